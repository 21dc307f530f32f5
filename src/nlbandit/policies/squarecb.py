"""SquareCB (Foster & Rakhlin 2020): inverse-gap weighting over an online regression oracle —
``squarecb`` (ridge regression), ``glm-squarecb`` (the GLM maximum likelihood) and ``neural-squarecb``
(the MLP).

Foster & Rakhlin (2020), "Beyond UCB: Optimal and Efficient Contextual Bandits with Regression Oracles",
Algorithm 1, written for rewards: in round t the oracle predicts ŷ_a for every arm on offer; with
b = argmax_a ŷ_a and K_t arms on offer,

    p_a = 1 / (K_t + γ_t (ŷ_b − ŷ_a))  for a ≠ b,        p_b = 1 − Σ_{a≠b} p_a,

and the arm is drawn from p; the oracle then learns the observed reward by square loss (here: the ridge
estimate, the regularised GLM likelihood, or the network's training). The decision's probability is
exact (``info.probability``: what the online agent logs and off-policy estimators read).

Deviations, stated: the paper's γ is a constant tuned to the horizon (γ = √(KT / (Reg_Sq(T) + log(2/δ))),
μ = K); we take Vowpal Wabbit's schedule ``--squarecb``, γ_t = ``gamma_scale`` · t^``gamma_exponent``
(its defaults 10 and 0.5), which needs no horizon, and μ = K_t, the arms on offer this round (K when all
are). ``gamma_exponent = 0`` recovers the constant γ = ``gamma_scale``. Ties for b go to the first arm in
order, so p depends on the state only. The GLM and MLP oracles fit the link's mean μ(xᵀθ) and the
network's output, with their families' warm-ups (planned pulls have probability 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import Hyper, forwards
from nlbandit.core.types import Policy, PolicyMeta, ProblemSpec
from nlbandit.models.links import LINKS
from nlbandit.models.mlp import mlp_apply
from nlbandit.models.ridge import ridge_init, ridge_theta
from nlbandit.policies import glm, neural
from nlbandit.policies.baselines import LAM, ridge_learn
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info
from nlbandit.policies.warmup import warmup_arm

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""

HYPERS = (
    Hyper("gamma_scale", 10.0, "γ_t = gamma_scale · t^gamma_exponent, the learning rate of the inverse-gap "
          "weights (Vowpal Wabbit's --gamma_scale: 10)", low=0.0),
    Hyper("gamma_exponent", 0.5, "the exponent of t in γ_t (Vowpal Wabbit's --gamma_exponent: 0.5; 0: the "
          "paper's constant γ)", low=0.0),
)


def inverse_gap_weights(predictions: jax.Array, mask: jax.Array, gamma: jax.Array) -> jax.Array:
    """(K,) SquareCB's distribution over the arms on offer (module docstring; 0 for the others): the best
    predicted arm b (the first of ties) gets what the others leave, each other arm 1 / (K_t + γ gap)."""
    best = jnp.argmax(jnp.where(mask, predictions, -jnp.inf))
    others = jnp.where(mask, 1.0 / (jnp.sum(mask) + gamma * (predictions[best] - predictions)), 0.0).at[best].set(0.0)
    return others.at[best].set(1.0 - jnp.sum(others))


def igw_choice(key: jax.Array, predictions: jax.Array, mask: jax.Array,
               gamma: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(arm, its probability): an arm drawn from :func:`inverse_gap_weights` by inverting its cumulative
    sum at one uniform draw (an arm of probability 0 is never drawn)."""
    p = inverse_gap_weights(predictions, mask, gamma)
    cdf = jnp.cumsum(p)
    last = p.shape[0] - 1 - jnp.argmax(mask[::-1])  # the last arm on offer, should rounding leave u ≥ cdf[-1]
    arm = jnp.minimum(jnp.sum(cdf <= jax.random.uniform(key, dtype=p.dtype) * cdf[-1]), last).astype(jnp.int32)
    return arm, p[arm]


def gamma(params, t: jax.Array) -> jax.Array:
    """γ_t = gamma_scale · t^gamma_exponent."""
    return params.gamma_scale * t ** params.gamma_exponent


def squarecb(spec: ProblemSpec) -> Policy:
    """SquareCB with the ridge regression oracle: ŷ = xᵀθ̂, θ̂ = (λI + Σ xxᵀ)⁻¹ Σ x r (the online
    least-squares oracle of Foster & Rakhlin 2020, §5)."""

    def init(params, key):
        return ridge_init(spec.d, params.lam)

    def act(params, state, key, contexts, mask, t):
        predictions = contexts @ ridge_theta(state)
        arm, p = igw_choice(key, predictions, mask, gamma(params, t))
        return arm, act_info(predictions[arm], jnp.nan, p)

    return Policy(init, act, ridge_learn, PolicyMeta("squarecb"))


@forwards(glm.glm_setup)
def glm_squarecb(spec: ProblemSpec, **options) -> Policy:
    """SquareCB with the GLM oracle: ŷ = μ(xᵀθ̂), θ̂ the regularised maximum likelihood refitted after every
    reward (the GLM family's estimator, warm-up and backends)."""
    setup = glm.glm_setup(spec, **options)
    mean = LINKS[setup.link].mean

    def predict(params, state, key, contexts):
        return mean(contexts @ state.theta), None

    def act(params, state, key, contexts, mask, t):
        predictions, _ = predict(params, state, key, contexts)
        chosen, p = igw_choice(key, predictions, mask, gamma(params, t))
        arm, planned = warmup_arm(state.warmup, t, chosen, mask)
        return arm, act_info(predictions[arm], jnp.nan, jnp.where(planned, 1.0, p))

    return glm._policy("glm-squarecb", setup, predict, glm._refit_mle(setup))._replace(act=act)


@forwards(neural.neural_setup)
def neural_squarecb(spec: ProblemSpec, **options) -> Policy:
    """SquareCB with the MLP oracle: ŷ = f(x; θ), the network trained by square loss on the rewards (the
    neural family's network, training cadence and warm-up)."""
    setup = neural.neural_setup(spec, **options)

    def act(params, state, key, contexts, mask, t):
        predictions = mlp_apply(setup.arch, state.theta, contexts)
        chosen, p = igw_choice(key, predictions, mask, gamma(params, t).astype(predictions.dtype))
        return neural._planned(state, t, chosen, mask, predictions, probability=p)

    return neural._policy("neural-squarecb", setup, act, neural._append_learner(setup))


ENTRIES = (
    PolicyEntry("squarecb", squarecb, (LAM,) + HYPERS,
                "SquareCB (Foster & Rakhlin 2020): inverse-gap weighting over the ridge regression oracle"),
    glm._entry("glm-squarecb", glm_squarecb, HYPERS,
               "SquareCB (Foster & Rakhlin 2020) over the GLM maximum-likelihood oracle: ŷ = μ(xᵀθ̂)"),
    neural._entry("neural-squarecb", neural_squarecb, HYPERS,
                  "SquareCB (Foster & Rakhlin 2020) over the MLP oracle: ŷ = f(x; θ)"),
)
