"""SquareCB (nlbandit.policies.squarecb): the inverse-gap weights against a float64 NumPy reference, the draw's
law, learning on a linear and a logistic bandit, and the online agent's exact probabilities. The contract every
policy keeps (tests/test_contract.py) covers the three entries without naming them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.policies.squarecb import igw_choice, inverse_gap_weights

RNG = np.random.default_rng(11)


def reference_weights(predictions: np.ndarray, mask: np.ndarray, gamma: float) -> np.ndarray:
    """Foster & Rakhlin (2020) Algorithm 1 for rewards, written out arm by arm in float64."""
    offered = [a for a in range(len(predictions)) if mask[a]]
    best = max(offered, key=lambda a: (predictions[a], -a))  # the first of tied maxima
    p = np.zeros(len(predictions))
    for a in offered:
        if a != best:
            p[a] = 1.0 / (len(offered) + gamma * (predictions[best] - predictions[a]))
    p[best] = 1.0 - p.sum()
    return p


def test_weights_match_the_reference_and_form_a_distribution_on_the_offered_arms():
    for _ in range(200):
        k = int(RNG.integers(1, 9))
        predictions = RNG.normal(size=k).round(int(RNG.integers(0, 3)))  # rounding makes ties
        mask = RNG.random(k) < 0.7
        mask[RNG.integers(k)] = True
        gamma = float(RNG.choice([0.0, 0.5, 10.0, 1e4]))
        p = np.asarray(inverse_gap_weights(jnp.asarray(predictions), jnp.asarray(mask), jnp.asarray(gamma)))
        np.testing.assert_allclose(p, reference_weights(predictions, mask, gamma), rtol=1e-12, atol=1e-15)
        assert p.sum() == pytest.approx(1.0, abs=1e-12) and (p[~mask] == 0).all() and (p[mask] > 0).all()


def test_draws_follow_the_weights_and_report_their_probability():
    predictions, mask = jnp.asarray([0.2, 0.9, 0.5, 0.9, -1.0]), jnp.asarray([True, True, False, True, True])
    n = 20_000
    arms, probs = jax.jit(jax.vmap(lambda k: igw_choice(k, predictions, mask, jnp.asarray(3.0))))(
        jax.random.split(jax.random.key(0), n))
    p = reference_weights(np.asarray(predictions), np.asarray(mask), 3.0)
    freq = np.bincount(np.asarray(arms), minlength=5) / n
    assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / n) + 1e-12), (freq, p)
    np.testing.assert_allclose(np.asarray(probs), p[np.asarray(arms)], rtol=1e-12)


@pytest.mark.parametrize("name, env_name", [("squarecb", "linear"), ("glm-squarecb", "logistic"),
                                            pytest.param("neural-squarecb", "linear", marks=pytest.mark.slow)])
def test_learns_far_better_than_uniform_play(name, env_name):
    """Mean final regret over 8 seeds (common random numbers) at most half of uniform play's, T = 400."""
    env = nb.make_env(env_name, d=4, k=8)
    hyper = dict(width=8, steps=10) if name == "neural-squarecb" else {}
    policy, params = nb.make_policy(name, env, horizon=400, **hyper)
    uniform, uparams = nb.make_policy("uniform", env, horizon=400)
    seeds = range(8)
    regret = nb.simulate(env, policy, params, 400, seeds).final_regret.mean()
    assert regret <= 0.5 * nb.simulate(env, uniform, uparams, 400, seeds).final_regret.mean()


def test_the_agent_logs_the_exact_probability_of_each_decision():
    """Each decision's probability is the weight SquareCB gives its arm, recomputed from a float64 ridge fit
    (λ = 1) of the rewards learnt so far and γ_t = 2 √t."""
    agent = nb.Agent("squarecb", d=3, k=4, horizon=50, gamma_scale=2.0)
    rng = np.random.default_rng(1)
    v, b = np.eye(3), np.zeros(3)
    for t in range(1, 31):
        contexts = rng.normal(size=(4, 3))
        decision = agent.decide(contexts)
        p = reference_weights(contexts @ np.linalg.solve(v, b), np.ones(4, bool), 2.0 * np.sqrt(t))
        assert decision.method == "exact" and decision.probability == pytest.approx(p[decision.arm], rel=1e-9)
        x, reward = contexts[decision.arm], float(contexts[decision.arm, 0] + rng.normal(scale=0.1))
        agent.reward(decision.event_id, reward)
        v, b = v + np.outer(x, x), b + reward * x
