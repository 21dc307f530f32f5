"""Turn an experiment's stored runs into a report: PNG regret curves, a markdown table, claim checks.

A report's files (markdown, plots, run list) are rendered first and then written together
(:func:`nlbandit.atomic.write_files`: each to a synced temporary file, then all renamed into place one right after
the other), so a report is never half-written, nor its files of two different runs of the command.
"""

from __future__ import annotations

import contextvars
import datetime
import io
import json
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
from scipy import stats

from nlbandit import __version__, machine
from nlbandit.atomic import write_bytes, write_files
from nlbandit.core.phases import PhaseRows
from nlbandit.experiments.claims import (
    TIME_FUNCTIONS,
    ClaimResult,
    SEED_BY_SEED,
    MissingCase,
    Timing,
    evaluate_claim,
    grid_values,
    reads_times,
    run_selector,
    traced_text,
)
from nlbandit.experiments.power import verdict_rates
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.experiments.strata import pooled, reported
from nlbandit.experiments.tuning import TuningResult
from nlbandit.loops import LOOPS
from nlbandit.plugins import Diagnostic, Panel, claim_functions, of_kind
from nlbandit.provenance import package_hash
from nlbandit.report.runlist import run_list, run_list_path, stored_digests
from nlbandit.store import Store, StoredRun

DEFAULT_CI = 0.95
"""The level of a report's intervals where its file sets no ``ci``."""


def half_width(values: np.ndarray, level: float | None, axis: int = 0) -> np.ndarray:
    """Half-width of the confidence interval of the mean of ``values`` over ``axis``: Student t with n − 1
    degrees of freedom at ``level`` (None: :data:`DEFAULT_CI`), as the claims' intervals are; 0 for a single value.
    (Reports rendered before 2026-11-29 from a file without ``ci`` show the normal interval, 1.96 standard errors,
    under '95% CI': with 2 seeds about a sixth of the t interval's width.)"""
    n = values.shape[axis]
    if n < 2:
        return np.zeros_like(np.mean(values, axis=axis))
    q = float(stats.t.ppf(0.5 + (DEFAULT_CI if level is None else level) / 2, n - 1))
    return q * np.std(values, axis=axis, ddof=1) / np.sqrt(n)


def ci_name(level: float | None) -> str:
    """The intervals' name in tables and plots, e.g. ``95% CI (t)``."""
    return f"{100 * (DEFAULT_CI if level is None else level):g}% CI (t)"


@dataclass
class Row:
    """Summary of one run for tables: final regret statistics and timing, and the
    :func:`~nlbandit.report.runlist.digest` of its first and last seed."""

    run: RunConfig
    stored: StoredRun
    digest: str
    parts: tuple["Row", ...] = ()  # a stratified case's runs, pooled in this one (nlbandit.experiments.strata)

    @property
    def final(self) -> np.ndarray:
        """Final cumulative regret per seed."""
        return self.stored.cum_regret[:, -1]

    def ci(self, level: float | None = None) -> float:
        """Half-width of the confidence interval of the mean final regret (:func:`half_width`)."""
        return float(half_width(self.final, level))

    def us_per_seed_round(self) -> float:
        """Run time of the batch per seed-round, in microseconds."""
        s = self.stored
        return 1e6 * s.run_s / (self.run.horizon * self.run.n_seeds * s.batch_size)

    def timing(self) -> Timing:
        """The run's :class:`~nlbandit.experiments.claims.Timing`: µs per seed-round of the whole round and,
        when its phases were timed apart, of selection and update (means over the sampled rounds and processes,
        and their sum at each round in each process)."""
        if self.stored.phases is None:
            return Timing(self.us_per_seed_round())
        rounds, select, update = self.stored.phases
        return Timing(self.us_per_seed_round(), 1e6 * float(np.mean(select)), 1e6 * float(np.mean(update)),
                      (np.asarray(rounds), 1e6 * (np.asarray(select) + np.asarray(update))))


def load_rows(exp: Experiment, store: Store) -> list[Row]:
    """Stored results of every run of ``exp`` (``KeyError`` if one is missing; ``ValueError`` if ``exp`` tunes
    a series and was not through :func:`~nlbandit.experiments.tuning.tune_experiment`)."""
    if exp.tuning and not exp.tuned:
        raise ValueError(f"{exp.path}: tune the experiment first (nlbandit.experiments.tuning.tune_experiment)")
    stored = store.load_many([(r.series_id, r.seeds) for r in exp.runs])
    rows = {id(r): Row(r, s, d) for r, s, d in zip(exp.runs, stored, stored_digests(store, exp.runs))}  # (by
    # object: one configuration under several labels is several runs of one run_id, each shown under its label)
    out = []
    for run, parts in reported(exp):
        if parts[0] is run:  # (a run standing for itself)
            out.append(rows[id(run)])
            continue
        own = tuple(rows[id(p)] for p in parts)
        out.append(Row(run, pooled(run, [r.stored for r in own]), "", own))
    return out


