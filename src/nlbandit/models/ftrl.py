"""Follow-the-regularized-leader for online GLM regression: Zhao, Zhou, He & Gu (2023), Algorithm 1.

After round t the estimate is

    μ̂_{t+1} = argmin_μ F_t(μ),   F_t(μ) = λ‖μ‖² + Σ_{τ≤t} ℓ_τ(μ),   ℓ_τ(μ) = −(x_τᵀμ) y_τ + Φ(x_τᵀμ)

(eq. (3.2); Φ is the link's log-partition, Φ' = φ), with μ̂_1 = 0 and no projection. The regularizer is
λ‖μ‖², not λ/2‖μ‖²: the Hessian is 2λI + Σ φ'(x_τᵀμ) x_τ x_τᵀ (eq. (4.2)), so in the notation of
:mod:`nlbandit.models.glm` (ridge λ'/2‖θ‖²) the ridge is λ' = 2λ. Two solvers (spec 000 §2.1):

* ``closed-form`` (identity link only): μ̂_{t+1} = H_t⁻¹ Σ_{τ≤t} y_τ x_τ with H_t = 2λI + Σ_{τ≤t} x_τ x_τᵀ,
  H_t⁻¹ kept by Sherman–Morrison: O(d²) per round;
* ``newton``: damped Newton with step halving on the full history (a fixed-size buffer), warm-started
  at μ̂_t, stopping when a full step is below 1e-10 (relative) or after 50 iterations: O(t d² + d³) per
  iteration. The spec's single "online Newton step" shortcut is not offered; it is not the paper's
  algorithm.

The estimate does not depend on the horizon, so one run of length T gives every prefix's regret.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.models.glm import newton_solve
from nlbandit.models.links import Link

SOLVERS = ("auto", "closed-form", "newton")
_BLOCK = 64  # history rows per block of the Newton solver's masked sums


class FTRLState(NamedTuple):
    """FTRL after t updates.

    Attributes:
      theta: (d,) the estimate μ̂_{t+1}.
      h_inv: (d, d) H_t⁻¹ = (2λI + Σ x xᵀ)⁻¹ (closed form; kept for the Newton solver too, as MOR-UCB
        and the regret identities need the unweighted Gram matrix).
      b: (d,) Σ y x.
      xs, ys: (capacity, d) and (capacity,) history buffers (Newton; capacity 0 for the closed form).
      n: number of updates t.
    """

    theta: jax.Array
    h_inv: jax.Array
    b: jax.Array
    xs: jax.Array
    ys: jax.Array
    n: jax.Array


class FTRL(NamedTuple):
    """FTRL as pure functions: ``init(lam) -> state`` and ``update(state, x, y, lam) -> state``.

    ``lam`` is the λ of λ‖μ‖² and may be traced. Build with :func:`ftrl`.
    """

    link: Link
    solver: str
    init: Callable[..., FTRLState]
    update: Callable[..., FTRLState]


def ftrl(link: Link, d: int, capacity: int, solver: str = "auto") -> FTRL:
    """FTRL for ``d`` features and at most ``capacity`` updates (the Newton solver's buffer length).

    ``solver="auto"`` is the closed form for the identity link and Newton otherwise.
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    if solver == "auto":
        solver = "closed-form" if link.name == "identity" else "newton"
    if solver == "closed-form" and link.name != "identity":
        raise ValueError(f"the closed-form FTRL solver needs the identity link, got {link.name!r}")
    cap = 0 if solver == "closed-form" else -(-capacity // _BLOCK) * _BLOCK

    def init(lam) -> FTRLState:
        lam = jnp.asarray(lam, jnp.float64)
        return FTRLState(jnp.zeros(d), jnp.eye(d) / (2.0 * lam), jnp.zeros(d), jnp.zeros((cap, d)),
                         jnp.zeros(cap), jnp.zeros((), jnp.int32))

    def update(state: FTRLState, x, y, lam) -> FTRLState:
        hx = state.h_inv @ x
        h_inv = state.h_inv - jnp.outer(hx, hx) / (1.0 + x @ hx)
        b = state.b + y * x
        n = state.n + 1
        if solver == "closed-form":
            return FTRLState(h_inv @ b, h_inv, b, state.xs, state.ys, n)
        xs = state.xs.at[state.n].set(x)
        ys = state.ys.at[state.n].set(y)
        w = (jnp.arange(cap) < n).astype(jnp.float64)
        theta = newton_solve(link, xs, w, w * ys, 2.0 * lam, state.theta, max_iter=50, step_tol=1e-10,
                             grad_tol=0.0, active=(n, _BLOCK)).theta
        return FTRLState(theta, h_inv, b, xs, ys, n)

    return FTRL(link, solver, init, update)
