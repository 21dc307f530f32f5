"""The two protocols every environment and policy implements: pure functions on pytrees.

An :class:`Env` is one family of problem instances; ``reset`` draws an instance from a key. A
:class:`Policy` is an ``init``/``act``/``update`` triple in the style of optax: state goes in, new state
comes out, every random step takes an explicit key. Hyperparameters that do not change array shapes
arrive as a ``params`` pytree (traced, so one compilation serves a whole grid); shape-changing ones are
fixed when the policy is constructed.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp

PyTree = Any
Array = jax.Array


class ProblemSpec(NamedTuple):
    """Static sizes a policy is built for.

    Attributes:
      d: feature dimension.
      k: maximum number of arms offered in a round (``K_max``); fewer may be available via the mask.
      horizon: number of rounds, when known (policies with history buffers size them from it).
    """

    d: int
    k: int
    horizon: int


class Feedback(NamedTuple):
    """What the learner observes after acting.

    Attributes:
      reward: realised reward, a scalar.
      variance_bound: an upper bound on the noise level revealed after acting, in settings that have one
        (heteroscedastic bandits); ``None`` elsewhere.
    """

    reward: Array
    variance_bound: Array | None = None


class EnvFacts(NamedTuple):
    """What an environment promises about its rewards and arms, checked against a policy's
    :class:`Requirements` by :func:`nlbandit.core.compat.check_compatible`.

    Attributes:
      reward_range: (low, high), the interval every reward lies in ((−inf, inf) when unbounded).
      link: the link μ of the mean reward μ(xᵀθ*) when the mean is a GLM ('identity', 'logistic', ...),
        None for other reward functions.
      fixed_arms: every round offers the same K feature vectors (masks may still vary), so a policy may
        keep per-arm statistics and plan a design on the arm set.
      noise_level: ``pull`` reveals a bound σ_t on the round's noise (``Feedback.variance_bound``).
      noise_bound: the largest noise magnitude the environment produces (None when unbounded or unknown).
    """

    reward_range: tuple[float, float] = (-float("inf"), float("inf"))
    link: str | None = None
    fixed_arms: bool = False
    noise_level: bool = False
    noise_bound: float | None = None


def _described_only(*args: Any) -> Any:
    """The functions of an environment described for checks only (:meth:`Env.described`)."""
    raise RuntimeError("this environment is described for checks only (its sizes and facts); it cannot be simulated")


class Env(NamedTuple):
    """A bandit environment as pure functions.

    Attributes:
      name: registry name.
      spec: static sizes (``d``, ``k``; ``horizon`` is set by the caller of ``simulate``).
      reset: ``reset(key) -> env_state``: draw one problem instance (θ*, arm pool, ...).
      observe: ``observe(env_state, key, t) -> (contexts (K, d), mask (K,) bool)``: the arms on offer in
        round ``t`` (1-based).
      pull: ``pull(env_state, key, t, contexts, arm) -> Feedback``: the reward of the chosen arm.
      mean: ``mean(env_state, contexts) -> (K,)``: expected rewards, for pseudo-regret.
      facts: what the environment promises (:class:`EnvFacts`).
    """

    name: str
    spec: ProblemSpec
    reset: Callable[[Array], PyTree]
    observe: Callable[[PyTree, Array, Array], tuple[Array, Array]]
    pull: Callable[[PyTree, Array, Array, Array, Array], Feedback]
    mean: Callable[[PyTree, Array], Array]
    facts: EnvFacts = EnvFacts()

    @classmethod
    def described(cls, name: str, spec: ProblemSpec, facts: EnvFacts = EnvFacts()) -> "Env":
        """An environment known by its sizes and facts only, to check a policy against (logged data, an
        online agent's rewards): it cannot be simulated (:attr:`simulable`), and its functions say so."""
        return cls(name, spec, _described_only, _described_only, _described_only, _described_only, facts)

    @property
    def simulable(self) -> bool:
        """Whether the environment has rounds to draw (not one :meth:`described` for checks only)."""
        return self.reset is not _described_only


class Requirements(NamedTuple):
    """What a policy needs from an environment (the counterpart of :class:`EnvFacts`).

    Attributes:
      fixed_arms: the state is indexed by arm (per-arm statistics, a design on the arm set).
      noise_level: the policy reads ``Feedback.variance_bound``.
      reward_range: (low, high) the rewards its model can describe (a Bernoulli likelihood: [0, 1]);
        None when any real reward is fine.
      link: the link the environment's mean must have (None: any reward function; a misspecified model is
        the user's choice).
      noise_bound: the noise magnitude R the policy's radii assume; the environment's must not exceed it.
    """

    fixed_arms: bool = False
    noise_level: bool = False
    reward_range: tuple[float, float] | None = None
    link: str | None = None
    noise_bound: float | None = None


class ActInfo(NamedTuple):
    """Per-round diagnostics returned by ``act`` beside the arm (scalars; NaN where not defined).

    Attributes:
      score: the chosen arm's value under the policy's rule (UCB index, sampled mean, ensemble member's
        estimate, greedy estimate).
      bonus: the exploration part of that value (UCB width term; sample minus point estimate), NaN where
        the policy computes no separate point estimate.
      probability: the probability with which the policy chose this arm given the history and the
        round's contexts, where it is exactly computable (uniform, greedy and UCB rules up to random
        tie-breaking, ε-greedy, ensemble sampling with a finite ensemble, planned warm-up pulls); NaN for
        continuous sampling rules (Thompson, perturbed history), where it has no closed form.
    """

    score: Array
    bonus: Array
    probability: Array


class PolicyMeta(NamedTuple):
    """What a policy is and what it needs, beside its functions.

    Attributes:
      name: registry name.
      requires: what the policy needs from an environment (:class:`Requirements`).
      dtype: the floating type of the policy's state and arithmetic, ``"float64"`` (the default: the
        incremental inverses of the linear and GLM policies need it, see :mod:`nlbandit.models.ridge`) or
        ``"float32"`` (neural models). The engine hands the policy its params, contexts and feedback in
        this type (:func:`to_dtype`); the environment's means and the regret stay float64.
      max_horizon: the most rounds the state can hold (policies with fixed-size history buffers), or
        ``None`` when unbounded; :func:`~nlbandit.core.simulate.simulate` refuses longer runs.
      spec: the sizes it was built for (set by :func:`~nlbandit.policies.registry.make_policy`; checked
        against the environment's by :func:`~nlbandit.core.simulate.simulate`), or None.
      params_type: the params record class (:mod:`nlbandit.core.params`) of a registered policy (set by
        :func:`~nlbandit.policies.registry.make_policy`); :func:`~nlbandit.core.simulate.simulate` converts
        a dict of params into it and names missing or unknown fields. ``None`` (a hand-built policy):
        params pass as given.
      transients: the working arrays one seed's round holds beside the state, as (part, bytes) pairs (e.g.
        NeuralUCB's K per-arm gradients), declared by the factory that creates them; the state itself is
        measured from ``jax.eval_shape`` of ``init`` (:func:`nlbandit.core.memory.policy_parts`).
    """

    name: str
    requires: Requirements = Requirements()
    dtype: str = "float64"
    max_horizon: int | None = None
    spec: ProblemSpec | None = None
    params_type: type | None = None
    transients: tuple[tuple[str, int], ...] = ()


class Policy(NamedTuple):
    """A bandit policy as pure functions.

    What only some consumers need is declared beside the policy, not here: the engine's health check as a
    ``healthy()`` method of the family's state record (:func:`healthy`), the agent's resampling of the update's
    draw on the family's :class:`~nlbandit.policies.entry.PolicyEntry` (``draws_in_update``, ``resample``).

    Attributes:
      init: ``init(params, key) -> state``.
      act: ``act(params, state, key, contexts, mask, t) -> (arm, info)``: index of the chosen arm (an
        available one; ties broken uniformly at random) and its :class:`ActInfo`.
      update: ``update(params, state, key, contexts, arm, feedback, t) -> state``: learn from the chosen
        arm (its index into ``contexts`` (K, d)) and its :class:`Feedback`.
      meta: its name, requirements, precision, horizon and sizes (:class:`PolicyMeta`).
      prepare: ``prepare(params, state, key, arms, mask) -> state``, or ``None``: called once after
        ``init`` with the arm set of round 1 (per-arm statistics, an initial design).
    """

    init: Callable[[PyTree, Array], PyTree]
    act: Callable[[PyTree, PyTree, Array, Array, Array, Array], tuple[Array, ActInfo]]
    update: Callable[[PyTree, PyTree, Array, Array, Array, Feedback, Array], PyTree]
    meta: PolicyMeta
    prepare: Callable[[PyTree, PyTree, Array, Array, Array], PyTree] | None = None


def healthy(state: PyTree) -> Array:
    """False once a policy's state can no longer be trusted (a neural network whose training diverged to
    non-finite weights): the state's own ``healthy()`` where its type declares one (the family declares it on
    its state record), else True. The engine checks it after every round's update."""
    check = getattr(type(state), "healthy", None)
    return jnp.asarray(True) if check is None else check(state)


def to_dtype(tree: PyTree, dtype: str) -> PyTree:
    """``tree`` with every floating leaf cast to ``dtype`` (integer, boolean and key leaves unchanged)."""
    return jax.tree.map(lambda a: a.astype(dtype) if jnp.issubdtype(jnp.result_type(a), jnp.floating) else a, tree)


class Learner(NamedTuple):
    """An online regression learner (Zhao, Zhou, He & Gu 2023, §3.1): in round t it sees x_t, predicts
    ŷ_t = φ(ẑ_t), then observes y_t.

    Attributes:
      name: registry name.
      link: the link φ (a :class:`nlbandit.models.links.Link`); the loss is ℓ(z, y) = Φ(z) − y z.
      init: ``init(params) -> state``.
      predict: ``predict(params, state, x) -> ẑ``: the linear predictor (ŷ = φ(ẑ)), from the past only.
      update: ``update(params, state, x, y) -> state``.
    """

    name: str
    link: Any
    init: Callable[[PyTree], PyTree]
    predict: Callable[[PyTree, PyTree, Array], Array]
    update: Callable[[PyTree, PyTree, Array, Array], PyTree]


class StreamData(NamedTuple):
    """One trial of a stream.

    Attributes:
      x: (T, d) features.
      y: (T,) labels.
      z_star: (T,) x_tᵀμ* (zeros when the stream has no μ*).
      clipped: (T,) bool, the rounds whose label or label probability was clipped.
    """

    x: jax.Array
    y: jax.Array
    z_star: jax.Array
    clipped: jax.Array


class Stream(NamedTuple):
    """An online-regression stream.

    Attributes:
      name: registry name.
      d, horizon: feature dimension and trial length T.
      link: the link φ of the model the labels follow (identity for the adversarial stream).
      sample: ``sample(key) -> StreamData``.
      has_truth: whether labels come from a true μ* (the stochastic regret (3.3) needs one).
      feature_bound, param_bound: A ≥ ‖x_t‖ and B ≥ ‖μ*‖ (for the theory λ = 4A²K²/κ).
    """

    name: str
    d: int
    horizon: int
    link: Any
    sample: Callable[[jax.Array], StreamData]
    has_truth: bool
    feature_bound: float
    param_bound: float
