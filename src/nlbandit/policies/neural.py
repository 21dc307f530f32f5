"""Neural bandit policies: ``neural-ucb``, ``neural-ts``, ``neural-phe``, ``neural-es``, ``neural-greedy``.

Every policy here is one composition of the same parts:

* the **network** of :mod:`nlbandit.models.mlp` (ReLU MLP, L = ``depth``, N = ``width``, bias-free unless
  ``bias``; the block-symmetric NTK initialisation θ₀ by default), float32 throughout;
* its **training** (:mod:`nlbandit.models.mlp_train`): ``steps`` full-batch gradient steps of ``lr`` on
  the regularised squared loss (spec 003 §1.4), warm-started, every ``train_every`` rounds once the
  warm-up is over, on the history buffer (``backend = "history"``) or, on a fixed arm set, on per-arm
  statistics (``"arms"``: the same loss exactly, a step costs O(K·network) whatever t is);
* a **warm-up** of one pull per arm (``warmup_rounds`` = K by default; spec 003 §3: "all neural
  baselines pull each arm once first"), round-robin over the arm indices;
* an **exploration rule**: a width over gradient features (UCB, TS), perturbed history (PHE), an
  ensemble (ES), or ε-greedy.

Spec 003 §3 [REC] is followed for the baselines: all of them share Neural-ES's network and training, so
only the exploration rule differs (the reference code's PyTorch initialisation, unscaled output and sparser
training cadence are options, ``init = "standard"``, ``output_scale = "none"``, ``train_every``; its per-sample
SGD is minibatch SGD with B = 1, ``optimizer = "sgd"``). The confidence design is
Z = λI + Σ g gᵀ over the gradients g = ∇_θ f(x; θ) at the *current* θ of the chosen arms (the reference
code's; the theory uses θ₀ and g/√N), kept diagonal (``design = "diagonal"``, U += g ⊙ g) or full
(``"full"``, Sherman–Morrison; for small p).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import SIGNATURE, ConfigError, Hyper, forwards
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models.history import Rows, add_row, empty_rows, history_capacity, history_noise
from nlbandit.models.mlp import INITS, MLP, SCALES, mlp_apply, mlp_grads, mlp_init
from nlbandit.models.mlp_train import ANCHORS, OPTIMIZERS, REDUCTIONS, REG_SCALES, Training, train, training_bytes
from nlbandit.models.ridge import diagonal_widths, gram_update, mahalanobis_widths
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import (act_info, choose, ensemble_probability, epsilon_greedy, greedy_choice,
                                           member_and_tie_words, member_draw)
from nlbandit.policies.linear import M_USED, SIGMA_R, members_used
from nlbandit.policies.warmup import Warmup, empty_warmup, plan_warmup, warmup_arm

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


F32 = "float32"


class NeuralSetup(NamedTuple):
    """The static choices shared by every neural policy (see :func:`neural_setup`)."""

    spec: ProblemSpec
    arch: MLP
    how: Training
    init: str
    capacity: int
    warmup_rounds: int
    train_every: int

    @property
    def per_arm(self) -> bool:
        """Per-arm statistics of a fixed arm set rather than a history buffer."""
        return not self.how.history


class NeuralState(NamedTuple):
    """State of the neural policies.

    Attributes:
      theta: (p,) the network's parameters, or (m, p) an ensemble's.
      theta0: (p,) the initialisation (shared by all members; the regulariser's anchor).
      rows: the data (:class:`~nlbandit.models.history.Rows`; responses (C, m) for an ensemble).
      design: (p,) the diagonal U, or (p, p) the inverse Z⁻¹ of the full design; () when unused.
      warmup: the one-pull-per-arm plan.
    """

    theta: jax.Array
    theta0: jax.Array
    rows: Rows
    design: jax.Array
    warmup: Warmup

    def healthy(self) -> jax.Array:
        """Whether the network's parameters are finite (the engine's check, :func:`~nlbandit.core.types.healthy`)."""
        return jnp.all(jnp.isfinite(self.theta))


def needs_duplicate(init: str, d: int) -> bool:
    """What an omitted ``duplicate`` means: feed [x; x]/√2 exactly when the symmetric initialisation needs it,
    an odd input dimension d (:meth:`~nlbandit.models.mlp.MLP.check`), so the defaults build for every d."""
    return init == "symmetric" and d % 2 == 1


def neural_setup(spec: ProblemSpec, width: int = 20, depth: int = 3, init: str = "symmetric",
                 duplicate: bool | None = None, output_scale: str = "ntk", steps: int = 100, optimizer: str = "gd",
                 reduction: str = "mean", anchor: str = "init", reg_scale: str = "width", from_init: bool = False,
                 backend: str = "history", train_every: int = 1, warmup_rounds: int | None = None,
                 batch_size: int = 1, bias: bool = False) -> NeuralSetup:
    """The static choices of a neural policy (the hyperparameters of :data:`NEURAL_HYPERS`)."""
    duplicate = needs_duplicate(init, spec.d) if duplicate is None else duplicate
    arch = MLP(spec.d, width, depth, duplicate, output_scale, bias)
    how = Training(steps, optimizer, reduction, anchor, reg_scale, from_init, backend == "history", batch_size)
    capacity = history_capacity(spec.horizon) if backend == "history" else spec.k
    rounds = spec.k if warmup_rounds is None else warmup_rounds
    return NeuralSetup(spec, arch, how, init, capacity, rounds, train_every)


def _policy(name: str, setup: NeuralSetup, act, learn, members: int | None = None,
            design: str | None = None) -> Policy:
    """A neural policy from its ``act`` and its ``learn(params, state, key, x, arm, reward) -> (state,
    rows to train on)``: the shared init/prepare, and an update that trains on the cadence."""
    arch, p = setup.arch, setup.arch.n_params

    def init(params, key):
        theta0 = mlp_init(arch, key, setup.init, F32)
        theta = theta0 if members is None else jnp.tile(theta0, (members, 1))
        if design == "diagonal":
            z = params.lam * jnp.ones((p,), F32)
        elif design == "full":
            z = jnp.eye(p, dtype=F32) / params.lam
        else:
            z = jnp.zeros((), F32)
        rows = empty_rows(setup.capacity, setup.spec.d, members, F32)
        return NeuralState(theta, theta0, rows, z, empty_warmup(max(setup.warmup_rounds, 1)))

    def prepare(params, state, key, arms, mask):
        plan = plan_warmup("round-robin", arms, key, max(setup.warmup_rounds, 1), setup.warmup_rounds, 1)
        rows = state.rows._replace(x=arms.astype(F32)) if setup.per_arm else state.rows
        return state._replace(rows=rows, warmup=plan)

    def update(params, state, key, contexts, arm, feedback, t):
        state, rows = learn(params, state, key, contexts[arm], arm, feedback.reward)
        due = (t >= setup.warmup_rounds) & ((t - setup.warmup_rounds) % setup.train_every == 0)
        theta = jax.lax.cond(due, lambda: train(arch, setup.how, state.theta, state.theta0, rows, params.lam,
                                                params.lr, jax.random.fold_in(key, 1)), lambda: state.theta)
        return state._replace(theta=theta)

    m, k = members or 1, setup.spec.k
    selection = ("selection: the ensemble's K·m scores", 4 * k * m) if design is None else (
        f"selection: K per-arm gradients K·p{' and Z⁻¹g' if design == 'full' else ''}",
        4 * k * p * (2 if design == "full" else 1))
    training = ("training: a block's activations", training_bytes(arch, setup.how, k, m))
    meta = PolicyMeta(name, Requirements(fixed_arms=setup.per_arm), F32, None if setup.per_arm else setup.capacity,
                      transients=(selection, training))
    return Policy(init, act, update, meta, prepare)


def _append(setup: NeuralSetup, state: NeuralState, x, arm, y) -> NeuralState:
    """``state`` with the observation (x, y) of arm ``arm`` added to its rows."""
    return state._replace(rows=add_row(state.rows, x, arm, y, setup.per_arm))


def _widths(design: jax.Array, grads: jax.Array) -> jax.Array:
    """‖g‖_{Z⁻¹} for every row of ``grads`` (K, p): diagonal U (p,) or full inverse Z⁻¹ (p, p)."""
    return diagonal_widths(design, grads) if design.ndim == 1 else mahalanobis_widths(design, grads)


def _design_learner(setup: NeuralSetup):
    """``learn`` of UCB and TS: add the chosen arm's gradient at the current θ to Z, then its reward."""

    def learn(params, state, key, x, arm, reward):
        g = mlp_grads(setup.arch, state.theta, x[None])[0]
        z = state.design + g * g if state.design.ndim == 1 else gram_update(state.design, g)[0]
        state = _append(setup, state._replace(design=z), x, arm, reward)
        return state, state.rows

    return learn


