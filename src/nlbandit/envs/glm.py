"""GLM bandits beyond the logistic one: probit (Bernoulli rewards, mean Φ(xᵀθ*)) and Poisson (counts, mean
exp(xᵀθ*)), for the GLM policies' ``link = "probit"`` and ``"poisson"`` (:mod:`nlbandit.models.links`).

Instances are drawn as the synthetic bandits' (:mod:`nlbandit.envs.synthetic`: ``arms``, ``theta``,
``theta_norm``, ``contexts``, ``theta_star``, ``arm_set``, ``avail_prob``); the rewards are drawn from the mean
alone, so there is no ``noise_std``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from nlbandit.core.types import Env, EnvFacts
from nlbandit.envs.entry import COMMON, EnvEntry, arm_norm, check_finite_rewards, theta_norm
from nlbandit.envs.synthetic import _check_given_arrays, _synthetic

NUMERICS = 1
"""Version of the numbers its environments compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


def probit(d: int, k: int, **instance) -> Env:
    """Probit bandit: Y ~ Bernoulli(Φ(xᵀθ*)), Φ the standard normal CDF. ``instance``: the synthetic bandits'
    instance options (module docstring)."""

    def bernoulli(key, mu):
        return (jax.random.uniform(key, (), jnp.float64) < mu).astype(jnp.float64)

    return _synthetic("probit", d, k, lambda th, ctx: jax.scipy.special.ndtr(ctx @ th), bernoulli,
                      EnvFacts(reward_range=(0.0, 1.0), link="probit"), **instance)


def poisson(d: int, k: int, **instance) -> Env:
    """Poisson bandit: Y ~ Poisson(exp(xᵀθ*)), counts. ``instance``: as for :func:`probit`."""

    def counts(key, mu):
        return jax.random.poisson(key, mu, (), jnp.int64).astype(jnp.float64)

    return _synthetic("poisson", d, k, lambda th, ctx: jnp.exp(ctx @ th), counts,
                      EnvFacts(reward_range=(0.0, math.inf), link="poisson"), **instance)


def _finalize(mean_bound):
    """The ``finalize`` hook: rewards that stay finite (:func:`~nlbandit.envs.entry.check_finite_rewards`, with
    |reward| ≤ ``mean_bound(‖x‖ bound · ‖θ*‖ bound)``) and consistent explicit arrays."""

    def finalize(values, where):
        arm, theta = arm_norm(values), theta_norm(values)
        check_finite_rewards(values, where, mean_bound(arm[1] * theta[1]), arm, theta, ("noise", 0.0))
        _check_given_arrays(values, where)
        return values

    return finalize


_OPTIONS = tuple(h for h in COMMON if h.name != "noise_std")

ENTRIES = (
    EnvEntry("probit", probit, _OPTIONS, "probit mean Φ(xᵀθ*), Bernoulli rewards", _finalize(lambda z: 1.0)),
    EnvEntry("poisson", poisson, _OPTIONS, "Poisson counts with mean exp(xᵀθ*)",
             _finalize(lambda z: 2 * math.exp(min(z, 700.0)) + 10)),  # counts stay below 2 μ + 10 w.p. ≈ 1
)
"""The probit and Poisson bandits (:mod:`nlbandit.envs.registry` collects them)."""
