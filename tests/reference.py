"""Independent float64 NumPy reference implementations of the linear policies.

Written from the formulas, not from ``nlbandit``'s code: every function refits from scratch from the
full history (``X`` (n, d) played features, ``y`` (n,) rewards) with ``np.linalg`` instead of updating an
inverse incrementally. Randomness is passed in explicitly (the standard normal vector of Lin-TS, the
model index of Lin-ES, the perturbations and prior of Lin-ES, the tie-breaking uniforms), so a test can
feed the same draws as the JAX policy and compare decisions exactly.

Notation: V = λI + XᵀX, θ̂ = V⁻¹ Xᵀy, ‖x‖_{V⁻¹} = √(xᵀV⁻¹x).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class RidgeFit(NamedTuple):
    """A ridge fit refitted from scratch.

    Attributes:
      v: (d, d) regularised Gram matrix V = λI + XᵀX.
      v_inv: (d, d) its inverse (``np.linalg.inv``).
      b: (d,) or (d, m) response vector(s) b₀ + Xᵀy.
      theta: (d,) or (d, m) estimate(s) V⁻¹ b (``np.linalg.solve``).
    """

    v: np.ndarray
    v_inv: np.ndarray
    b: np.ndarray
    theta: np.ndarray


def ridge_fit(X: np.ndarray, y: np.ndarray, lam: float, b0: np.ndarray | None = None) -> RidgeFit:
    """Ridge regression on ``X`` (n, d), responses ``y`` (n,) or (n, m), plus an optional prior ``b0``.

    With n = 0 rows this is the empty state V = λI, b = b₀ (or 0).
    """
    X = np.asarray(X, np.float64).reshape(-1, np.shape(X)[-1])
    d = X.shape[1]
    v = lam * np.eye(d) + X.T @ X
    b = X.T @ np.asarray(y, np.float64)
    if b0 is not None:
        b = b + b0
    return RidgeFit(v, np.linalg.inv(v), b, np.linalg.solve(v, b))


def logdet_ratio(v: np.ndarray, lam: float) -> float:
    """log det V − d log λ (``np.linalg.slogdet``), the information gain term of the OFUL radius."""
    sign, logdet = np.linalg.slogdet(v)
    assert sign > 0, "V must be positive definite"
    return float(logdet - v.shape[0] * np.log(lam))


def oful_radius(v: np.ndarray, lam: float, sigma: float, delta: float, s: float) -> float:
    """√β_t = σ √(2 log(1/δ) + log det V − d log λ) + √λ S (Abbasi-Yadkori et al. 2011, Thm. 2)."""
    return sigma * np.sqrt(2.0 * np.log(1.0 / delta) + logdet_ratio(v, lam)) + np.sqrt(lam) * s


def widths(contexts: np.ndarray, v_inv: np.ndarray) -> np.ndarray:
    """‖x‖_{V⁻¹} for every row x of ``contexts`` (K, d)."""
    return np.sqrt(np.einsum("kd,de,ke->k", contexts, v_inv, contexts))


TIE_RTOL = 1e-12


def tie_priorities(word: int, k: int) -> np.ndarray:
    """K uint32 tie-break priorities from one random 32-bit word: lowbias32(word XOR 0x9E3779B9·i)."""
    with np.errstate(over="ignore"):
        x = np.uint32(word) ^ (np.arange(k, dtype=np.uint32) * np.uint32(0x9E3779B9))
        x ^= x >> np.uint32(16)
        x *= np.uint32(0x7FEB352D)
        x ^= x >> np.uint32(15)
        x *= np.uint32(0x846CA68B)
        x ^= x >> np.uint32(16)
    return x


def argmax_ties(scores: np.ndarray, word: int | None = None) -> int:
    """Index of the largest score; among scores within 1e-12·max(1, |best|) of it, the one with the highest
    :func:`tie_priorities` of ``word``. Without ``word`` the first maximiser is returned."""
    best = np.max(scores)
    tied = np.flatnonzero(scores >= best - TIE_RTOL * max(1.0, abs(best)))
    if word is None:
        return int(tied[0])
    return int(tied[np.argmax(tie_priorities(word, scores.shape[0])[tied])])


def greedy_choice(contexts: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float,
                  u: int | None = None) -> int:
    """Greedy: argmax_x xᵀθ̂."""
    return argmax_ties(contexts @ ridge_fit(X, y, lam).theta, u)


def linucb_scores(contexts: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float, *, alpha: float | None = None,
                  sigma: float = 0.5, delta: float = 0.01, s: float = 1.0) -> np.ndarray:
    """LinUCB scores xᵀθ̂ + α ‖x‖_{V⁻¹}.

    ``alpha`` given: the constant-width variant. ``alpha=None``: the OFUL width α = √β_t (see
    :func:`oful_radius`, with ``sigma``, ``delta``, ``s``).
    """
    fit = ridge_fit(X, y, lam)
    if alpha is None:
        alpha = oful_radius(fit.v, lam, sigma, delta, s)
    return contexts @ fit.theta + alpha * widths(contexts, fit.v_inv)


def linucb_choice(contexts: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float, u: int | None = None,
                  **width) -> int:
    """LinUCB decision: argmax of :func:`linucb_scores` (``width`` keywords are passed on)."""
    return argmax_ties(linucb_scores(contexts, X, y, lam, **width), u)


def lints_theta(X: np.ndarray, y: np.ndarray, lam: float, v: float, z: np.ndarray) -> np.ndarray:
    """Lin-TS sample θ̃ = θ̂ + v L z with L the lower Cholesky factor of V⁻¹ and ``z`` (d,) standard normal."""
    fit = ridge_fit(X, y, lam)
    return fit.theta + v * np.linalg.cholesky(fit.v_inv) @ z


def lints_choice(contexts: np.ndarray, X: np.ndarray, y: np.ndarray, lam: float, v: float, z: np.ndarray,
                 u: int | None = None) -> int:
    """Lin-TS decision: argmax_x xᵀθ̃ (see :func:`lints_theta`)."""
    return argmax_ties(contexts @ lints_theta(X, y, lam, v, z), u)


def lines_thetas(X: np.ndarray, y: np.ndarray, Z: np.ndarray, prior: np.ndarray, lam: float) -> np.ndarray:
    """Lin-ES models (d, m): θ_j = V⁻¹ B[:, j] with B = prior + Σ_l x_l (y_l + Z_l)ᵀ.

    ``Z`` (n, m) holds the perturbation of every model on every past reward, ``prior`` (d, m) the initial
    response b₀.
    """
    return ridge_fit(X, np.asarray(y)[:, None] + Z, lam, prior).theta


def lines_choice(contexts: np.ndarray, X: np.ndarray, y: np.ndarray, Z: np.ndarray, prior: np.ndarray, lam: float,
                 j: int, u: int | None = None) -> int:
    """Lin-ES decision: argmax_x xᵀθ_j for the drawn model ``j`` (see :func:`lines_thetas`)."""
    return argmax_ties(contexts @ lines_thetas(X, y, Z, prior, lam)[:, j], u)


def assert_same_decisions(arms: np.ndarray, ref_arms: np.ndarray, what: str) -> None:
    """Every decision of a policy equals the reference's; the message names the first difference."""
    mismatch = np.flatnonzero(np.asarray(arms) != np.asarray(ref_arms))
    assert mismatch.size == 0, (
        f"{what}: {mismatch.size} of {len(arms)} decisions differ, first in round {mismatch[0] + 1}: "
        f"policy {arms[mismatch[0]]}, reference {ref_arms[mismatch[0]]}"
    )
