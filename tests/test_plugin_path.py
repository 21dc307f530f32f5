"""A researcher's own policy and environment, written as docs/contributing.md says and used without editing the
package ("out of tree"): the contract (:func:`nlbandit.testing.check_policy`), :func:`nlbandit.make_policy` and
:func:`nlbandit.make_env` on unregistered entries, then :func:`nlbandit.simulate` against a registered baseline."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.hyper import SIGNATURE, ConfigError, Hyper
from nlbandit.core.types import Env, EnvFacts, Feedback, Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.envs.entry import EnvEntry
from nlbandit.models.ridge import ridge_init, ridge_theta, ridge_update
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info
from nlbandit.testing import check_policy


def softmax_ridge(spec: ProblemSpec, requires: Requirements = Requirements(), arm_dtype=jnp.int32,
                  name: str = "softmax-ridge") -> Policy:
    """Boltzmann exploration over the ridge estimate: P(a) ∝ exp(x_aᵀθ̂ / τ) among the available arms."""

    def init(params, key):
        return ridge_init(spec.d, params.lam)

    def act(params, state, key, contexts, mask, t):
        scores = contexts @ ridge_theta(state)
        logits = jnp.where(mask, scores / params.tau, -jnp.inf)
        probs = jnp.where(mask, jnp.exp(logits - jnp.max(logits)), 0.0)
        probs = probs / jnp.sum(probs)
        arm = jax.random.categorical(key, jnp.log(probs)).astype(arm_dtype)
        return arm, act_info(scores[arm], 0.0, probs[arm])

    def update(params, state, key, contexts, arm, feedback, t):
        return ridge_update(state, contexts[arm], feedback.reward)

    return Policy(init, act, update, PolicyMeta(name, requires))


HYPERS = (Hyper("lam", 1.0, "ridge λ", low=0.0, low_open=True),
          Hyper("tau", 0.1, "temperature τ", low=0.0, low_open=True))
SOFTMAX = PolicyEntry("softmax-ridge", softmax_ridge, HYPERS, "Boltzmann exploration over the ridge estimate")


class Instance(NamedTuple):
    theta: jax.Array
    arms: jax.Array


def bernoulli_linear(d: int, k: int, flip: float = 0.0) -> Env:
    """Bernoulli rewards of mean (1 − flip)(1 + xᵀθ*)/2 + flip/2, unit θ* and arms, one arm set per instance."""

    def reset(key):
        k1, k2 = jax.random.split(key)
        unit = [v / jnp.linalg.norm(v, axis=-1, keepdims=True) for v in
                (jax.random.normal(k1, (d,), jnp.float64), jax.random.normal(k2, (k, d), jnp.float64))]
        return Instance(*unit)

    def mean(state, contexts):
        return (1 - flip) * 0.5 * (1 + contexts @ state.theta) + flip * 0.5

    def pull(state, key, t, contexts, arm):
        return Feedback(jax.random.bernoulli(key, mean(state, contexts)[arm]).astype(jnp.float64))

    return Env("bernoulli-linear", ProblemSpec(d, k, 0), reset, lambda state, key, t: (state.arms, jnp.ones(k, bool)),
               pull, mean, EnvFacts(reward_range=(0.0, 1.0), fixed_arms=True))


BERNOULLI = EnvEntry("bernoulli-linear", bernoulli_linear,
                     (Hyper("d", None, "dimension", kind=int, static=True, low=1),
                      Hyper("k", None, "arms", kind=int, static=True, low=1),
                      Hyper("flip", SIGNATURE, "label flip probability", static=True, low=0.0, high=1.0)),
                     "Bernoulli linear bandit with label flips")


def test_make_policy_and_make_env_take_unregistered_entries():
    env = nb.make_env(BERNOULLI, d=3, k=6, flip=0.1)
    assert env.name == "bernoulli-linear" and env.spec.k == 6
    with pytest.raises(ConfigError, match="env 'bernoulli-linear': field 'flip' must be a number >= 0 and <= 1"):
        nb.make_env(BERNOULLI, d=3, k=6, flip=2.0)
    policy, params = nb.make_policy(SOFTMAX, env, horizon=60, tau=0.2)
    assert type(params).__name__ == "SoftmaxRidgeParams" and float(params.tau) == 0.2 and float(params.lam) == 1.0
    with pytest.raises(ConfigError, match="policy 'softmax-ridge': unknown field 'temperature'"):
        nb.make_policy(SOFTMAX, env, horizon=60, temperature=0.2)
    mine = nb.simulate(env, policy, params, seeds=range(4))
    baseline = nb.simulate(env, *nb.make_policy("lin-ucb", env, horizon=60), seeds=range(4))
    assert mine.cum_regret.shape == baseline.cum_regret.shape == (4, 60)
    assert np.isfinite(mine.final_regret).all()
    # sizes only (as the online agent builds it), and the dict form of params that simulate accepts
    _, sized = nb.make_policy(SOFTMAX, ProblemSpec(3, 6, 60), tau=0.2)
    again = nb.simulate(env, policy, {"lam": 1.0, "tau": 0.2}, seeds=range(4))
    assert sized == params and np.array_equal(again.arms, mine.arms)


def test_an_unregistered_entry_does_not_take_a_registered_name():
    """An entry named like a registered environment or policy is built from itself, not from the registry."""
    shadow = EnvEntry("linear", bernoulli_linear, BERNOULLI.hypers, "mine")
    assert nb.make_env(shadow, d=3, k=6).facts.reward_range == (0.0, 1.0)
    assert nb.make_env("linear", d=3, k=6).facts.reward_range != (0.0, 1.0)
    mine = PolicyEntry("greedy", softmax_ridge, HYPERS, "mine")
    assert "tau" in nb.make_policy(mine, ProblemSpec(3, 6, 60))[1]._fields


def test_check_policy_says_when_act_returns_an_arm_of_another_integer_type():
    entry = PolicyEntry("softmax-int64", lambda spec: softmax_ridge(spec, arm_dtype=jnp.int64), HYPERS, "int64 arms")
    with pytest.raises(AssertionError, match="softmax-int64: act must return the arm as an int32 scalar, got int64"):
        check_policy(entry)


@pytest.mark.parametrize("requires", [Requirements(link="identity"), Requirements(noise_bound=0.5)],
                         ids=["identity-link", "noise-bound"])
def test_check_policy_finds_an_environment_for_an_identity_link_or_a_noise_bound(requires):
    """testing.py's docstring: each check runs "on a small environment that meets its Requirements"."""
    check_policy(PolicyEntry("softmax-needs", lambda spec: softmax_ridge(spec, requires, name="softmax-needs"),
                             HYPERS, "needs"))


def test_a_policy_is_named_by_its_entry():
    """A factory shared by several entries (or copied from another) names its policy as its entry does, so that
    messages name the entry the user gave (the contract's checks look for that name)."""
    entry = PolicyEntry("softmax-copy", softmax_ridge, HYPERS, "a copy under another name")
    assert nb.make_policy(entry, ProblemSpec(3, 6, 60))[0].meta.name == "softmax-copy"
    check_policy(entry)
