"""Neural logistic bandits (Bae & Lee 2025): ``neurallog-ucb-1``, ``neurallog-ucb-2``, ``neurallog-ts-1``,
``neurallog-ts-2`` and the baseline ``ncbf-ucb`` (Verma et al. 2025), in the paper's experiment mode
(``mode = "experiment"``, spec 001 §3, from which all its figures come) or as written (``"theory"``,
§2: :func:`_theory`).

In experiment mode every policy is one composition of the same parts:

* the **network** of :mod:`nlbandit.models.mlp`, by default the paper's (L = 2, width m = 20, no √m output
  factor: spec 001 §3.1 items 2 and 6), float32, PyTorch's default nn.Linear layers, bias terms and
  initialisation included (§8 item 12, spec 001 Amendment item 4; ``bias = false`` is the former reading);
* its **training** on the binary cross-entropy (:mod:`nlbandit.models.mlp_train`, ``loss = "logistic"``)
  with the weight decay λ‖θ‖² (§3.1 item 3): by default 100 full-batch gradient steps of 0.01 on the mean
  loss (divided by t, §3.4 [REC]), warm-started, every 50 rounds (t = 50, 100, …: §3.1 item 8), or with
  ``optimizer = "minibatch"``, ``reduction = "sum"`` 100 steps each on a minibatch of ``batch_size`` = 50
  observations' summed loss (App. J.1's "batch size 50" as a minibatch size, Amendment item 2); before the
  first training the initial network predicts and the bonus explores (§3.4);
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
  read κ. UCB scores are f + σ (``score_scale = "latent"``) or μ(f) + σ (``"prob"``), by default on the
  scale of the policy's own algorithm (spec 001 Amendment item 1: latent for NCBF-UCB and NeuralLog-UCB-2,
  probability for NeuralLog-UCB-1; ``"prob"`` for all is the former reading); TS samples N(f, σ²) on the
  latent scale.

With ``features = "disjoint"`` (disjoint-encoded arms: the real-data figures) the network, its gradients,
the diagonal designs and the history are computed without the zeros of the encoding
(:mod:`nlbandit.models.disjoint`); the results are the same up to floating-point summation order.

ν and λ are fixed hyperparameters (the paper grid-searches them over {0.01, 0.1, 1, 10, 100}); S = 1 and
κ = 10 are plugged in, not estimated (§3.1 item 4).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import SIGNATURE, ConfigError, Hyper, forwards, signature_defaults
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models import disjoint
from nlbandit.models.history import Rows, add_row, empty_rows, history_capacity
from nlbandit.models.mlp import MLP, mlp_apply, mlp_grads, mlp_init
from nlbandit.models.mlp_train import Training, train, training_bytes
from nlbandit.models.ridge import cholesky_widths
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info, choose
from nlbandit.policies.neural import CONTRACT_NETWORK, F32, NEURAL_HYPERS, NeuralSetup, neural_setup

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


R = 0.25
"""R = 1/4, the bound on μ̇ of the logistic link (spec 001 §2.1)."""

SCORE_SCALES = ("prob", "latent")
MODES = ("experiment", "theory")


class NeuralLogState(NamedTuple):
    """State of the NeuralLog policies.

    Attributes:
      theta: (p,) the network's parameters; theta0: (p,) its initialisation.
      rows: the history of played contexts and rewards.
      design: (p,) the diagonal D of V or W.
      squares: (p,) G = Σ g_i ⊙ g_i, unweighted (the running effective dimension's).
      blocks: (capacity,) the played arm of each history row with ``features = "disjoint"`` (the rows then
        hold the d₀ features of the sample only), (0,) otherwise.
    """

    theta: jax.Array
    theta0: jax.Array
    rows: Rows
    design: jax.Array
    squares: jax.Array
    blocks: jax.Array

    def healthy(self) -> jax.Array:
        """Whether the network's parameters are finite (the engine's check, :func:`~nlbandit.core.types.healthy`)."""
        return jnp.all(jnp.isfinite(self.theta))


class Rule(NamedTuple):
    """What distinguishes the five policies (static)."""

    name: str
    weighted: bool  # a W-type design (weights μ̇ after training) rather than V-type
    sample: bool  # Thompson sampling on the latent scale rather than a UCB score
    dimension_scale: str  # c of d̃_t: "kappa" (1/κ) or "r" (R)
    factor: Any  # factor(params, d̃_t) -> F of σ(x) = ν·F·‖g‖_{D⁻¹}
    score_scale: str  # the scale its own algorithm scores on: "latent" (f) or "prob" (μ(f))


def _b(params, dtilde):
    """B(λ, S) = (1 + S + S²)(√d̃_t + λ^{−1/2}) + 1 (spec 001 §3.2)."""
    s = params.s
    return (1.0 + s + s * s) * (jnp.sqrt(dtilde) + 1.0 / jnp.sqrt(params.lam)) + 1.0


RULES = {
    "ncbf-ucb": Rule("ncbf-ucb", False, False, "kappa",
                     lambda p, dt: p.kappa * jnp.sqrt(dt) + p.s * jnp.sqrt(p.kappa * p.lam) + 1.0, "latent"),
    "neurallog-ucb-1": Rule("neurallog-ucb-1", False, False, "r", lambda p, dt: R * jnp.sqrt(p.kappa) * _b(p, dt),
                            "prob"),
    "neurallog-ucb-2": Rule("neurallog-ucb-2", True, False, "r", _b, "latent"),
    "neurallog-ts-1": Rule("neurallog-ts-1", False, True, "r", lambda p, dt: jnp.sqrt(p.kappa) * _b(p, dt), "latent"),
    "neurallog-ts-2": Rule("neurallog-ts-2", True, True, "r", _b, "latent"),
}
"""Each rule's default score scale is its algorithm's (spec 001 Amendment item 1): NCBF-UCB (Verma et al.'s
f + σ) and NeuralLog-UCB-2 (Algorithm 2's g(x; θ₀)ᵀ(θ − θ₀) + ν‖·‖) on the latent scale, NeuralLog-UCB-1
(Algorithm 1's μ(f) + σ) on the probability scale, the TS rules sample on the latent scale."""


def effective_dimension(squares: jax.Array, c: jax.Array) -> jax.Array:
    """d̃ ≈ Σ_j log(1 + c·G_j) for the per-coordinate sums of squares G (p,): log det(c Σ g gᵀ + I) with the
    matrix replaced by its diagonal, an upper bound by Hadamard's inequality (spec 001 §3.3)."""
    return jnp.sum(jnp.log1p(c * squares))


def _neurallog(rule: Rule, spec: ProblemSpec, score_scale: str, features: str = "dense",
               **options) -> Policy:
    """The policy of ``rule`` (module docstring) on the network and training of ``options``, reading the
    arms' ``features`` as given or in the compact form of :mod:`nlbandit.models.disjoint`."""
    setup: NeuralSetup = neural_setup(spec, **options)
    setup = setup._replace(how=setup.how._replace(loss="logistic"))
    arch, p = setup.arch, setup.arch.n_params
    net = disjoint.network(arch, spec.k, setup.how, features)
    compact = features == "disjoint"

    def design_floor(params):
        return params.lam if rule.weighted else params.kappa * params.lam

    def init(params, key):
        theta0 = mlp_init(arch, key, setup.init, F32)
        return NeuralLogState(theta0, theta0,
                              empty_rows(setup.capacity, spec.d // spec.k if compact else spec.d, None, F32),
                              jnp.full((p,), design_floor(params), F32), jnp.zeros((p,), F32),
                              jnp.zeros((setup.capacity if compact else 0,), jnp.int32))

    def act(params, state, key, contexts, mask, t):
        k_z, k_ties = jax.random.split(key)
        f = net.outputs(state.theta, contexts)
        c = 1.0 / params.kappa if rule.dimension_scale == "kappa" else R
        dtilde = effective_dimension(state.squares, c)
        sigma = params.nu * rule.factor(params, dtilde) * net.arm_widths(state.design, state.theta, contexts)
        if rule.sample:
            scores = f + sigma * normal(k_z, f.shape, F32)
        else:
            scores = (jax.nn.sigmoid(f) if score_scale == "prob" else f) + sigma
        arm, probability = choose(k_ties, scores, mask)
        return arm, act_info(scores[arm], (scores - f if rule.sample else sigma)[arm],
                             jnp.nan if rule.sample else probability)

    def update(params, state, key, contexts, arm, feedback, t):
        x = net.row(contexts, arm)
        g = net.played(state.theta, contexts, arm)  # at θ_{t−1}, the network that chose x
        blocks = state.blocks.at[state.rows.count].set(arm) if compact else state.blocks
        rows = add_row(state.rows, x, arm, feedback.reward.astype(F32), False)

        def fit():  # λ‖θ − anchor‖² is ½·(2λ)‖θ − anchor‖² in mlp_train's convention
            return net.train(state.theta, state.theta0, rows, blocks, 2.0 * params.lam, params.lr, key)

        theta = jax.lax.cond(t % setup.train_every == 0, fit, lambda: state.theta)
        if rule.weighted:  # μ̇(f(x_t; θ_t)), after this round's training
            f = net.output(theta, x, arm)
            weight = jax.nn.sigmoid(f) * jax.nn.sigmoid(-f)
        else:
            weight = 1.0
        return NeuralLogState(theta, state.theta0, rows, net.add(state.design, g, arm, weight),
                              net.add(state.squares, g, arm, 1.0), blocks)

    transients = (("selection: K per-arm gradients K·p", 4 * spec.k * p),
                  ("training: a block's activations", training_bytes(arch, setup.how, spec.k)))
    return Policy(init, act, update, PolicyMeta(rule.name, Requirements(reward_range=(0.0, 1.0)), F32, setup.capacity,
                                                transients=transients))


def _widths_logdet(matrix: jax.Array, g: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(‖g_k‖_{M⁻¹} for each row of ``g``, log det M) from one Cholesky factor of M. One LAPACK call rather
    than a Cholesky and an independent ``slogdet``: XLA's CPU runtime may run two independent LAPACK calls
    concurrently, and with vmapped operands that intermittently deadlocked its thread pool (measured with
    jax 0.10.2 on 2 cores: a 2-seed NCBF-UCB run hung in about one run of four)."""
    chol = jnp.linalg.cholesky(matrix)
    z = jax.scipy.linalg.solve_triangular(chol, g.T, lower=True)
    return jnp.sqrt(jnp.sum(z * z, axis=0)), 2.0 * jnp.sum(jnp.log(jnp.diagonal(chol)))


class TheoryState(NamedTuple):
    """State in theory mode.

    Attributes:
      theta, theta0, rows: as in :class:`NeuralLogState`.
      gram: (p, p) Σ_{i≤t} g_i g_iᵀ/m over the fixed features g_i = g(x_i; θ₀) (float64, spec 001 §8 item 24).
      weighted: (p, p) Σ_{i≤t} μ̇(f(x_i; θ_i)) g_i g_iᵀ/m for the W-type rules, a (1, 1) zero otherwise.
      lam, nu: λ_t and ν_t (ν⁽¹⁾ for V-type rules, ν⁽²⁾ for W-type; λ₀ and 1 at t = 0).
    """

    theta: jax.Array
    theta0: jax.Array
    rows: Rows
    gram: jax.Array
    weighted: jax.Array
    lam: jax.Array
    nu: jax.Array

    def healthy(self) -> jax.Array:
        """Whether the network's parameters are finite (the engine's check, :func:`~nlbandit.core.types.healthy`)."""
        return jnp.all(jnp.isfinite(self.theta))


def lambda0(depth: int, s, delta, c1):
    """λ₀ = 8√2·C1·√L·log(4/δ)/S (spec 001 §2.1)."""
    return 8.0 * math.sqrt(2.0) * c1 * math.sqrt(depth) * jnp.log(4.0 / delta) / s


def confidence(gram: jax.Array, t, depth: int, s, delta, c1, c_nu):
    """(λ_t, ν_t, ι_t, clamped) of spec 001 §2.1 after t ≥ 1 rounds, from ``gram`` = Σ g gᵀ/m:
    LD_t = log det(G_t/(4mλ₀) + I), ℓ_t = log(4t²/δ), ι_t = 16√(LD_t ℓ_t) + 8 C1 √(L/λ₀) ℓ_t (eq. 2),
    λ_t = (64/S²) LD_t ℓ_t + (16 C1² L/(S² λ₀)) ℓ_t² (eq. 3) clamped to ≥ λ₀ ([REC]; ``clamped`` says
    when that fired), and ν_t = C (1 + √L S + L S²) ι_t + 1 (eq. 1 with C = C6, Lemma 5.1 with C = C7)."""
    lam0 = lambda0(depth, s, delta, c1)
    ld = jnp.linalg.slogdet(gram / (4.0 * lam0) + jnp.eye(gram.shape[0], dtype=gram.dtype))[1]
    ell = jnp.log(4.0 * jnp.asarray(t, gram.dtype) ** 2 / delta)
    iota = 16.0 * jnp.sqrt(ld * ell) + 8.0 * c1 * jnp.sqrt(depth / lam0) * ell
    lam = 64.0 / s**2 * ld * ell + 16.0 * c1**2 * depth / (s**2 * lam0) * ell**2
    nu = c_nu * (1.0 + math.sqrt(depth) * s + depth * s**2) * iota + 1.0
    return jnp.maximum(lam, lam0), nu, iota, lam < lam0


def _theory(rule: Rule, spec: ProblemSpec, width: int, depth: int, duplicate: bool, steps: int, **unused) -> Policy:
    """The policy of ``rule`` as written (spec 001 §2): fixed NTK features g(x; θ₀)/√m of the symmetric θ₀,
    full float64 matrices, the adaptive λ_t and ν_t of :func:`confidence`, and TrainNN from θ₀ every round
    (J = ``steps`` full-batch gradient steps of η = C5/(mTL + mλ_t), Condition 4.4, on the summed
    cross-entropy + (mλ_t/2)‖θ − θ₀‖²). NCBF-UCB keeps its constant λ (``lam``) and scores
    f(x; θ_{t−1}) + (κ√(d̃_t + 2 log(1/δ)) + S√(κλ) + 1)‖g/√m‖_{V⁻¹}, d̃_t = log det(G_t/(mκλ) + I)."""
    arch = MLP(spec.d, width, depth, duplicate, "ntk")
    how = Training(steps, "gd", "sum", "init", "width", from_init=True, history=True, loss="logistic")
    capacity, p, root_m = history_capacity(spec.horizon), arch.n_params, math.sqrt(width)
    f64 = jnp.float64

    def init(params, key):
        theta0 = mlp_init(arch, key, "symmetric", F32)
        size = p if rule.weighted else 1
        return TheoryState(theta0, theta0, empty_rows(capacity, spec.d, None, F32), jnp.zeros((p, p), f64),
                           jnp.zeros((size, size), f64), lambda0(depth, params.s, params.delta, params.c1).astype(f64),
                           jnp.ones((), f64))

    def act(params, state, key, contexts, mask, t):
        k_z, k_ties = jax.random.split(key)
        g = mlp_grads(arch, state.theta0, contexts).astype(f64)  # g(x; θ₀), (K, p)
        eye = jnp.eye(p, dtype=f64)
        if rule.name == "ncbf-ucb":
            kl = params.kappa * params.lam
            widths, logdet = _widths_logdet(state.gram + kl * eye, g / root_m)
            dtilde = logdet - p * jnp.log(kl)  # log det(G/(κλ) + I)
            factor = params.kappa * jnp.sqrt(dtilde + 2.0 * jnp.log(1.0 / params.delta)) + params.s * jnp.sqrt(kl) + 1.0
        elif rule.weighted:
            factor, widths = state.nu, cholesky_widths(state.weighted + state.lam * eye, g / root_m)
        else:
            factor = (1.0 if rule.sample else R) * jnp.sqrt(params.kappa) * state.nu
            widths = cholesky_widths(state.gram + params.kappa * state.lam * eye, g / root_m)
        sigma = (factor * widths).astype(F32)
        if rule.weighted:  # Algorithm 2's linearised mean g(x; θ₀)ᵀ(θ_{t−1} − θ₀)
            mean = (g @ (state.theta - state.theta0).astype(f64)).astype(F32)
        else:
            mean = mlp_apply(arch, state.theta, contexts)
        if rule.sample:
            scores = mean + sigma * normal(k_z, mean.shape, F32)
        else:
            scores = (jax.nn.sigmoid(mean) if rule.name == "neurallog-ucb-1" else mean) + sigma
        arm, probability = choose(k_ties, scores, mask)
        return arm, act_info(scores[arm], (scores - mean if rule.sample else sigma)[arm],
                             jnp.nan if rule.sample else probability)

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm]
        g = mlp_grads(arch, state.theta0, x[None])[0].astype(f64) / root_m
        gram = state.gram + jnp.outer(g, g)
        if rule.name == "ncbf-ucb":
            lam, nu = jnp.asarray(params.lam, f64), state.nu
        else:
            lam, nu, _, _ = confidence(gram, t, depth, params.s, params.delta, params.c1,
                                       params.c7 if rule.weighted else params.c6)
        rows = add_row(state.rows, x, arm, feedback.reward.astype(F32), False)
        eta = params.c5 / (width * spec.horizon * depth + width * lam)
        theta = train(arch, how, state.theta, state.theta0, rows, lam.astype(F32), eta.astype(F32), key)
        weighted = state.weighted
        if rule.weighted:  # μ̇(f(x_t; θ_t)) with the network just trained
            f = mlp_apply(arch, theta, x)
            weighted = weighted + (jax.nn.sigmoid(f) * jax.nn.sigmoid(-f)).astype(f64) * jnp.outer(g, g)
        return TheoryState(theta, state.theta0, rows, gram, weighted, lam, nu)

    transients = (("selection: float64 gradients K·p and a Cholesky factor p²", 8 * (spec.k * p + p * p)),
                  ("training: a block's activations", training_bytes(arch, how, spec.k)))
    return Policy(init, act, update, PolicyMeta(rule.name, Requirements(reward_range=(0.0, 1.0)), F32, capacity,
                                                transients=transients))


# Bytes of theory mode's float64 p × p matrices (per seed) above which a configuration is refused.
THEORY_MATRIX_LIMIT = 2**30


def _check(config: dict[str, Any], env: Env, horizon: int, where: str) -> None:
    """An architecture the initialisation can build (spec 001 §1.2: the symmetric one, always used in theory
    mode, needs an even width and input dimension: duplicate the input), and theory mode's full matrices of
    a reasonable size."""
    theory = config["mode"] == "theory"
    arch = MLP(env.spec.d, config["width"], config["depth"], config["duplicate"],
               "ntk" if theory else config["output_scale"], config["bias"] and not theory)
    problem = arch.check("symmetric" if theory else config["init"], where)
    if not problem and config["features"] == "disjoint":
        problem = (f"{where}: field 'features' = 'disjoint' does not take duplicate = true" if config["duplicate"]
                   else f"{where}: field 'features' = 'disjoint' trains by full-batch gradient descent only (optimizer "
                   f"= 'gd', got '{config['optimizer']}'); use features = 'dense'" if config["optimizer"] != "gd"
                   else disjoint.problem(env, where))
    if problem:
        raise ConfigError(problem)
    if theory and 8 * arch.n_params**2 > THEORY_MATRIX_LIMIT:
        raise ConfigError(f"{where}: field 'mode' = 'theory' keeps full {arch.n_params} × {arch.n_params} float64 "
                          f"matrices per seed ({8 * arch.n_params**2 / 2**30:.1f} GiB each); use mode = "
                          "'experiment' (diagonal matrices) or a smaller network")


_EXPERIMENT_ONLY = ("nu", "lr", "init", "output_scale", "anchor", "reg_scale", "reduction", "from_init",
                    "train_every", "score_scale", "features", "bias", "optimizer", "batch_size")


def _finalize(rule: Rule, entry: PolicyEntry, values: dict[str, Any]) -> dict[str, Any]:
    """Refuse experiment-mode fields set away from their defaults (``entry``'s) in theory mode, where the theory
    fixes them (spec 001 §2), and a TS rule's score scale other than the latent one it samples on."""
    if rule.sample and values["score_scale"] != "latent":
        raise ConfigError(f"field 'score_scale': {rule.name} samples on the latent scale (N(f, σ²)); only "
                          "'latent' applies")
    if values["mode"] == "theory":
        defaults = {h.name: h.default for h in entry.hypers}
        for name in _EXPERIMENT_ONLY:
            if values[name] != defaults[name]:
                raise ConfigError(f"field '{name}' applies to mode = 'experiment' only; theory mode uses the "
                                  "bias-free network, the symmetric θ₀, the √m output, TrainNN from θ₀ every round "
                                  "and its own λ_t, ν_t")
    return values


_DEFAULTS = {  # spec 001 §3.5: the paper's experiment-mode network and schedule
    "depth": 2, "output_scale": "none", "init": "standard", "anchor": "zero", "reg_scale": "one", "train_every": 50,
    "lam": 1.0, "duplicate": False, "batch_size": 50, "bias": True,
}
_DOCS = {
    "lam": "λ of the loss λ‖θ − anchor‖² (times m with reg_scale = 'width') and of the designs (κλ or λ)",
    "train_every": "train at rounds t = n, 2n, … (spec 001 §3.1 item 8: 50)",
    "duplicate": "feed [x; x]/√2 (makes f(x; θ₀) = 0 and the input dimension even; theory mode's symmetric "
                 "initialisation needs it for odd d)",
    "optimizer": "full-batch gradient descent (gd: with reduction = 'mean', spec 001 §3.4's reading), gradient "
                 "descent on minibatches of batch_size distinct observations, each step on its batch's loss "
                 "(minibatch: with reduction = 'sum', App. J.1's 'batch size 50' read as a minibatch size, spec 001 "
                 "Amendment item 2), or sgd / adam as for the other neural policies",
    "batch_size": "B, observations per minibatch step (App. J.1: 50); optimizer = 'minibatch' only",
}
_SHARED = tuple(replace(h, default=_DEFAULTS.get(h.name, h.default), doc=_DOCS.get(h.name, h.doc),
                        optional=h.optional and h.name not in _DEFAULTS,
                        from_signature=h.from_signature and h.name not in _DEFAULTS)
                for h in signature_defaults(NEURAL_HYPERS, neural_setup, "neurallog")
                if h.name not in ("backend", "warmup_rounds"))
"""The network and training options of :func:`~nlbandit.policies.neural.neural_setup` (its defaults), with the
paper's experiment-mode values (:data:`_DEFAULTS`) in place of some: every field is passed on explicitly."""
_OWN = (
    Hyper("nu", 1.0, "exploration scale ν (spec 001 §3.1 item 4: grid {0.01, 0.1, 1, 10, 100})", low=0.0),
    Hyper("kappa", 10.0, "κ, the bound on 1/μ̇ plugged into the bonus (spec 001 §3.5: 10)", low=1.0),
    Hyper("s", 1.0, "S, the parameter-norm bound plugged into the bonus (spec 001 §3.5: 1)", low=0.0, low_open=True),
    Hyper("score_scale", "prob", "UCB score μ(f) + σ (prob) or f + σ (latent); default: the algorithm's own "
          "(latent for NCBF-UCB and NeuralLog-UCB-2, prob for NeuralLog-UCB-1, spec 001 Amendment item 1); TS "
          "samples on the latent scale",
          kind=str, static=True, choices=SCORE_SCALES),
    Hyper("features", SIGNATURE, "read the arms' features as given (dense) or, for disjoint-encoded arms (the "
          "classification env), as the sample and its block (disjoint: nothing of size d₀K per arm, "
          ":mod:`nlbandit.models.disjoint`; same results)", kind=str, static=True, choices=disjoint.FEATURES),
    Hyper("mode", SIGNATURE, "the paper's practical adjustments (experiment, spec 001 §3) or the algorithms as "
          "written (theory, §2: full matrices, for small p)", kind=str, static=True, choices=MODES),
    Hyper("delta", 0.05, "confidence level δ (theory mode)", low=0.0, high=1.0, low_open=True, high_open=True),
    Hyper("c1", 1.0, "absolute constant C1 of λ₀, ι_t, λ_t (theory mode)", low=0.0, low_open=True),
    Hyper("c5", 1.0, "absolute constant C5 of the step size η = C5/(mTL + mλ_t) (theory mode)", low=0.0,
          low_open=True),
    Hyper("c6", 1.0, "absolute constant C6 of ν⁽¹⁾ (theory mode)", low=0.0, low_open=True),
    Hyper("c7", 1.0, "absolute constant C7 of ν⁽²⁾ (theory mode)", low=0.0, low_open=True),
)


def _entry(rule: Rule, doc: str) -> PolicyEntry:
    @forwards(_neurallog)
    def make(spec, mode="experiment", **options):
        return _neurallog(rule, spec, **options) if mode == "experiment" else _theory(rule, spec, **options)

    hypers = tuple(replace(h, default=rule.score_scale) if h.name == "score_scale" else h for h in _OWN) + _SHARED
    entry = PolicyEntry(rule.name, make, hypers, doc, check=_check,
                        finalize=lambda values: _finalize(rule, entry, values),
                        test_hypers=lambda spec: CONTRACT_NETWORK)
    return entry


ENTRIES = (
    _entry(RULES["ncbf-ucb"], "NCBF-UCB (Verma et al. 2025): f + ν(κ√d̃ + S√(κλ) + 1)‖g‖_{V⁻¹} (experiment mode)"),
    _entry(RULES["neurallog-ucb-1"], "NeuralLog-UCB-1 (Bae & Lee 2025, Alg. 1): μ(f) + νR√κ·B‖g‖_{V⁻¹} (experiment)"),
    _entry(RULES["neurallog-ucb-2"], "NeuralLog-UCB-2 (Bae & Lee 2025, Alg. 2): f + ν·B‖g‖_{W⁻¹} (experiment mode)"),
    _entry(RULES["neurallog-ts-1"], "NeuralLog-TS-1 (Bae & Lee 2025, App. I): N(f, (ν√κ·B‖g‖_{V⁻¹})²) (experiment)"),
    _entry(RULES["neurallog-ts-2"], "NeuralLog-TS-2 (Bae & Lee 2025, App. I): N(f, (ν·B‖g‖_{W⁻¹})²) (experiment mode)"),
)
