"""The linear logistic baselines in Bae & Lee's experiment mode (``mode = "experiment"`` of ``logistic-ucb-1``
and ``ada-ofu-ecolog``; spec 001 §3.1 item 9, §3.2 rows 2–3, §3.3, §3.4).

Both score a context x ∈ ℝ^d by μ(xᵀθ_{t−1}) + σ(x) (``score_scale = "prob"``, or xᵀθ_{t−1} + σ(x) with
``"latent"``), where θ is the linear logistic model trained like the paper's networks: full-batch gradient
descent on the mean cross-entropy + (λ/t)‖θ‖² (the objective divided by t, §3.4 [REC]), 100 steps of 0.01,
warm-started, every 50 rounds (the depth-1 model of :mod:`nlbandit.models.mlp`, θ₀ = 0), and

* Logistic-UCB-1: σ(x) = ν·√κ·(1 + S)·(S√λ + d̃_t/√λ)·‖x‖_{V⁻¹}, V = κλI + Σ_{i<t} x_i x_iᵀ;
* ada-OFU-ECOLog: σ(x) = ν·(S√λ + (1 + S)√d̃_t)·‖x‖_{W⁻¹}, W = λI + Σ_{i<t} μ̇(x_iᵀθ_i) x_i x_iᵀ, each weight
  taken with the θ after round i's training and then frozen (it never reads κ);

with the running effective dimension d̃_t = log det(R Σ_{i<t} x_i x_iᵀ + I), R = 1/4 (§3.1 item 5). The
matrices are full (``matrix = "full"``: inverses by Sherman–Morrison, log det by the determinant lemma,
§3.3's choice for D ≤ 1000) or diagonal (``"diagonal"``, for large D: the diagonal of each matrix, d̃_t its
Hadamard upper bound), float64. Neither depends on a network width: the model is linear.

With ``features = "disjoint"`` (disjoint-encoded arms, :mod:`nlbandit.models.disjoint`) every played x lies
in one block, so V, W and A are block-diagonal: they are kept as K blocks of d₀ × d₀ (K·d₀² numbers instead
of K²·d₀², and a Sherman–Morrison step of O(d₀²) on the played arm's block), the history holds the samples
(d₀ numbers each) and their blocks, and training runs tile by tile on them. The results are the same.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE
from nlbandit.core.types import Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models import disjoint
from nlbandit.models.history import Rows, add_row, empty_rows, history_capacity
from nlbandit.models.mlp import MLP
from nlbandit.models.mlp_train import Training, train
from nlbandit.models.ridge import diagonal_widths, gram_update, mahalanobis_widths
from nlbandit.policies.exploration import act_info, choose
from nlbandit.policies.neurallog import R, SCORE_SCALES, effective_dimension

MATRICES = ("full", "diagonal")


class LogisticGDState(NamedTuple):
    """State of the experiment-mode linear baselines.

    Attributes:
      theta: (d,) the model; rows: the history it trains on.
      design: V⁻¹ or W⁻¹ (d, d), or the diagonal of V or W (d,); with disjoint features the inverse's
        diagonal blocks (K, d₀, d₀).
      dim: the d̃ matrix's inverse A⁻¹ (d, d) with A = R Σ x xᵀ + I, or Σ x ⊙ x (d,) for the diagonal;
        blocks (K, d₀, d₀) as ``design``.
      logdet: log det A (full matrices; the diagonal recomputes its bound from ``dim``).
      blocks: (capacity,) the played arm of each history row with disjoint features, (0,) otherwise.
    """

    theta: jax.Array
    rows: Rows
    design: jax.Array
    dim: jax.Array
    logdet: jax.Array
    blocks: jax.Array


def logistic_gd(spec: ProblemSpec, weighted: bool, name: str, kappa=None, matrix: str = "full",
                score_scale: str = "prob", steps: int = 100, train_every: int = 50,
                features: str = "dense") -> Policy:
    """Logistic-UCB-1 (``weighted`` False: V-type design, √κ factor, ``kappa(params) -> κ``) or
    ada-OFU-ECOLog (``weighted``: W-type design, no κ) in experiment mode (module docstring), on ``dense``
    or ``disjoint`` features."""
    d, k, full, compact = spec.d, spec.k, matrix == "full", features == "disjoint"
    d_row = d // k if compact else d  # a history row's (and a matrix block's) size
    arch = MLP(d, 1, 1, False, "none")
    how = Training(steps, "gd", "mean", "zero", "one", loss="logistic")
    capacity = history_capacity(spec.horizon)

    def floor(params):
        return params.lam if weighted else kappa(params) * params.lam

    def init(params, key):
        if full:
            eye = jnp.tile(jnp.eye(d_row), (k, 1, 1)) if compact else jnp.eye(d)
            design, dim = eye / floor(params), eye
        else:
            design, dim = jnp.full((d,), floor(params), jnp.float64), jnp.zeros((d,))
        return LogisticGDState(jnp.zeros((d,)), empty_rows(capacity, d_row), design, dim, jnp.zeros(()),
                               jnp.zeros((capacity if compact else 0,), jnp.int32))

    def arm_widths(design, x):
        """‖x_a‖_{M⁻¹} of every arm's row of ``x`` (K, d), or of its sample (K, d₀) in block a."""
        if not compact:
            return mahalanobis_widths(design, x) if full else diagonal_widths(design, x)
        if full:
            return jnp.sqrt(jnp.maximum(jnp.einsum("kd,kde,ke->k", x, design, x), 0.0))
        return diagonal_widths(design.reshape(k, d_row), x)

    def add(design, arm, x):
        """``design`` after x xᵀ (Sherman–Morrison on the inverse, or the diagonal), and the log det step."""
        if full and compact:
            block, step = gram_update(design[arm], x)
            return design.at[arm].set(block), step
        if full:
            return gram_update(design, x)
        if compact:
            return design.reshape(k, d_row).at[arm].add(x * x).reshape(-1), 0.0
        return design + x * x, 0.0

    def factor(params, dtilde):
        s, lam = params.s, params.lam
        if weighted:
            return s * jnp.sqrt(lam) + (1.0 + s) * jnp.sqrt(dtilde)
        return jnp.sqrt(kappa(params)) * (1.0 + s) * (s * jnp.sqrt(lam) + dtilde / jnp.sqrt(lam))

    def act(params, state, key, contexts, mask, t):
        if compact:
            x = disjoint.compact(contexts, k).astype(jnp.float64)
            f = jnp.sum(x * state.theta.reshape(k, d_row), axis=1)
        else:
            x = contexts.astype(jnp.float64)
            f = x @ state.theta
        dtilde = state.logdet if full else effective_dimension(state.dim, R)
        sigma = params.nu * factor(params, dtilde) * arm_widths(state.design, x)
        scores = (jax.nn.sigmoid(f) if score_scale == "prob" else f) + sigma
        arm, probability = choose(key, scores, mask)
        return arm, act_info(scores[arm], sigma[arm], probability)

    def update(params, state, key, contexts, arm, feedback, t):
        x = (disjoint.compact(contexts, k)[arm] if compact else contexts[arm]).astype(jnp.float64)
        blocks = state.blocks.at[state.rows.count].set(arm) if compact else state.blocks
        rows = add_row(state.rows, x, arm, feedback.reward, False)

        def fit():
            if compact:
                return disjoint.train(arch, k, how, state.theta, state.theta, rows.x, blocks, rows.y, rows.count,
                                      2.0 * params.lam, params.lr)
            return train(arch, how, state.theta, state.theta, rows, 2.0 * params.lam, params.lr, key)

        theta = jax.lax.cond(t % train_every == 0, fit, lambda: state.theta)
        if weighted:  # μ̇(x_tᵀθ_t), after this round's training
            v = x @ (theta.reshape(k, d_row)[arm] if compact else theta)
            x_w = jnp.sqrt(jax.nn.sigmoid(v) * jax.nn.sigmoid(-v)) * x
        else:
            x_w = x
        design = add(state.design, arm, x_w)[0]
        if full:
            dim, step = add(state.dim, arm, jnp.sqrt(R) * x)
            return LogisticGDState(theta, rows, design, dim, state.logdet + step, blocks)
        return LogisticGDState(theta, rows, design, add(state.dim, arm, x)[0], state.logdet, blocks)

    return Policy(init, act, update, PolicyMeta(name, Requirements(reward_range=(0.0, 1.0)), max_horizon=capacity))


