"""The probability of a Thompson-type choice on the host: one vectorised block of Gaussian draws.

A Thompson-type policy (Lin-TS, GLM-TSL) chooses argmax_a s_a with scores s = μ + c F ξ, ξ ~ N(0, I_r), given
the history: the round's *score law* (μ, F, c), declared by its host round
(:attr:`nlbandit.host.rounds.HostRound.law`). The probability of its choice is estimated from N antithetic
pairs (ξ_j, −ξ_j): each pair scores ½(1[arm wins under ξ_j] + 1[arm wins under −ξ_j]), unbiased, and the
standard error is the pairs' sample standard deviation over √N. The pairs cost one matrix product F Ξ for
both signs."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def _win_rate(mean, spread, mask, arm):
    """(p̂, se) from ``spread`` = c F Ξ (K, N): arm ``arm`` wins pair j when its score is the largest available
    one under +spread[:, j] and under −spread[:, j] (each counted ½)."""
    k, n = spread.shape
    total, squares = 0.0, 0.0
    for j in range(n):
        pair = 0.0
        for sign in (1.0, -1.0):
            mine = mean[arm] + sign * spread[arm, j]
            wins = True
            for a in range(k):
                if a != arm and (mask is None or mask[a]) and mean[a] + sign * spread[a, j] > mine:
                    wins = False
                    break
            if wins:
                pair += 0.5
        total += pair
        squares += pair * pair
    p = total / n
    var = max(squares / n - p * p, 0.0) * n / max(n - 1, 1)
    return p, math.sqrt(var / n)


def gaussian_choice_probability(mean: np.ndarray, factor: np.ndarray, scale: float, mask: np.ndarray | None,
                                arm: int, normals: np.ndarray) -> tuple[float, float]:
    """(p̂, standard error) of P(argmax_a (μ + c F ξ)_a = ``arm``) among the available arms, from the pairs
    (ξ_j, −ξ_j) of ``normals`` (r, N) standard normals (module docstring)."""
    return _win_rate(mean, scale * (factor @ normals), mask, arm)


__all__ = ["gaussian_choice_probability"]
