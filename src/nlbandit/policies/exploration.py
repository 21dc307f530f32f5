"""Exploration rules shared by the policies: masked argmax with random tie-breaking, ε-greedy, the
ensemble member draw, and the :class:`~nlbandit.core.types.ActInfo` that ``act`` returns.

The random numbers each rule reads from its key are drawn by one function (:func:`tie_word`,
:func:`member_and_tie_words`, :func:`epsilon_greedy_draws`), which the online agent's host rounds
(:mod:`nlbandit.host`) call too, so that no other module re-spells how a key is split.

Every rule that can say with which probability it chose its arm returns it beside the arm. The
probability is computed inside the jitted ``act``; when the caller does not use it (the simulation
engine), XLA removes that computation, so it costs nothing there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from nlbandit.core.types import ActInfo

TIE_RTOL = 1e-12
"""Relative tolerance under which two scores count as tied."""


def mix32(x: jax.Array) -> jax.Array:
    """A bijective 32-bit integer mixer (the "lowbias32" finaliser of C. Wellons' hash-prospector)."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def tie_priorities(word: jax.Array, k: int) -> jax.Array:
    """K distinct pseudo-random uint32 priorities from one random word: mix32(word XOR golden·index)."""
    return mix32(word ^ (jnp.arange(k, dtype=jnp.uint32) * jnp.uint32(0x9E3779B9)))


def argmax_random_ties(key: jax.Array, scores: jax.Array, mask: jax.Array) -> jax.Array:
    """Index of the largest score among available arms, ties broken at random.

    Spec 003 §2.1(e)/U6: ties matter, e.g. every arm scores exactly 0 at θ = 0. Scores within
    ``TIE_RTOL``·max(1, |best|) of the best count as tied, so that values equal in exact arithmetic but
    not in floating point (equal-norm arms at round 1) are tied too. Among tied arms the one with the
    highest :func:`tie_priorities` wins: one random word per round instead of one uniform per arm and
    no cumulative sum, which halves the cost of the rule (0.51 → 0.22 µs per seed-round at K = 50).
    Deviation: the choice is uniform up to the quality of the hash (checked by a chi-square test in
    ``tests/test_exploration.py``), not exactly uniform.
    """
    return argmax_tie_word(tie_word(key), scores, mask)


def tie_word(key: jax.Array) -> jax.Array:
    """The random 32-bit word that breaks ties (:func:`tie_priorities`), drawn from ``key``."""
    return jax.random.bits(key, (), jnp.uint32)


def member_and_tie_words(key: jax.Array) -> jax.Array:
    """Ensemble sampling's two words from one key: (2,) uint32, the member word (:func:`member_draw`) and
    the tie word."""
    return jax.random.bits(key, (2,), jnp.uint32)


def tied_arms(scores: jax.Array, mask: jax.Array) -> jax.Array:
    """(K,) bool: the available arms whose score is within ``TIE_RTOL``·max(1, |best|) of the best."""
    scores = jnp.where(mask, scores, -jnp.inf)
    best = jnp.max(scores)
    return mask & (scores >= best - TIE_RTOL * jnp.maximum(1.0, jnp.abs(best)))


def argmax_tie_word(word: jax.Array, scores: jax.Array, mask: jax.Array) -> jax.Array:
    """:func:`argmax_random_ties` with the random 32-bit ``word`` already drawn (for policies that draw
    several words at once)."""
    tied = tied_arms(scores, mask)
    return jnp.argmax(jnp.where(tied, tie_priorities(word, scores.shape[0]), 0)).astype(jnp.int32)


def greedy_choice(word: jax.Array, scores: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(arm, probability): :func:`argmax_tie_word`, and 1/|tied arms|, the probability of that choice (in the
    scores' float type)."""
    tied = tied_arms(scores, mask)
    arm = jnp.argmax(jnp.where(tied, tie_priorities(word, scores.shape[0]), 0)).astype(jnp.int32)
    return arm, 1 / jnp.sum(tied).astype(scores.dtype)


def choose(key: jax.Array, scores: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`greedy_choice` with its random word drawn from ``key``."""
    return greedy_choice(tie_word(key), scores, mask)


def uniform_arm(key: jax.Array, mask: jax.Array) -> jax.Array:
    """An available arm, uniformly at random."""
    return argmax_random_ties(key, jnp.zeros(mask.shape, jnp.float32), mask)


def epsilon_greedy(key: jax.Array, scores: jax.Array, mask: jax.Array,
                   epsilon: jax.Array) -> tuple[jax.Array, jax.Array]:
    """With probability ε a uniformly random available arm, otherwise the masked argmax; returns (arm,
    probability), the probability being ε/|available| + (1 − ε)·[arm tied for best]/|tied|."""
    coin, uniform_word, word = epsilon_greedy_draws(key, scores.dtype)
    best, p_best = greedy_choice(word, scores, mask)
    arm = jnp.where(coin < epsilon, argmax_tie_word(uniform_word, jnp.zeros(mask.shape, jnp.float32), mask), best)
    tied = tied_arms(scores, mask)
    probability = epsilon / jnp.sum(mask) + (1.0 - epsilon) * jnp.where(tied[arm], p_best, 0.0)
    return arm, probability


def epsilon_greedy_draws(key: jax.Array, dtype: jnp.dtype) -> tuple[jax.Array, jax.Array, jax.Array]:
    """ε-greedy's draws from its key: the exploration coin ~ U[0, 1) (in ``dtype``), the uniform arm's word and
    the tie word."""
    k_coin, k_uniform, k_ties = jax.random.split(key, 3)
    return jax.random.uniform(k_coin, dtype=dtype), tie_word(k_uniform), tie_word(k_ties)


def member_draw(word: jax.Array, m_used: jax.Array) -> jax.Array:
    """j ~ Uniform{0..m_used−1} from a random 32-bit word (modulo bias ≤ m/2³², negligible): the
    ensemble member that acts this round (Sun, Wang & Xu 2025, Algorithm 1, line 4)."""
    return (word % m_used.astype(jnp.uint32)).astype(jnp.int32)


def ensemble_probability(member_scores: jax.Array, arm: jax.Array, mask: jax.Array,
                         m_used: jax.Array) -> jax.Array:
    """P(arm) = (1/m_used) Σ_{j < m_used} [arm tied for best under member j]/|tied_j|: the exact
    probability of ensemble sampling's choice, from every member's scores (m, K)."""
    tied = jax.vmap(tied_arms, in_axes=(0, None))(member_scores, mask)
    share = jnp.where(tied[:, arm], 1 / jnp.sum(tied, axis=1).astype(member_scores.dtype), 0)
    used = jnp.arange(member_scores.shape[0]) < m_used
    return jnp.sum(jnp.where(used, share, 0.0)) / m_used


def act_info(score: jax.Array, bonus: jax.Array | float = jnp.nan,
             probability: jax.Array | float = jnp.nan) -> ActInfo:
    """An :class:`~nlbandit.core.types.ActInfo` of scalars in the score's float type (NaN for what is not
    defined), so a float32 policy's info stays float32."""
    score = jnp.asarray(score)
    dtype = score.dtype if jnp.issubdtype(score.dtype, jnp.floating) else jnp.result_type(float)
    return ActInfo(score.astype(dtype), jnp.asarray(bonus, dtype), jnp.asarray(probability, dtype))