def claim_curves(exp: Experiment, rows: list[Row]) -> Callable[..., tuple]:
    """The ``curves(label, case, metric="regret")`` that claims of ``exp`` read from the stored ``rows``: a run's
    rounds, its per-seed cumulative curve of ``metric`` and its timing (:class:`MissingCase` for a case not run)."""
    select = run_selector(exp)
    by_run = {(row.run.label, row.run.case_label): row for row in rows}  # (not by run id: one configuration
    # under several labels is one run id)

    def curves(label: str, case: dict[str, Any], metric: str = "regret"):
        if case.get("case") in exp.missing:
            raise MissingCase(case["case"])
        run = select(label, case)
        row = by_run[run.label, run.case_label]
        curve = row.stored.cum_regret if metric == "regret" else row.stored.curves[metric]
        return row.stored.rounds, curve, row.timing()

    return curves


def check_claims(exp: Experiment, rows: list[Row]) -> list[ClaimResult]:
    """Evaluate every claim of ``exp`` on the stored results."""
    curves = claim_curves(exp, rows)
    out = []
    for c in exp.claims:
        if c.unchecked:  # decided by a documented deviation, not by the results: never evaluated
            out.append(ClaimResult(c.name, c.text, c.check, c.expect, None, [], c.kind, c.unchecked))
            continue
        holds, values = evaluate_claim(c.check, curves, exp.horizon, grid_values(exp), claim_functions(exp.loop))
        if c.missing and holds is None:  # not decided by the cases that ran
            out.append(ClaimResult(c.name, c.text, c.check, c.expect, None, [], c.kind, c.missing))
            continue
        if c.missing:
            values.append((f"decided without the cases not run ({c.missing})", float("nan")))
        out.append(ClaimResult(c.name, c.text, c.check, c.expect, holds, values, c.kind))
    return out


def repeat_shares(exp: Experiment, rows: list[Row], claims: list[ClaimResult], resamples: int) -> None:
    """Set each evaluated claim's ``repeats``: the share of ``resamples`` draws of the report's n seeds, drawn with
    replacement from its own (the same draw for every run, so pairs stay paired), on which the claim reads as it
    does on them: holds, fails or stays undetermined (:func:`~nlbandit.experiments.power.verdict_rates`, with its
    caveats). A claim that reads measured times (whose times are not resampled) or was not checked keeps None."""
    names = {c.name for c in claims if not c.missing and not reads_times(c.check)}
    if not names:
        return
    only = replace(exp, claims=[c for c in exp.claims if c.name in names])
    rates = {name: per_n[0] for name, _, per_n in verdict_rates(only, claim_curves(exp, rows), (exp.n_seeds,),
                                                                 resamples)}
    for c in claims:
        if c.name in rates:
            r = rates[c.name]
            c.repeats = r.undetermined if c.holds is None else r.holds if c.holds else r.fails


def claim_verdict(c: ClaimResult) -> str:
    """PASS, FAIL, INCONCLUSIVE (the seeds cannot resolve it), NOT CHECKED (it reads a case that was not run
    and the cases that ran do not decide it, or its file says why it cannot check it), or the expected-failure
    variants."""
    if c.missing:
        return "NOT CHECKED"
    if c.holds is None:
        return "INCONCLUSIVE"
    if c.expect == "pass":
        return "PASS" if c.holds else "FAIL"
    return "fails, as documented (expected)" if not c.holds else "UNEXPECTEDLY HOLDS"


def results_table(rows: list[Row], level: float | None = None) -> str:
    """Plain-text table of final regrets for the terminal."""
    width = max(len(r.run.label + r.run.case_label) for r in rows) + 4
    lines = [f"{'policy':<{width}} {'final regret':>14} {'± ' + ci_name(level):>14} {'std':>9} {'µs/seed-round':>14}"]
    for r in rows:
        name = r.run.label + (f" ({r.run.case_label})" if r.run.case else "")
        lines.append(f"{name:<{width}} {np.mean(r.final):>14.1f} {r.ci(level):>14.1f} "
                     f"{np.std(r.final, ddof=1) if r.final.size > 1 else 0.0:>9.1f} {r.us_per_seed_round():>14.2f}")
    return "\n".join(lines)


