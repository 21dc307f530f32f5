"""The regression loop's report panel (:mod:`nlbandit.plugins`), ``plots = ["regret-vs-d"]``: the mean regret at
each of the file's ``checkpoints`` against the environment grid key d, one panel per series and remaining grid
case (Zhao, Zhou, He & Gu 2023, Fig. 3; any loop's file may ask for it). Not imported by the loop's module, so
in no run's code hash."""

from __future__ import annotations

from typing import Any

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.claims import value_at
from nlbandit.loops import LOOPS
from nlbandit.plugins import Panel


def d_groups(exp: Any) -> list[tuple[str, tuple[tuple[str, Any], ...]]]:
    """(label, case without d) pairs: one 'regret-vs-d' panel each (a stratified case's runs as one)."""
    from nlbandit.experiments.strata import reported_runs  # (the experiments import the loops)

    groups = {(r.label, tuple((k, v) for k, v in r.case if k != "d")): None for r in reported_runs(exp)}
    return list(groups)


def plot_regret_vs_d(ax: Any, exp: Any, rows: list[Any], panel: tuple[str, tuple[tuple[str, Any], ...]]) -> None:
    """Mean regret (with a 10–90% band across seeds) at each checkpoint against d, for one series and grid case
    (``panel``: the series' label and the case without d)."""
    label, rest = panel
    mine = sorted((r for r in rows if r.run.label == label and all(p in r.run.case for p in rest)),
                  key=lambda r: dict(r.run.case)["d"])
    ds = [dict(r.run.case)["d"] for r in mine]
    for i, t in enumerate(exp.checkpoints):
        at = [value_at(r.stored.rounds, r.stored.cum_regret, t) for r in mine]
        ax.plot(ds, [a.mean() for a in at], "o-", color=f"C{i}", ms=4, lw=1.6, label=f"T = {t}")
        ax.fill_between(ds, [np.quantile(a, 0.1) for a in at], [np.quantile(a, 0.9) for a in at],
                        color=f"C{i}", alpha=0.15, lw=0)
    ax.set_xlabel("dimension d")
    ax.set_ylabel(LOOPS[exp.loop].regret_name(exp.runs))
    ax.set_title(label + (" — " + ", ".join(f"{k}={v}" for k, v in rest) if rest else "")
                 + " (band: 10–90% of seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def check_d_grid(exp: Any, where: str) -> None:
    """The panel needs a grid over the environment's d."""
    if not any(k == "d" for case in exp.env_cases for k, _ in case):
        raise ConfigError(f"{where}: plot 'regret-vs-d' needs a grid over env field 'd' (d = [...])")


REPORT_PLUGINS = (Panel("regret-vs-d", "the mean regret at each of the checkpoints against the environment grid "
                        "key d, one panel per series and remaining grid case (Zhao, Zhou, He & Gu 2023, Fig. 3)",
                        d_groups, plot_regret_vs_d, check_d_grid),)
"""The loop's report plug-ins (:func:`nlbandit.plugins.plugins`)."""
