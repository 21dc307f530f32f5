"""Heteroscedastic GLM bandits (Zhao, Zhou, He & Gu 2023, §6.1; spec 000 §1.5, §6.5).

The reward of arm a in round t is φ(aᵀθ*) + ε_t with bounded noise ε_t = σ_t·ξ_t, ξ_t a Rademacher sign,
so |ε_t| = σ_t ≤ R and Var ε_t = σ_t² (Assumption 6.1 with E ε² ≤ σ_t² tight); the learner observes the
variance bound σ_t only after acting (``Feedback.variance_bound``). Noise schedules for σ_t:

* ``constant``: σ_t = σ_low;
* ``burst``: σ_t = σ_high with probability ``burst_prob``, else σ_low (rare large-noise rounds; spec
  §6.5's "mixed" scenario is σ_low = 0.01, σ_high = R = 1, probability 0.1);
* ``decaying``: σ_t = max(σ_low, σ_high/√t);
* ``arm``: σ_t = σ_low + (σ_high − σ_low)(1 + a_{t,1}/‖a_t‖)/2 depends on the chosen arm's first
  coordinate (noise that the agent's choices change).

Instances (θ*, arms) are drawn as in :mod:`nlbandit.envs.synthetic`; spec §6.5 uses θ* and 20 fresh arms
per round uniform on the unit sphere.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE
from nlbandit.core.types import Env, EnvFacts, Feedback, ProblemSpec
from nlbandit.envs.entry import COMMON, VECTOR_DISTS, EnvEntry, arm_norm, check_finite_rewards, theta_norm
from nlbandit.envs.synthetic import arm_observer, instance_reset
from nlbandit.models.links import LINKS

NUMERICS = 1
"""Version of the numbers its environment computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


SCHEDULES = ("constant", "burst", "decaying", "arm")


def noise_level(schedule: str, key: jax.Array, t: jax.Array, x: jax.Array, sigma_low: float, sigma_high: float,
                burst_prob: float) -> jax.Array:
    """σ_t of ``schedule`` in round ``t`` (1-based) for the chosen arm's features ``x``."""
    if schedule == "constant":
        return jnp.asarray(sigma_low, jnp.float64)
    if schedule == "burst":
        return jnp.where(jax.random.uniform(key, (), jnp.float64) < burst_prob, sigma_high, sigma_low)
    if schedule == "decaying":
        return jnp.maximum(sigma_low, sigma_high / jnp.sqrt(t.astype(jnp.float64)))
    share = 0.5 * (1.0 + x[0] / jnp.maximum(jnp.linalg.norm(x), 1e-300))
    return sigma_low + (sigma_high - sigma_low) * share


def heteroscedastic(d: int, k: int, *, link: str = "identity", schedule: str = "constant", sigma_low: float = 0.01,
                    sigma_high: float = 1.0, burst_prob: float = 0.1, arms: str = "sphere", theta: str = "sphere",
                    contexts: str = "fresh", theta_norm: float | None = None) -> Env:
    """A heteroscedastic bandit with mean φ(aᵀθ*) and noise σ_t·Rademacher (module docstring)."""
    spec = ProblemSpec(d, k, 0)
    mean_link = LINKS[link].mean

    def mean(state, ctx):
        return mean_link(ctx @ state.theta)

    def pull(state, key, t, ctx, arm):
        k_level, k_sign = jax.random.split(key)
        sigma = noise_level(schedule, k_level, t, ctx[arm], sigma_low, sigma_high, burst_prob)
        eps = sigma * jax.random.rademacher(k_sign, (), jnp.float64)
        return Feedback(mean(state, ctx)[arm] + eps, sigma)

    reset = instance_reset(spec, arms, theta, theta_norm, None, None, None)
    facts = EnvFacts(link=link, fixed_arms=contexts == "fixed", noise_level=True,
                     noise_bound=max(sigma_low, sigma_high))
    return Env("heteroscedastic", spec, reset, arm_observer(spec, arms, contexts, 1.0), pull, mean, facts)


def _finalize(values, where):
    """Rewards that stay finite (|φ(aᵀθ*)| ≤ ‖a‖‖θ*‖, noise ≤ σ_high) and σ_low ≤ σ_high."""
    arm, theta = arm_norm(values), theta_norm(values)
    check_finite_rewards(values, where, arm[1] * theta[1], arm, theta, ("sigma_high", values["sigma_high"]))
    if values["sigma_low"] > values["sigma_high"]:
        raise ConfigError(f"{where}: field 'sigma_low' = {values['sigma_low']:g} must be <= sigma_high = "
                          f"{values['sigma_high']:g}")
    return values


ENTRIES = (
    EnvEntry(
        "heteroscedastic",
        heteroscedastic,
        (
            COMMON[0], COMMON[1],
            Hyper("link", SIGNATURE, "mean φ(aᵀθ*): identity or logistic", kind=str, static=True,
                  choices=("identity", "logistic")),
            Hyper("schedule", SIGNATURE, "noise level σ_t: constant σ_low, rare bursts of σ_high, decaying, "
                  "or arm-dependent", kind=str, static=True, choices=SCHEDULES),
            Hyper("sigma_low", SIGNATURE, "noise level σ_low", static=True, low=0.0),
            Hyper("sigma_high", SIGNATURE, "noise level σ_high (the noise bound of the environment)", static=True,
                  low=0.0),
            Hyper("burst_prob", SIGNATURE, "probability of a σ_high round (schedule = 'burst')", static=True,
                  low=0.0, high=1.0),
            Hyper("arms", SIGNATURE, "arm feature distribution", kind=str, static=True, choices=VECTOR_DISTS),
            Hyper("theta", SIGNATURE, "θ* distribution", kind=str, static=True, choices=VECTOR_DISTS),
            Hyper("contexts", SIGNATURE, "a fresh arm set every round (spec 000 §6.5), or one pool", kind=str,
                  static=True, choices=("fixed", "fresh")),
            Hyper("theta_norm", SIGNATURE, "rescale θ* to this norm (omitted: keep the drawn norm)", static=True,
                  low=0.0, low_open=True, optional=True),
        ),
        "heteroscedastic GLM bandit: φ(aᵀθ*) + σ_t·Rademacher, σ_t revealed after acting (Zhao et al. "
        "2023 §6)",
        _finalize,
    ),
)
"""The heteroscedastic bandit (:mod:`nlbandit.envs.registry` collects it)."""
