"""Report plug-ins (:mod:`nlbandit.plugins`): declared beside what they compute, collected by discovery,
validated at load, and outside every run's code hash."""

from __future__ import annotations

import pytest

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.plan import load_experiment
from nlbandit.loops import LOOPS
from nlbandit.policies.registry import POLICIES
from nlbandit.provenance import module_closure
from nlbandit.plugins import Diagnostic, Panel, of_kind, plugins


def test_plugins_are_collected_from_their_owners():
    assert set(of_kind(Panel)) == {"anytime-constant", "regret-vs-d"}
    assert set(of_kind(Diagnostic)) == {"effective-dimension"}
    assert plugins()["effective-dimension"].lines.__module__ == "nlbandit.policies.neurallog_report"
    assert plugins()["anytime-constant"].draw.__module__ == "nlbandit.policies.anytime_report"
    assert plugins()["regret-vs-d"].draw.__module__ == "nlbandit.loops.regression_report"


def test_report_modules_are_in_no_run_hash():
    closures = set(module_closure(LOOPS["regression"].code_modules("ftrl", "stochastic")))
    for name in POLICIES:
        closures |= set(module_closure(LOOPS["bandit"].code_modules(name, "linear")))
    assert not {m for m in closures if m.endswith("_report") or m.startswith(("nlbandit.report", "nlbandit.plugins"))}


@pytest.mark.parametrize("field, value, message", [
    ("plots", '["no-such"]', "field 'plots' must be a list of distinct names from 'anytime-constant', 'regret-vs-d'"),
    ("plots", '["regret-vs-d"]', "plot 'regret-vs-d' needs a grid over env field 'd'"),
    ("diagnostics", '["anytime-constant"]', "field 'diagnostics' must be a list of distinct names from "
     "'effective-dimension'"),
    ("diagnostics", '["effective-dimension"]', "diagnostic 'effective-dimension' needs an even d in every case"),
])
def test_plugin_names_and_checks_are_validated_at_load(experiment_file, field, value, message):
    text = f'horizon = 10\nseeds = 1\n{field} = {value}\n[env]\nname = "linear"\nd = 3\nk = 2\n' \
           '[[policies]]\nlabel = "U"\nname = "uniform"\n'
    with pytest.raises(ConfigError, match=message):
        load_experiment(experiment_file(text))


def test_a_sweeps_regret_curves_are_told_apart_by_colour_and_line_style(monkeypatch, tmp_path):
    """Past ten series the colours of the regret panel repeat: each (colour, line style) pair stays distinct, and a
    sweep's panels share one legend, below them: it overlaps no panel, its labels or title (beside the first panel it
    ran into the second one's axis label)."""
    from types import SimpleNamespace

    import numpy as np

    from nlbandit.report import build

    labels = [f"p{i}" for i in range(15)]
    cases = [(("d", 5),), (("d", 10),)]
    exp = SimpleNamespace(env_cases=cases, curves=True, plots=[], labels=labels, ci=0.95, paper="p", name="n",
                          scale="quick", n_seeds=2, title="t", loop="bandit", runs=[])
    stored = SimpleNamespace(rounds=np.arange(1, 4), cum_regret=np.ones((2, 3)))
    rows = [SimpleNamespace(run=SimpleNamespace(case=case, label=label, policy={"name": "lin-ucb"}), stored=stored)
            for case in cases for label in labels]
    kept = {}
    monkeypatch.setattr(build, "_save_png", lambda fig, path: kept.setdefault("fig", fig))
    build.plot_regret(exp, rows, tmp_path / "x.png")
    fig = kept["fig"]
    lines = fig.axes[0].get_lines()
    assert len({(line.get_color(), line.get_linestyle()) for line in lines}) == 15
    assert [ax.get_legend() for ax in fig.axes] == [None, None] and len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == labels  # each series once, in the file's order
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    box = fig.legends[0].get_window_extent(renderer)
    assert all(box.y1 < ax.get_tightbbox(renderer).y0 for ax in fig.axes)


@pytest.mark.parametrize("uniform_final, above", [(100.0, True), (15.0, False)])
def test_uniform_play_runs_off_a_panel_it_would_squash(monkeypatch, tmp_path, uniform_final, above):
    """A regret panel's y-axis fits its policies' series, their bands included, and uniform play runs off its top,
    its final mean in its legend entry, where it ends over twice as high as their highest point (10 here); else the
    axis holds it and its label is its own."""
    from types import SimpleNamespace

    import numpy as np

    from nlbandit.report import build

    exp = SimpleNamespace(env_cases=[()], curves=True, plots=[], labels=["A", "B", "uniform"], ci=0.95, paper="p",
                          name="n", scale="quick", n_seeds=2, title="t", loop="bandit", runs=[])
    rounds = np.arange(1, 4)

    def row(label, name, final):  # two seeds 1 apart at the end: a band of ±6.35 (t, 1 degree of freedom) there
        cum = np.array([[0.0, final / 2, final - 0.5], [0.0, final / 2, final + 0.5]])
        return SimpleNamespace(run=SimpleNamespace(case=(), label=label, policy={"name": name}),
                               stored=SimpleNamespace(rounds=rounds, cum_regret=cum))

    rows = [row("A", "lin-ucb", 2.0), row("B", "lin-ts", 3.65), row("uniform", "uniform", uniform_final)]
    kept = {}
    monkeypatch.setattr(build, "_save_png", lambda fig, path: kept.setdefault("fig", fig))
    build.plot_regret(exp, rows, tmp_path / "x.png")
    ax = kept["fig"].axes[0]
    bottom, top = ax.get_ylim()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    if above:
        assert -5.2 < bottom < -4.9 and 10.0 <= top < 11.0  # the others' bands, A's low and B's high, and 5% margins
        assert labels == ["A", "B", "uniform (above the axis: final 100)"]
    else:
        assert top >= uniform_final + 6.35 and labels == ["A", "B", "uniform"]


def test_a_sweeps_shared_legend_keeps_uniform_and_its_panel_notes_it_off_the_axis(monkeypatch, tmp_path):
    """Past twelve series the legend is shared below the panels: uniform play keeps its plain label there, once, and
    a panel it would squash says in a line of its own that it runs above the axis, with its final mean."""
    from types import SimpleNamespace

    import numpy as np

    from nlbandit.report import build

    labels = [f"p{i}" for i in range(13)] + ["uniform"]
    exp = SimpleNamespace(env_cases=[(("d", 5),)], curves=True, plots=[], labels=labels, ci=0.95, paper="p",
                          name="n", scale="quick", n_seeds=2, title="t", loop="bandit", runs=[])
    rows = [SimpleNamespace(run=SimpleNamespace(case=(("d", 5),), label=label, policy={"name": label}),
                            stored=SimpleNamespace(rounds=np.arange(1, 4), cum_regret=np.array(
                                [[0.0, 1.0, 80.0 if label == "uniform" else 2.0]] * 2)))
            for label in labels]
    kept = {}
    monkeypatch.setattr(build, "_save_png", lambda fig, path: kept.setdefault("fig", fig))
    build.plot_regret(exp, rows, tmp_path / "x.png")
    fig = kept["fig"]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == labels
    assert [t.get_text() for t in fig.axes[0].texts] == ["uniform (above the axis: final 80)"]
    assert fig.axes[0].get_ylim()[1] < 3.0
