"""Exploration designs for the warm-up: G-optimal design, its rounding, and a well-conditioned basis.

**G-optimal design** (spec 003 §2.3.1–2.3.2). For arms x_1..x_K ∈ ℝ^d and weights ζ on the simplex, let
V(ζ) = Σ_k ζ_k x_k x_kᵀ and g_k(ζ) = x_kᵀV(ζ)⁻¹x_k. The G-optimal design minimises max_k g_k(ζ), which the
GLM-ES warm-up (Sun, Wang & Xu 2025, Algorithm 2 and Lemma B.4) needs. By the Kiefer–Wolfowitz theorem
(Kiefer & Wolfowitz 1960) it is also the D-optimal design, the maximiser of log det V(ζ), and the optimal
value is exactly d. Since Σ_k ζ_k g_k = tr(I) = d, max_k g_k ≥ d for every ζ, and concavity of log det gives
log det V(ζ*) − log det V(ζ) ≤ max_k g_k(ζ) − d. The stop rule max_k g_k ≤ d(1 + ε) therefore certifies
that ζ is within a factor 1 + ε of G-optimal and within dε of the maximal log det. Two solvers, both
started from ζ = 1/K:

* ``"multiplicative"`` (Titterington 1976; Silvey, Titterington & Torsney 1978): ζ_k ← ζ_k g_k/d. The
  update keeps Σζ = 1 exactly (it is renormalised anyway against rounding) and increases log det V
  monotonically. Spec 003 §9: ≈ 10 iterations for K = 50, d = 20 and ≈ 34 for K = 500, d = 50 at ε = 1e-2.
* ``"frank-wolfe"`` (Fedorov 1972; Wynn 1970): move to the worst-covered arm i* = argmax g with the exact
  line-search step γ = (g*/d − 1)/(g* − 1), ζ ← (1 − γ)ζ + γ e_{i*}. Much slower (≈ 300 iterations for
  K = 50, d = 20), and, having no away steps, it crawls at small ε: on unit-sphere arms with K = 50,
  d = 20 it needs ≈ 10⁴ iterations for ε = 1e-3 and does not reach ε = 1e-4 in 10⁵, where the
  multiplicative algorithm needs 39 and 78.

*Arms that do not span ℝ^d* (K < d, duplicated or degenerate arms). V(ζ) is then singular, so the design is
computed in the span of the arms: with the thin SVD X = U S Wᵀ of the arm matrix and r its numerical rank
(singular values above s_max·max(K, d)·eps, NumPy's ``matrix_rank`` rule), the arms have coordinates
x̃_k = (U S)_k in the orthonormal basis W, and the coordinates beyond r are set to zero. Those directions get
a unit diagonal entry in Ṽ(ζ) = Σ_k ζ_k x̃_k x̃_kᵀ + diag(0..0, 1..1), which keeps every shape static (as jit
and vmap need) without changing g_k = x_kᵀV(ζ)⁺x_k, the variance in the span. Everything above holds with
d replaced by d_eff = r, in the stop rule and in the updates. For a full-rank arm set this is a rotation,
which leaves g unchanged; it is exact, unlike a small ridge, and keeps Ṽ as well conditioned as the design.

**Rounding** (spec 003 §2.3.3; Sun, Wang & Xu 2025, Algorithm 3, after Pukelsheim 2006, Ch. 12, and Fiez
et al. 2019) turns ζ into integer pull counts N_k with Σ N_k = τ, then raises every count to
⌈r(a)/K⌉ with r(a) = (d(d+1)/2 + 1)/a (line 6), which can make the warm-up longer than τ;
:func:`warmup_length_bounds` gives the range of the real length Σ N_k. Lemma B.4 in design form:
max_k x_kᵀ(Σ_i N_i x_i x_iᵀ)⁻¹x_k ≤ 1.5·d/τ for a = 0.5, and :func:`tau_from_iota` picks τ from the
target width 1/ι.

**Basis** (spec 002 §2.5 [R]; Kveton et al. 2020, §4.5): :func:`basis_arms` picks d arms by greedy
max-residual selection (Gram–Schmidt with pivoting, i.e. QR with column pivoting on Xᵀ), which keeps
λ_min(Σ v vᵀ) of the chosen basis large and so the round-robin warm-up τ = d⌈C/λ_min⌉ short.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

# Design weights at or below this are treated as zero by the rounding (spec 003 §2.3.3 [REC]).
_NEGLIGIBLE_WEIGHT = 1e-12


class Design(NamedTuple):
    """Outcome of :func:`g_optimal_design`.

    Attributes:
      weights: (K,) design ζ on the simplex.
      max_variance: max_k x_kᵀV(ζ)⁻¹x_k at the returned ζ (V(ζ)⁺, the inverse on the span of the arms,
        when they do not span ℝ^d); at least d_eff, at most d_eff(1 + ε) when converged.
      iterations: number of weight updates made (0 when the uniform design already meets the stop rule).
      converged: whether the stop rule max_k g_k ≤ d_eff(1 + ε) was met within ``max_iter`` updates.
    """

    weights: jax.Array
    max_variance: jax.Array
    iterations: jax.Array
    converged: jax.Array


def _span_coordinates(arms: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Coordinates (K, p) of the arms in an orthonormal basis of ℝ^d ordered by singular value
    (p = min(K, d)), with the coordinates beyond the numerical rank zeroed, and the mask (p,) of the
    kept coordinates."""
    u, s, _ = jnp.linalg.svd(arms, full_matrices=False)
    tol = s[0] * max(arms.shape) * jnp.finfo(arms.dtype).eps
    kept = s > tol
    return u * jnp.where(kept, s, 0.0), kept


