"""Linear bandit policies: ``lin-ucb``, ``lin-ts``, ``lin-phe`` and ``lin-es``.

All share the ridge estimator of :mod:`nlbandit.models.ridge`; they differ only in the exploration rule.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE
from nlbandit.core.keys import normal
from nlbandit.core.types import Policy, PolicyMeta, ProblemSpec
from nlbandit.models.history import HISTORY_BLOCK, blockwise_sum, history_capacity, history_noise
from nlbandit.models.ridge import Ridge, ridge_init, ridge_theta, ridge_update, ridge_widths
from nlbandit.policies.baselines import LAM, ridge_learn
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import (act_info, choose, ensemble_probability, greedy_choice, member_and_tie_words,
                                          member_draw, tie_word)

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


def oful_radius(state: Ridge, params) -> jax.Array:
    """√β_t of Abbasi-Yadkori et al. (2011), Theorem 2:

    √β_t = σ √(2 log(1/δ) + log det V_t − d log λ) + √λ S,
    with σ the sub-Gaussian noise level, S a bound on ‖θ*‖ and δ the failure probability.
    """
    return params.sigma * jnp.sqrt(2.0 * jnp.log(1.0 / params.delta) + state.logdet) + jnp.sqrt(
        params.lam
    ) * params.s


def lin_ucb(spec: ProblemSpec, width: str = "oful") -> Policy:
    """LinUCB/OFUL: argmax_x xᵀθ̂ + α_t ‖x‖_{V⁻¹}.

    ``width="oful"``: α_t = √β_t of Abbasi-Yadkori et al. (2011), Thm. 2 (params ``sigma``, ``delta``,
    ``s``, ``lam``), computed with the exact log-determinant rather than its d log(1 + t/(dλ)) upper bound
    used in spec 003 §3, so the width is never larger than the spec's. ``width="constant"``: α_t =
    ``alpha``, the practical tuned variant (spec 003 §3 suggests α ∈ {0.1, 0.25, 0.5, 1}).
    """

    def init(params, key):
        return ridge_init(spec.d, params.lam)

    def act(params, state, key, contexts, mask, t):
        alpha = oful_radius(state, params) if width == "oful" else params.alpha
        bonus = alpha * ridge_widths(state, contexts)
        scores = contexts @ ridge_theta(state) + bonus
        arm, p = choose(key, scores, mask)
        return arm, act_info(scores[arm], bonus[arm], p)

    return Policy(init, act, ridge_learn, PolicyMeta("lin-ucb"))


def lin_ts(spec: ProblemSpec) -> Policy:
    """Linear Thompson sampling (Agrawal & Goyal 2013): θ̃ ~ N(θ̂, v² V⁻¹), play argmax_x xᵀθ̃.

    Deviation: the theory scale v = σ√(24 d log(1/δ)/ε) is replaced by the practical constant ``v``
    (spec 003 §3: v = σ = 0.5 by default). The sample is θ̂ + v L z with L Lᵀ = V⁻¹ (Cholesky, O(d³) per
    round) and z ~ N(0, I_d).
    """

    def init(params, key):
        return ridge_init(spec.d, params.lam)

    def act(params, state, key, contexts, mask, t):
        z, word = lin_ts_draws(key, spec.d)
        center = ridge_theta(state)
        theta = center + params.v * (jnp.linalg.cholesky(state.v_inv) @ z)
        scores = contexts @ theta
        arm, _ = greedy_choice(word, scores, mask)
        return arm, act_info(scores[arm], scores[arm] - contexts[arm] @ center)

    return Policy(init, act, ridge_learn, PolicyMeta("lin-ts"))


def lin_ts_draws(key: jax.Array, d: int) -> tuple[jax.Array, jax.Array]:
    """Lin-TS's draws from its act key: z ~ N(0, I_d) and the tie word."""
    k_z, k_ties = jax.random.split(key)
    return normal(k_z, (d,)), tie_word(k_ties)


