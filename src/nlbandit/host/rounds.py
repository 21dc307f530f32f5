"""The rounds the agent runs on the host, one per policy that has one (:mod:`nlbandit.host`).

A :class:`HostRound` is the policy's ``act`` and ``update`` on NumPy state, with the random numbers each
needs as a function of the round key (``act_draws``, ``update_draws``) so that they are the jitted policy's
own draws. Each round below cites the jitted policy it mirrors; the paper and equations are there.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.keys import normal
from nlbandit.core.types import Policy, ProblemSpec
from nlbandit.host import exploration, glm
from nlbandit.host.ridge import gram_update, mahalanobis_widths, ridge_update
from nlbandit.models.history import Rows
from nlbandit.policies.linear import LinES

Round = tuple[int, float, float, float]
"""What ``act`` returns: (arm, score, bonus, probability), NaN where undefined."""


class HostRound(NamedTuple):
    """A policy's round in NumPy.

    Attributes:
      act: ``act(params, state, draws, contexts, mask, t) -> (arm, score, bonus, probability)``, ``mask`` None
        when every arm is available (:mod:`nlbandit.host.exploration`).
      update: ``update(params, state, draws, contexts, arm, reward, t) -> state``.
      act_draws, update_draws: one round key → the tuple of arrays that ``act`` / ``update`` read as
        ``draws`` (the jitted policy's draws from that key); None when the step draws nothing.
    """

    act: Callable[..., Round]
    update: Callable[..., Any]
    act_draws: Callable[[jax.Array], tuple] | None
    update_draws: Callable[[jax.Array], tuple] | None


def _tie_word(key: jax.Array) -> tuple:
    """The tie-breaking word of :func:`~nlbandit.policies.exploration.choose` drawn from ``key``."""
    return (jax.random.bits(key, (), jnp.uint32),)


def _split_tie_word(key: jax.Array) -> tuple:
    """The tie word of a policy that splits its act key into (score key, tie key) (the GLM policies)."""
    return _tie_word(jax.random.split(key)[1])


def _two_words(key: jax.Array) -> tuple:
    """Ensemble sampling's member word and tie word."""
    return (jax.random.bits(key, (2,), jnp.uint32),)


def _three_words_and_coin(key: jax.Array) -> tuple:
    """ε-greedy's draws (:func:`~nlbandit.policies.exploration.epsilon_greedy`): the exploration coin, the
    uniform arm's word and the tie word."""
    k_coin, k_uniform, k_ties = jax.random.split(key, 3)
    return (jax.random.uniform(k_coin, dtype=jnp.float64), *_tie_word(k_uniform), *_tie_word(k_ties))


def _available(mask: np.ndarray | None, k: int) -> int:
    """The number of available arms."""
    return k if mask is None else int(np.count_nonzero(mask))


def _learn_nothing(params, state, draws, contexts, arm, reward, t):
    """The update of a policy that learns nothing."""
    return state


def _ridge_learn(params, state, draws, contexts, arm, reward, t):
    """The update of a policy whose state is one ridge regression on the played features."""
    return ridge_update(state, contexts[arm], reward)


def uniform(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.baselines.uniform`: an available arm uniformly at random."""

    def act(params, state, draws, contexts, mask, t):
        arm, _ = exploration.greedy_choice(draws[0], np.zeros(contexts.shape[0]), mask)
        return arm, math.nan, math.nan, 1.0 / _available(mask, contexts.shape[0])

    return HostRound(act, _learn_nothing, _tie_word, None)


def greedy(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.baselines.greedy`: argmax_x xᵀθ̂, the ridge estimate."""

    def act(params, state, draws, contexts, mask, t):
        scores = contexts @ (state.b @ state.v_inv)
        arm, p = exploration.greedy_choice(draws[0], scores, mask)
        return arm, scores[arm], 0.0, p

    return HostRound(act, _ridge_learn, _tie_word, None)


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
        p = params.epsilon / _available(mask, scores.shape[0]) + (1.0 - params.epsilon) * (p_best if tied else 0.0)
        return arm, scores[arm], 0.0, p

    return HostRound(act, _ridge_learn, _three_words_and_coin, None)


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
        bonus = alpha * mahalanobis_widths(state.v_inv, contexts)
        scores = contexts @ (state.b @ state.v_inv) + bonus
        arm, p = exploration.greedy_choice(draws[0], scores, mask)
        return arm, scores[arm], bonus[arm], p

    return HostRound(act, _ridge_learn, _tie_word, None)


@functools.lru_cache(maxsize=None)
def _gaussian_and_tie_word(d: int) -> Callable[[jax.Array], tuple]:
    """Lin-TS's draws from its act key: z ~ N(0, I_d) and the tie word (one function per d, so its compiled
    block is shared)."""

    def draws(key):
        k_z, k_ties = jax.random.split(key)
        return (normal(k_z, (d,)), *_tie_word(k_ties))

    return draws


def lin_ts(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.linear.lin_ts`: θ̃ = θ̂ + v L z with L Lᵀ = V⁻¹, play argmax_x xᵀθ̃ (the
    probability is estimated by the agent's redraws, as for the jitted round)."""

    def act(params, state, draws, contexts, mask, t):
        z, tie_word = draws
        center = state.b @ state.v_inv
        scores = contexts @ (center + params.v * (np.linalg.cholesky(state.v_inv) @ z))
        arm, _ = exploration.greedy_choice(tie_word, scores, mask)
        return arm, scores[arm], scores[arm] - contexts[arm] @ center, math.nan

    return HostRound(act, _ridge_learn, _gaussian_and_tie_word(spec.d), None)


@functools.lru_cache(maxsize=None)
def _member_noise(m: int) -> Callable[[jax.Array], tuple]:
    """The m standard normals of Lin-ES's update (one function per m, so its compiled block is shared)."""
    return lambda key: (normal(key, (m,)),)


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

    return HostRound(act, update, _two_words, _member_noise(m))


def _planned(state, t: int, mask: np.ndarray | None) -> int | None:
    """The warm-up plan's arm of round ``t`` while the warm-up lasts and that arm is on offer, else None
    (:func:`~nlbandit.policies.warmup.warmup_arm`)."""
    plan = state.warmup.plan
    arm = int(plan[min(t - 1, plan.shape[0] - 1)])
    return arm if t <= state.warmup.length and (mask is None or mask[arm]) else None


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
        scores, bonus = glm.optimistic_scores(code, mean_scale, contexts, state.theta, state.v_inv,
                                              float(params.alpha))
        planned = _planned(state, t, mask)
        if planned is not None:
            return planned, scores[planned], bonus[planned], 1.0
        arm, p = exploration.greedy_choice(draws[0], scores, mask)
        return arm, scores[arm], bonus[arm], p

    def update(params, state, draws, contexts, arm, reward, t):
        rows, n, y = _pulled(state, arm, reward)
        theta = glm.newton_solve(code, rows.x, n, y, float(params.lam), state.theta, *glm.NEWTON_OPTIONS)
        return state._replace(rows=rows, theta=theta, v_inv=gram_update(state.v_inv, contexts[arm])[0])

    return HostRound(act, update, _split_tie_word, None)


def glm_ucb(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_ucb` (constant width ρ): argmax_x μ(xᵀθ̂) + ρ ‖x‖_{G⁻¹}."""
    return _glm_optimistic(config, mean_scale=True)


def ucb_glm(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.ucb_glm` (constant width α): argmax_x xᵀθ̂ + α ‖x‖_{V⁻¹}."""
    return _glm_optimistic(config, mean_scale=False)


def _sampled_act(centred: bool) -> Callable[..., Round]:
    """``act`` playing argmax_x xᵀθ̃ (GLM-TSL, GLM-FPL: the update drew θ̃; the probability is the agent's
    estimate), the warm-up's planned arms first; with ``centred``, the bonus is the excess over the centre θ̄."""

    def act(params, state, draws, contexts, mask, t):
        scores = contexts @ state.theta
        planned = _planned(state, t, mask)
        arm = planned if planned is not None else exploration.greedy_choice(draws[0], scores, mask)[0]
        bonus = scores[arm] - contexts[arm] @ state.center if centred else math.nan
        return arm, scores[arm], bonus, 1.0 if planned is not None else math.nan

    return act


@functools.lru_cache(maxsize=None)
def _fit_key_normals(n: int) -> Callable[[jax.Array], tuple]:
    """The n standard normals of a GLM update's fit key (the second half of the split update key): GLM-TSL's
    ξ (n = d), GLM-FPL's per-arm noise (n = K)."""
    return lambda key: (normal(jax.random.split(key)[1], (n,)),)


def glm_tsl(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_tsl` (constant scale a): θ̄ = the Newton MLE, θ̃ = θ̄ + a L⁻ᵀ ξ with
    L Lᵀ = H(θ̄), drawn by the update; play argmax_x xᵀθ̃."""
    code = glm.LINK_CODES[config["link"]]

    def update(params, state, draws, contexts, arm, reward, t):
        rows, n, y = _pulled(state, arm, reward)
        lam = float(params.lam)
        center = glm.newton_solve(code, rows.x, n, y, lam, state.center, *glm.NEWTON_OPTIONS)
        theta = center + params.a * glm.thompson_step(code, rows.x, n, lam, center, draws[0])
        return state._replace(rows=rows, center=center, theta=theta)

    return HostRound(_sampled_act(centred=True), update, _split_tie_word, _fit_key_normals(spec.d))


def glm_fpl(config: dict[str, Any], spec: ProblemSpec) -> HostRound:
    """:func:`nlbandit.policies.glm.glm_fpl` (constant scale a, per-arm statistics): θ̃ = the Newton MLE of
    the reward sums perturbed by a √N_k ξ_k, warm-started at the previous θ̃; play argmax_x xᵀθ̃."""
    code = glm.LINK_CODES[config["link"]]

    def update(params, state, draws, contexts, arm, reward, t):
        rows, n, y = _pulled(state, arm, reward)
        targets = y + params.a * (np.sqrt(n) * draws[0])
        theta = glm.newton_solve(code, rows.x, n, targets, float(params.lam), state.theta, *glm.NEWTON_OPTIONS)
        return state._replace(rows=rows, theta=theta)

    return HostRound(_sampled_act(centred=False), update, _split_tie_word, _fit_key_normals(spec.k))


HOST_ROUNDS: dict[str, Callable[[dict[str, Any], ProblemSpec], HostRound]] = {
    "uniform": uniform, "greedy": greedy, "eps-greedy": eps_greedy, "lin-ucb": lin_ucb, "lin-ts": lin_ts,
    "lin-es": lin_es, "glm-ucb": glm_ucb, "ucb-glm": ucb_glm, "glm-tsl": glm_tsl, "glm-fpl": glm_fpl}
"""The policies with a host round, by name: each builds it from the resolved configuration and the sizes
(under the conditions of :func:`host_round`)."""


def host_round(policy: Policy, config: dict[str, Any]) -> HostRound | None:
    """The host round of ``policy`` (resolved ``config``), or None where it has none: a policy not in
    :data:`HOST_ROUNDS`, a float32 policy, and for the GLM policies the history layout, solvers other than
    Newton and the theory widths or scales (those run the jitted round)."""
    if config["name"] not in HOST_ROUNDS or policy.meta.dtype != "float64":
        return None
    if "backend" in config and (config["backend"], config["solver"], config.get("width", config.get("scale"))) != (
            "arms", "newton", "constant"):
        return None
    return HOST_ROUNDS[config["name"]](config, policy.meta.spec)