_STAGED: contextvars.ContextVar[dict[Path, bytes] | None] = contextvars.ContextVar("report_files", default=None)
"""The files of the report :func:`write_report` is writing, collected to be written together."""


def _save_png(fig, path: Path) -> None:
    """Write a matplotlib figure to ``path`` as PNG (atomically; within :func:`write_report`, with the report's other
    files) and close it."""
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    staged = _STAGED.get()
    if staged is None:
        write_bytes(path, buf.getvalue())
    else:
        staged[path] = buf.getvalue()


_LEGEND_INSIDE = 12
"""The most series whose legend a regret panel holds inside it; more share one legend below the panels."""

REFERENCE_POLICY = "uniform"
"""The policy of a regret panel's reference series, uniform play: its regret grows linearly, often far above the
others'."""

_SQUASHED = 2.0
"""A reference series whose final mean exceeds this many times the other series' highest point (band included)
runs off the top of its panel (:func:`_fit_to_policies`)."""


def _fit_to_policies(ax, drawn: list[tuple[Any, Any, float, float]], note: bool) -> str:
    """Scale a regret panel's y-axis to its policies' series, letting uniform play (:data:`REFERENCE_POLICY`) run
    off the top where it would stretch the axis to over :data:`_SQUASHED` times their highest point (Sun Fig. 1a, full
    scale: uniform's 4,774 against the others' at most 1,514, their differences a sliver at the bottom); its legend
    entry, or with ``note`` a line in the panel (a shared legend), gives its final mean. ``drawn``: (row, line,
    lowest and highest point of its band). Returns that line's text ('' when uniform fits), for :func:`_panel_note`
    should the panel's legend move out later."""
    refs = [line for row, line, _, _ in drawn if row.run.policy["name"] == REFERENCE_POLICY]
    others = [(low, top) for row, _, low, top in drawn
              if row.run.policy["name"] != REFERENCE_POLICY and np.isfinite(low) and np.isfinite(top)]
    if not refs or not others or max(top for _, top in others) <= 0:
        return ""
    low, top = min(low for low, _ in others), max(top for _, top in others)
    finals = [(line, float(line.get_ydata()[-1])) for line in refs]
    if max(final for _, final in finals) <= _SQUASHED * top:
        return ""
    ax.set_ylim(low - 0.05 * (top - low), top + 0.05 * (top - low))  # matplotlib's own margins, without uniform
    for line, final in finals:
        line.set_label(f"{line.get_label()} (above the axis: final {final:.0f})")
    text = "; ".join(line.get_label() for line, _ in finals)
    if note:
        _panel_note(ax, text)
    return text


def _panel_note(ax, text: str) -> None:
    """``text`` in a line of its own at the top right of panel ``ax`` (uniform play's final, off the axis)."""
    ax.text(0.99, 0.98, text, transform=ax.transAxes, ha="right", va="top", fontsize=7)


_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("", "o", "s", "^", "v", "D", "x", "+")