def _planned(state: NeuralState, t, chosen, mask, scores, bonus=None, probability=jnp.nan):
    """(arm, info) of a round: the warm-up's arm (probability 1) while it lasts, else ``chosen``; ``bonus``
    (K,) the exploration part of ``scores``, if any."""
    arm, planned = warmup_arm(state.warmup, t, chosen, mask)
    return arm, act_info(scores[arm], jnp.nan if bonus is None else bonus[arm], jnp.where(planned, 1.0, probability))


def _append_learner(setup: NeuralSetup, targets=lambda params, key, reward: reward):
    """``learn`` that stores the observation with response ``targets(params, key, reward)`` (the reward, or
    an ensemble's perturbed copies) and trains on the stored data."""

    def learn(params, state, key, x, arm, reward):
        state = _append(setup, state, x, arm, targets(params, key, reward))
        return state, state.rows

    return learn


@forwards(neural_setup)
def neural_ucb(spec: ProblemSpec, design: str = "diagonal", **options) -> Policy:
    """NeuralUCB (Zhou, Li & Gu 2020, Algorithm 1), in the practical form of spec 003 §3:
    score_k = f(x_k; θ) + √(λν) ‖g_k‖_{Z⁻¹}, g_k = ∇_θ f(x_k; θ) at the current θ, Z = λI + Σ g gᵀ over the
    chosen arms (diagonal by default: √(λν Σ_i g_{k,i}²/U_i), the reference code's rule). Deviation from
    the paper: the constant ν (param ``nu``) replaces the theory radius γ_t, the gradients are not divided
    by √N, and Z uses the current rather than the initial network's gradients (both as in the reference
    code; spec ``reference_code.md`` §3.13). ``info.bonus`` is the chosen arm's width term."""
    setup = neural_setup(spec, **options)

    def act(params, state, key, contexts, mask, t):
        mean = mlp_apply(setup.arch, state.theta, contexts)
        bonus = jnp.sqrt(params.lam * params.nu) * _widths(state.design, mlp_grads(setup.arch, state.theta, contexts))
        scores = mean + bonus
        chosen, p = choose(key, scores, mask)
        return _planned(state, t, chosen, mask, scores, bonus, p)

    return _policy("neural-ucb", setup, act, _design_learner(setup), design=design)


