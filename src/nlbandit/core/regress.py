"""The online-regression loop beside :func:`~nlbandit.core.simulate.simulate`: ``jit(vmap(scan))`` over rounds,
vectorised over trials (seeds) and optionally over a grid of traced learner hyperparameters.

Protocol (Zhao, Zhou, He & Gu 2023, §3.1): in round t the learner sees x_t, predicts ŷ_t = φ(ẑ_t) from
the past only, then sees y_t. With the loss ℓ_t(μ) = Φ(x_tᵀμ) − y_t x_tᵀμ of eq. (3.2) and ẑ_t = x_tᵀμ̂_t,
z_t = x_tᵀμ*, the curves (cumulative over rounds, spec 000 §1.3):

* ``stochastic``: R_stoc(t) = Σ_{τ≤t} ℓ_τ(μ̂_τ) − ℓ_τ(μ*), eq. (3.3) (streams with a μ*; may be negative);
* ``pseudo``: Σ_{τ≤t} D_Φ(ẑ_τ, z_τ), D_Φ(a, b) = Φ(a) − Φ(b) − φ(b)(a − b), which has R_stoc's
  expectation (R_stoc = pseudo − Σ ε_τ(ẑ_τ − z_τ) exactly);
* ``adversarial``: R_adv(t) = Σ_{τ≤t} ℓ_τ(μ̂_τ) − min_μ Σ_{τ≤t} ℓ_τ(μ) (Remark 3.6), the best
  unregularised parameter in hindsight for every prefix: −½ b_tᵀ G_t⁺ b_t with G_t = Σ x xᵀ, b_t = Σ y x
  (identity link only; the pseudo-inverse covers t < d);
* ``loss``: Σ_{τ≤t} ℓ_τ(μ̂_τ); ``clipped``: the number of clipped labels so far.

All regrets are in the ℓ units of eq. (3.2), i.e. half the square loss for the identity link;
``units="square"`` doubles them (the introduction's square-loss regret; identity link only).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.keys import seed_keys
from nlbandit.core.simulate import recorded_rounds
from nlbandit.core.types import Learner, Stream

NUMERICS = 2
"""Version of the numbers the online-regression engine computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


METRICS = ("stochastic", "pseudo", "adversarial")
UNITS = ("ell", "square")


@dataclass
class RegressionResult:
    """Result of :func:`regress`. Batch shape ``B`` is ``(S,)``, or ``(G, S)`` for a grid.

    Attributes:
      rounds: (P,) recorded 1-based rounds (always ending at the horizon).
      curves: name → B + (P,) cumulative curve at ``rounds`` (see the module docstring; the ``clipped``
        curve has shape (S, P): the labels do not depend on the learner).
      compile_s, run_s: seconds compiling and running.
    """

    rounds: np.ndarray
    curves: dict[str, np.ndarray]
    compile_s: float
    run_s: float


def _least_squares_min(x: jax.Array, y: jax.Array) -> jax.Array:
    """min_μ Σ_{τ≤t} (½(x_τᵀμ)² − y_τ x_τᵀμ) = −½ b_tᵀ G_t⁺ b_t for every prefix t (T,)."""

    def step(carry, inputs):
        g, b = carry
        xt, yt = inputs
        g, b = g + jnp.outer(xt, xt), b + yt * xt
        return (g, b), -0.5 * b @ jnp.linalg.pinv(g, hermitian=True) @ b

    d = x.shape[1]
    _, out = jax.lax.scan(step, (jnp.zeros((d, d)), jnp.zeros(d)), (x, y))
    return out


def _running_sum(values: jax.Array) -> jax.Array:
    """The cumulative sum over the last axis, added in round order as the bandit engine's curves are
    (:mod:`nlbandit.core.simulate`). ``jnp.cumsum`` sums in a tree on this backend (other last bits), and a run's
    program with its five cumulative sums compiled about 0.2 s longer than with this loop (0.7-0.8 s against
    0.5-0.6 s, quick-scale flags, 2026-11-27)."""
    values = values.astype(jnp.int_) if values.dtype == jnp.bool_ else values
    steps = jnp.moveaxis(values, -1, 0)
    _, sums = jax.lax.scan(lambda last, v: (last + v, last + v), jnp.zeros(steps.shape[1:], values.dtype), steps)
    return jnp.moveaxis(sums, 0, -1)


def regress(stream: Stream, learner: Learner, params: dict[str, Any], seeds, *, adversarial: bool = False,
            units: str = "ell", grid: bool = False, max_points: int = 1000) -> RegressionResult:
    """Run ``learner`` on one trial of ``stream`` per seed; return the cumulative curves.

    Args:
      stream, learner: must share the link (the loss is the stream model's likelihood).
      params: the learner's traced hyperparameters; with ``grid=True`` every leaf has a leading grid axis.
      seeds: trial seeds; trial s draws its data from ``seed_keys(s).env_reset`` (common random numbers
        across learners and grid points).
      adversarial: also compute R_adv (O(d³) per round for the pseudo-inverse; identity link).
      units: ``"ell"`` or ``"square"`` (×2).
    """
    if stream.link.name != learner.link.name:
        raise ValueError(f"stream link {stream.link.name!r} and learner link {learner.link.name!r} differ")
    if adversarial and learner.link.name != "identity":
        raise ValueError("the adversarial regret is computed for the identity link only")
    if units not in UNITS or (units == "square" and learner.link.name != "identity"):
        raise ValueError(f"units must be 'ell', or 'square' with the identity link, got {units!r}")
    scale = 2.0 if units == "square" else 1.0
    link = learner.link
    rounds = recorded_rounds(stream.horizon, max_points)
    at = jnp.asarray(rounds - 1)

    def trial(p, x, y):
        def step(state, inputs):
            xt, yt = inputs
            return learner.update(p, state, xt, yt), learner.predict(p, state, xt)

        return jax.lax.scan(step, learner.init(p), (x, y))[1]

    def run(p, keys):
        data = jax.vmap(stream.sample)(keys)
        over_seeds = jax.vmap(trial, in_axes=(None, 0, 0))
        z_hat = (jax.vmap(over_seeds, in_axes=(0, None, None)) if grid else over_seeds)(p, data.x, data.y)
        loss = link.log_partition(z_hat) - data.y * z_hat
        curves = {"loss": loss}
        if stream.has_truth:
            z = data.z_star
            curves["stochastic"] = loss - (link.log_partition(z) - data.y * z)
            curves["pseudo"] = (link.log_partition(z_hat) - link.log_partition(z)
                                - link.mean(z) * (z_hat - z))
        if adversarial:
            curves["adversarial"] = loss - jnp.diff(jax.vmap(_least_squares_min)(data.x, data.y),
                                                    prepend=0.0, axis=-1)
        out = {k: scale * _running_sum(v)[..., at] for k, v in curves.items()}
        out["clipped"] = _running_sum(data.clipped)[..., at]
        return out

    keys = jnp.stack([seed_keys(s).env_reset for s in seeds])
    params = {k: jnp.asarray(v, jnp.float64) for k, v in params.items()}
    start = time.perf_counter()
    compiled = jax.jit(run).lower(params, keys).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    out = jax.block_until_ready(compiled(params, keys))
    run_s = time.perf_counter() - start
    return RegressionResult(rounds, {k: np.asarray(v, np.float64) for k, v in out.items()}, compile_s, run_s)
