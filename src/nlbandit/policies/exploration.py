"""Exploration rules shared by the policies: masked argmax with random tie-breaking, ε-greedy."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def argmax_random_ties(key: jax.Array, scores: jax.Array, mask: jax.Array) -> jax.Array:
    """Index of the largest score among available arms, ties broken uniformly at random.

    Spec 003 §2.1(e)/U6: ties matter, e.g. every arm scores exactly 0 at θ = 0.
    """
    scores = jnp.where(mask, scores, -jnp.inf)
    best = scores == jnp.max(scores)
    u = jax.random.uniform(key, scores.shape)
    return jnp.argmax(jnp.where(best & mask, u, -1.0)).astype(jnp.int32)


def uniform_arm(key: jax.Array, mask: jax.Array) -> jax.Array:
    """An available arm, uniformly at random."""
    return argmax_random_ties(key, jnp.zeros(mask.shape), mask)


def epsilon_greedy(key: jax.Array, scores: jax.Array, mask: jax.Array, epsilon: jax.Array) -> jax.Array:
    """With probability ε a uniformly random available arm, otherwise the masked argmax."""
    k_coin, k_uniform, k_ties = jax.random.split(key, 3)
    explore = jax.random.uniform(k_coin) < epsilon
    return jnp.where(explore, uniform_arm(k_uniform, mask), argmax_random_ties(k_ties, scores, mask))