def check_features(config: dict, env, horizon: int, where: str) -> None:
    """Refuse ``features = "disjoint"`` on an environment whose arms are not disjoint-encoded."""
    problem = disjoint.problem(env, where) if config.get("features") == "disjoint" else None
    if problem:
        raise ConfigError(problem)


EXPERIMENT_HYPERS = (
    Hyper("mode", SIGNATURE, "the authors' algorithm (original) or Bae & Lee's experiment mode (spec 001 §3: "
          "GD every train_every rounds, the d̃_t bonus scaled by nu)", kind=str, static=True,
          choices=("original", "experiment")),
    Hyper("nu", 1.0, "exploration scale ν (experiment mode; spec 001 §3.1 item 4: grid {0.01, 0.1, 1, 10, 100})",
          low=0.0),
    Hyper("lr", 0.01, "gradient-descent step (experiment mode)", low=0.0, low_open=True),
    Hyper("steps", SIGNATURE, "gradient steps per training (experiment mode)", kind=int, static=True, low=1),
    Hyper("train_every", SIGNATURE, "train at rounds t = n, 2n, … (experiment mode)", kind=int, static=True, low=1),
    Hyper("matrix", SIGNATURE, "full design matrices (Sherman–Morrison) or their diagonal (experiment mode)",
          kind=str, static=True, choices=MATRICES),
    Hyper("score_scale", SIGNATURE, "UCB score μ(xᵀθ) + σ (prob) or xᵀθ + σ (latent) (experiment mode)", kind=str,
          static=True, choices=SCORE_SCALES),
    Hyper("features", SIGNATURE, "read the arms' features as given (dense) or, for disjoint-encoded arms (the "
          "classification env), as the sample and its block, with block-diagonal matrices (disjoint; same "
          "results, experiment mode)", kind=str, static=True, choices=disjoint.FEATURES),
)
"""The hyperparameters both baselines gain with experiment mode."""
EXPERIMENT_ONLY = tuple(h.name for h in EXPERIMENT_HYPERS if h.name != "mode")
