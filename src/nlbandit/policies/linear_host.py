"""Host rounds (:mod:`nlbandit.host`) of the linear policies of :mod:`nlbandit.policies.linear`, found by the agent
through :data:`HOST_ROUNDS` (:func:`nlbandit.host.rounds.host_round`). Not imported by the family module, so not
part of any run's code hash (:mod:`nlbandit.provenance`)."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import jax
import numpy as np

from nlbandit.core.keys import normal
from nlbandit.core.types import ProblemSpec
from nlbandit.host import exploration, glm
from nlbandit.host.ridge import ridge_update
from nlbandit.host.rounds import HostRound, ridge_learn, tie_word
from nlbandit.policies.exploration import member_and_tie_words
from nlbandit.policies.linear import LinES, lin_ts_draws


IDENTITY = glm.LINK_CODES["identity"]

AGENT_DEFAULTS = {"lin-ucb": {"width": "constant", "alpha": 1.0}, "lin-ts": {"v": 0.1}, "lin-es": {"prior_scale": 1.0}}
"""The online agent's practice defaults (:func:`nlbandit.agent.agent_defaults`), measured on held-out problems by
``benchmarks/agent_defaults.py`` (2026-11-26, T = 2,000, 10 seeds, four linear bandits; the average ratio to the
best candidate's regret): lin-ucb α = 1 (constant width) 1.03 against the OFUL theory width's 2.19; lin-ts
v = 0.1 1.23 against v = 0.5's 2.23; lin-es prior_scale = 1 1.52 against the default prior's 1.73."""


def lin_ucb(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.linear.lin_ucb`: argmax_x xᵀθ̂ + α_t ‖x‖_{V⁻¹}, α_t the OFUL radius (Abbasi-Yadkori
    et al. 2011, Thm. 2) or a constant."""
    oful = config["width"] == "oful"

    def act(params, state, draws, contexts, mask, t):
        if oful:
            alpha = params.sigma * math.sqrt(2.0 * math.log(1.0 / params.delta) + state.logdet) + math.sqrt(
                params.lam) * params.s
        else:
            alpha = params.alpha
        return glm.optimistic_choice(draws[0], IDENTITY, False, contexts, state.b @ state.v_inv, state.v_inv,
                                     float(alpha), mask)

    return HostRound(act, ridge_learn, tie_word, None)


@functools.lru_cache(maxsize=None)
def _lin_ts_draws(d: int) -> Callable[[jax.Array], tuple]:
    """Lin-TS's draws from its act key (:func:`nlbandit.policies.linear.lin_ts_draws`; one function per d, so its
    compiled block is shared)."""
    return functools.partial(lin_ts_draws, d=d)


def lin_ts(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.linear.lin_ts`: θ̃ = θ̂ + v L z with L Lᵀ = V⁻¹, play argmax_x xᵀθ̃ (the
    probability from the Gaussian law of θ̃, ``estimate``: :mod:`nlbandit.host.propensity`)."""

    def estimate(params, state, draws, contexts, mask, t, normals):
        z, tie_word = draws
        return glm.thompson_decision(tie_word, contexts, state.b, state.v_inv, float(params.v), z, mask, normals)

    def act(params, state, draws, contexts, mask, t):
        return estimate(params, state, draws, contexts, mask, t, None)[:4]

    return HostRound(act, ridge_learn, _lin_ts_draws(spec.d), None, estimate)


@functools.lru_cache(maxsize=None)
def _member_noise(m: int) -> Callable[[jax.Array], tuple]:
    """The m standard normals of Lin-ES's update (one function per m, so its compiled block is shared)."""
    return lambda key: (normal(key, (m,)),)


def ensemble_words(key: jax.Array) -> tuple:
    """Lin-ES's act draws (:func:`~nlbandit.policies.exploration.member_and_tie_words`): one module-level
    function, so its compiled block is shared by every agent."""
    return (member_and_tie_words(key),)


def lin_es(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.linear.lin_es`: play member j_t's argmax; every member gets a fresh
    perturbation of the reward."""
    m = config["m"]

    def act(params, state, draws, contexts, mask, t):
        member_word, tie_word = draws[0]
        ridge = state.ridge
        j = exploration.member_draw(member_word, params.m_used)
        scores = contexts @ (ridge.v_inv @ ridge.b[j])
        arm, _ = exploration.greedy_choice(tie_word, scores, mask)
        members = (ridge.b @ ridge.v_inv) @ contexts.T
        return arm, scores[arm], math.nan, exploration.ensemble_probability(members, arm, mask, int(params.m_used))

    def update(params, state, draws, contexts, arm, reward, t):
        y = reward + params.sigma_r * draws[0]
        return LinES(ridge_update(state.ridge, contexts[arm], y), state.draws + np.int32(m))

    return HostRound(act, update, ensemble_words, _member_noise(m))


HOST_ROUNDS = {"lin-ucb": lin_ucb, "lin-ts": lin_ts, "lin-es": lin_es}
"""The family's host rounds by policy name (:func:`nlbandit.host.rounds.host_round`)."""
