"""Rendering problems found by an audit of the committed reports (docs/reproductions/, 2026-11-29), each held here.

* Bae & Lee's Table 2 plots 54 series in one panel: past forty, colour and line style both repeated, so that e.g.
  'NeuralLog-TS-1 kappa=100' was drawn exactly as 'NCBF-UCB m=20';
* a panel's legend inside its axes covered curves (Zhao Fig. 2's adversarial series, Sun Fig. 1b's restarting
  doubling-trick series, Sun Fig. 1f's per-round times): such a legend moves out of the axes;
* the phase plot's long y label ran into the figure's title (Sun Fig. 5);
* the plot's alt text said "cumulative regret", and the claims' key read ``paired(a, b)`` as "regret(a) − regret(b)",
  where the loop's first quantity is clicks (replay) or an estimated reward (off-policy evaluation);
* claims on measured times printed bare numbers: their unit (µs per seed-round) is stated with them.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from nlbandit.experiments.claims import ClaimResult
from nlbandit.report import build


def _exp(labels, cases=((),), loop="bandit", **extra):
    return SimpleNamespace(env_cases=list(cases), curves=True, plots=[], labels=labels, ci=0.95, paper="p",
                           name="n", scale="quick", n_seeds=2, title="t", loop=loop, runs=[], **extra)


def _row(label, cum, case=(), name="lin-ucb"):
    cum = np.asarray(cum, float)
    return SimpleNamespace(run=SimpleNamespace(case=case, label=label, policy={"name": name}),
                           stored=SimpleNamespace(rounds=np.arange(1, cum.shape[1] + 1), cum_regret=cum))


def _plotted(monkeypatch, tmp_path, exp, rows):
    kept = {}
    monkeypatch.setattr(build, "_save_png", lambda fig, path: kept.setdefault("fig", fig))
    build.plot_regret(exp, rows, tmp_path / "x.png")
    return kept["fig"]


def test_past_forty_series_every_curve_keeps_a_look_of_its_own(monkeypatch, tmp_path):
    """54 series in one panel (Table 2's sweep): no two curves share colour, line style and marker."""
    labels = [f"p{i}" for i in range(54)]
    fig = _plotted(monkeypatch, tmp_path, _exp(labels), [_row(label, [[0.0, 1.0, 2.0]] * 2) for label in labels])
    looks = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in fig.axes[0].get_lines()}
    assert len(looks) == 54
    assert [t.get_text() for t in fig.legends[0].get_texts()] == labels  # the shared legend shows each look


def _covered(fig, legend, ax) -> bool:
    """Whether ``legend``'s box crosses a curve of ``ax`` (its part inside the axes)."""
    fig.canvas.draw()
    box = legend.get_window_extent(fig.canvas.get_renderer())
    return any(line.get_path().transformed(line.get_transform()).intersects_bbox(box, filled=False)
               for line in ax.get_lines())


def test_a_legend_that_would_cover_a_curve_moves_below_the_panels(monkeypatch, tmp_path):
    """Nine flat curves an eighth of the panel apart (a nine-entry legend inside it must cover one): the legend goes
    below the panel, each series once, and covers no curve; a panel with room keeps its legend inside."""
    shapes = {f"level {k}": np.full(50, float(k)) for k in range(9)}
    labels = list(shapes)
    fig = _plotted(monkeypatch, tmp_path, _exp(labels), [_row(k, [v, v]) for k, v in shapes.items()])
    ax = fig.axes[0]
    legend = ax.get_legend() or fig.legends[0]
    assert not _covered(fig, legend, ax)
    assert ax.get_legend() is None and [t.get_text() for t in fig.legends[0].get_texts()] == labels

    quiet = _plotted(monkeypatch, tmp_path, _exp(["a", "b"]), [_row("a", [[0.0, 1.0, 2.0]] * 2),
                                                               _row("b", [[0.0, 0.5, 1.0]] * 2)])
    assert quiet.axes[0].get_legend() is not None and not quiet.legends


