"""How many seeds a figure needs, from a pilot: the sample size at which each paired comparison of its claims is
resolved, fixed before the figure's own run (issue 33 item 4: never raise seeds after seeing an INCONCLUSIVE).

A claim's ``paired(a, b)`` is resolved when the 95% Student-t interval of the per-seed differences a − b lies on
one side of the value at which its comparison turns, its margin m (``lower(paired(a, b)) > 5``, and as well
``paired(a, b) / regret('b') <= -0.5`` or ``-paired(a, b) >= 20``: the comparison is solved for the paired mean, the
rest held at the pilot's values; 0 for a bare sign; not estimated where the comparison is not affine in it; the
nearer bound of a chained range) (:func:`~nlbandit.experiments.claims.paired_interval`). A comparison that a report
decides seed by seed (``paired(a, b) <= 0.25 * regret('b')``: the per-seed gap a − 1.25·b against 0) is planned as
that gap, with margin 0. With a pilot's mean difference d̄ and standard deviation
s, a run of n fresh seeds resolves it with probability about Φ(|d̄ − m|√n / s − t₀.₉₇₅,ₙ₋₁) (the t statistic taken
as normal around its mean; slightly optimistic for small n), so the seeds needed at power β are the smallest n ≥ 2
with |d̄ − m|√n / s ≥ t₀.₉₇₅,ₙ₋₁ + z_β. The pilot's d̄ and m are themselves estimates: a small pilot can miss an
effect or overstate it, so the count is a planning figure, stated in the experiment file with its pilot and then
used once, on seeds the pilot did not use.

Claims that compare no ``paired()`` interval (a threshold on a mean, ``growth(a) < 0.35``; a fraction of seeds,
``stuck(a) <= 0.1``; an order of means) and whole claims of several comparisons are planned by resampling instead
(:func:`verdict_rates`): the claim is evaluated, as a report evaluates it, on n seeds drawn with replacement from the
pilot's (the same draw for every run, so pairs stay paired), many times, and the shares of draws in which it holds,
fails or stays undetermined estimate how a run of n fresh seeds would decide it. This takes the pilot's seeds for the
population: a proportion the pilot never observed (no stuck instance among its seeds) is taken as zero, and a pilot's
extreme seed is drawn as often as any; and a statistic that noise biases (the R² of a line fit, the least of several
values, a ratio of means) is biased once more by the draw, so for such claims the shares understate how often the
pilot's verdict repeats. They are planning figures too, consistent for means and paired differences as the pilot
grows, best where n is at most the pilot's count. A claim's times (``runtime()``, ``select_time()``) are the
pilot's, not resampled.
``nlbandit seeds FILE --scale S --db DB`` prints both per claim (``docs/experiments.md``), and a report gives each
claim's share at its own seed count (:func:`nlbandit.report.build.repeat_shares`).
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from nlbandit.experiments.claims import evaluate_claim, grid_values, paired_differences, t_quantile_975
from nlbandit.plugins import claim_functions

MAX_SEEDS = 1_000_000
"""Counts above this are reported as out of reach (None)."""

SIZES = (3, 5, 10, 20, 50, 100)
"""The seed counts :func:`verdict_rates` tries by default (beside the pilot's own)."""

RESAMPLES = 400
"""Draws per seed count in :func:`verdict_rates`: a share's standard error is at most 0.025."""


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
    margin: float | None = 0.0


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
            needed = seeds_needed(mean - margin, sd, power) if (
                stat == "mean" and diff.size > 1 and margin is not None) else None
            comparisons.append(Comparison(call, stat, int(diff.size), mean, sd, needed, margin))
        if comparisons:
            out.append((claim.name, comparisons))
    return out


class VerdictRates(NamedTuple):
    """A claim evaluated on ``n`` seeds drawn with replacement from the pilot's, ``resamples`` times: the shares of
    draws in which it holds, fails and stays undetermined (INCONCLUSIVE)."""

    n: int
    holds: float
    fails: float
    undetermined: float

    @property
    def decided(self) -> float:
        """The larger of the shares that hold and that fail: how often n seeds decide the claim the same way."""
        return max(self.holds, self.fails)


def verdict_rates(exp, curves, sizes: tuple[int, ...] = SIZES, resamples: int = RESAMPLES,
                  seed: int = 0) -> list[tuple[str, bool | None, list[VerdictRates]]]:
    """(claim name, its verdict on the pilot, its :class:`VerdictRates` per seed count in ``sizes``) for every
    evaluated claim of ``exp``, from the pilot's ``curves`` (:func:`nlbandit.report.build.claim_curves` of its
    stored rows; module docstring). Every claim sees the same ``resamples`` draws of each count (``seed`` fixes
    them)."""
    if resamples < 1 or any(n < 1 for n in sizes):
        raise ValueError(f"resamples and sizes must be >= 1, got {resamples} and {sizes}")
    pilot, grid, functions = exp.n_seeds, grid_values(exp), claim_functions(exp.loop)
    rng = np.random.default_rng(seed)
    draws = {n: rng.integers(0, pilot, size=(resamples, n)) for n in sorted(set(sizes))}

    read_once: dict[tuple, tuple] = {}  # the pilot's curves by call: every draw reads the same runs

    def drawn(rows: np.ndarray):
        def read(label, case, metric="regret"):
            key = (label, json.dumps(case, sort_keys=True, default=str), metric)
            if key not in read_once:
                read_once[key] = curves(label, case, metric)
            rounds, curve, timing = read_once[key]
            if curve.shape[0] != pilot:
                raise ValueError(f"the pilot's run {label!r} holds {curve.shape[0]} seeds, not the file's {pilot}")
            return rounds, curve[rows], timing

        return read

    out = []
    for claim in exp.claims:
        if claim.unchecked:
            continue
        holds = evaluate_claim(claim.check, curves, exp.horizon, grid, functions)[0]
        rates = []
        for n, rows in draws.items():
            found = [evaluate_claim(claim.check, drawn(r), exp.horizon, grid, functions)[0] for r in rows]
            rates.append(VerdictRates(n, found.count(True) / resamples, found.count(False) / resamples,
                                      found.count(None) / resamples))
        out.append((claim.name, holds, rates))
    return out
