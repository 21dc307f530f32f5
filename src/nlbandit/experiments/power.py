"""How many seeds a figure needs, from a pilot: the sample size at which each paired comparison of its claims is
resolved, fixed before the figure's own run (issue 33 item 4: never raise seeds after seeing an INCONCLUSIVE).

A claim's ``paired(a, b)`` is resolved when the 95% Student-t interval of the per-seed differences a − b lies on
one side of the number the claim compares it with, its margin m (``paired(a, b) <= 0.25 * regret('b')``,
``lower(paired(a, b)) > 5``; 0 where it is compared with none, e.g. a bare sign; the margin is evaluated on the
pilot) (:func:`~nlbandit.experiments.claims.paired_interval`). With a pilot's mean difference d̄ and standard
deviation s, a run of n fresh seeds resolves it with probability about Φ(|d̄ − m|√n / s − t₀.₉₇₅,ₙ₋₁) (the t
statistic taken as normal around its mean; slightly optimistic for small n), so the seeds needed at power β are
the smallest n ≥ 2 with |d̄ − m|√n / s ≥ t₀.₉₇₅,ₙ₋₁ + z_β. The pilot's d̄ and m are themselves estimates: a small
pilot can miss an effect or overstate it, so the count is a planning figure, stated in the experiment file with
its pilot and then used once, on seeds the pilot did not use.
``nlbandit seeds FILE --scale S --db DB`` prints it per claim (``docs/experiments.md``).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from nlbandit.experiments.claims import grid_values, paired_differences, t_quantile_975
from nlbandit.plugins import claim_functions

MAX_SEEDS = 1_000_000
"""Counts above this are reported as out of reach (None)."""


class Comparison(NamedTuple):
    """One ``paired()`` of a claim on the pilot: the call, the pilot's seeds, mean difference and standard
    deviation, the seeds a run needs to resolve it against its margin (None: out of reach, or a median, which this
    does not estimate), and that margin (module docstring)."""

    call: str
    stat: str
    seeds: int
    mean: float
    sd: float
    needed: int | None
    margin: float = 0.0


def seeds_needed(mean: float, sd: float, power: float = 0.8) -> int | None:
    """The smallest n ≥ 2 with |mean|·√n / sd ≥ t₀.₉₇₅,ₙ₋₁ + z_power (module docstring; ``mean`` the pilot's mean
    difference less the margin); 2 where sd = 0 and mean ≠ 0; None where mean = 0 or n would exceed
    :data:`MAX_SEEDS`."""
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if mean == 0.0 or not math.isfinite(mean) or not math.isfinite(sd):
        return None
    if sd == 0.0:
        return 2
    z, effect = NormalDist().inv_cdf(power), abs(mean) / sd

    def resolved(n: int) -> bool:
        return effect * math.sqrt(n) >= t_quantile_975(n - 1) + z

    low, high = 1, 2  # resolved(n) is monotone (the left side grows with n, the right one falls): doubling,
    while not resolved(high):  # then bisection with resolved(high) and not resolved(low)
        if high > MAX_SEEDS:
            return None
        low, high = high, 2 * high
    while low + 1 < high:
        mid = (low + high) // 2
        low, high = (low, mid) if resolved(mid) else (mid, high)
    return high


def claim_comparisons(exp, curves, power: float = 0.8) -> list[tuple[str, list[Comparison]]]:
    """(claim name, its :class:`Comparison` list) for every claim of ``exp`` that compares runs with
    ``paired()``, from the pilot's ``curves`` (:func:`nlbandit.report.build.claim_curves` of its stored rows)."""
    out, grid, functions = [], grid_values(exp), claim_functions(exp.loop)
    for claim in exp.claims:
        found = paired_differences(claim.check, curves, exp.horizon, grid, functions)
        comparisons = []
        for call, stat, diff, margin in found:
            sd = float(np.std(diff, ddof=1)) if diff.size > 1 else math.nan
            mean = float(diff.mean())
            needed = seeds_needed(mean - margin, sd, power) if stat == "mean" and diff.size > 1 else None
            comparisons.append(Comparison(call, stat, int(diff.size), mean, sd, needed, margin))
        if comparisons:
            out.append((claim.name, comparisons))
    return out
