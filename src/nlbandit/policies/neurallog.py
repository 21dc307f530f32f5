"""Neural logistic bandits (Bae & Lee 2025): ``neurallog-ucb-1``, ``neurallog-ucb-2``, ``neurallog-ts-1``,
``neurallog-ts-2`` and the baseline ``ncbf-ucb`` (Verma et al. 2025), in the paper's experiment mode
(spec 001 §3, from which all its figures come).

Every policy is one composition of the same parts:

* the **network** of :mod:`nlbandit.models.mlp`, by default the paper's (L = 2, width m = 20, no √m output
  factor: spec 001 §3.1 items 2 and 6), float32;
* its **training** on the binary cross-entropy (:mod:`nlbandit.models.mlp_train`, ``loss = "logistic"``)
  with the weight decay λ‖θ‖² (§3.1 item 3; the loss is divided by t, §3.4 [REC]): 100 full-batch
  gradient steps of 0.01, warm-started, every 50 rounds (t = 50, 100, …: §3.1 item 8); before the first
  training the initial network predicts and the bonus explores (§3.4);
* a **diagonal design** D over the gradients g_i = g(x_i; θ_{i−1}) of the played contexts, taken at the
  network that chose them (§3.1 item 1, §3.3): ``V``-type D = κλ + Σ g_i ⊙ g_i (NCBF-UCB, UCB-1, TS-1), or
  ``W``-type D = λ + Σ μ̇(f(x_i; θ_i)) g_i ⊙ g_i (UCB-2, TS-2), each weight taken after round i's training
  (Algorithm 2) and then frozen;
* a **running effective dimension** d̃_t = Σ_j log(1 + c G_j), G = Σ_{i<t} g_i ⊙ g_i, with c = 1/κ for
  NCBF-UCB and c = R = 1/4 for the NeuralLog policies (§3.1 item 5, §3.3: Hadamard's upper bound of the
  log det);
* an **exploration rule** (§3.2's table), a bonus or a Gaussian sample of width σ(x) = ν·F·‖g_t(x)‖_{D⁻¹}
  with F = κ√d̃_t + S√(κλ) + 1 (NCBF-UCB), R√κ·B (UCB-1), B (UCB-2, TS-2) or √κ·B (TS-1), where
  B = (1 + S + S²)(√d̃_t + λ^{−1/2}) + 1. The κ-dependence is exactly the table's: UCB-2 and TS-2 never
  read κ. UCB scores are μ(f) + σ (``score_scale = "prob"``, the default) or f + σ (``"latent"``); TS
  samples N(f, σ²) on the latent scale.

ν and λ are fixed hyperparameters (the paper grid-searches them over {0.01, 0.1, 1, 10, 100}); S = 1 and
κ = 10 are plugged in, not estimated (§3.1 item 4).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, Policy, ProblemSpec, Requirements
from nlbandit.models.history import Rows, add_row, empty_rows
from nlbandit.models.mlp import MLP, mlp_apply, mlp_grads, mlp_init
from nlbandit.models.mlp_train import train
from nlbandit.models.ridge import diagonal_widths
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info, choose
from nlbandit.policies.neural import F32, NEURAL_HYPERS, NeuralSetup, neural_setup

R = 0.25
"""R = 1/4, the bound on μ̇ of the logistic link (spec 001 §2.1)."""

SCORE_SCALES = ("prob", "latent")


class NeuralLogState(NamedTuple):
    """State of the NeuralLog policies.

    Attributes:
      theta: (p,) the network's parameters; theta0: (p,) its initialisation.
      rows: the history of played contexts and rewards.
      design: (p,) the diagonal D of V or W.
      squares: (p,) G = Σ g_i ⊙ g_i, unweighted (the running effective dimension's).
    """

    theta: jax.Array
    theta0: jax.Array
    rows: Rows
    design: jax.Array
    squares: jax.Array


class Rule(NamedTuple):
    """What distinguishes the five policies (static)."""

    name: str
    weighted: bool  # a W-type design (weights μ̇ after training) rather than V-type
    sample: bool  # Thompson sampling on the latent scale rather than a UCB score
    dimension_scale: str  # c of d̃_t: "kappa" (1/κ) or "r" (R)
    factor: Any  # factor(params, d̃_t) -> F of σ(x) = ν·F·‖g‖_{D⁻¹}


def _b(params, dtilde):
    """B(λ, S) = (1 + S + S²)(√d̃_t + λ^{−1/2}) + 1 (spec 001 §3.2)."""
    s = params.s
    return (1.0 + s + s * s) * (jnp.sqrt(dtilde) + 1.0 / jnp.sqrt(params.lam)) + 1.0


RULES = {
    "ncbf-ucb": Rule("ncbf-ucb", False, False, "kappa",
                     lambda p, dt: p.kappa * jnp.sqrt(dt) + p.s * jnp.sqrt(p.kappa * p.lam) + 1.0),
    "neurallog-ucb-1": Rule("neurallog-ucb-1", False, False, "r", lambda p, dt: R * jnp.sqrt(p.kappa) * _b(p, dt)),
    "neurallog-ucb-2": Rule("neurallog-ucb-2", True, False, "r", _b),
    "neurallog-ts-1": Rule("neurallog-ts-1", False, True, "r", lambda p, dt: jnp.sqrt(p.kappa) * _b(p, dt)),
    "neurallog-ts-2": Rule("neurallog-ts-2", True, True, "r", _b),
}


def effective_dimension(squares: jax.Array, c: jax.Array) -> jax.Array:
    """d̃ ≈ Σ_j log(1 + c·G_j) for the per-coordinate sums of squares G (p,): log det(c Σ g gᵀ + I) with the
    matrix replaced by its diagonal, an upper bound by Hadamard's inequality (spec 001 §3.3)."""
    return jnp.sum(jnp.log1p(c * squares))


def _neurallog(rule: Rule, spec: ProblemSpec, score_scale: str = "prob", **options) -> Policy:
    """The policy of ``rule`` (module docstring) on the network and training of ``options``."""
    setup: NeuralSetup = neural_setup(spec, **options)
    setup = setup._replace(how=setup.how._replace(loss="logistic"))
    arch, p = setup.arch, setup.arch.n_params

    def design_floor(params):
        return params.lam if rule.weighted else params.kappa * params.lam

    def init(params, key):
        theta0 = mlp_init(arch, key, setup.init, F32)
        return NeuralLogState(theta0, theta0, empty_rows(setup.capacity, spec.d, None, F32),
                              jnp.full((p,), design_floor(params), F32), jnp.zeros((p,), F32))

    def act(params, state, key, contexts, mask, t):
        k_z, k_ties = jax.random.split(key)
        f = mlp_apply(arch, state.theta, contexts)
        c = 1.0 / params.kappa if rule.dimension_scale == "kappa" else R
        dtilde = effective_dimension(state.squares, c)
        sigma = params.nu * rule.factor(params, dtilde) * diagonal_widths(state.design,
                                                                           mlp_grads(arch, state.theta, contexts))
        if rule.sample:
            scores = f + sigma * normal(k_z, f.shape, F32)
        else:
            scores = (jax.nn.sigmoid(f) if score_scale == "prob" else f) + sigma
        arm, probability = choose(k_ties, scores, mask)
        return arm, act_info(scores[arm], (scores - f if rule.sample else sigma)[arm],
                             jnp.nan if rule.sample else probability)

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm]
        g = mlp_grads(arch, state.theta, x[None])[0]  # at θ_{t−1}, the network that chose x
        rows = add_row(state.rows, x, arm, feedback.reward.astype(F32), False)
        theta = jax.lax.cond(t % setup.train_every == 0, lambda: train(arch, setup.how, state.theta, state.theta0, rows, 2.0 * params.lam,
                                                params.lr, key), lambda: state.theta)
        if rule.weighted:  # μ̇(f(x_t; θ_t)), after this round's training
            f = mlp_apply(arch, theta, x)
            weight = jax.nn.sigmoid(f) * jax.nn.sigmoid(-f)
        else:
            weight = 1.0
        return NeuralLogState(theta, state.theta0, rows, state.design + weight * g * g, state.squares + g * g)

    def healthy(state):
        return jnp.all(jnp.isfinite(state.theta))

    return Policy(rule.name, init, act, update, setup.capacity, None, Requirements(reward_range=(0.0, 1.0)),
                  dtype=F32, healthy=healthy)


