"""Logistic bandits with a nonlinear latent function: Bernoulli(μ(h(x))) rewards, μ the sigmoid, and the six
latent functions h1–h6 of Bae & Lee (2025) §7 and App. J (spec 001 §4.2).

| id | h(x) | parameters (entries i.i.d. Unif(−1, 1), drawn once per instance) |
|---|---|---|
| h1 | 0.2·(xᵀθ)⁴ | θ ∈ ℝ^d |
| h2 | 20·cos(xᵀθ) | θ |
| h3 | 5·xᵀΘx | Θ ∈ ℝ^{d×d}, not symmetrised (spec 001 §4.2 [REC]) |
| h4 | 10·(xᵀθ)² | θ (Zhou et al. 2020) |
| h5 | xᵀΘᵀΘx = ‖Θx‖² | Θ |
| h6 | cos(3·xᵀθ) | θ |

Contexts come from a pool of ``pool`` distinct vectors drawn once per instance (spec 001 §4.2, §4.4; the
paper controls the effective dimension through its size): uniform on [−1, 1]^d (``vectors = "box"``, the
spec's recommendation: with unit vectors h1 would be nearly constant) or on the unit sphere. Each round
offers K of them:

* ``pool_draw = "round"``: K distinct vectors, uniformly, independently across rounds (the paper's Figs. 1,
  2, 4 with a pool of 2500, and the small pools of Figs. 3 and 6);
* ``pool_draw = "run"``: without replacement across the whole run — round t offers entries (t − 1)K + 1 …
  tK of one random permutation of the pool — so that a pool of T·K vectors shows every vector once (the
  "high d̃" panels, N_vec = 10000 = T·K; spec 001 §4.4 [REC]); past the pool's end it starts over.

Regret is pseudo-regret against the means μ(h(x)) (spec 001 §4.1).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE
from nlbandit.core.types import Env, EnvFacts, Feedback, ProblemSpec
from nlbandit.envs.entry import COMMON, EnvEntry

NUMERICS = 1
"""Version of the numbers its environment computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


LATENTS = {
    "h1": lambda x, th, mat: 0.2 * (x @ th) ** 4,
    "h2": lambda x, th, mat: 20.0 * jnp.cos(x @ th),
    "h3": lambda x, th, mat: 5.0 * jnp.einsum("...i,ij,...j->...", x, mat, x),
    "h4": lambda x, th, mat: 10.0 * (x @ th) ** 2,
    "h5": lambda x, th, mat: jnp.sum((x @ mat.T) ** 2, axis=-1),
    "h6": lambda x, th, mat: jnp.cos(3.0 * (x @ th)),
}
"""h(x) for features x (..., d), the vector θ and the matrix Θ of an instance (each h uses one of them)."""

VECTORS = ("box", "sphere")
POOL_DRAWS = ("round", "run")


class LatentInstance(NamedTuple):
    """One instance: θ (d,), Θ (d, d), the context pool (N_vec, d) and a permutation of it (``run`` draws)."""

    theta: jax.Array
    matrix: jax.Array
    pool: jax.Array
    order: jax.Array


def distinct_indices(key: jax.Array, n: int, k: int) -> jax.Array:
    """``k`` distinct indices drawn uniformly from range(``n``) (Floyd's algorithm: k draws, no pass over n),
    in uniformly random order; needs k ≤ n."""
    keys = jax.random.split(key, k + 1)
    chosen = jnp.full((k,), -1, jnp.int32)
    for j in range(k):
        top = n - k + j  # Floyd: draw from [0, top]; a repeat takes top itself, which no earlier draw can be
        i = jax.random.randint(keys[j], (), 0, top + 1, jnp.int32)
        chosen = chosen.at[j].set(jnp.where(jnp.any(chosen == i), top, i))
    return jax.random.permutation(keys[k], chosen)


def latent(d: int, k: int, latent: str = "h1", pool: int = 2500, vectors: str = "box",
           pool_draw: str = "round") -> Env:
    """The latent logistic bandit ``latent`` ∈ h1…h6 (module docstring) in dimension ``d`` with ``k`` arms per
    round from a pool of ``pool`` ≥ k context vectors (validated at the registry, not here)."""
    spec = ProblemSpec(d, k, 0)
    h = LATENTS[latent]

    def reset(key):
        k_theta, k_matrix, k_pool, k_order = jax.random.split(key, 4)
        if vectors == "box":
            contexts = jax.random.uniform(k_pool, (pool, d), jnp.float64, -1.0, 1.0)
        else:
            g = jax.random.normal(k_pool, (pool, d), jnp.float64)
            contexts = g / jnp.linalg.norm(g, axis=1, keepdims=True)
        return LatentInstance(jax.random.uniform(k_theta, (d,), jnp.float64, -1.0, 1.0),
                              jax.random.uniform(k_matrix, (d, d), jnp.float64, -1.0, 1.0), contexts,
                              jax.random.permutation(k_order, pool))

    def observe(state, key, t):
        if pool_draw == "run":
            picks = state.order[((t - 1) * k + jnp.arange(k)) % pool]
        else:
            picks = distinct_indices(key, pool, k)
        return state.pool[picks], jnp.ones((k,), bool)

    def mean(state, contexts):
        return jax.nn.sigmoid(h(contexts, state.theta, state.matrix))

    def pull(state, key, t, contexts, arm):
        p = mean(state, contexts)[arm]
        return Feedback((jax.random.uniform(key, (), jnp.float64) < p).astype(jnp.float64))

    return Env("latent", spec, reset, observe, pull, mean, EnvFacts(reward_range=(0.0, 1.0)))


def _finalize(values, where):
    """A pool of at least K vectors (rewards are 0 or 1: nothing to bound)."""
    if values["pool"] < values["k"]:
        raise ConfigError(f"{where}: field 'pool' must be >= k = {values['k']} (each round offers k distinct "
                          f"vectors of the pool), got {values['pool']}")
    return values


ENTRIES = (
    EnvEntry(
        "latent",
        latent,
        (
            COMMON[0], COMMON[1],
            Hyper("latent", SIGNATURE, "latent function h of the mean sigmoid(h(x))", kind=str, static=True,
                  choices=tuple(LATENTS)),
            Hyper("pool", SIGNATURE, "N_vec, the number of distinct context vectors of an instance", kind=int,
                  static=True, low=1),
            Hyper("vectors", SIGNATURE, "context vectors uniform on [−1, 1]^d or on the unit sphere", kind=str,
                  static=True, choices=VECTORS),
            Hyper("pool_draw", SIGNATURE, "K distinct vectors per round, or without replacement across the run",
                  kind=str, static=True, choices=POOL_DRAWS),
        ),
        "Bernoulli(sigmoid(h(x))) rewards, h one of Bae & Lee (2025)'s h1–h6, contexts from a pool of "
        "N_vec vectors",
        _finalize,
        lambda config: config["pool"] * (config["d"] + 1) + config["d"] ** 2 + config["d"],  # pool, permutation, θ, Θ
    ),
)
"""The latent-function bandit (:mod:`nlbandit.envs.registry` collects it)."""