@forwards(neural_setup)
def neural_ts(spec: ProblemSpec, design: str = "diagonal", **options) -> Policy:
    """NeuralTS (Zhang, Zhou, Li & Gu 2021, Algorithm 1), in the practical form of spec 003 §3: every arm
    gets r̃_k ~ N(f(x_k; θ), σ_k²) with σ_k = √(λν) ‖g_k‖_{Z⁻¹} (the same g and Z as :func:`neural_ucb`),
    and the arm with the largest sample is played. Deviation from the paper: σ_k² = λν gᵀZ⁻¹g rather than
    ν² λ gᵀZ⁻¹g/N (ν is a tuned constant either way). ``info.bonus`` is the sample minus f."""
    setup = neural_setup(spec, **options)

    def act(params, state, key, contexts, mask, t):
        k_z, k_ties = jax.random.split(key)
        mean = mlp_apply(setup.arch, state.theta, contexts)
        sigma = jnp.sqrt(params.lam * params.nu) * _widths(state.design, mlp_grads(setup.arch, state.theta, contexts))
        scores = mean + sigma * normal(k_z, mean.shape, F32)
        chosen, _ = choose(k_ties, scores, mask)
        return _planned(state, t, chosen, mask, scores, scores - mean)

    return _policy("neural-ts", setup, act, _design_learner(setup), design=design)