def test_a_moved_legend_keeps_uniform_plays_final_in_its_panel(monkeypatch, tmp_path):
    """Uniform play run off the top of a panel whose legend moves below: the panel still says, in a line of its
    own, where uniform ended (the legend below names the series only)."""
    shapes = {f"level {k}": np.full(50, float(k)) for k in range(9)}
    shapes["uniform"] = np.linspace(0.0, 100.0, 50)
    rows = [_row(k, [v, v], name="uniform" if k == "uniform" else "lin-ucb") for k, v in shapes.items()]
    fig = _plotted(monkeypatch, tmp_path, _exp(list(shapes)), rows)
    assert fig.axes[0].get_legend() is None
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(shapes)
    assert [t.get_text() for t in fig.axes[0].texts] == ["uniform (above the axis: final 100)"]


def _timed(label, update):
    rounds = np.array([10, 20, 30])
    return SimpleNamespace(run=SimpleNamespace(label=label, case=(), case_label=""),
                           stored=SimpleNamespace(phases=(rounds, np.full((1, 3), 1e-6), np.asarray([update]))),
                           timing=lambda u=update: SimpleNamespace(select=1.0, update=1e6 * float(np.mean(u))))


def _phase_figure(monkeypatch, tmp_path, updates):
    timed = [_timed(f"run {i}", u) for i, u in enumerate(updates)]
    exp = SimpleNamespace(horizon=100, phase_processes=5, paper="p", name="n", scale="full", n_seeds=10)
    kept = {}
    monkeypatch.setattr(build, "_save_png", lambda fig, path: kept.setdefault("fig", fig))
    build.plot_phases(exp, timed, tmp_path / "x.png")
    return kept["fig"]


def test_the_phase_plots_legend_covers_none_of_its_curves(monkeypatch, tmp_path):
    """Sun Fig. 1f's phase plot: the per-round panel's legend lay over three runs' update times; with no room inside
    the axes (nine flat curves half a decade apart) it moves beside them and covers no curve."""
    fig = _phase_figure(monkeypatch, tmp_path, [np.full(3, 10.0 ** (k / 2 - 6)) for k in range(9)])
    lines = fig.axes[1]
    assert not _covered(fig, lines.get_legend(), lines)


def test_the_phase_plots_y_label_stays_under_the_title(monkeypatch, tmp_path):
    """Sun Fig. 5's phase plot: with five processes its one-line y label ran up into the figure's title."""
    fig = _phase_figure(monkeypatch, tmp_path, [np.array([1e-6, 1e-5, 1e-4])])
    renderer = fig.canvas.get_renderer()
    label = fig.axes[1].yaxis.label.get_window_extent(renderer)
    assert label.y1 < fig._suptitle.get_window_extent(renderer).y0


def _replay_report(monkeypatch, tmp_path, claims, loop="replay"):
    """The markdown ``write_report`` renders for a one-row experiment of ``loop`` whose claims read ``claims``."""
    exp = SimpleNamespace(name="n", title="t", description="d", scale="full", horizon=3, n_seeds=2, full_seeds=2,
                          first_seed=0, loop=loop, ci=None, missing={}, untuned=False, diagnostics=[], plots=[],
                          claims=[], tuning=[], curves=True, env_cases=[()], labels=["A"], paper="p", runs=[],
                          left_out=())
    cum = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 3.0]])
    stored = SimpleNamespace(cum_regret=cum, rounds=np.arange(1, 4), batch_size=1, parts=1, compile_s=1.0, run_s=1.0,
                             phases=None, curves={"reward": cum, "events": cum * 5, "regret": cum})
    row = build.Row(SimpleNamespace(label="A", case_label="", case=(), env={"name": "obd", "d": 1},
                                    policy={"name": "lin-ucb"}, code="c", horizon=3, n_seeds=2, run_id="r"),
                    stored, "digest")
    monkeypatch.setattr(build, "check_claims", lambda exp, rows: claims)
    monkeypatch.setattr(build, "plot_regret", lambda exp, rows, path: None)
    monkeypatch.setattr(build, "_memory_lines", lambda exp, rows: [])
    monkeypatch.setattr(build, "_data_lines", lambda exp, envs: [])
    monkeypatch.setattr(build, "run_list", lambda runs, digests: "[]")
    written = {}
    monkeypatch.setattr(build, "write_files", lambda staged: written.update(staged))
    md, _ = build.write_report(exp, [row], tmp_path, "cmd")
    return written[md].decode()


