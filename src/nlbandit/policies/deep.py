"""Kveton et al. (2020)'s neural policies: ``deep-fpl``, ``deep-fl`` and ``rep-glm-fpl``.

Kveton, Zaheer, Szepesvári, Li, Ghavamzadeh & Boutilier (2020), *Randomized Exploration in Generalized
Linear Bandits*, §5.2; spec 002 §2.7 and §7.11–7.14. All three share one trained network:

* the **network** of :mod:`nlbandit.models.shallow`, g_w(x) = w₂ᵀφ(W₁ᵀx + b₁) + b₂ with ``hidden`` units
  (50 in the paper) and φ = ReLU or tanh (``activation``), Keras's default initialisation, float32;
* its **training**: after every observation, exactly one Adam step (Kingma & Ba 2015; Keras's defaults,
  learning rate ``lr`` = 10⁻³, β₁ = 0.9, β₂ = 0.999, ε = 10⁻⁷, via optax) on the mean logistic loss
  (:func:`~nlbandit.models.shallow.logistic_loss`) over the ``batch`` (32) most recent examples, kept in a
  ring buffer of that size, so a round costs the same whatever t is. One optimiser runs over the whole
  run: Adam's moments and step count persist across rounds (a Keras model fitted once per round).

Deviations from the paper and from Keras, all of them details the paper leaves open (spec 002 §2.7, §7):

* the loss: the paper names none. The logistic negative log-likelihood on the logit, softplus(g) − ỹ g,
  is used (spec 002 §7.11); for targets in [0, 1] it is Keras's ``binary_crossentropy`` on σ(g) without
  that loss's clipping of σ(g) to [10⁻⁷, 1 − 10⁻⁷], and it extends to perturbed targets outside [0, 1];
* Adam's ε: optax adds ε to √v̂ (bias-corrected, Kingma & Ba's Algorithm 1); Keras adds it to √v, which
  is optax's update with ε/√(1 − β₂ᵗ) in place of ε (at most 32 ε = 3·10⁻⁶ in round 1, → ε later). The
  two differ only for gradient coordinates of size ~10⁻⁶ or less;
* the perturbation (spec 002 §7.12): ỹ_j = y_j + a ξ_j with ξ_j ~ N(0, 1) drawn afresh for every example
  of the minibatch at every step (as GLM-FPL redraws every perturbation in every round), not once per
  example;
* the decision: round 1 (no data yet) plays a uniformly random available arm; later rounds play
  argmax g_w(x) with ties broken at random (spec 002 §2.7 [R]).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models.glm import newton_solve
from nlbandit.models.history import HISTORY_BLOCK, Rows, add_row, empty_rows, history_capacity, history_noise
from nlbandit.models.links import LINKS
from nlbandit.models.shallow import ACTIVATIONS, ShallowNet, embedding, logistic_loss, logits, shallow_init
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info, choose

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


F32 = "float32"
ADAM_B1, ADAM_B2, ADAM_EPS = 0.9, 0.999, 1e-7
"""Adam's constants: Keras's defaults (spec 002 §2.7)."""

SWITCH_NEWTON_STEPS = 30
"""The cap on repGLM-FPL's Newton steps at the switch (a fit from θ = 0; spec 002 §2.4's 30 iterations)."""

_LOGISTIC = LINKS["logistic"]


class DeepSetup(NamedTuple):
    """The static choices of the network and its training.

    Attributes:
      spec: the sizes the policy is built for.
      hidden: H, the hidden layer's width.
      activation: φ, a key of :data:`~nlbandit.models.shallow.ACTIVATIONS`.
      batch: the minibatch of the most recent examples (the ring buffer's size).
    """

    spec: ProblemSpec
    hidden: int
    activation: str
    batch: int


class Window(NamedTuple):
    """The ``batch`` most recent examples, in a ring buffer: example i (0-based) sits in slot i mod batch.

    Attributes:
      x: (batch, d) features.
      y: (batch,) rewards.
      count: the number of examples seen so far (slots ≥ count are empty while count < batch).
    """

    x: jax.Array
    y: jax.Array
    count: jax.Array


class TrainedNet(NamedTuple):
    """The network, its Adam state and its training window."""

    net: ShallowNet
    opt: Any
    window: Window

    def healthy(self) -> jax.Array:
        """Whether every weight is finite (the engine's check, :func:`~nlbandit.core.types.healthy`)."""
        return jnp.all(jnp.asarray([jnp.all(jnp.isfinite(leaf)) for leaf in self.net]))


def _adam(params) -> optax.GradientTransformation:
    """Adam with Keras's constants, as float32 arrays: optax's bias corrections 1 − βᵗ are then float32
    (with Python floats, JAX's 64-bit mode computes them in float64)."""
    b1, b2, eps = (jnp.asarray(c, F32) for c in (ADAM_B1, ADAM_B2, ADAM_EPS))
    return optax.adam(params.lr, b1=b1, b2=b2, eps=eps)


def _init_model(setup: DeepSetup, params, key: jax.Array) -> TrainedNet:
    net = shallow_init(key, setup.spec.d, setup.hidden, F32)
    d, b = setup.spec.d, setup.batch
    window = Window(jnp.zeros((b, d), F32), jnp.zeros((b,), F32), jnp.zeros((), jnp.int32))
    return TrainedNet(net, _adam(params).init(net), window)


def _learn(setup: DeepSetup, params, model: TrainedNet, key: jax.Array | None, x: jax.Array,
           y: jax.Array) -> TrainedNet:
    """Add (x, y) to the window, then take one Adam step on the mean logistic loss of the window's examples
    with targets y_j + a ξ_j, ξ_j ~ N(0, 1) fresh per slot j from ``key`` (no perturbation when ``key`` is
    None: DeepFL)."""
    w = model.window
    slot = w.count % setup.batch
    w = Window(w.x.at[slot].set(x), w.y.at[slot].set(y), w.count + 1)
    targets = w.y if key is None else w.y + params.a * normal(key, (setup.batch,), F32)
    filled = jnp.arange(setup.batch) < w.count
    grads = jax.grad(logistic_loss)(model.net, w.x, targets, filled, setup.activation)
    updates, opt = _adam(params).update(grads, model.opt, model.net)
    return TrainedNet(optax.apply_updates(model.net, updates), opt, w)


def _deep(name: str, spec: ProblemSpec, perturbed: bool, hidden: int, activation: str, batch: int) -> Policy:
    setup = DeepSetup(spec, hidden, activation, batch)

    def init(params, key):
        return _init_model(setup, params, key)

    def act(params, state, key, contexts, mask, t):
        fresh = state.window.count == 0
        g = logits(state.net, contexts, activation)
        arm, p = choose(key, jnp.where(fresh, 0.0, g), mask)  # all tied in round 1: uniform
        # the choice is a function of the state, hence exact, unless the weights were trained on noise
        exact = fresh | (params.a == 0) if perturbed else True
        return arm, act_info(jnp.where(fresh, jnp.nan, g[arm]), jnp.nan, jnp.where(exact, p, jnp.nan))

    def update(params, state, key, contexts, arm, feedback, t):
        return _learn(setup, params, state, key if perturbed else None, contexts[arm], feedback.reward)

    return Policy(init, act, update, PolicyMeta(name, Requirements(reward_range=_LOGISTIC.reward_range), F32))


def deep_fpl(spec: ProblemSpec, hidden: int = 50, activation: str = "relu", batch: int = 32) -> Policy:
    """DeepFPL (Kveton et al. 2020, §5.2; spec 002 §2.7): GLM-FPL with the network f_w = σ(g_w) of
    :mod:`nlbandit.models.shallow` as the reward model, trained incrementally.

    Round t plays argmax_i g_w(x_{i,t}) (ties at random; round 1: a uniformly random arm), observes Y_t,
    adds (x_{I_t,t}, Y_t) to the window of the ``batch`` most recent examples, and takes one Adam step on
    ℓ(w) = mean_j [softplus(g_w(x_j)) − ỹ_j g_w(x_j)] with ỹ_j = y_j + a ξ_j, ξ_j ~ N(0, 1) fresh for each
    example at each step (a = 1 in the paper). Constant cost per round. Deviations: see the module
    docstring. ``info.probability`` is exact in round 1 and when a = 0, NaN otherwise (the weights were
    trained on random targets); ``info.score`` is g_w of the chosen arm.
    """
    return _deep("deep-fpl", spec, True, hidden, activation, batch)


def deep_fl(spec: ProblemSpec, hidden: int = 50, activation: str = "relu", batch: int = 32) -> Policy:
    """DeepFL (Kveton et al. 2020, §5.2): :func:`deep_fpl` with a = 0, follow the leader (no exploration
    beyond round 1's random arm and random tie-breaking). ``info.probability`` is exact."""
    return _deep("deep-fl", spec, False, hidden, activation, batch)


class RepState(NamedTuple):
    """State of repGLM-FPL.

    Attributes:
      model: the network (trained in the exploration phase, frozen after it).
      raw: (E, d) the features of the exploration phase's E observations, embedded at the switch.
      rows: the history of GLM-FPL (:class:`~nlbandit.models.history.Rows` of capacity T) on the embedded
        features ψ(x) (H + 1 columns; the exploration phase's rows hold zeros until the switch embeds them).
      theta: (H + 1,) the perturbed estimate θ̃ that ``act`` scores with after the switch.
    """

    model: TrainedNet
    raw: jax.Array
    rows: Rows
    theta: jax.Array

    def healthy(self) -> jax.Array:
        """Whether the network's weights and θ̃ are finite (the engine's check,
        :func:`~nlbandit.core.types.healthy`)."""
        return self.model.healthy() & jnp.all(jnp.isfinite(self.theta))


def exploration_rounds(fraction: float, horizon: int) -> int:
    """E = ⌈m·T⌉, the length of repGLM-FPL's exploration phase (at least 1), with m·T rounded to 9 decimals
    first so that e.g. m = 0.07, T = 100 gives 7 rather than ⌈7.000000000000001⌉ = 8."""
    return max(1, math.ceil(round(fraction * horizon, 9)))


def rep_glm_fpl(spec: ProblemSpec, hidden: int = 50, activation: str = "relu", batch: int = 32,
                explore_fraction: float = 0.05, newton_steps: int = 3) -> Policy:
    """repGLM-FPL (Kveton et al. 2020, §5.2; spec 002 §2.7 and §7.14): representation learning, then
    GLM-FPL on the learnt representation (a Neural-Linear-style baseline after Riquelme et al. 2018).

    * Exploration phase, rounds t ≤ E = ⌈m·T⌉ (m = ``explore_fraction``; the paper's m ∈ {1, 2, 5, 10,
      20}%): a uniformly random available arm; the network is trained exactly as DeepFL's
      (:func:`deep_fl`: one unperturbed Adam step per round on the ``batch`` most recent examples).
    * At the end of round E the network is frozen and its head chopped off: every observation so far is
      embedded once as ψ(x) = [φ(W₁ᵀx + b₁); 1] (H + 1 features, :func:`~nlbandit.models.shallow.embedding`),
      and GLM-FPL's first estimate is fitted to convergence (damped Newton from θ = 0,
      :func:`~nlbandit.models.glm.newton_solve`).
    * Rounds t > E: GLM-FPL (Kveton et al. 2020, eq. (6); logistic link) on ψ: play argmax_i ψ(x_{i,t})ᵀθ̃
      (ties at random), append (ψ(x), Y) to the history, and refit θ̃ to the ridge-regularised logistic
      loss with every stored reward perturbed by fresh N(0, a²) noise (a = 0.5), λ = ``lam`` (1),
      warm-started at the previous θ̃ (as :func:`~nlbandit.policies.glm.glm_fpl` with the history layout).

    The recommendations of spec 002 §2.7 fill what the paper leaves open: the phase-1 training, the bias
    feature, a, λ, and the reuse of the phase-1 data. Deviations: each round after the switch takes at most
    ``newton_steps`` (1–3) warm-started Newton steps (stopping early once converged) rather than solving the
    perturbed MLE to convergence (each costs O(t (H+1)²): the history is T-sized, since fresh contexts
    allow no per-arm statistics); the MLE is ridge-regularised (spec 002 §7.3); and GLM-FPL runs in float32
    with the network, where the library's GLM policies use float64. No initial exploration beyond the
    phase itself (spec 002 §2.5's basis pulls need a fixed arm set). ``info.probability`` is exact in the
    exploration phase (1/|available|) and, after it, when a = 0; NaN otherwise.
    """
    setup = DeepSetup(spec, hidden, activation, batch)
    explore = exploration_rounds(explore_fraction, spec.horizon)
    capacity = history_capacity(spec.horizon)

    def init(params, key):
        return RepState(_init_model(setup, params, key), jnp.zeros((explore, spec.d), F32),
                        empty_rows(capacity, hidden + 1, dtype=F32), jnp.zeros((hidden + 1,), F32))

    def act(params, state, key, contexts, mask, t):
        exploring = t <= explore
        scores = embedding(state.model.net, contexts, activation) @ state.theta
        arm, p = choose(key, jnp.where(exploring, 0.0, scores), mask)  # all tied while exploring: uniform
        exact = exploring | (params.a == 0)
        return arm, act_info(jnp.where(exploring, jnp.nan, scores[arm]), jnp.nan, jnp.where(exact, p, jnp.nan))

    def switch(params, state, key):
        x = state.rows.x.at[:explore].set(embedding(state.model.net, state.raw, activation))
        rows = state.rows._replace(x=x)
        theta = _perturbed_fit(capacity, params, rows, key, state.theta, SWITCH_NEWTON_STEPS)
        return state._replace(rows=rows, theta=theta)

    def exploring_update(params, state, key, x, arm, y, t):
        raw = state.raw.at[state.rows.count].set(x)
        rows = add_row(state.rows, jnp.zeros((hidden + 1,), F32), arm, y, per_arm=False)
        state = RepState(_learn(setup, params, state.model, None, x, y), raw, rows, state.theta)
        return jax.lax.cond(t == explore, switch, lambda params, state, key: state, params, state, key)

    def glm_fpl_update(params, state, key, x, arm, y, t):
        rows = add_row(state.rows, embedding(state.model.net, x, activation), arm, y, per_arm=False)
        return state._replace(rows=rows, theta=_perturbed_fit(capacity, params, rows, key, state.theta, newton_steps))

    def update(params, state, key, contexts, arm, feedback, t):
        # t is the same for every seed of a batch, so under vmap the cond still runs one branch
        return jax.lax.cond(t <= explore, exploring_update, glm_fpl_update, params, state, key, contexts[arm], arm,
                            feedback.reward, t)

    return Policy(init, act, update, PolicyMeta("rep-glm-fpl", Requirements(reward_range=_LOGISTIC.reward_range), F32,
                                                spec.horizon))


def _perturbed_fit(capacity: int, params, rows, key: jax.Array, theta0: jax.Array, max_iter: int) -> jax.Array:
    """θ̃ after at most ``max_iter`` Newton steps from ``theta0`` on the history's rewards, each perturbed by
    fresh N(0, a²) noise."""
    targets = rows.y + params.a * history_noise(key, rows.count, capacity, F32)
    return newton_solve(_LOGISTIC, rows.x, rows.n, targets, params.lam, theta0, max_iter=max_iter,
                        active=(rows.count, HISTORY_BLOCK)).theta


def _rep_resample(spec: ProblemSpec, hidden: int, activation: str, batch: int, explore_fraction: float,
                  newton_steps: int):
    """repGLM-FPL's ``resample`` (:attr:`~nlbandit.policies.entry.PolicyEntry.resample`): θ̃ refitted with
    fresh noise, warm-started at the current θ̃ (the update starts from the previous one: with at most
    ``newton_steps`` steps the law is that of the update only approximately); the exploration phase draws
    nothing here (its probabilities are exact)."""
    explore = exploration_rounds(explore_fraction, spec.horizon)
    capacity = history_capacity(spec.horizon)

    def resample(params, state, key):
        fitted = state.rows.count >= explore  # the switch (end of round E) fitted the first θ̃
        return state._replace(theta=jnp.where(fitted, _perturbed_fit(capacity, params, state.rows, key, state.theta,
                                                                     newton_steps), state.theta))

    return resample


def _check_rep(config: dict[str, Any], env: Env, horizon: int, where: str) -> None:
    """An exploration phase that leaves GLM-FPL at least one round of the horizon."""
    rounds = exploration_rounds(config["explore_fraction"], horizon)
    if rounds >= horizon:
        raise ConfigError(f"{where}: field 'explore_fraction' = {config['explore_fraction']:g}: the exploration "
                          f"phase lasts ⌈m·T⌉ = {rounds} rounds, as long as the horizon T = {horizon}, which leaves "
                          "GLM-FPL no round; use a smaller fraction or a longer horizon")


_NETWORK = (
    Hyper("hidden", SIGNATURE, "H, units of the hidden layer (Kveton et al. 2020 §5.2: 50)", kind=int, static=True,
          low=1),
    Hyper("activation", SIGNATURE, "φ of the hidden layer (the paper tries both)", kind=str, static=True,
          choices=tuple(ACTIVATIONS)),
    Hyper("batch", SIGNATURE, "minibatch of the most recent examples for each round's Adam step (Keras default 32)",
          kind=int, static=True, low=1),
    Hyper("lr", 1e-3, "Adam's learning rate (Keras default 10⁻³)", low=0.0, low_open=True),
)

ENTRIES = (
    PolicyEntry("deep-fpl", deep_fpl,
                _NETWORK + (Hyper("a", 1.0, "perturbation std a of the training targets (the paper: 1)", low=0.0),),
                "DeepFPL (Kveton et al. 2020): one Adam step per round on the latest rewards + fresh N(0, a²)",
                # the weights carry every step's noise: no cheap redraw of it (no resample)
                draws_in_update=True),
    PolicyEntry("deep-fl", deep_fl, _NETWORK, "DeepFL (Kveton et al. 2020): DeepFPL with a = 0 (follow the leader)"),
    PolicyEntry("rep-glm-fpl", rep_glm_fpl,
                _NETWORK + (
                    Hyper("explore_fraction", SIGNATURE, "m: the first ⌈m·T⌉ rounds explore uniformly and train the "
                          "network (the paper: 1%–20%)", static=True, low=0.0, high=1.0, low_open=True,
                          high_open=True),
                    Hyper("newton_steps", SIGNATURE, "at most this many warm-started Newton steps per round after the "
                          "switch (spec 002 §2.7: 1–3)", kind=int, static=True, low=1),
                    Hyper("a", 0.5, "GLM-FPL's perturbation std a (spec 002 §2.7: 0.5)", low=0.0),
                    Hyper("lam", 1.0, "ridge λ of GLM-FPL's MLE (spec 002 §7.3)", low=0.0, low_open=True),
                ),
                "repGLM-FPL (Kveton et al. 2020): uniform exploration training the network, then GLM-FPL on "
                "its hidden layer", check=_check_rep, draws_in_update=True, resample=_rep_resample),
)
