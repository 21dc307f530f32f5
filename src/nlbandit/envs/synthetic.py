"""Synthetic bandits: linear, logistic, and the nonlinear ``distance`` and ``quadratic`` of Sun, Wang & Xu
(2025) §7.1 (spec 003 §4.2).

One instance = θ* (for ``quadratic``, the matrix A) and (for a fixed arm set) a pool of K arms, drawn by
``reset`` from the repetition's key. Options shared by the families:

* ``arms`` / ``theta``: ``"sphere"`` (uniform on the unit sphere; seed 003's choice, spec 003 §4.2 U1),
  ``"cube"`` (uniform on [−1/√d, 1/√d]^d, so ‖x‖ ≤ 1), ``"box"`` (uniform on [−1, 1]^d, not
  normalised: Kveton et al. 2020 §5.1), ``"gaussian"`` (N(0, I_d), not normalised; the spec 003 §9
  variant for θ*).
* ``theta_var``: with ``theta="gaussian"``, θ* ~ N(0, v I_d) with v = 3/d² (Kveton et al. 2020 §5.1 as
  printed) or 3/d (which gives the Var[xᵀθ*] = 1 the paper's prose claims; spec 002 §7.1).
* ``theta_norm``: rescale θ* to this norm (``S``); omitted keeps the distribution's own norm.
* ``contexts``: ``"fixed"`` (one arm pool per instance, the theory's setting) or ``"fresh"`` (a new pool
  drawn every round, as in the contextual variants).
* ``theta_star`` / ``arm_set``: an explicit θ* and/or fixed arm set, used instead of the draws.
* ``avail_prob``: each arm is offered in a round independently with this probability (the arm with the
  smallest draw is always offered, so a round never has none); 1 offers all K arms.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, EnvFacts, Feedback, ProblemSpec
from nlbandit.envs.entry import COMMON, EnvEntry, arm_norm, check_finite_rewards, theta_norm

NUMERICS = 1
"""Version of the numbers its environments compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


class Instance(NamedTuple):
    """One problem instance: the parameter θ* (d,) (the matrix A (d, d) of :func:`quadratic`) and the fixed
    arm pool (K, d)."""

    theta: jax.Array
    arms: jax.Array


def sample_vectors(key: jax.Array, n: int, d: int, dist: str) -> jax.Array:
    """``n`` vectors in ℝ^d from ``dist`` ∈ {sphere, cube, box, gaussian} (see module docstring); ``matrix``
    gives one d × d matrix of N(0, 1) entries (the A of :func:`quadratic`) for n = 1."""
    if dist == "matrix":
        return normal(key, (n, d, d))
    if dist in ("cube", "box"):
        u = jax.random.uniform(key, (n, d), jnp.float64, -1.0, 1.0)
        return u / jnp.sqrt(d) if dist == "cube" else u
    g = normal(key, (n, d))
    return g / jnp.linalg.norm(g, axis=1, keepdims=True) if dist == "sphere" else g


_THETA_VARIANCE = {"3/d^2": lambda d: 3.0 / d**2, "3/d": lambda d: 3.0 / d}


def instance_reset(spec: ProblemSpec, arms: str, theta: str, theta_norm: float | None, theta_var: str | None,
                   theta_star, arm_set):
    """``reset(key) -> Instance``: θ* and the fixed arm pool drawn with the module's instance options."""

    def reset(key):
        k_theta, k_arms = jax.random.split(key)
        if theta_star is not None:
            th = jnp.asarray(theta_star, jnp.float64)
        else:
            th = sample_vectors(k_theta, 1, spec.d, theta)[0]
            if theta_var is not None:
                th = th * jnp.sqrt(_THETA_VARIANCE[theta_var](spec.d))
            if theta_norm is not None:
                th = th * (theta_norm / jnp.linalg.norm(th))
        pool = (jnp.asarray(arm_set, jnp.float64) if arm_set is not None
                else sample_vectors(k_arms, spec.k, spec.d, arms))
        return Instance(th, pool)

    return reset


