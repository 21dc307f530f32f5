"""Host rounds (:mod:`nlbandit.host`) of the GLM policies of :mod:`nlbandit.policies.glm`, found by the agent
through :data:`HOST_ROUNDS` (:func:`nlbandit.host.rounds.host_round`): per-arm statistics, Newton, and a constant
width or scale only; GLM-ES with per-arm statistics and the ensemble Newton solver, or its default gradient descent
(100 steps per member) with the identity link, whose steps have a closed form (the history layout, the other
solvers and links and the theory widths run the jitted round). Not imported by the family module, so not part of
any run's code hash (:mod:`nlbandit.provenance`)."""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import jax
import numpy as np

from nlbandit.core.keys import normal
from nlbandit.core.types import ProblemSpec
from nlbandit.host import exploration, glm
from nlbandit.host.ridge import gram_update
from nlbandit.host.rounds import HostRound, LastState, Round, tie_word
from nlbandit.models.history import Rows
from nlbandit.policies.glm import split_act_key, split_update_key
from nlbandit.policies.linear_host import ensemble_words


IDENTITY = glm.LINK_CODES["identity"]
NO_FACTOR = np.empty((0, 0))
"""The factor :func:`~nlbandit.host.glm.refit_after_pull` is given where its link does not read one."""

AGENT_DEFAULTS = {"glm-tsl": {"a": 0.5}}
"""The online agent's practice defaults (:func:`nlbandit.agent.agent_defaults`), measured on held-out problems by
``benchmarks/agent_defaults.py`` (2026-11-26, T = 2,000, 10 seeds, three logistic bandits; the average ratio to
the best candidate's regret): glm-tsl a = 0.5 1.07 against a = 1's 1.60; glm-ucb (α = 0.5, 1.41) and glm-fpl
(a = 0.5, 1.34) keep their registered defaults, the best of their candidates; so does glm-es (solver "gd" 1.01,
"ensemble-newton" 1.03, within the script's 2%, 2026-11-26), whose host round needs ``solver="ensemble-newton"``
or the identity link."""


def _planned(state, t: int, mask: np.ndarray | None) -> int | None:
    """The warm-up plan's arm of round ``t`` while the warm-up lasts and that arm is on offer, else None
    (:func:`~nlbandit.policies.warmup.warmup_arm`)."""
    warmup = state.warmup
    # after the warm-up: one comparison, not the plan's lookup too (with the 0-d length converted first: comparing
    # the array costs ten times the conversion)
    if t > int(warmup.length):
        return None
    arm = int(warmup.plan[min(t - 1, warmup.plan.shape[0] - 1)])
    return arm if mask is None or mask[arm] else None


def _pulled(state, arm: int, reward) -> tuple[Rows, np.ndarray, np.ndarray]:
    """The per-arm rows with one more pull of ``arm``, and their counts and sums."""
    rows = state.rows
    n, y = glm.add_pull(rows.n, rows.y, arm, float(reward))
    return Rows(rows.x, n, y, rows.count + np.int32(1)), n, y


def _glm_optimistic(config: dict[str, Any], mean_scale: bool) -> HostRound:
    """GLM-UCB (``mean_scale``: the index μ(xᵀθ̂) + ρ‖x‖_{G⁻¹}) or UCB-GLM (xᵀθ̂ + α‖x‖_{V⁻¹}) with per-arm
    statistics, the Newton MLE refitted after every reward, and the warm-up's planned arms first."""
    code = glm.LINK_CODES[config["link"]]

    def act(params, state, draws, contexts, mask, t):
        planned = _planned(state, t, mask)
        if planned is not None:
            scores, bonus = glm.optimistic_scores(code, mean_scale, contexts, state.theta, state.v_inv,
                                                  float(params.alpha))
            return planned, scores[planned], bonus[planned], 1.0
        return glm.optimistic_choice(draws[0], code, mean_scale, contexts, state.theta, state.v_inv,
                                     float(params.alpha), mask)

    def update(params, state, draws, contexts, arm, reward, t):
        rows, n, y = _pulled(state, arm, reward)
        theta = glm.newton_solve(code, rows.x, n, y, float(params.lam), state.theta, *glm.NEWTON_OPTIONS)
        return state._replace(rows=rows, theta=theta, v_inv=gram_update(state.v_inv, contexts[arm])[0])

    return HostRound(act, update, _act_tie_word, None)