def _phe_act(setup: NeuralSetup):
    """Neural-PHE's ``act``: argmax_k f(x_k; θ), its probability that of the greedy choice (1/|ties|) only
    when σ_R = 0 (otherwise θ was trained on random targets: NaN)."""

    def act(params, state, key, contexts, mask, t):
        scores = mlp_apply(setup.arch, state.theta, contexts)
        chosen, p = choose(key, scores, mask)
        return _planned(state, t, chosen, mask, scores, probability=jnp.where(params.sigma_r == 0, p, jnp.nan))

    return act


def perturbed_rows(rows: Rows, key: jax.Array, sigma_r: jax.Array, per_arm: bool) -> Rows:
    """``rows`` with fresh N(0, σ_R²) noise added to every stored observation: one draw per history row
    (O(t), the perturbed-history baseline as the papers count it), or per arm of a fixed arm set one draw of
    N(0, n_k σ_R²), the law of the sum of its n_k fresh draws — the same loss in distribution for O(K)
    (spec 003 §2.5 notes it; the runtime comparison keeps the O(t) form)."""
    if per_arm:
        noise = jnp.sqrt(rows.n) * normal(key, rows.n.shape, F32)
    else:
        noise = history_noise(key, rows.count, rows.n.shape[0], F32)
    return rows._replace(y=rows.y + sigma_r * noise)


@forwards(neural_setup)
def neural_phe(spec: ProblemSpec, **options) -> Policy:
    """Neural-PHE / NPR (Jia, Zhang, Zhou, Gu & Wang 2022), as spec 003 §3 [REC]: play argmax_k f(x_k; θ),
    no bonus; after each reward draw fresh γ_s ~ N(0, σ_R²) for *every* stored observation s ≤ t and train
    on the targets r_s + γ_s (:func:`perturbed_rows`). On the history buffer (the default) this is the
    O(t)-per-round baseline of Sun, Wang & Xu's runtime comparison; ``backend = "arms"`` draws the per-arm
    sums of the fresh noise directly, the same law in O(K) per round (for regret experiments at scale).
    ``info.probability`` is exact for planned warm-up pulls and when σ_R = 0, NaN otherwise: the network was
    trained on random targets, and retraining it to redraw them is no estimate one pays per decision
    (``draws_in_update``, no ``resample``)."""
    setup = neural_setup(spec, **options)

    def learn(params, state, key, x, arm, reward):
        state = _append(setup, state, x, arm, reward)
        return state, perturbed_rows(state.rows, key, params.sigma_r, setup.per_arm)

    return _policy("neural-phe", setup, _phe_act(setup), learn)


@forwards(neural_setup)
def neural_es(spec: ProblemSpec, m: int = 10, **options) -> Policy:
    """Neural-ES, Sun, Wang & Xu (2025) Algorithm 1 with the neural loss (eq. 4.4; spec 003 §2.4).

    m networks start from the same θ₀; each observation gets one draw Z_t^j ~ N(0, σ_R²) per member when
    it arrives and keeps it (one new perturbation row per round, spec 003 §2.5; with ``backend = "arms"``
    only the per-arm sums R_k^j are kept, exactly). All members train, vmapped, on their perturbed targets;
    each round j_t ~ Uniform over the first ``m_used`` members and argmax_k f(x_k; θ^{j_t}) is played.
    ``info.probability`` is the exact probability of the choice over the draw of j_t.
    """
    setup = neural_setup(spec, **options)

    def act(params, state, key, contexts, mask, t):
        words = member_and_tie_words(key)
        j = member_draw(words[0], params.m_used)
        scores = mlp_apply(setup.arch, state.theta[j], contexts)
        chosen, _ = greedy_choice(words[1], scores, mask)
        members = jax.vmap(mlp_apply, in_axes=(None, 0, None))(setup.arch, state.theta, contexts)
        return _planned(state, t, chosen, mask, scores,
                        probability=ensemble_probability(members, chosen, mask, params.m_used))

    def perturbed(params, key, reward):
        return reward + params.sigma_r * normal(key, (m,), F32)

    return _policy("neural-es", setup, act, _append_learner(setup, perturbed), members=m)


