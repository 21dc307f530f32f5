"""Reference policies: ``uniform``, ``greedy`` (ridge) and ``eps-greedy``."""

from __future__ import annotations

import jax.numpy as jnp

from nlbandit.core.hyper import Hyper
from nlbandit.core.types import Policy, PolicyMeta, ProblemSpec
from nlbandit.models.ridge import ridge_init, ridge_theta, ridge_update
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info, choose, epsilon_greedy, uniform_arm

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


LAM = Hyper("lam", 1.0, "ridge regularisation λ (V = λI + Σ xxᵀ)", low=0.0, low_open=True)


def uniform(spec: ProblemSpec) -> Policy:
    """Pick an available arm uniformly at random every round; learns nothing. Probability 1/|available|."""

    def init(params, key):
        return jnp.zeros(())

    def act(params, state, key, contexts, mask, t):
        return uniform_arm(key, mask), act_info(jnp.nan, probability=1.0 / jnp.sum(mask))

    def update(params, state, key, contexts, arm, feedback, t):
        return state

    return Policy(init, act, update, PolicyMeta("uniform"))


def ridge_learn(params, state, key, contexts, arm, feedback, t):
    """``update`` of a policy whose state is one ridge regression on the played features."""
    return ridge_update(state, contexts[arm], feedback.reward)


def greedy(spec: ProblemSpec) -> Policy:
    """Play argmax_x xᵀθ̂ with θ̂ the ridge estimate (params: ``lam``); no exploration."""

    def init(params, key):
        return ridge_init(spec.d, params.lam)

    def act(params, state, key, contexts, mask, t):
        scores = contexts @ ridge_theta(state)
        arm, p = choose(key, scores, mask)
        return arm, act_info(scores[arm], 0.0, p)

    return Policy(init, act, ridge_learn, PolicyMeta("greedy"))


def eps_greedy(spec: ProblemSpec) -> Policy:
    """Greedy on the ridge estimate, but a uniformly random arm with probability ``epsilon``."""

    def init(params, key):
        return ridge_init(spec.d, params.lam)

    def act(params, state, key, contexts, mask, t):
        scores = contexts @ ridge_theta(state)
        arm, p = epsilon_greedy(key, scores, mask, params.epsilon)
        return arm, act_info(scores[arm], 0.0, p)

    return Policy(init, act, ridge_learn, PolicyMeta("eps-greedy"))


ENTRIES = (
    PolicyEntry("uniform", uniform, (), "uniformly random available arm"),
    PolicyEntry("greedy", greedy, (LAM,), "ridge estimate, no exploration"),
    PolicyEntry("eps-greedy", eps_greedy,
                (LAM, Hyper("epsilon", 0.05, "exploration probability ε", low=0.0, high=1.0)),
                "ridge greedy with probability-ε uniform exploration"),
)