def arm_observer(spec: ProblemSpec, arms: str, contexts: str, avail_prob: float):
    """``observe(state, key, t) -> (contexts, mask)``: the fixed pool or a fresh draw, with availability."""

    def observe(state, key, t):
        k_ctx, k_mask = jax.random.split(key)
        ctx = state.arms if contexts == "fixed" else sample_vectors(k_ctx, spec.k, spec.d, arms)
        if avail_prob >= 1.0:
            return ctx, jnp.ones((spec.k,), bool)
        u = jax.random.uniform(k_mask, (spec.k,))
        return ctx, (u < avail_prob).at[jnp.argmin(u)].set(True)

    return observe


def _synthetic(name: str, d: int, k: int, mean, reward, facts: EnvFacts, *, arms: str = "sphere",
               theta: str = "sphere", theta_norm: float | None = None, theta_var: str | None = None,
               contexts: str = "fixed", avail_prob: float = 1.0, theta_star: tuple[float, ...] | None = None,
               arm_set: tuple[tuple[float, ...], ...] | None = None) -> Env:
    """An instance-based environment: ``mean(θ*, contexts) -> (K,)`` and ``reward(key, mean) -> Y``,
    with the instance options of the module docstring; ``facts`` says what the rewards promise (the arm
    set's fixedness is added from ``contexts``)."""
    spec = ProblemSpec(d, k, 0)

    def mean_fn(state, ctx):
        return mean(state.theta, ctx)

    def pull(state, key, t, ctx, arm):
        return Feedback(reward(key, mean_fn(state, ctx)[arm]))

    reset = instance_reset(spec, arms, theta, theta_norm, theta_var, theta_star, arm_set)
    return Env(name, spec, reset, arm_observer(spec, arms, contexts, avail_prob), pull, mean_fn,
               facts._replace(fixed_arms=contexts == "fixed"))


def linear(d: int, k: int, noise_std: float = 0.5, **instance) -> Env:
    """Linear bandit: E[Y | x] = xᵀθ*, Y = xᵀθ* + η with η ~ N(0, noise_std²).

    ``instance``: arms, theta, theta_norm, theta_var, contexts, avail_prob, theta_star, arm_set (module docstring).
    """
    return _synthetic("linear", d, k, lambda th, ctx: ctx @ th,
                      lambda key, mu: mu + noise_std * normal(key, ()), EnvFacts(link="identity"), **instance)


def logistic(d: int, k: int, reward: str = "bernoulli", noise_std: float = 0.5, **instance) -> Env:
    """Logistic bandit: E[Y | x] = sigmoid(xᵀθ*).

    ``reward="bernoulli"``: Y ~ Bernoulli(sigmoid(xᵀθ*)). ``reward="gaussian"``: Y = sigmoid(xᵀθ*) + η,
    η ~ N(0, noise_std²), the "logistic bandit" of Sun, Wang & Xu (2025) §7.1 (spec 003 §1.2).
    ``instance``: as for :func:`linear`.
    """

    def bernoulli(key, mu):
        return (jax.random.uniform(key, (), jnp.float64) < mu).astype(jnp.float64)

    def gaussian(key, mu):
        return mu + noise_std * normal(key, ())

    facts = EnvFacts(reward_range=(0.0, 1.0) if reward == "bernoulli" else EnvFacts().reward_range, link="logistic")
    return _synthetic("logistic", d, k, lambda th, ctx: jax.nn.sigmoid(ctx @ th),
                      bernoulli if reward == "bernoulli" else gaussian, facts, **instance)


def distance(d: int, k: int, noise_std: float = 0.5, **instance) -> Env:
    """Distance bandit (Sun, Wang & Xu 2025 §7.1, Fig. 1d): E[Y | x] = −‖x − θ*‖₂, Y = mean + N(0, σ²);
    with arms and θ* on the unit sphere the means lie in [−2, 0] (spec 003 §4.2).

    ``instance``: as for :func:`linear`.
    """
    return _synthetic("distance", d, k, lambda th, ctx: -jnp.linalg.norm(ctx - th, axis=-1),
                      lambda key, mu: mu + noise_std * normal(key, ()), EnvFacts(), **instance)


