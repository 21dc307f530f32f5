"""Exploration rules: masked argmax with random tie-breaking."""

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

import nlbandit  # noqa: F401  (enables x64)
from nlbandit.policies.exploration import argmax_random_ties, epsilon_greedy, uniform_arm

N = 20_000


def choices(scores, mask):
    """N independent draws of ``argmax_random_ties``."""
    keys = jax.random.split(jax.random.key(0), N)
    return np.asarray(jax.jit(jax.vmap(lambda k: argmax_random_ties(k, jnp.asarray(scores), jnp.asarray(mask))))(keys))


def test_ties_are_broken_uniformly():
    # Arms 1, 3, 4 and 6 tie for the maximum (arm 5 is higher but masked out); chi-square at the 1% level.
    scores = [0.0, 2.0, 1.0, 2.0, 2.0, 9.0, 2.0 + 1e-15]
    mask = [True, True, True, True, True, False, True]
    picked = choices(scores, mask)
    assert set(np.unique(picked)) == {1, 3, 4, 6}
    counts = np.bincount(picked, minlength=7)[[1, 3, 4, 6]]
    assert stats.chisquare(counts).pvalue > 0.01, counts


def test_all_equal_scores_pick_every_arm_uniformly():
    picked = choices(np.zeros(50), np.ones(50, bool))
    assert stats.chisquare(np.bincount(picked, minlength=50)).pvalue > 0.01


def test_strict_maximum_and_mask_are_respected():
    assert set(choices([0.1, 0.5, 0.4], [True, True, True])) == {1}
    assert set(choices([0.1, 0.5, 0.4], [True, False, True])) == {2}
    assert set(choices([-np.inf, -np.inf, 3.0], [True, True, False])) == {0, 1}


def test_uniform_arm_and_epsilon_greedy():
    mask = np.array([True, False, True, True])
    picked = np.asarray(jax.vmap(lambda k: uniform_arm(k, jnp.asarray(mask)))(jax.random.split(jax.random.key(1), N)))
    assert set(np.unique(picked)) == {0, 2, 3}
    assert stats.chisquare(np.bincount(picked, minlength=4)[[0, 2, 3]]).pvalue > 0.01
    eps, prob = jax.vmap(lambda k: epsilon_greedy(k, jnp.array([0.0, 1.0, 0.5, 0.2]), jnp.asarray(mask), 0.3))(
        jax.random.split(jax.random.key(2), N))
    eps, prob = np.asarray(eps), np.asarray(prob)
    # Greedy arm 2 with probability 0.7 + 0.3/3 = 0.8; arms 0 and 3 with 0.1 each; masked arm 1 never.
    counts = np.bincount(eps, minlength=4)
    assert counts[1] == 0
    assert stats.chisquare(counts[[0, 2, 3]], N * np.array([0.1, 0.8, 0.1])).pvalue > 0.01
    # the probability returned with each choice is the one computed by hand
    np.testing.assert_allclose(prob, np.where(eps == 2, 0.8, 0.1), rtol=1e-12)
