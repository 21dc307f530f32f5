"""The probability of a Thompson-type choice on the host: one vectorised block of Gaussian draws, each
integrated exactly along the chosen arm's own direction (conditional Monte Carlo).

A Thompson-type policy (Lin-TS, GLM-TSL, GLM-FPL with the identity link) plays argmax_a x_aᵀθ̃ with
θ̃ = θ̄ + c M ξ, ξ ~ N(0, I_r), given the history: the round's *law* (θ̄, M, c), which its host round's
``estimate`` derives (:attr:`nlbandit.host.rounds.HostRound.estimate`), so its scores are s = μ + c F ξ with
μ = Xθ̄ and F = XM for the round's contexts X. For the chosen arm a with row f = F_a ≠ 0, write ξ = u e + ξ⊥,
e = f/‖f‖, u ~ N(0, 1) independent of ξ⊥. Given ξ⊥, every score is affine in the scalar u,
s_b = μ_b + c(ρ_b u + g_b) with ρ_b = F_b·e, g_b = F_b·ξ⊥ (and ρ_a = ‖f‖, g_a = 0), so arm a wins on an
interval of u whose Gaussian mass is exact: P(a | ξ⊥) = Φ(hi) − Φ(lo). The estimate is the mean of P(a | ξ⊥)
over N antithetic pairs (ξ⊥, −ξ⊥) (each pair scores the mean of its two); it is unbiased, and each pair's
variance is at most that of the antithetic pair of indicators (ξ, −ξ) it conditions (Rao–Blackwell): about
as large where the choice is likely, several times smaller where it is unlikely (``GAUSSIAN_DRAWS`` in
:mod:`nlbandit.agent` gives the measurements). The standard error is the pairs' sample standard deviation
over √N. Arms whose score equals a's under every
draw (the same row of the law: duplicated contexts) tie with it, and the tie rule splits their wins evenly.
A policy's act calls :func:`choice_probability` in the compiled call that makes its choice.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_SQRT_HALF = math.sqrt(0.5)
_TIE_RTOL = 1e-12
"""Relative tolerance under which another arm's coefficient of u and offset equal the chosen arm's (a tie)."""


@njit(cache=True)
def _upper_tail(z: float) -> float:
    """P(N(0, 1) > z), accurate in both tails."""
    return 0.5 * math.erfc(z * _SQRT_HALF)


@njit(cache=True)
def _conditional_rate(mean, factor, scale, mask, arm, normals):
    """(p̂, se) of the module docstring from ``normals`` (r, N): pair j conditions on ±(ζ_j − (e·ζ_j) e)."""
    k, r = factor.shape
    n = normals.shape[1]
    if mask is not None and not mask[arm]:
        return 0.0, 0.0
    f = np.ascontiguousarray(factor[arm])
    norm = math.sqrt(f @ f)
    e = f / norm if norm > 0 else np.zeros(r)
    rho = factor @ e
    along = e @ normals
    spread = factor @ normals
    tol = _TIE_RTOL * (1.0 + abs(mean[arm]) + abs(scale) * norm)
    # a beats rival b iff alpha_b·u > beta_b = mean_b − mean_a ± c·g_b: a lower bound on u where alpha_b > 0, an
    # upper one where alpha_b < 0; where alpha_b = 0, b never or always beats a, or ties with it (one row per
    # sign: the pair's two members; rivals outer, draws inner, so the inner loop runs over contiguous rows)
    lo, hi = np.full((2, n), -np.inf), np.full((2, n), np.inf)
    ties, offset = np.zeros((2, n)), np.empty(n)
    for b in range(k):
        if b == arm or (mask is not None and not mask[b]):
            continue
        alpha, gap = scale * (norm - rho[b]), mean[b] - mean[arm]
        for j in range(n):
            offset[j] = scale * (spread[b, j] - rho[b] * along[j])
        for s in range(2):
            sign = 1.0 - 2.0 * s
            if abs(alpha) > tol:
                inverse = 1.0 / alpha
                if alpha > 0:
                    for j in range(n):
                        lo[s, j] = max(lo[s, j], (gap + sign * offset[j]) * inverse)
                else:
                    for j in range(n):
                        hi[s, j] = min(hi[s, j], (gap + sign * offset[j]) * inverse)
            else:
                for j in range(n):
                    beta = gap + sign * offset[j]
                    if abs(beta) <= tol:
                        ties[s, j] += 1.0
                    elif beta > 0:
                        hi[s, j] = -np.inf  # b always beats a
    total, squares = 0.0, 0.0
    for j in range(n):
        pair = 0.0
        for s in range(2):
            if lo[s, j] < hi[s, j]:
                upper = _upper_tail(lo[s, j]) if lo[s, j] > -np.inf else 1.0
                pair += 0.5 * (upper - (_upper_tail(hi[s, j]) if hi[s, j] < np.inf else 0.0)) / (1.0 + ties[s, j])
        total += pair
        squares += pair * pair
    p = total / n
    var = max(squares / n - p * p, 0.0) * n / max(n - 1, 1)
    return p, math.sqrt(var / n)


@njit(cache=True)
def choice_probability(contexts, center, factor, scale: float, mask, arm: int, normals) -> tuple[float, float]:
    """(p̂, standard error) of P(argmax_a x_aᵀθ̃ = ``arm``) among the available arms (``mask``, None for all) of
    ``contexts`` X (K, d), θ̃ = ``center`` + ``scale`` · ``factor`` ξ with ξ ~ N(0, I_r) (``factor`` (d, r)),
    from ``normals`` (r, N) standard normals: N antithetic pairs, each integrated exactly along the arm's
    direction (module docstring). A law of the scores themselves is the identity's contexts (X = I_K)."""
    return _conditional_rate(contexts @ center, contexts @ factor, scale, mask, arm, normals)


__all__ = ["choice_probability"]