def quadratic(d: int, k: int, noise_std: float = 0.5, **instance) -> Env:
    """Quadratic bandit (Sun, Wang & Xu 2025 §7.1, Figs. 1e, 1f, 2d, 4b; the h₂ of Zhou et al. 2020):
    E[Y | x] = 10⁻² xᵀAAᵀx = 10⁻² ‖Aᵀx‖², A ∈ ℝ^{d×d} with i.i.d. N(0, 1) entries drawn once per instance,
    Y = mean + N(0, σ²); on the unit sphere the means average 10⁻²·d (≈ 0.2 at d = 20; spec 003 §4.2).

    ``instance``: arms, contexts, avail_prob, arm_set (module docstring); A is always drawn.
    """
    return _synthetic("quadratic", d, k, lambda a, ctx: 1e-2 * jnp.sum((ctx @ a) ** 2, axis=-1),
                      lambda key, mu: mu + noise_std * normal(key, ()), EnvFacts(), theta="matrix", **instance)


def _check_given_arrays(values: dict, where: str) -> None:
    """An explicit θ* of d entries, ``theta_var`` only with Gaussian θ*, an explicit arm set of K × d numbers on
    fixed contexts (for the fields the environment has)."""
    d, k = values["d"], values["k"]
    if values.get("theta_star") is not None and len(values["theta_star"]) != d:
        raise ConfigError(f"{where}: field 'theta_star' must have d = {d} entries, got {len(values['theta_star'])}")
    if values.get("theta_var") is not None and values["theta"] != "gaussian":
        raise ConfigError(f"{where}: field 'theta_var' needs theta = 'gaussian', got {values['theta']!r}")
    if values.get("arm_set") is not None:
        if values["contexts"] != "fixed":
            raise ConfigError(f"{where}: field 'arm_set' needs contexts = 'fixed', got {values['contexts']!r}")
        if len(values["arm_set"]) != k or len(values["arm_set"][0]) != d:
            raise ConfigError(f"{where}: field 'arm_set' must be K = {k} rows of d = {d} numbers, got "
                              f"{len(values['arm_set'])} rows of {len(values['arm_set'][0])}")


def _finalize(signal):
    """The ``finalize`` hook of a synthetic bandit whose |mean| is at most ``signal(‖x‖ bound, ‖θ*‖ bound)``:
    rewards that stay finite (:func:`~nlbandit.envs.entry.check_finite_rewards`) and consistent explicit
    arrays (:func:`_check_given_arrays`)."""

    def finalize(values, where):
        arm, theta = arm_norm(values), theta_norm(values)
        check_finite_rewards(values, where, signal(arm[1], theta[1]), arm, theta,
                             ("noise_std", 10 * values["noise_std"]))
        _check_given_arrays(values, where)
        return values

    return finalize


def _quadratic_finalize(values, where):
    """:func:`_finalize` of the quadratic bandit, |mean| ≤ 10⁻²‖A‖²_F‖x‖² with ‖A‖²_F below d² + 100d
    (‖A‖²_F ~ χ²(d²) exceeds it with negligible probability)."""
    arm, a_norm = arm_norm(values), ("d", math.sqrt(1e-2 * (values["d"] ** 2 + 100 * values["d"])))
    check_finite_rewards(values, where, (arm[1] * a_norm[1]) ** 2, arm, a_norm, ("noise_std", 10 * values["noise_std"]))
    _check_given_arrays(values, where)
    return values

ENTRIES = (
    EnvEntry("linear", linear, COMMON, "linear rewards xᵀθ* + N(0, σ²)", _finalize(lambda x, th: x * th)),
    EnvEntry("logistic", logistic,
             COMMON + (Hyper("reward", SIGNATURE, "Bernoulli(sigmoid) rewards, or sigmoid mean + N(0, σ²)",
                             kind=str, static=True, choices=("bernoulli", "gaussian")),),
             "logistic mean sigmoid(xᵀθ*), Bernoulli or Gaussian-noise rewards", _finalize(lambda x, th: x * th)),
    EnvEntry("distance", distance, COMMON, "nonlinear rewards −‖x − θ*‖ + N(0, σ²) (Sun et al. 2025)",
             _finalize(lambda x, th: x + th)),
    EnvEntry("quadratic", quadratic,
             tuple(h for h in COMMON if h.name in ("d", "k", "noise_std", "arms", "contexts", "arm_set", "avail_prob")),
             "nonlinear rewards 10⁻²·xᵀAAᵀx + N(0, σ²), A ~ N(0, 1)^{d×d} (Sun et al. 2025)", _quadratic_finalize,
             lambda config: config["d"] * config["k"] + config["d"] ** 2),
)
"""The synthetic bandits (:mod:`nlbandit.envs.registry` collects them)."""
