"""Ridge regression with a Sherman–Morrison inverse, shared by every linear policy.

State: V⁻¹ where V = λI + Σ_l x_l x_lᵀ, the response vector(s) b = b₀ + Σ_l x_l y_l (one *row* per
ensemble member when ``b`` is a matrix (m, d): the row layout makes the per-round rank-one update and the
row read of one member contiguous, 1.4× faster per Lin-ES round than columns), and log det(V) − d log λ for
the OFUL confidence width (Abbasi-Yadkori et al. 2011, Thm. 2), updated with the matrix determinant lemma.

Accuracy: the state is float64. Over 10^5 updates on K = 50 unit-sphere arms in d = 20 (measured in
``tests/test_ridge.py``), a float32 Sherman–Morrison state drifts past 1e-4 relative in V⁻¹ and by 8e-2 to
150% in θ̂; in float64 the relative error stays at 1e-10 (90% of pulls on one arm, cond(V) ≈ 10³) and
2e-8 (99.9% on one arm, λ = 0.01, cond(V) ≈ 2·10⁵), so no periodic refactorisation is needed. Each update
is O(d²), independent of the number of samples.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class Ridge(NamedTuple):
    """Ridge regression state.

    Attributes:
      v_inv: (d, d) inverse of the regularised Gram matrix V.
      b: (d,) or (m, d) response vector(s) Σ x y (plus an optional prior term), one row per target.
      logdet: log det(V) − d log λ, for OFUL widths.
    """

    v_inv: jax.Array
    b: jax.Array
    logdet: jax.Array


def ridge_init(d: int, lam: jax.Array, b0: jax.Array | None = None) -> Ridge:
    """Empty ridge state with V = λI; ``b0`` (default zeros (d,)) sets the response's initial value."""
    b = jnp.zeros((d,), jnp.float64) if b0 is None else jnp.asarray(b0, jnp.float64)
    return Ridge(jnp.eye(d, dtype=jnp.float64) / lam, b, jnp.zeros((), jnp.float64))


def gram_update(v_inv: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Sherman–Morrison: (V + xxᵀ)⁻¹ from V⁻¹, and log(1 + xᵀV⁻¹x) for the determinant lemma."""
    vx = v_inv @ x
    q = x @ vx
    return v_inv - jnp.outer(vx, vx) / (1.0 + q), jnp.log1p(q)


def ridge_update(state: Ridge, x: jax.Array, y: jax.Array) -> Ridge:
    """Add one observation: features ``x`` (d,), response ``y`` (scalar, or (m,) for a matrix ``b``)."""
    x = x.astype(jnp.float64)
    v_inv, dlogdet = gram_update(state.v_inv, x)
    b = state.b + (x * y if state.b.ndim == 1 else jnp.outer(y, x))
    return Ridge(v_inv, b, state.logdet + dlogdet)


def ridge_theta(state: Ridge) -> jax.Array:
    """The ridge estimate(s) θ̂ = V⁻¹ b: (d,), or (m, d) with one estimate per row of ``b``."""
    return state.b @ state.v_inv


def mahalanobis_widths(inverse: jax.Array, contexts: jax.Array) -> jax.Array:
    """‖x‖_{M⁻¹} = √(xᵀ M⁻¹ x) for each row x of ``contexts`` (K, d), given the inverse ``M⁻¹`` (d, d):
    the confidence width of every UCB rule in the library (negative rounding clipped to 0)."""
    return jnp.sqrt(jnp.maximum(jnp.einsum("kd,de,ke->k", contexts, inverse, contexts), 0.0))


def diagonal_widths(diagonal: jax.Array, contexts: jax.Array) -> jax.Array:
    """‖x‖_{M⁻¹} for each row of ``contexts`` (K, p) when M = diag(``diagonal``) (p,): √(Σ_i x_i²/M_ii), the
    diagonal approximation of the neural policies' design (NeuralUCB's reference code)."""
    return jnp.sqrt(jnp.sum(contexts * contexts / diagonal, axis=-1))


def cholesky_widths(matrix: jax.Array, contexts: jax.Array) -> jax.Array:
    """‖x‖_{M⁻¹} for each row of ``contexts`` (K, d) from ``M`` itself (one Cholesky factor and a
    triangular solve, O(d³ + Kd²)), for matrices that change too much between rounds to keep an inverse."""
    chol = jnp.linalg.cholesky(matrix)
    z = jax.scipy.linalg.solve_triangular(chol, contexts.T.astype(matrix.dtype), lower=True)
    return jnp.sqrt(jnp.sum(z * z, axis=0))


def ridge_widths(state: Ridge, contexts: jax.Array) -> jax.Array:
    """‖x‖_{V⁻¹} for each row of ``contexts`` (K, d)."""
    return mahalanobis_widths(state.v_inv, contexts)