def _series_styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each label's look in a regret panel (``plot`` keywords): ten colours, then another line style for each further
    ten, then past forty (Bae & Lee's Table 2 sweeps 54) a marker too, so that no two series look alike (colour and
    style alone repeated after forty: 'NeuralLog-TS-1 kappa=100' was drawn as 'NCBF-UCB m=20')."""
    looks = {}
    for i, label in enumerate(labels):
        look = {"color": f"C{i % 10}", "ls": _STYLES[i // 10 % 4]}
        marker = _MARKERS[i // 40 % len(_MARKERS)]
        if marker:
            look.update(marker=marker, markevery=0.1, ms=4)
        looks[label] = look
    return looks


def _legend_covers(ax, renderer) -> bool:
    """Whether the legend inside panel ``ax`` crosses one of its curves (a curve's part off the axis, uniform play's,
    cannot: the legend lies inside the axes)."""
    legend = ax.get_legend()
    if legend is None:
        return False
    box = legend.get_window_extent(renderer)
    return any(line.get_path().transformed(line.get_transform()).intersects_bbox(box, filled=False)
               for line in ax.get_lines() if line.get_visible())


def plot_regret(exp: Experiment, rows: list[Row], path: Path) -> None:
    """Mean cumulative regret with 95% confidence bands, one panel per environment case."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = exp.env_cases if exp.curves else []
    panels_of = of_kind(Panel)
    extra = [(name, panel) for name in exp.plots for panel in panels_of[name].panels(exp)]
    panels = len(cases) + len(extra)
    columns = panels if panels <= 4 else 3  # one row, or rows of three panels
    rows_n = -(-panels // columns)
    many = len(exp.labels) > _LEGEND_INSIDE  # a sweep: one legend for all its panels, below them
    fig, grid = plt.subplots(rows_n, columns, figsize=(6.4 * columns, 4.4 * rows_n), squeeze=False)
    for ax in grid.flat[panels:]:
        ax.set_visible(False)
    axes = [list(grid.flat)]
    looks = _series_styles(exp.labels)  # past ten series another line style, past forty a marker
    notes = []
    for ax, case in zip(axes[0], cases):
        drawn = []
        for row in (r for r in rows if r.run.case == case):
            cum = row.stored.cum_regret
            mean = cum.mean(axis=0)
            half = half_width(cum, exp.ci)
            look = looks[row.run.label]
            line, = ax.plot(row.stored.rounds, mean, **look, label=row.run.label, gid=row.run.label, lw=1.6)
            ax.fill_between(row.stored.rounds, mean - half, mean + half, color=look["color"], alpha=0.2, lw=0)
            drawn.append((row, line, float(np.min(mean - half, initial=np.inf)),
                          float(np.max(mean + half, initial=-np.inf))))
        notes.append(_fit_to_policies(ax, drawn, note=many))
        ax.set_xlabel("round t")
        ax.set_ylabel(_regret_name(exp))
        title = ", ".join(f"{k}={v}" for k, v in case) if case else exp.title or exp.name
        ax.set_title("\n".join(textwrap.wrap(title, 80)), fontsize=10)
        ax.grid(alpha=0.3)
        if not many:
            ax.legend(fontsize=8)
    for ax, (name, panel) in zip(axes[0][len(cases):], extra):
        panels_of[name].draw(ax, exp, rows, panel)
    bands = f"; bands: {ci_name(exp.ci)} of the mean" if cases else ""
    fig.suptitle(f"{exp.paper}/{exp.name} ({exp.scale} scale, {exp.n_seeds} seeds{bands})", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.4 / (4.4 * rows_n)))  # room for the title above the top row
    if not many and cases:  # a legend inside a panel that covers a curve (Zhao Fig. 2, Sun Fig. 1b) moves below
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        if any(_legend_covers(ax, renderer) for ax in axes[0][:len(cases)]):
            many = True
            for ax, text in zip(axes[0], notes):
                ax.get_legend().remove()
                if text:
                    _panel_note(ax, text)
    if many and cases:  # the series of every regret panel, each once, in columns below the panels (the PNG's box grows)
        handles = {handle.get_gid(): handle for ax in axes[0][:len(cases)]  # (gid: the label before any note)
                   for handle in ax.get_legend_handles_labels()[0]}
        shown = [label for label in exp.labels if label in handles]
        fig.legend([handles[label] for label in shown], shown, fontsize=7,  # ~2.6 inches per column of labels
                   ncol=max(1, int(6.4 * columns / 2.6)), loc="upper center", bbox_to_anchor=(0.5, 0.0))
    _save_png(fig, path)


def plot_phases(exp: Experiment, timed: list[Row], path: Path) -> None:
    """The runs ``timed`` (their phases timed apart): bars of seconds per run (one seed, T rounds) split
    into selection and update (spec 003 §4.4 [REC], Fig. 1f), and the sampled per-round times against t."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r.run.label + (f" ({r.run.case_label})" if r.run.case else "") for r in timed]
    select = np.array([r.timing().select for r in timed]) * exp.horizon / 1e6
    update = np.array([r.timing().update for r in timed]) * exp.horizon / 1e6
    fig, (bars, lines) = plt.subplots(1, 2, figsize=(12.8, 4.4))
    at = np.arange(len(timed))
    bars.bar(at, select, color="C0", label="select (act)")
    bars.bar(at, update, bottom=select, color="C1", label="update")
    bars.set_xticks(at, names, rotation=30, ha="right", fontsize=8)
    bars.set_ylabel(f"seconds per run (T = {exp.horizon}, one seed)")
    bars.legend(fontsize=8)
    bars.grid(alpha=0.3, axis="y")
    for i, (r, name) in enumerate(zip(timed, names)):
        t, sel, upd = r.stored.phases
        lines.plot(t, 1e6 * sel.mean(axis=0), color=f"C{i % 10}", ls=":", marker=".", lw=1)
        lines.plot(t, 1e6 * upd.mean(axis=0), color=f"C{i % 10}", ls="-", marker=".", lw=1.4, label=name)
    lines.set_yscale("log")
    lines.set_xlabel("round t")
    lines.set_ylabel("µs per seed-round\n(solid: update, dotted: select"  # two lines: one ran into the title
                     + (f"; mean of {exp.phase_processes} processes)" if exp.phase_processes > 1 else ")"))
    lines.grid(alpha=0.3)
    lines.legend(fontsize=8)
    fig.suptitle(f"{exp.paper}/{exp.name} ({exp.scale} scale, {exp.n_seeds} seeds vectorised): select and update "
                 "timed apart", fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.95))  # room for the title
    fig.canvas.draw()
    if _legend_covers(lines, fig.canvas.get_renderer()):  # (Sun Fig. 1f: over three runs' update times) beside it
        lines.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    _save_png(fig, path)


def _rows_per_call(rows: PhaseRows) -> str:
    """The rows of a run's timed calls, in words."""
    if rows.select == rows.update:
        return f"{rows.select} rows per call"
    return f"{rows.select} rows per call of `act` and {rows.update} per call of `update`"