def test_a_replay_reports_plot_and_claims_key_name_clicks_not_regret(monkeypatch, tmp_path):
    """Table 2 (replay): the plot's alt text names the loop's quantity, and the claims' key says that regret() and
    paired() read it, the difference a − b of clicks, not of regrets."""
    claims = [ClaimResult("c", "text", "regret('A') >= 0", "pass", True, [("regret('A')", 2.5)])]
    text = _replay_report(monkeypatch, tmp_path, claims)
    assert "![cumulative clicks over accepted events](n.png)" in text
    assert "![cumulative regret]" not in text
    assert "regret(a) − regret(b)" not in text
    assert ("`regret(label)` and `paired(a, b)` read the cumulative clicks over accepted events (not a regret): "
            "`paired(a, b)` is the per-seed difference of it, a − b") in text


def test_a_regret_reports_claims_key_is_unchanged(monkeypatch, tmp_path):
    """A bandit report's plot is named by its regret, and its key reads paired() as regret(a) − regret(b)."""
    claims = [ClaimResult("c", "text", "regret('A') >= 0", "pass", True, [("regret('A')", 2.5)])]
    text = _replay_report(monkeypatch, tmp_path, claims, loop="bandit")
    assert "![cumulative pseudo-regret](n.png)" in text
    assert "`paired(a, b)` is the per-seed difference regret(a) − regret(b)" in text
    assert "not a regret" not in text


@pytest.mark.parametrize("traced, shown", [
    ("runtime('A')", "`runtime('A') = 15.91 µs per seed-round`"),
    ("update_time('A')", "`update_time('A') = 15.91 µs per seed-round`"),
    ("phase_diff('A', 'B') = -7.03 [-7.62, -6.45]: the 95% CI over 5 processes × 10 sampled rounds",
     "`phase_diff('A', 'B') = -7.03 [-7.62, -6.45] µs per seed-round: the 95% CI over 5 processes × 10 sampled "
     "rounds`"),
])
def test_claims_on_measured_times_state_their_unit(monkeypatch, tmp_path, traced, shown):
    """Sun Figs. 1b, 1f and 5: a measured time is printed with its unit, µs per seed-round."""
    claims = [ClaimResult("c", "text", f"{traced.split(' = ')[0]} > 0", "pass", True, [(traced, 15.91)])]
    assert shown in _replay_report(monkeypatch, tmp_path, claims, loop="bandit")


def test_the_anytime_panels_nearly_equal_curves_each_stay_visible():
    """l(T₀, b) barely depends on T₀ (3.4253, 3.4172, 3.4150 at b = 2 for T₀ = 100, 300, 1000), so in Sun Fig. 3's
    panel the three curves and their dots lay exactly on one another, one visible: each now has its own dash, width
    and marker."""
    import matplotlib.pyplot as plt

    from nlbandit.policies.anytime_report import draw_anytime_constant

    runs = [SimpleNamespace(policy={"name": "lin-ucb@anytime", "t0": t0, "b": 2.0}) for t0 in (100, 300, 1000)]
    fig, ax = plt.subplots()
    draw_anytime_constant(ax, SimpleNamespace(runs=runs), [], None)
    curves, dots = ax.get_lines()[0:6:2], ax.get_lines()[1:6:2]
    assert len({(c.get_linestyle(), c.get_linewidth()) for c in curves}) == 3
    assert len({(d.get_marker(), d.get_markersize(), d.get_fillstyle()) for d in dots}) == 3
    plt.close(fig)