@forwards(neural_setup)
def neural_greedy(spec: ProblemSpec, **options) -> Policy:
    """ε-greedy over the network's mean f(x; θ) (a baseline: no model of uncertainty); ``epsilon = 0`` is
    pure greedy. ``info.probability`` is exact."""
    setup = neural_setup(spec, **options)

    def act(params, state, key, contexts, mask, t):
        scores = mlp_apply(setup.arch, state.theta, contexts)
        chosen, p = epsilon_greedy(key, scores, mask, params.epsilon)
        return _planned(state, t, chosen, mask, scores, probability=p)

    return _policy("neural-greedy", setup, act, _append_learner(setup))


NEURAL_HYPERS = (
    Hyper("width", SIGNATURE, "N, the width of every hidden layer (spec 003 §4.3: 20)", kind=int, static=True, low=1),
    Hyper("depth", SIGNATURE, "L, the number of weight matrices (spec 003 §4.3: 3)", kind=int, static=True, low=1),
    Hyper("init", SIGNATURE, "θ₀: the block-symmetric NTK initialisation, or PyTorch's default (standard)",
          kind=str, static=True, choices=INITS),
    Hyper("duplicate", SIGNATURE, "feed [x; x]/√2 (makes f(x; θ₀) = 0 and the input dimension even); omitted: exactly "
          "when the symmetric initialisation needs it (odd d)", kind=bool, static=True, optional=True),
    Hyper("output_scale", SIGNATURE, "output multiplied by √N (ntk, the papers') or not (none, the reference code)",
          kind=str, static=True, choices=SCALES),
    Hyper("bias", SIGNATURE, "every layer adds a bias vector, as PyTorch's nn.Linear (needs init = 'standard'; "
          "false: the papers' bias-free network)", kind=bool, static=True),
    Hyper("lam", 1.0, "regularisation λ of the loss and of the design Z = λI + Σ ggᵀ", low=0.0, low_open=True),
    Hyper("lr", 0.01, "step size η", low=0.0, low_open=True),
    Hyper("steps", SIGNATURE, "J, optimiser steps per training call", kind=int, static=True, low=1),
    Hyper("optimizer", SIGNATURE, "full-batch gradient descent (gd), minibatch SGD (sgd: an unbiased estimate of the "
          "full gradient; history only), gradient descent on each minibatch's own loss (minibatch; history only) or "
          "full-batch Adam", kind=str, static=True, choices=OPTIMIZERS),
    Hyper("batch_size", SIGNATURE, "B, observations per sgd step (drawn with replacement; 1: the public NeuralUCB "
          "code's per-sample SGD) or per minibatch step (distinct)", kind=int, static=True, low=1),
    Hyper("reduction", SIGNATURE, "loss divided by the number of observations (mean) or not (sum)", kind=str,
          static=True, choices=REDUCTIONS),
    Hyper("anchor", SIGNATURE, "regularise toward θ₀ (init) or 0 (zero)", kind=str, static=True, choices=ANCHORS),
    Hyper("reg_scale", SIGNATURE, "regulariser ½λN‖θ − anchor‖² (width, spec 003) or ½λ‖θ − anchor‖² (one)",
          kind=str, static=True, choices=REG_SCALES),
    Hyper("from_init", SIGNATURE, "train from θ₀ at every call (the theory) instead of warm-starting", kind=bool,
          static=True),
    Hyper("backend", SIGNATURE, "data layout: the history buffer, or per-arm statistics of a fixed arm set "
          "(arms: the same loss, O(K) per step)", kind=str, static=True, choices=("history", "arms")),
    Hyper("train_every", SIGNATURE, "train every n rounds once the warm-up is over", kind=int, static=True, low=1),
    Hyper("warmup_rounds", SIGNATURE, "round-robin pulls before the network is used (omitted: K, one per arm)",
          kind=int, static=True, low=0, optional=True),
)
_DESIGN = (Hyper("design", SIGNATURE, "confidence design Z: diagonal (reference code) or full (p × p)", kind=str,
                 static=True, choices=("diagonal", "full")),
           Hyper("nu", 0.1, "exploration scale ν (spec 003 §3: 0.1; tune over 1e-3..1)", low=0.0))