def _session_processes(processes: int) -> str:
    """Where a session of timed calls ran (:func:`nlbandit.experiments.runner.time_sessions`), in words."""
    return "in one process" if processes == 1 else f"repeated in each of {processes} fresh processes, one after another"


def _phase_lines(exp: Experiment, rows: list[Row], png: Path) -> list[str]:
    """The report's section on the runs whose phases were timed apart (none: no section)."""
    timed = [r for r in rows if r.stored.phases is not None]
    if not timed:
        return []
    plot_phases(exp, timed, png)
    lines = ["", "## Select and update time", "",
             f"Each run below was simulated in a batch of one, keeping its states after each of its chunks; once "
             "the runs of one horizon and seeds were all simulated, the policies' jitted `act` and `update` were "
             "timed apart on those states in one session with nothing else computing, "
             f"{_session_processes(exp.phase_processes)} (at each sampled round each "
             f"run's calls in turn, the first run rotating; its {exp.n_seeds} seeds vectorised and repeated to "
             f"{_rows_per_call(exp.phase_rows.of_seeds(exp.n_seeds))}, so that a call's fixed cost of dispatch, "
             "which the engine's compiled chunks of rounds do not pay per round, weighs little; the median of 5 "
             "calls over its rows, their buffers kept on malloc's heap; "
             "`nlbandit.core.phases`). "
             + ("A difference of two runs' costs (`phase_diff`) has its interval over the processes and the rounds. "
                if exp.phase_processes > 1 else "")
             + "Times are per seed-round, averaged over the sampled rounds"
             + (" and the processes" if exp.phase_processes > 1 else "") + "; seconds "
             "per run are that average × T. *Late/early*: the update time at the last sampled round over the "
             "first.", "", f"![select and update time]({png.name})", "",
             "| policy | case | sampled rounds | select µs / seed-round | update µs / seed-round | select s / run | "
             "update s / run | update late/early |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in timed:
        t, _, upd = r.stored.phases
        upd, timing = upd.mean(axis=0), r.timing()
        lines.append(f"| {r.run.label} | {r.run.case_label or '—'} | {t[0]}..{t[-1]} ({t.size}) | "
                     f"{timing.select:.1f} | {timing.update:.1f} | {timing.select * exp.horizon / 1e6:.2f} | "
                     f"{timing.update * exp.horizon / 1e6:.2f} | {upd[-1] / upd[0]:.2f} |")
    return lines


def _regret_name(exp: Experiment) -> str:
    """The y-axis label of the loop's regret (:meth:`~nlbandit.loops.base.Loop.regret_name`)."""
    return LOOPS[exp.loop].regret_name(exp.runs)


def _paired_key(exp: Experiment) -> str:
    """What ``paired(a, b)`` (and ``regret(label)``) read, for the claims' key: the per-seed difference of regrets, or
    where the loop's first quantity is no regret (Table 2's clicks, an off-policy estimate) of that quantity."""
    name = _regret_name(exp)
    if "regret" in name:
        return "`paired(a, b)` is the per-seed difference regret(a) − regret(b)"
    return (f"`regret(label)` and `paired(a, b)` read the {name} (not a regret): `paired(a, b)` is the per-seed "
            "difference of it, a − b,")


TIME_UNIT = "µs per seed-round"
"""The unit of every claim function that reads a measured time (:data:`~nlbandit.experiments.claims.TIME_FUNCTIONS`)."""


def _measured_text(text: str, value: float) -> str:
    """One traced call as the claims table prints it (:func:`~nlbandit.experiments.claims.traced_text`), a measured
    time with its unit: ``runtime('A') = 15.91 µs per seed-round``, ``phase_diff('A', 'B') = -7.03 [-7.62, -6.45] µs
    per seed-round: the 95% CI over …``."""
    shown = traced_text(text, value)
    if not any(shown.startswith(f"{name}(") for name in TIME_FUNCTIONS):
        return shown
    head, sep, tail = shown.partition(": the 95% CI")
    return f"{head} {TIME_UNIT}{sep}{tail}"


def _hyper_text(config: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items() if k != "name") or "no hyperparameters"


def _cell(text: str) -> str:
    """Text fit for one markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _of_full(exp: Experiment) -> str:
    """' of the full scale's N' when the report runs fewer repetitions than the file's full scale, else ''."""
    return f" of the full scale's {exp.full_seeds}" if exp.n_seeds < exp.full_seeds else ""


def _computed(rows: list[Row]) -> list[Row]:
    """The rows of the runs computed for ``rows``: a pooled row's parts, any other row itself."""
    return [part for r in rows for part in (r.parts or (r,))]


def _sim_minutes(rows: list[Row]) -> float:
    """Minutes of compile and run time behind ``rows``: a batch's time counted once, and a run that several rows
    show (one configuration under several labels) once."""
    runs = {part.run.run_id: part.stored for part in _computed(rows)}
    return sum((s.compile_s + s.run_s) / s.batch_size for s in runs.values()) / 60


def _diagnostic_lines(exp: Experiment) -> list[str]:
    """The sections of the experiment's ``diagnostics`` (:class:`~nlbandit.plugins.Diagnostic`)."""
    diagnostics = of_kind(Diagnostic)
    return [line for name in exp.diagnostics for line in diagnostics[name].lines(exp)]


def _tuning_lines(exp: Experiment, results: list[TuningResult]) -> list[str]:
    """The report's tuning section: the chosen point of each tuned series and case, then every point."""
    if not results:
        return []
    first = results[0].tuning.candidates[0]
    what = {"min-regret": f"lowest mean final {_regret_name(exp)}", "max-reward": "highest mean final reward"}
    lines = ["", "## Tuning", "",
             f"Each tuned series ran every point of its grid on {first.n_seeds} tuning seed(s) (seeds "
             f"{first.seed_offset}..{first.seed_offset + first.n_seeds - 1}, none of them a reported seed), at the "
             f"same horizon; the point with the {what[results[0].tuning.objective]} (the first in grid order on a "
             "tie) is the configuration reported above. The interval is Student's t over the tuning seeds.", "",
             "A choice *at the grid's edge* (the smallest or the largest value of a field the grid varies) says "
             "that the best value may lie outside the grid.", "",
             "| series | case | chosen | at the grid's edge |", "|---|---|---|---|"]
    edges = [grid_edges(r.tuning.points, r.chosen) for r in results]
    lines += [f"| {r.tuning.label} | {r.tuning.case_label or '—'} | {_hyper_text(r.tuning.points[r.chosen])} | "
              f"{', '.join(f'{field} {side}' for field, side in edge) or '—'} |" for r, edge in zip(results, edges)]
    for field in dict.fromkeys(field for edge in edges for field, _ in edge):
        counts = {side: sum((field, side) in edge for edge in edges) for side in ("floor", "ceiling")}
        lines += ["", f"{field} was chosen at the grid's floor in {counts['floor']} and at its ceiling in "
                  f"{counts['ceiling']} of the {len(results)} tunings."]
    lines += ["", "| series | case | point | mean | ± 95% CI |", "|---|---|---|---:|---:|"]
    for r in results:
        for i, point in enumerate(r.tuning.points):
            mark = "**" if i == r.chosen else ""
            value = "diverged | —" if not np.isfinite(r.means[i]) else f"{r.means[i]:.1f} | " + (
                f"{r.ci95[i]:.1f}" if np.isfinite(r.ci95[i]) else "— (one seed)")
            lines.append(f"| {r.tuning.label} | {r.tuning.case_label or '—'} | {mark}{_hyper_text(point)}{mark} | "
                         f"{value} |")
    return lines


def grid_edges(points: Sequence[dict[str, Any]], chosen: int) -> list[tuple[str, str]]:
    """The fields of ``points[chosen]`` at the edge of the grid ``points``, as (field, "floor") where it takes
    the smallest value the grid gives that field and (field, "ceiling") the largest (numeric fields the grid
    varies)."""
    out = []
    for field, value in points[chosen].items():
        values = {p[field] for p in points}
        if len(values) > 1 and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            out += [(field, "floor")] if value == min(values) else [(field, "ceiling")] if value == max(values) else []
    return out


def _memory_lines(exp: Experiment, rows: list[Row]) -> list[str]:
    """For runs on real data: the bytes one seed needs (the environment's arrays, the chosen arms and curves,
    the policy's state and working arrays), by run (a pooled run's largest part's)."""
    loop = LOOPS[exp.loop]
    mine = [r for r in rows if any(loop.data_sources(p.run.env) for p in _computed([r]))]
    if not mine:
        return []
    lines = ["", "## Memory per seed", "",
             "The dominant arrays of one seed (the loop's, and the policy's state, counted twice as the engine holds "
             "it, with the working arrays it declares: nlbandit.core.memory); data shared by every seed (the data "
             "set itself) not.", "",
             "| policy | case | MB per seed |", "|---|---|---:|"]
    for r in mine:  # (a pooled row: its largest part's)
        per_seed = max(sum(v for k, v in loop.memory(run.env, run.policy, run.horizon, 1, run.record_points).items()
                           if "(shared)" not in k) for run in (p.run for p in _computed([r])))
        lines.append(f"| {r.run.label} | {r.run.case_label or '—'} | {per_seed / 2**20:.1f} |")
    return lines


def _data_lines(exp: Experiment, envs) -> list[str]:
    """The real data sets the runs used (version and size) and the cases not run (for want of a data set, or
    left out by ``--cases``)."""
    from nlbandit.data.sources import load

    names = sorted({c["dataset"] for c in envs if "dataset" in c})
    lines = ["", "Data sets: " + "; ".join(load(n).describe() for n in names) + "."] if names else []
    if exp.missing:
        lines += ["", "**Not run:** " + "; ".join(
            f"case `{case}`: {why}" for case, why in exp.missing.items())]
    return lines


def write_report(exp: Experiment, rows: list[Row], out_dir: Path, command: str,
                 tuning: Sequence[TuningResult] = (), resamples: int = 0) -> tuple[Path, list[ClaimResult]]:
    """Write ``<out_dir>/<name>.md``, ``<name>.png`` and the run list ``<name>.runs.json``
    (:mod:`nlbandit.report.runlist`) from ``load_rows(exp, store)`` and, for a tuned
    experiment its ``exp.tuned`` results; return the markdown path and the claim results. With ``resamples``, each
    claim's verdict is also evaluated on that many draws of the seeds (:func:`repeat_shares`), in a column of
    the claims table. The files are written together (module docstring): a command killed while rendering them
    leaves the previous report whole (a kill left the new plot beside the old markdown)."""
    staged: dict[Path, bytes] = {}
    token = _STAGED.set(staged)
    try:
        md, claims = _report(exp, rows, out_dir, command, tuning, resamples)
    finally:
        _STAGED.reset(token)
    write_files(staged)  # (the markdown last: renamed in place one right after the other, after every file is on disk)
    return md, claims


def _report(exp: Experiment, rows: list[Row], out_dir: Path, command: str, tuning: Sequence[TuningResult],
            resamples: int) -> tuple[Path, list[ClaimResult]]:
    """:func:`write_report`'s work, its files staged."""
    claims = check_claims(exp, rows)
    if resamples:
        repeat_shares(exp, rows, claims, resamples)
    png = out_dir / f"{exp.name}.png"
    plot_regret(exp, rows, png)
    env_cfgs = {json.dumps(r.run.env, sort_keys=True): r.run.env for r in rows}
    lines = [
        f"# {exp.title or exp.name}",
        "",
        f"_Generated by `{command}` on {datetime.date.today().isoformat()} with nlbandit {__version__} (CPU "
        f"{machine.describe()}; source hash {package_hash()}; each run's own code hash is listed with its "
        "configuration below); do not edit by hand._",
        "",
        exp.description.strip(),
        "",
        f"Scale **{exp.scale}**: horizon T = {exp.horizon}, {exp.n_seeds}{_of_full(exp)} seeds (repetitions; "
        f"seeds {exp.first_seed}..{exp.first_seed + exp.n_seeds - 1}, common random numbers across policies); "
        f"{_sim_minutes(rows):.1f} min of simulation (compile + run, summed over the rows below). Environment: "
        + "; ".join(f"`{_hyper_text(c)}` ({c['name']})" for c in env_cfgs.values()) + ".",
        *_data_lines(exp, [r.run.env for r in _computed(rows)]),
        *(["", f"Not tuned at this scale (`[scales.{exp.scale}] tune = false`): every series runs at its own "
           "hyperparameters, not at a tuned point."] if exp.untuned else []),
        *(["", f"Only the runs this scale's claims read were run (`[scales.{exp.scale}] series = \"claimed\"`); "
           f"left out: {', '.join(exp.left_out)}."] if exp.left_out else []),
        "",
        f"![{_regret_name(exp)}]({png.name})",
        "",
        f"## Final {_regret_name(exp)} at T = {exp.horizon}",
        "",
    ]
    loop = LOOPS[exp.loop]
    for note in loop.report_notes():
        lines += [note, ""]
    extra_head = "".join(f" {c} |" for c in loop.report_columns())
    lines += [f"| policy | case |{extra_head} mean | ± {ci_name(exp.ci)} | std | median | compile s | run s | "
              "µs / seed-round |",
              "|---|---|" + "---|" * len(loop.report_columns()) + "---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        s = r.stored
        batch = f" (batch of {s.batch_size})" if s.batch_size > 1 else ""
        batch += f" ({s.parts} computations)" if s.parts > 1 else ""
        extra_cells = "".join(f" {c} |" for c in loop.report_cells(r.run, s.curves))
        lines.append(
            f"| {r.run.label} | {r.run.case_label or '—'} |{extra_cells} {np.mean(r.final):.1f} | {r.ci(exp.ci):.1f} | "
            f"{np.std(r.final, ddof=1) if r.final.size > 1 else 0.0:.1f} | {np.median(r.final):.1f} | "
            f"{s.compile_s:.2f}{batch} | {s.run_s:.2f} | {r.us_per_seed_round():.2f} |"
        )
    lines += _phase_lines(exp, rows, out_dir / f"{exp.name}_phases.png")
    lines += _diagnostic_lines(exp)
    lines += _memory_lines(exp, rows)
    if claims:
        lines += ["", "## Claims", "",
                  "Kinds: *paper* (the paper's or its spec's statement, on the margin it justifies), *regression* (a "
                  "threshold the paper does not justify, kept as a check on the implementation), *sanity* (true by "
                  "construction). " + _paired_key(exp) + " on common random numbers, with its 95% CI; a comparison "
                  "the CI straddles is INCONCLUSIVE." + (
                      " A paired() compared with a threshold on means of the same seeds (`paired(a, b) <= 0.25 * "
                      "regret(b)`) is decided *seed by seed*: by the CI of the per-seed gap a − b − 0.25·b against 0, "
                      "so the threshold's own sampling error counts (docs/experiments.md#verdicts)."
                      if any(t.startswith(SEED_BY_SEED) for c in claims for t, _ in c.values) else "") + (
                      f" *Repeats*: the share of {resamples} draws of {exp.n_seeds} seeds, drawn with replacement "
                      "from this report's own (one draw for all runs, so pairs stay paired), in which the claim reads "
                      "as it does here (holds, fails or stays INCONCLUSIVE): an estimate of how often fresh seeds "
                      "would repeat this verdict and, for a claim on point values (a growth rate, an order of means), "
                      "which has no interval, the only measure of its luck. A statistic that noise biases (an R², the "
                      "least of several values) is biased again by the draw, so there the share understates how "
                      "often the verdict repeats; measured times are not resampled (`nlbandit.experiments.power`; "
                      "docs/experiments.md)." if resamples else ""), "",
                  "| claim | kind | check | measured | result |" + (" repeats |" if resamples else ""),
                  "|---|---|---|---|---|" + ("---:|" if resamples else "")]
        for c in claims:
            values = "; ".join(f"`{_cell(_measured_text(t, v))}`" for t, v in c.values) or _cell(c.missing)
            repeats = ("" if not resamples else f" {c.repeats:.2f} |" if c.repeats is not None else
                       " — (times) |" if reads_times(c.check) and not c.missing else " — |")
            lines.append(f"| **{c.name}**: {_cell(c.text)} | {c.kind} | `{_cell(c.check)}` | {values} | "
                         f"{claim_verdict(c)} |{repeats}")
    lines += _tuning_lines(exp, list(tuning))
    lines += ["", "## Policy configurations", ""]
    seen = set()
    for r in rows:
        if r.run.label not in seen:
            seen.add(r.run.label)
            lines.append(f"- **{r.run.label}**: `{r.run.policy['name']}` with {_hyper_text(r.run.policy)} "
                         f"(code {r.run.code})")
    md = out_dir / f"{exp.name}.md"
    lines += ["", f"Every run's identity, with a digest of its first and last seed, is listed in "
              f"`{run_list_path(md).name}` (`nlbandit results revalidate --reports` recomputes those two seeds under "
              "changed code and, when the digests hold, brings this report's code hashes up to date)."]
    staged = _STAGED.get()
    computed = _computed(rows)
    staged[run_list_path(md)] = run_list([r.run for r in computed], [r.digest for r in computed]).encode()
    staged[md] = ("\n".join(lines) + "\n").encode()
    return md, claims