def _check(config: dict[str, Any], env: Env, horizon: int, where: str) -> None:
    """An architecture the initialisation can build (spec 001 §1.2: the symmetric one needs an even input
    dimension: duplicate it)."""
    arch = MLP(env.spec.d, config["width"], config["depth"], config["duplicate"], config["output_scale"])
    problem = arch.check(config["init"], where)
    if problem:
        raise ConfigError(problem)


_DEFAULTS = {  # spec 001 §3.5: the paper's experiment-mode network and schedule
    "depth": 2, "output_scale": "none", "anchor": "zero", "reg_scale": "one", "train_every": 50,
    "lam": 1.0,
}
_DOCS = {
    "lam": "λ of the loss λ‖θ − anchor‖² (times m with reg_scale = 'width') and of the designs (κλ or λ)",
    "train_every": "train at rounds t = n, 2n, … (spec 001 §3.1 item 8: 50)",
}
_SHARED = tuple(replace(h, default=_DEFAULTS.get(h.name, h.default), doc=_DOCS.get(h.name, h.doc))
                for h in NEURAL_HYPERS if h.name not in ("backend", "optimizer", "batch_size", "warmup_rounds"))
_OWN = (
    Hyper("nu", 1.0, "exploration scale ν (spec 001 §3.1 item 4: grid {0.01, 0.1, 1, 10, 100})", low=0.0),
    Hyper("kappa", 10.0, "κ, the bound on 1/μ̇ plugged into the bonus (spec 001 §3.5: 10)", low=1.0),
    Hyper("s", 1.0, "S, the parameter-norm bound plugged into the bonus (spec 001 §3.5: 1)", low=0.0, low_open=True),
    Hyper("score_scale", "prob", "UCB score μ(f) + σ (prob) or f + σ (latent); TS samples on the latent scale",
          kind=str, static=True, choices=SCORE_SCALES),
)


