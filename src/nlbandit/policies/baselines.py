"""Reference policies: ``uniform``, ``greedy`` (ridge) and ``eps-greedy``."""

from __future__ import annotations

import jax.numpy as jnp

from nlbandit.core.types import Policy, ProblemSpec
from nlbandit.models.ridge import ridge_init, ridge_theta, ridge_update
from nlbandit.policies.exploration import argmax_random_ties, epsilon_greedy, uniform_arm


def uniform(spec: ProblemSpec) -> Policy:
    """Pick an available arm uniformly at random every round; learns nothing."""

    def init(params, key):
        return jnp.zeros(())

    def act(params, state, key, contexts, mask, t):
        return uniform_arm(key, mask)

    def update(params, state, key, x, feedback, t):
        return state

    return Policy("uniform", init, act, update)


def _ridge_update(params, state, key, x, feedback, t):
    return ridge_update(state, x, feedback.reward)


def greedy(spec: ProblemSpec) -> Policy:
    """Play argmax_x xᵀθ̂ with θ̂ the ridge estimate (params: ``lam``); no exploration."""

    def init(params, key):
        return ridge_init(spec.d, params["lam"])

    def act(params, state, key, contexts, mask, t):
        return argmax_random_ties(key, contexts @ ridge_theta(state), mask)

    return Policy("greedy", init, act, _ridge_update)


def eps_greedy(spec: ProblemSpec) -> Policy:
    """Greedy on the ridge estimate, but a uniformly random arm with probability ``epsilon``."""

    def init(params, key):
        return ridge_init(spec.d, params["lam"])

    def act(params, state, key, contexts, mask, t):
        return epsilon_greedy(key, contexts @ ridge_theta(state), mask, params["epsilon"])

    return Policy("eps-greedy", init, act, _ridge_update)