def _variances(coords: jax.Array, kept: jax.Array, weights: jax.Array) -> jax.Array:
    """g_k = x̃_kᵀṼ(ζ)⁻¹x̃_k for every arm, by a Cholesky factor of Ṽ(ζ) = Σ ζ_k x̃_k x̃_kᵀ + diag(¬kept)."""
    v = (coords * weights[:, None]).T @ coords + jnp.diag(jnp.where(kept, 0.0, 1.0))
    chol = jnp.linalg.cholesky(v)
    z = jax.scipy.linalg.solve_triangular(chol, coords.T, lower=True)
    return jnp.sum(z * z, axis=0)


def _multiplicative_step(weights, g, d_eff):
    """Titterington's update ζ_k ← ζ_k g_k / d_eff, renormalised."""
    new = weights * g / d_eff
    return new / jnp.sum(new)


def _frank_wolfe_step(weights, g, d_eff):
    """Fedorov–Wynn step towards the worst-covered arm, with the exact line search for log det."""
    i = jnp.argmax(g)
    gamma = (g[i] / d_eff - 1.0) / (g[i] - 1.0)
    return (1.0 - gamma) * weights + gamma * jax.nn.one_hot(i, weights.shape[0], dtype=weights.dtype)


_STEPS = {"multiplicative": _multiplicative_step, "frank-wolfe": _frank_wolfe_step}


def g_optimal_design(arms: jax.Array, method: str = "multiplicative", eps: float = 1e-2,
                     max_iter: int = 10_000) -> Design:
    """G-optimal (equivalently D-optimal) design on the rows of ``arms`` (K, d).

    ``method`` is ``"multiplicative"`` (default) or ``"frank-wolfe"``; both start from ζ = 1/K and stop
    once max_k x_kᵀV(ζ)⁻¹x_k ≤ d_eff(1 + ``eps``), with d_eff the numerical rank of ``arms`` (see the
    module docstring for arm sets that do not span ℝ^d), or after ``max_iter`` updates. Jittable and
    vmappable with ``method`` and ``max_iter`` static; an unknown ``method`` raises KeyError at trace time.
    """
    step = _STEPS[method]
    coords, kept = _span_coordinates(arms)
    d_eff = jnp.sum(kept).astype(arms.dtype)
    threshold = d_eff * (1.0 + eps)
    k = arms.shape[0]

    def cond(carry):
        _, g, it = carry
        return (it < max_iter) & (jnp.max(g) > threshold)

    def body(carry):
        weights, g, it = carry
        weights = step(weights, g, d_eff)
        return weights, _variances(coords, kept, weights), it + 1

    weights0 = jnp.full((k,), 1.0 / k, arms.dtype)
    init = (weights0, _variances(coords, kept, weights0), jnp.zeros((), jnp.int32))
    weights, g, it = jax.lax.while_loop(cond, body, init)
    max_g = jnp.max(g)
    return Design(weights, max_g, it, max_g <= threshold)


def _min_count(d: int, k: int, a: float = 0.5) -> int:
    """⌈r(a)/K⌉ with r(a) = (d(d+1)/2 + 1)/a: the least pull count per arm after line 6 of Algorithm 3."""
    return math.ceil((d * (d + 1) / 2 + 1) / a / k)