def _entry(rule: Rule, doc: str) -> PolicyEntry:
    def make(spec, **options):
        return _neurallog(rule, spec, **options)

    return PolicyEntry(rule.name, make, _OWN + _SHARED, doc, check=_check)


ENTRIES = (
    _entry(RULES["ncbf-ucb"], "NCBF-UCB (Verma et al. 2025), experiment mode: μ(f) + ν(κ√d̃ + S√(κλ) + 1)‖g‖_{V⁻¹}"),
    _entry(RULES["neurallog-ucb-1"], "NeuralLog-UCB-1 (Bae & Lee 2025, Alg. 1), experiment mode: μ(f) + νR√κ·B‖g‖_{V⁻¹}"),
    _entry(RULES["neurallog-ucb-2"], "NeuralLog-UCB-2 (Bae & Lee 2025, Alg. 2), experiment mode: μ(f) + ν·B‖g‖_{W⁻¹}"),
    _entry(RULES["neurallog-ts-1"], "NeuralLog-TS-1 (Bae & Lee 2025, App. I), experiment mode: N(f, (ν√κ·B‖g‖_{V⁻¹})²)"),
    _entry(RULES["neurallog-ts-2"], "NeuralLog-TS-2 (Bae & Lee 2025, App. I), experiment mode: N(f, (ν·B‖g‖_{W⁻¹})²)"),
)