def _prior_term(key: jax.Array, params, shape: tuple[int, ...]) -> jax.Array:
    """The prior perturbation b₀ = √λ · prior_scale · w, w ~ N(0, I) (Lee & Oh 2024; spec 003 §2.2, U10)."""
    return jnp.sqrt(params.lam) * params.prior_scale * normal(key, shape)


class LinES(NamedTuple):
    """Lin-ES state: the shared ridge state with one response column per model, and the draw counter."""

    ridge: Ridge
    draws: jax.Array


def lin_es(spec: ProblemSpec, m: int = 25) -> Policy:
    """Linear ensemble sampling, Sun, Wang & Xu (2025) Algorithm 1 with the linear loss (spec 003 §2.2).

    m models share V = λI + Σ x xᵀ; model j keeps b^j = b₀^j + Σ_l x_l (y_l + Z_l^j). Each round one model
    j_t ~ Uniform{1..m} is drawn and the arm maximising xᵀ V⁻¹ b^{j_t} is played; then every model gets
    one fresh perturbation Z_t^j ~ N(0, σ_R²) on the new reward (m draws per round, old draws kept:
    ``B += (y·1 + Z_t) xᵀ`` with B stored as (m, d), one row per model). Per-round cost O(d² + Kd + dm),
    constant in t.

    Deviation (spec 003 U10, default on): the initial prior perturbation b₀^j = √λ·prior_scale·w^j of
    Lee & Oh (2024); without it every model scores unexplored directions at exactly 0 and Lin-ES without
    warm-up locks onto the first arm with a positive mean (spec 003 §9). ``prior_scale = 0`` gives the
    paper-literal algorithm. The draw is restricted to the first ``m_used`` models (param ``m_used``;
    all m by default, fewer in the early epochs of the anytime schedule). ``info.probability`` is the
    exact probability of the choice over the draw of j_t (:func:`ensemble_probability`).
    """

    def init(params, key):
        b0 = _prior_term(key, params, (spec.d, m)).T
        return LinES(ridge_init(spec.d, params.lam, b0), jnp.zeros((), jnp.int32))

    def act(params, state, key, contexts, mask, t):
        words = member_and_tie_words(key)
        j = member_draw(words[0], params.m_used)
        theta = state.ridge.v_inv @ (jax.nn.one_hot(j, m, dtype=jnp.float64) @ state.ridge.b)
        scores = contexts @ theta
        arm, _ = greedy_choice(words[1], scores, mask)
        members = ridge_theta(state.ridge) @ contexts.T
        return arm, act_info(scores[arm], probability=ensemble_probability(members, arm, mask, params.m_used))

    def update(params, state, key, contexts, arm, feedback, t):
        z = params.sigma_r * normal(key, (m,))
        return LinES(ridge_update(state.ridge, contexts[arm], feedback.reward + z), state.draws + m)

    return Policy(init, act, update, PolicyMeta("lin-es"))


class LinPHE(NamedTuple):
    """Lin-PHE state: ridge state on the unperturbed rewards and the history of played features."""

    ridge: Ridge
    xs: jax.Array
    n: jax.Array


def lin_phe(spec: ProblemSpec) -> Policy:
    """Linear perturbed-history exploration (Kveton et al. 2020a), the O(t)-per-round baseline of ES.

    Every round draws a fresh perturbation Z_l ~ N(0, σ_R²) for *all* l < t and plays argmax_x xᵀθ̃ with
    θ̃ = V⁻¹ (b₀ + Σ_l x_l (y_l + Z_l)) = θ̂ + V⁻¹ (b₀ + Σ_l x_l Z_l) (spec 003 §2.5, Remark 4.1). The sum
    runs over the stored history in blocks of 128 rows up to the current count, so the cost really
    grows linearly in t, as the paper's runtime comparison assumes (spec 003 §2.5 [REC]: naive PHE).
    The Gaussian law replaces Kveton et al.'s Bernoulli pseudo-rewards, as in spec 003 §3; the prior
    term b₀ (fresh every round, scale ``prior_scale``) mirrors Lin-ES's.
    """
    capacity = history_capacity(spec.horizon)

    def init(params, key):
        return LinPHE(ridge_init(spec.d, params.lam), jnp.zeros((capacity, spec.d)), jnp.zeros((), jnp.int32))

    def act(params, state, key, contexts, mask, t):
        k_prior, k_z, k_ties = jax.random.split(key, 3)
        z = history_noise(k_z, state.n, capacity)
        noise = blockwise_sum(lambda x, _, z: x.T @ z, state.xs, z, z, (state.n, HISTORY_BLOCK))
        b = state.ridge.b + params.sigma_r * noise + _prior_term(k_prior, params, (spec.d,))
        scores = contexts @ (state.ridge.v_inv @ b)
        arm, _ = choose(k_ties, scores, mask)
        return arm, act_info(scores[arm], scores[arm] - contexts[arm] @ ridge_theta(state.ridge))

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm]
        xs = jax.lax.dynamic_update_slice_in_dim(state.xs, x[None, :].astype(jnp.float64), state.n, 0)
        return LinPHE(ridge_update(state.ridge, x, feedback.reward), xs, state.n + 1)

    return Policy(init, act, update, PolicyMeta("lin-phe", max_horizon=spec.horizon))