def round_design(weights: jax.Array, tau: int, d: int, a: float = 0.5,
                 enforce_min_count: bool = True) -> jax.Array:
    """Integer pull counts N (K,) int32 from the design ``weights`` ζ (K,): Algorithm 3 of Sun, Wang & Xu
    (2025) as in spec 003 §2.3.3.

    1. N_i ← ⌈(τ − K/2)ζ_i⌉;
    2. while Σ N ≠ τ: if Σ N < τ increment the arm with the least (N_i − 1)/ζ_i, else decrement the arm
       with the largest (N_i − 1)/ζ_i, over the arms with ζ_i > 1e-12;
    3. if ``enforce_min_count``: N_i ← max(N_i, ⌈r(a)/K⌉) for every arm (paper's line 6, with the ceiling
       of spec 003 [REC]); Σ N is then in :func:`warmup_length_bounds`. Without it Σ N = τ exactly.

    Two guards beyond the paper, inert unless some 0 < ζ_i ≤ 1e-12 or τ < K/2: arms with ζ_i ≤ 1e-12
    take no part at all (they also start from N_i = 0 in step 1, instead of ⌈(τ − K/2)·ζ_i⌉ = 1), and
    τ − K/2 is clipped at 0, so that for τ < K/2 the loop apportions τ pulls from N = 0 instead of starting
    from negative counts. Then every count stays ≥ 0 (a decrement always finds an arm with N_i ≥ 1, whose
    (N_i − 1)/ζ_i ≥ 0 beats the negative value of any N_j = 0), and each pass moves Σ N one step towards
    τ, so the loop ends after |Σ N − τ| passes, at most about K/2 for weights summing to 1. ``d``, ``a`` and
    ``enforce_min_count`` are static Python values; ``tau`` is a Python int or a traced integer scalar.
    Jittable and vmappable.
    """
    k = weights.shape[0]
    live = weights > _NEGLIGIBLE_WEIGHT
    live_weights = jnp.where(live, weights, 1.0)  # any positive value: ignored arms are masked out below
    counts = jnp.where(live, jnp.ceil(jnp.maximum(tau - k / 2, 0.0) * weights), 0.0).astype(jnp.int32)

    def cond(counts):
        return jnp.sum(counts) != tau

    def body(counts):
        ratio = (counts - 1) / live_weights
        short = jnp.sum(counts) < tau
        up = jnp.argmin(jnp.where(live, ratio, jnp.inf))
        down = jnp.argmax(jnp.where(live, ratio, -jnp.inf))
        return counts.at[jnp.where(short, up, down)].add(jnp.where(short, 1, -1).astype(jnp.int32))

    counts = jax.lax.while_loop(cond, body, counts)
    if enforce_min_count:
        counts = jnp.maximum(counts, _min_count(d, k, a))
    return counts


def warmup_length_bounds(tau: int, d: int, k: int, a: float = 0.5,
                         enforce_min_count: bool = True) -> tuple[int, int]:
    """Static bounds (low, high) on the warm-up length Σ N_i returned by :func:`round_design` for K = ``k``
    arms: (max(τ, K⌈r/K⌉), τ + K⌈r/K⌉) with the line-6 minimum count, (τ, τ) without it. Size a fixed
    buffer with ``high``; a ``low`` beyond the horizon means the warm-up cannot fit."""
    if not enforce_min_count:
        return tau, tau
    floor = k * _min_count(d, k, a)
    return max(tau, floor), tau + floor


def tau_from_iota(iota: float, d: int, mu_dot_min: float) -> int:
    """Warm-up length τ = ⌈1.5·ι²·d/μ̇_min⌉ of Lemma B.4, after which max_x ‖x‖_{H_t⁻¹} ≤ 1/ι (a = 0.5)."""
    return math.ceil(1.5 * iota**2 * d / mu_dot_min)


def basis_arms(arms: jax.Array, n: int | None = None) -> jax.Array:
    """Indices (n,) int32 of ``n`` arms (default d) chosen greedily from the rows of ``arms`` (K, d): each
    step takes the arm farthest from the span of those already chosen (largest Gram–Schmidt residual),
    then removes that direction from every residual (spec 002 §2.5 [R]). When the arms span ℝ^d the first
    d picks are a basis. Needs n ≤ K; once the chosen arms span all the arms have, the remaining picks are
    unchosen arms with (rounding-level) largest residual. ``n`` is static; jittable and vmappable.
    """
    k, d = arms.shape
    n = d if n is None else n

    def pick(i, carry):
        residual, chosen, indices = carry
        norms = jnp.where(chosen, -jnp.inf, jnp.sum(residual * residual, axis=1))
        j = jnp.argmax(norms)
        q = residual[j] / jnp.sqrt(jnp.maximum(norms[j], jnp.finfo(arms.dtype).tiny))
        residual = residual - jnp.outer(residual @ q, q)
        return residual, chosen.at[j].set(True), indices.at[i].set(j.astype(jnp.int32))

    init = (arms, jnp.zeros((k,), bool), jnp.zeros((n,), jnp.int32))
    return jax.lax.fori_loop(0, n, pick, init)[2]
