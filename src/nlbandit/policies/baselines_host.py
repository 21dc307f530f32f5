"""Host rounds (:mod:`nlbandit.host`) of the baseline policies of :mod:`nlbandit.policies.baselines`, found by the
agent through :data:`HOST_ROUNDS` (:func:`nlbandit.host.rounds.host_round`). Not imported by the family module,
so not part of any run's code hash (:mod:`nlbandit.provenance`)."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.types import ProblemSpec
from nlbandit.host import exploration
from nlbandit.host.rounds import HostRound, available, learn_nothing, ridge_learn, tie_word
from nlbandit.policies.exploration import epsilon_greedy_draws


def uniform(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.baselines.uniform`: an available arm uniformly at random."""

    def act(params, state, draws, contexts, mask, t):
        arm, _ = exploration.greedy_choice(draws[0], np.zeros(contexts.shape[0]), mask)
        return arm, math.nan, math.nan, 1.0 / available(mask, contexts.shape[0])

    return HostRound(act, learn_nothing, tie_word, None)


def greedy(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.baselines.greedy`: argmax_x xᵀθ̂, the ridge estimate."""

    def act(params, state, draws, contexts, mask, t):
        scores = contexts @ (state.b @ state.v_inv)
        arm, p = exploration.greedy_choice(draws[0], scores, mask)
        return arm, scores[arm], 0.0, p

    return HostRound(act, ridge_learn, tie_word, None)


def _epsilon_greedy_draws(key: jax.Array) -> tuple:
    """ε-greedy's act draws in float64 (:func:`~nlbandit.policies.exploration.epsilon_greedy_draws`): one
    module-level function, so its compiled block is shared by every agent."""
    return epsilon_greedy_draws(key, jnp.float64)


def eps_greedy(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.baselines.eps_greedy`: greedy on the ridge estimate, an available arm uniformly
    at random with probability ε; the probability ε/|available| + (1 − ε)·[arm tied for best]/|tied|."""

    def act(params, state, draws, contexts, mask, t):
        coin, uniform_word, tie_word = draws
        scores = contexts @ (state.b @ state.v_inv)
        best, p_best = exploration.greedy_choice(tie_word, scores, mask)
        arm = best
        if coin < params.epsilon:
            arm, _ = exploration.greedy_choice(uniform_word, np.zeros(scores.shape[0]), mask)
        tied = arm == best or (p_best < 1.0 and exploration.tied_arms(scores, mask)[arm])
        p = params.epsilon / available(mask, scores.shape[0]) + (1.0 - params.epsilon) * (p_best if tied else 0.0)
        return arm, scores[arm], 0.0, p

    return HostRound(act, ridge_learn, _epsilon_greedy_draws, None)


HOST_ROUNDS = {"uniform": uniform, "greedy": greedy, "eps-greedy": eps_greedy}
"""The family's host rounds by policy name (:func:`nlbandit.host.rounds.host_round`)."""