SIGMA_R = Hyper("sigma_r", 0.1, "perturbation standard deviation σ_R (spec 003 erratum 5: a std)", low=0.0)
PRIOR = Hyper("prior_scale", None, "prior perturbation scale (omitted: σ_R; 0: off, paper-literal)", low=0.0,
              optional=True)
M_USED = Hyper("m_used", None, "number of members j_t is drawn from, the first m_used of the m (omitted: m; "
               "the anytime schedule sets it per epoch)", low=1.0, optional=True)


def prior_defaults_to_sigma_r(values: dict[str, Any]) -> dict[str, Any]:
    """prior_scale omitted → σ_R."""
    if values["prior_scale"] is None:
        values["prior_scale"] = values["sigma_r"]
    return values


def members_used(values: dict[str, Any]) -> dict[str, Any]:
    """m_used omitted → m; otherwise an integer ≤ m."""
    if values["m_used"] is None:
        values["m_used"] = float(values["m"])
    elif not float(values["m_used"]).is_integer() or values["m_used"] > values["m"]:
        raise ConfigError(f"policy '{values.get('name', 'ensemble')}': field 'm_used' must be an integer in "
                          f"[1, m = {values['m']}], got {values['m_used']!r}")
    return values


ENTRIES = (
    PolicyEntry(
        "lin-ucb",
        lin_ucb,
        (
            Hyper("width", SIGNATURE, "confidence width: OFUL theory √β_t, or the constant alpha", kind=str,
                  static=True, choices=("oful", "constant")),
            LAM,
            Hyper("sigma", 0.5, "sub-Gaussian noise level σ in √β_t (OFUL width)", low=0.0),
            Hyper("delta", 0.01, "failure probability δ in √β_t (OFUL width)", low=0.0, high=1.0,
                  low_open=True, high_open=True),
            Hyper("s", 1.0, "bound S on ‖θ*‖ in √β_t (OFUL width)", low=0.0),
            Hyper("alpha", 1.0, "constant width α (constant width)", low=0.0),
        ),
        "LinUCB/OFUL (Abbasi-Yadkori et al. 2011)",
    ),
    PolicyEntry("lin-ts", lin_ts, (LAM, Hyper("v", 0.5, "posterior scale v: θ̃ ~ N(θ̂, v² V⁻¹)", low=0.0)),
                "linear Thompson sampling (Agrawal & Goyal 2013), practical scale"),
    PolicyEntry("lin-phe", lin_phe, (LAM, SIGMA_R, PRIOR),
                "perturbed history, all t rewards re-perturbed each round (O(t) per round)",
                prior_defaults_to_sigma_r),
    PolicyEntry("lin-es", lin_es,
                (Hyper("m", SIGNATURE, "ensemble size m", kind=int, static=True, low=1), LAM, SIGMA_R, PRIOR, M_USED),
                "linear ensemble sampling (Sun, Wang & Xu 2025), m models, incremental perturbations",
                lambda values: members_used(prior_defaults_to_sigma_r(values))),
)
