"""The anytime wrapper's report panel (:mod:`nlbandit.plugins`), ``plots = ["anytime-constant"]``: the
doubling trick's constant l(T₀, b) against the growth factor b for the T₀ of the experiment's ``@anytime`` runs
(Sun, Wang & Xu 2025, Fig. 3b). Not imported by the family module, so in no run's code hash."""

from __future__ import annotations

from typing import Any

import numpy as np

from nlbandit.policies.anytime import SUFFIX
from nlbandit.plugins import Panel
from nlbandit.theory import anytime_constant, optimal_base


_DASHES = ("-", "--", ":", "-.")
_MARKS = ("o", "s", "^", "D")


def draw_anytime_constant(ax: Any, exp: Any, rows: list[Any], panel: None) -> None:
    """l(T₀, b) (γ = 1/2, δ = 3/2) against b for the T₀ of the experiment's ``@anytime`` runs, with the
    (T₀, b) pairs that were run marked."""
    pairs = sorted({(r.policy["t0"], r.policy["b"]) for r in exp.runs if r.policy["name"].endswith(SUFFIX)})
    t0s = sorted({t0 for t0, _ in pairs}) or [100]
    for i, t0 in enumerate(t0s):  # (l barely depends on T₀: the curves nearly coincide, so each has its own dash
        bs = np.linspace(max(1.05, 1.0 + 1.01 / t0), 6.0, 300)  # and the later ones are drawn thinner, on top)
        ax.plot(bs, [anytime_constant(t0, b) for b in bs], color=f"C{i}", ls=_DASHES[i % len(_DASHES)],
                lw=max(0.8, 2.4 - 0.6 * i), label=f"T₀ = {t0}")
        used = [b for t, b in pairs if t == t0]
        ax.plot(used, [anytime_constant(t0, b) for b in used], _MARKS[i % len(_MARKS)], color=f"C{i}",
                ms=max(3.0, 7.0 - 1.5 * i), fillstyle="none" if i else "full")
    ax.axvline(optimal_base(), color="0.5", ls=":", lw=1, label=f"b* = {optimal_base():.3f}")
    low = min(anytime_constant(t0, optimal_base()) for t0 in t0s)
    ax.set_ylim(0.95 * low, 1.6 * low)  # the curve's shape near b*, not its blow-up as b → 1
    ax.set_xlabel("growth factor b")
    ax.set_ylabel("l(T₀, b)  (γ = 1/2, δ = 3/2)")
    ax.set_title("doubling-trick constant (dots: pairs run)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


REPORT_PLUGINS = (Panel("anytime-constant", "the doubling trick's l(T₀, b) against b (Sun, Wang & Xu 2025, "
                        "Fig. 3b)", lambda exp: [None], draw_anytime_constant),)
"""The family's report plug-ins (:func:`nlbandit.plugins.plugins`)."""