# Bytes of a full p × p design above which it is refused (float32 per seed; p = 820 needs 2.7 MB).
FULL_DESIGN_LIMIT = 2**30


def _check_neural(config: dict[str, Any], env: Env, horizon: int, where: str) -> None:
    """What only a neural policy can judge: an architecture its initialisation can build, a warm-up that
    fits in the horizon, a full design of reasonable size."""
    arch = MLP(env.spec.d, config["width"], config["depth"], config["duplicate"], config["output_scale"],
               config["bias"])
    problem = arch.check(config["init"], where)
    if problem:
        raise ConfigError(problem)
    if config["optimizer"] in ("sgd", "minibatch") and config["backend"] != "history":
        raise ConfigError(f"{where}: field 'optimizer' = '{config['optimizer']}' samples single observations, which "
                          "per-arm statistics do not keep; use backend = 'history' or optimizer = 'gd' or 'adam'")
    rounds = env.spec.k if config["warmup_rounds"] is None else config["warmup_rounds"]
    if rounds > horizon:
        raise ConfigError(f"{where}: field 'warmup_rounds': the warm-up lasts {rounds} rounds, longer than the "
                          f"horizon T = {horizon}")
    if config.get("design") == "full" and 4 * arch.n_params**2 > FULL_DESIGN_LIMIT:
        raise ConfigError(f"{where}: field 'design' = 'full' needs a {arch.n_params} × {arch.n_params} matrix per "
                          f"seed ({4 * arch.n_params**2 / 2**30:.1f} GiB); use design = 'diagonal' or a smaller "
                          "network")


CONTRACT_NETWORK = {"duplicate": True, "width": 6, "steps": 5, "lr": 1e-6}
"""The small, quickly trained network of the contract's checks (:func:`nlbandit.testing.check_policy`). Gradient
descent at a fixed step diverges on features scaled by 1e3 (the loss's curvature grows like ‖x‖^(2L)): a property
of the method, which the engine refuses by name (tests/test_neural.py); a step of 1e-6 is stable at both of the
contract's feature scales."""


def fill_duplicate(config: dict[str, Any], env: Env) -> dict[str, Any]:
    """An omitted ``duplicate`` filled for the environment's input dimension (:func:`needs_duplicate`)."""
    if config["duplicate"] is not None:
        return config
    return {**config, "duplicate": needs_duplicate(config["init"], env.spec.d)}


def _entry(name: str, make, own: tuple[Hyper, ...], doc: str, finalize=None, **extra: Any) -> PolicyEntry:
    extra = extra if finalize is None else {**extra, "finalize": finalize}
    return PolicyEntry(name, make, own + NEURAL_HYPERS, doc, check=_check_neural, adapt=fill_duplicate,
                       test_hypers=lambda spec: {"warmup_rounds": 2 * spec.d, **CONTRACT_NETWORK}, **extra)


ENTRIES = (
    _entry("neural-ucb", neural_ucb, _DESIGN, "NeuralUCB (Zhou et al. 2020): f(x; θ) + √(λν)‖g‖_{Z⁻¹}"),
    _entry("neural-ts", neural_ts, _DESIGN, "NeuralTS (Zhang et al. 2021): r̃ ~ N(f(x; θ), λν‖g‖²_{Z⁻¹})"),
    _entry("neural-phe", neural_phe, (SIGMA_R,),
           "Neural-PHE / NPR (Jia et al. 2022): every past reward re-perturbed each round (O(t) per round on "
           "its history)", draws_in_update=True),
    _entry("neural-es", neural_es,
           (Hyper("m", SIGNATURE, "ensemble size m", kind=int, static=True, low=1), SIGMA_R, M_USED),
           "neural ensemble sampling (Sun, Wang & Xu 2025): m networks, incremental perturbations", members_used),
    _entry("neural-greedy", neural_greedy,
           (Hyper("epsilon", 0.0, "exploration probability ε (0: greedy)", low=0.0, high=1.0),),
           "ε-greedy over a neural network's mean"),
)