def glm_ucb(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_ucb` (constant width ρ): argmax_x μ(xᵀθ̂) + ρ ‖x‖_{G⁻¹}."""
    return _glm_optimistic(config, mean_scale=True)


def ucb_glm(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.ucb_glm` (constant width α): argmax_x xᵀθ̂ + α ‖x‖_{V⁻¹}."""
    return _glm_optimistic(config, mean_scale=False)


def _gram_factor(last: LastState) -> Callable[..., np.ndarray]:
    """``factor(params, state)``: L with L Lᵀ = G = Σ_k N_k x_k x_kᵀ + λI of the state's per-arm rows, the identity
    link's Hessian at any θ; kept in ``last`` for the state it was derived from (an update that adds a pull puts
    the rank-one-updated factor of its new state there, :func:`~nlbandit.host.glm.cholesky_add`)."""

    def factor(params, state):
        rows = state.rows
        return last.get(state, lambda: glm.hessian_cholesky(IDENTITY, rows.x, rows.n, float(params.lam),
                                                            np.zeros(rows.x.shape[1])))

    return factor


def _planned_round(contexts: np.ndarray, arm: int, theta: np.ndarray, center: np.ndarray | None) -> Round:
    """(arm, score, bonus, 1) of a planned arm of GLM-TSL or GLM-FPL: the bonus the score's excess over the
    centre θ̄ where one is given, else NaN."""
    score = contexts[arm] @ theta
    return arm, score, math.nan if center is None else score - contexts[arm] @ center, 1.0


def _sampled_act(centred: bool) -> Callable[..., Round]:
    """``act`` playing argmax_x xᵀθ̃ (GLM-TSL, GLM-FPL: the update drew θ̃; the probability is estimated where
    the policy's ``estimate`` is asked for it), the warm-up's planned arms first; with ``centred``, the bonus is
    the excess over the centre θ̄."""

    def act(params, state, draws, contexts, mask, t):
        planned = _planned(state, t, mask)
        if planned is None:
            return (*glm.sampled_choice(draws[0], contexts, state.theta, state.center, mask, centred), math.nan)
        return _planned_round(contexts, planned, state.theta, state.center if centred else None)

    return act


@functools.lru_cache(maxsize=None)
def _fit_key_normals(n: int) -> Callable[[jax.Array], tuple]:
    """The n standard normals of a GLM update's fit key (the second half of the split update key): GLM-TSL's
    ξ (n = d), GLM-FPL's per-arm noise (n = K)."""
    return lambda key: (normal(split_update_key(key)[1], (n,)),)


def _act_tie_word(key: jax.Array) -> tuple:
    """A GLM policy's tie word: the word of the tie key of its split act key."""
    return tie_word(split_act_key(key)[1])


def glm_tsl(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_tsl` (constant scale a): θ̄ = the Newton MLE, θ̃ = θ̄ + a L⁻ᵀ ξ with
    L Lᵀ = H(θ̄), drawn by the update; play argmax_x xᵀθ̃."""
    code = glm.LINK_CODES[config["link"]]
    last = LastState()  # the state's Hessian factor L at θ̄: its update computes it, its estimate reads it

    def hessian_factor(params, state):
        rows = state.rows
        return last.get(state, lambda: glm.hessian_cholesky(code, rows.x, rows.n, float(params.lam), state.center))

    def update(params, state, draws, contexts, arm, reward, t):  # (identity link: H = G, the last state's
        rows = state.rows  # factor with one more pull added)
        n, y, center, theta, h = glm.laplace_refit(code, hessian_factor(params, state) if code == IDENTITY else
                                                   NO_FACTOR, rows.x, rows.n, rows.y, arm, float(reward),
                                                   float(params.lam), state.center, float(params.a), draws[0],
                                                   *glm.NEWTON_OPTIONS)
        learnt = state._replace(rows=Rows(rows.x, n, y, rows.count + np.int32(1)), center=center, theta=theta)
        last.put(learnt, h)
        return learnt

    def estimate(params, state, draws, contexts, mask, t, normals):  # θ̃ = θ̄ + a L⁻ᵀ ξ
        planned = _planned(state, t, mask)
        if planned is not None:
            return (*_planned_round(contexts, planned, state.theta, state.center), None)
        return glm.laplace_decision(draws[0], contexts, state.theta, state.center, hessian_factor(params, state),
                                    float(params.a), mask, normals)

    return HostRound(_sampled_act(centred=True), update, _act_tie_word, _fit_key_normals(spec.d), estimate)


def glm_fpl(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_fpl` (constant scale a, per-arm statistics): θ̃ = the Newton MLE of
    the reward sums perturbed by a √N_k ξ_k, warm-started at the previous θ̃; play argmax_x xᵀθ̃. With the
    identity link the fit is linear in the perturbation, so its law is Gaussian (``estimate``); with other
    links the agent redraws the fit."""
    code = glm.LINK_CODES[config["link"]]
    last = LastState()  # identity link: the Cholesky factor of the state's G
    gram_factor = _gram_factor(last)

    def update(params, state, draws, contexts, arm, reward, t):  # (identity link: the last state's G, one more
        rows = state.rows  # pull added)
        n, y, theta, h = glm.refit_after_pull(code, gram_factor(params, state) if code == IDENTITY else NO_FACTOR,
                                              rows.x, rows.n, rows.y, arm, float(reward), float(params.a), draws[0],
                                              float(params.lam), state.theta, False, *glm.NEWTON_OPTIONS)
        learnt = state._replace(rows=Rows(rows.x, n, y, rows.count + np.int32(1)), theta=theta)
        if code == IDENTITY:
            last.put(learnt, h)
        return learnt

    def estimate(params, state, draws, contexts, mask, t, normals):  # identity link: θ̃ is exactly Gaussian
        planned = _planned(state, t, mask)
        if planned is not None:
            return (*_planned_round(contexts, planned, state.theta, None), None)
        rows = state.rows
        return glm.perturbed_fit_decision(draws[0], contexts, state.theta, gram_factor(params, state), rows.x,
                                          rows.y, float(params.lam), float(params.a), mask, normals)

    return HostRound(_sampled_act(centred=False), update, _act_tie_word, _fit_key_normals(spec.k),
                     estimate if code == IDENTITY else None)


@functools.lru_cache(maxsize=None)
def _member_noise(m: int) -> Callable[[jax.Array], tuple]:
    """GLM-ES's m standard normals of an update (the perturbations' key, the first half of the split update key;
    one function per m, so its compiled block is shared)."""
    return lambda key: (normal(split_update_key(key)[0], (m,)),)


def glm_es(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_es` with per-arm statistics and the ensemble Newton solver, or gradient
    descent with the identity link: every member's reward sums get their own perturbation of each reward, all
    members are refitted together (:func:`nlbandit.host.glm.ensemble_refit_after_pull`; gradient descent:
    :func:`nlbandit.host.glm.ensemble_gd_after_pull`, its steps in closed form; the identity link's Gram factor
    kept by a rank-one update per pull; with the ensemble solver, not refitted before the warm-up's last pull, as
    the policy); play member j_t's argmax, the warm-up's planned arms first, with the exact probability over the
    member draw."""
    code = glm.LINK_CODES[config["link"]]
    gd, mean, steps = config["solver"] == "gd", config["reduction"] == "mean", int(config["gd_steps"])
    last = LastState()  # identity link: the Cholesky factor of the state's G
    gram_factor = _gram_factor(last)

    def act(params, state, draws, contexts, mask, t):
        member_word, tie_word = draws[0]
        theta = state.theta
        scores = contexts @ theta[exploration.member_draw(member_word, params.m_used)]
        planned = _planned(state, t, mask)
        if planned is not None:
            return planned, scores[planned], math.nan, 1.0
        arm, _ = exploration.greedy_choice(tie_word, scores, mask)
        return arm, scores[arm], math.nan, exploration.ensemble_probability(theta @ contexts.T, arm, mask,
                                                                            int(params.m_used))

    def update(params, state, draws, contexts, arm, reward, t):
        rows = state.rows  # (identity link: the last state's Gram factor, one more pull added)
        factor = gram_factor(params, state) if code == IDENTITY else NO_FACTOR
        if gd:
            n, y, theta, h = glm.ensemble_gd_after_pull(factor, rows.x, rows.n, rows.y, arm, float(reward),
                                                        float(params.sigma_r), draws[0], float(params.lr), mean,
                                                        state.theta, steps)
        else:
            warming = int(rows.count) + 1 < int(state.warmup.length)
            n, y, theta, h = glm.ensemble_refit_after_pull(code, factor, rows.x, rows.n, rows.y, arm, float(reward),
                                                           float(params.sigma_r), draws[0], float(params.lam),
                                                           state.theta, warming, *glm.ENSEMBLE_OPTIONS)
        learnt = state._replace(rows=Rows(rows.x, n, y, rows.count + np.int32(1)), theta=theta)
        if code == IDENTITY:
            last.put(learnt, h)
        return learnt

    return HostRound(act, update, ensemble_words, _member_noise(config["m"]))


def _supported(build: Callable[[dict[str, Any], ProblemSpec], HostRound]):
    """``build`` for the configurations the host rounds cover (module docstring), None for the others."""

    def host(config: dict[str, Any], spec: ProblemSpec) -> HostRound | None:
        covered = (config["backend"], config["solver"], config.get("width", config.get("scale")))
        return build(config, spec) if covered == ("arms", "newton", "constant") else None

    return host


HOST_ROUNDS = {**{name: _supported(build) for name, build in
                  (("glm-ucb", glm_ucb), ("ucb-glm", ucb_glm), ("glm-tsl", glm_tsl), ("glm-fpl", glm_fpl))},
               "glm-es": lambda config, spec: glm_es(config, spec) if config["backend"] == "arms" and (
                   config["solver"] == "ensemble-newton" or (config["solver"], config["link"]) == ("gd", "identity"))
               else None}
"""The family's host rounds by policy name (:func:`nlbandit.host.rounds.host_round`)."""
