"""Variance-aware UCB policies for heteroscedastic bandits, where the agent observes a variance bound σ_t
after acting: MOR-UCB (GLM links) and its linear baseline, weighted OFUL.

MOR-UCB, the multi-layer online-regression UCB: Zhao, Zhou, He & Gu (2023), Algorithm 2, Theorem 6.2
(spec 000 §2.2).

The agent observes a variance bound σ_t after acting. Data are split into L = max(1, ⌈log₂(R/σ̄)⌉) layers by
noise level: the point of round t goes to layer l_t with 2^{l_t}σ̄ ≤ s_t ≤ 2^{l_t+1}σ̄, s_t = σ_t clamped to
[σ̄, R] (0-based layers, the consistent reading of Alg. 2 line 7, spec 000 §2.2 ambiguity (a); at an exact
power of two the higher layer). Each layer runs FTRL (Algorithm 1, :mod:`nlbandit.models.ftrl`) on its own
data, with Σ_l = 2λI + Σ_{τ∈Ψ_l} a_τa_τᵀ (not κ-weighted, as Alg. 2 is written; ambiguity (d)). Arms are
chosen by

    a_t = argmax_a φ(min_l [θ̂_lᵀa + β_{t,l}‖a‖_{Σ_l⁻¹}]) = argmax_a min_l [...]   (φ is increasing)

    β_{t,l} = 16·2^l σ̄ κ^{-1/2} √(d log(1 + tκA²/(2dλ)) · log(4t²L/δ)) + 4Rκ^{-1/2} log(4t²L/δ) + 2√(2/κ) K

(Theorem 6.2 with A = 1, the global round t; ``beta_scale`` multiplies it, 1 = theory). Only the layer that
receives the point is refit (the others have no new data). λ defaults to the theory 4K²/κ; σ̄ to R/√d,
the largest value that keeps the order of Theorem 6.2's bound (spec 000 §2.2). With σ̄ = R there is a
single layer: the variance-blind baseline, a GLM-UCB on FTRL estimates.

Clamping (documented, not an error, since σ_t arrives inside the compiled loop): σ_t below σ̄ (including
negative values) counts as σ̄, above R as R, and NaN as R, the most conservative layer.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import Hyper, SIGNATURE
from nlbandit.core.types import Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models.ftrl import SOLVERS, ftrl
from nlbandit.models.links import LINKS
from nlbandit.models.ridge import mahalanobis_widths, ridge_init, ridge_theta, ridge_update, ridge_widths
from nlbandit.policies.entry import PolicyEntry, link_from_env
from nlbandit.policies.exploration import act_info, choose
from nlbandit.theory import ftrl_lambda, link_curvature

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


def n_layers(noise_bound: float, sigma_bar: float) -> int:
    """L = max(1, ⌈log₂(R/σ̄)⌉) (1 when R ≤ σ̄)."""
    return max(1, math.ceil(math.log2(noise_bound / sigma_bar))) if noise_bound > sigma_bar else 1


def layer_index(sigma: jax.Array, sigma_bar: float, noise_bound: float, layers: int) -> jax.Array:
    """The 0-based layer l with 2^l σ̄ ≤ s ≤ 2^{l+1} σ̄ for s = σ clamped to [σ̄, R] (NaN → R), clamped to
    [0, L−1]; the floor of log₂ is corrected by one step either way against rounding."""
    s = jnp.clip(jnp.where(jnp.isnan(sigma), noise_bound, sigma), sigma_bar, noise_bound)
    guess = jnp.floor(jnp.log2(s / sigma_bar))
    guess = guess + (2.0 ** (guess + 1) * sigma_bar <= s) - (2.0**guess * sigma_bar > s)
    return jnp.clip(guess, 0, layers - 1).astype(jnp.int32)


def confidence_radii(t: jax.Array, lam: jax.Array, *, d: int, layers: int, sigma_bar: float, noise_bound: float,
                     delta: float, link: str) -> jax.Array:
    """The theory radii β_{t,l} of Theorem 6.2 for l = 0..L−1 in round t (module docstring; A = 1)."""
    kappa, k_max = link_curvature(link)
    t = jnp.asarray(t, jnp.float64)
    log_term = jnp.log(4.0 * t * t * layers / delta)
    return (16.0 * 2.0 ** jnp.arange(layers) * sigma_bar / math.sqrt(kappa)
            * jnp.sqrt(d * jnp.log1p(t * kappa / (2.0 * d * lam)) * log_term)
            + 4.0 * noise_bound / math.sqrt(kappa) * log_term + 2.0 * math.sqrt(2.0 / kappa) * k_max)


def regret_bound(t: int, layer_sizes, lam: float, *, d: int, sigma_bar: float, noise_bound: float, delta: float,
                 link: str) -> float:
    """The data-dependent regret bound (B.3) of Theorem 6.2's proof after ``t`` rounds, given the final layer
    sizes |Ψ_{t+1,l}| (A = 1):

        Regret(t) ≤ 4K √(d κ⁻¹ log(1 + tκ/(2dλ))) · Σ_l β_{t,l} √|Ψ_{t+1,l}|.

    Vacuous at moderate t (spec 000 §5: about 7·10⁴ at t = 2000, against the trivial 2t), so a sanity check.
    """
    kappa, k_max = link_curvature(link)
    sizes = jnp.asarray(layer_sizes, jnp.float64)
    betas = confidence_radii(t, lam, d=d, layers=sizes.shape[0], sigma_bar=sigma_bar, noise_bound=noise_bound,
                             delta=delta, link=link)
    return float(4.0 * k_max * math.sqrt(d / kappa * math.log1p(t * kappa / (2.0 * d * lam)))
                 * jnp.sum(betas * jnp.sqrt(sizes)))


def mor_ucb(spec: ProblemSpec, link: str = "identity", noise_bound: float = 1.0, sigma_bar: float | None = None,
            delta: float = 0.05, solver: str = "auto") -> Policy:
    """MOR-UCB (module docstring); params ``lam`` (λ of λ‖θ‖²) and ``beta_scale``.

    The state is one :class:`~nlbandit.models.ftrl.FTRLState` per layer, stacked on a leading axis of
    length L; its ``n`` holds the layer sizes |Ψ_l|.
    """
    d, big_r = spec.d, noise_bound
    sigma_bar = big_r / math.sqrt(d) if sigma_bar is None else sigma_bar
    layers = n_layers(big_r, sigma_bar)
    est = ftrl(LINKS[link], d, spec.horizon, solver)

    def beta(params, t):
        return params.beta_scale * confidence_radii(t, params.lam, d=d, layers=layers, sigma_bar=sigma_bar,
                                                       noise_bound=big_r, delta=delta, link=link)

    def init(params, key):
        one = est.init(params.lam)
        return jax.tree.map(lambda a: jnp.broadcast_to(a, (layers,) + a.shape), one)

    def act(params, state, key, contexts, mask, t):
        means = contexts @ state.theta.T  # (K, L)
        widths = jax.vmap(mahalanobis_widths, in_axes=(0, None), out_axes=1)(state.h_inv, contexts)  # (K, L)
        upper_by_layer = means + beta(params, t) * widths
        layer = jnp.argmin(upper_by_layer, axis=1)
        upper = jnp.take_along_axis(upper_by_layer, layer[:, None], axis=1)[:, 0]
        arm, p = choose(key, upper, mask)
        return arm, act_info(upper[arm], upper[arm] - means[arm, layer[arm]], p)

    def update(params, state, key, contexts, arm, feedback, t):
        layer = layer_index(feedback.variance_bound, sigma_bar, big_r, layers)
        mine = jax.tree.map(lambda a: a[layer], state)
        new = est.update(mine, contexts[arm], feedback.reward, params.lam)
        return jax.tree.map(lambda a, b: a.at[layer].set(b), state, new)

    requires = Requirements(noise_level=True, link=link, noise_bound=noise_bound)
    return Policy(init, act, update, PolicyMeta("mor-ucb", requires,
                                                max_horizon=None if est.solver == "closed-form" else spec.horizon))


def weighted_radius(t: jax.Array, lam: jax.Array, s: jax.Array, *, d: int, sigma_min: float, noise_bound: float,
                    delta: float) -> jax.Array:
    """β_t of weighted OFUL: the Bernstein self-normalised bound of Zhou, Gu & Szepesvári (2021, Thm. 4.1) for
    the weighted data (x/σ̄, ε/σ̄), whose noise has variance ≤ 1 and magnitude ≤ R/σ_min and whose features
    have norm ≤ 1/σ_min:

        β_t = 8 √(d log(1 + t/(σ_min² d λ)) · log(4t²/δ)) + 4 (R/σ_min) log(4t²/δ) + √λ S.
    """
    t = jnp.maximum(jnp.asarray(t, jnp.float64), 1.0)
    log_term = jnp.log(4.0 * t * t / delta)
    return (8.0 * jnp.sqrt(d * jnp.log1p(t / (sigma_min**2 * d * lam)) * log_term)
            + 4.0 * noise_bound / sigma_min * log_term + jnp.sqrt(lam) * s)


def weighted_oful(spec: ProblemSpec, noise_bound: float = 1.0, sigma_min: float | None = None,
                  delta: float = 0.05) -> Policy:
    """Weighted OFUL (Zhou, Gu & Szepesvári 2021, the variance-weighted ridge regression UCB of Zhao et al.
    2023 §6.2, "existing approach"): identity link only, the baseline of MOR-UCB on linear bandits.

    Each point is weighted by 1/σ̄_t² with σ̄_t = σ_t clamped to [σ_min, R] (NaN → R, the most
    conservative; the clamps of MOR-UCB):

        Z_t = λI + Σ a_τa_τᵀ/σ̄_τ²,   θ̂_t = Z_t⁻¹ Σ a_τ r_τ/σ̄_τ²,   a_t = argmax_a aᵀθ̂ + β_{t−1}‖a‖_{Z⁻¹}

    with β_t of :func:`weighted_radius` (``beta_scale`` multiplies it, 1 = theory). Params ``lam`` (λ = 1/S²
    in the paper; default 1), ``s`` (S ≥ ‖θ*‖) and ``beta_scale``. σ_min defaults to R/√d, the value that
    balances the two terms of the regret Õ(R√(dT) + d√(Σσ_t²)).
    """
    d, big_r = spec.d, noise_bound
    sigma_min = big_r / math.sqrt(d) if sigma_min is None else sigma_min

    def init(params, key):
        return ridge_init(d, params.lam)

    def act(params, state, key, contexts, mask, t):
        beta = params.beta_scale * weighted_radius(t - 1, params.lam, params.s, d=d, sigma_min=sigma_min,
                                                      noise_bound=big_r, delta=delta)
        bonus = beta * ridge_widths(state, contexts)
        scores = contexts @ ridge_theta(state) + bonus
        arm, p = choose(key, scores, mask)
        return arm, act_info(scores[arm], bonus[arm], p)

    def update(params, state, key, contexts, arm, feedback, t):
        sigma = jnp.where(jnp.isnan(feedback.variance_bound), big_r, feedback.variance_bound)
        weight = 1.0 / jnp.clip(sigma, sigma_min, big_r)
        return ridge_update(state, contexts[arm] * weight, feedback.reward * weight)

    return Policy(init, act, update,
                  PolicyMeta("weighted-oful", Requirements(noise_level=True, link="identity", noise_bound=noise_bound)))


def _mor_ucb_lambda(values: dict[str, Any]) -> dict[str, Any]:
    """λ omitted → the theory 4K²/κ of the link (once the link is known)."""
    if values["lam"] is None and values["link"] != "env":
        values["lam"] = ftrl_lambda(values["link"])
    return values


_NOISE_BOUND = Hyper("noise_bound", SIGNATURE, "noise bound R ≥ |ε_t|", static=True, low=0.0, low_open=True)
_DELTA = Hyper("delta", SIGNATURE, "confidence level δ of the radii", static=True, low=0.0, high=1.0, low_open=True,
               high_open=True)
_BETA_SCALE = Hyper("beta_scale", 1.0, "multiplier of the theory radii (1 = theory)", low=0.0, low_open=True)

ENTRIES = (
    PolicyEntry(
        "mor-ucb",
        mor_ucb,
        (
            Hyper("link", SIGNATURE, "GLM link φ, the environment's ('env' takes it from the environment)",
                  kind=str, static=True, choices=tuple(LINKS) + ("env",)),
            _NOISE_BOUND,
            Hyper("sigma_bar", SIGNATURE, "smallest layer's noise level σ̄ (omitted: R/√d; σ̄ = R: one layer)",
                  static=True, low=0.0, low_open=True, optional=True),
            _DELTA,
            Hyper("lam", None, "λ of λ‖θ‖² per layer (omitted: the theory 4K²/κ)", low=0.0, low_open=True,
                  optional=True),
            _BETA_SCALE,
            Hyper("solver", SIGNATURE, "per-layer FTRL solver: closed form (identity link) or Newton", kind=str,
                  static=True, choices=SOLVERS),
        ),
        "MOR-UCB (Zhao et al. 2023, Alg. 2): variance-layered FTRL estimates, min over layers of the UCBs",
        _mor_ucb_lambda,
        adapt=lambda config, env: _mor_ucb_lambda(link_from_env(config, env)),
    ),
    PolicyEntry(
        "weighted-oful",
        weighted_oful,
        (
            _NOISE_BOUND,
            Hyper("sigma_min", SIGNATURE, "floor σ_min of the weights' noise levels σ̄_t = max(σ_t, σ_min) (omitted: "
                  "R/√d)", static=True, low=0.0, low_open=True, optional=True),
            _DELTA,
            Hyper("lam", 1.0, "ridge λ of Z = λI + Σ aaᵀ/σ̄² (the paper: 1/S²)", low=0.0, low_open=True),
            Hyper("s", 1.0, "S, the bound on ‖θ*‖", low=0.0, low_open=True),
            _BETA_SCALE,
        ),
        "weighted OFUL (Zhou, Gu & Szepesvári 2021): 1/σ̄_t²-weighted ridge regression UCB, identity link",
    ),
)
