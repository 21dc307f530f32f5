"""Online-regression streams (x_t, y_t) of Zhao, Zhou, He & Gu (2023), §3 and §4.2 (spec 000 §1.2, §3, §4).

Labels never depend on the learner's predictions (the adversary of eq. (3.4) sees only the design and
its own past labels), so a stream draws a whole trial at once: ``sample(key) -> StreamData`` with the
T × d design and the T labels. Features are ``sphere`` (uniform on the sphere of radius A, i.e.
g/‖g‖ with g ~ N(0, I_d)) or ``basis`` (round robin over the standard basis, x_t = A e_{(t−1) mod d}:
the lower-bound instance of Theorem 5.1, spec 000 §4.3).

* :func:`stochastic`: y_t = φ(x_tᵀμ*) + ε_t with μ* ~ U[−B/√d, B/√d]^d (so ‖μ*‖ ≤ B) and i.i.d. noise:
  ``gaussian`` N(0, σ²) (Condition 3.2), or ``bounded`` ε = ±R with probability σ²/(2R²) each and 0
  otherwise (Condition 3.3 with |ε| ≤ R and E ε² = σ²: the case where R and σ differ, Remark 3.4).
  ``clip``: ``label`` clips y_t to [−Y, Y] (Fig. 2's literal wording; it shrinks the label's mean, so μ*
  is slightly misspecified), ``noise`` clips ε_t to ±(Y − AB) (zero-mean noise, labels in [−Y, Y]).
* :func:`adversarial`: the labels of Bartlett et al. (2015) as used in eq. (3.4): y_t = +Y with
  probability p_t = ½ + m_t/(2Y), else −Y, where m_t = x_tᵀP_t s_{t−1}, s_{t−1} = Σ_{τ<t} y_τ x_τ and
  P_t⁻¹ = Σ_{τ≤t} x_τx_τᵀ + Σ_{τ>t} q_τ/(1+q_τ) x_τx_τᵀ, q_τ = x_τᵀP_τx_τ. Deviation (a typo fix,
  spec 000 §3): the paper's denominator 2B is Bartlett's label bound, i.e. 2Y, which makes E[y_t | past]
  = m_t, the minimax forecaster's prediction. p_t is clipped to [0, 1] and the clipped rounds are
  counted, since Bartlett's validity condition is not guaranteed for random features. The backward
  recursion P_{t−1} = P_t + (P_t x_t)(P_t x_t)ᵀ from P_T = (XᵀX)⁻¹ gives every v_t = P_t x_t in O(Td²)
  (the design must have full rank: T ≥ d). The stream has no μ*.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper
from nlbandit.core.keys import normal
from nlbandit.core.types import Stream, StreamData
from nlbandit.envs.entry import EnvEntry
from nlbandit.envs.synthetic import sample_vectors
from nlbandit.models.links import LINKS, Link

NUMERICS = 1
"""Version of the numbers its streams compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


FEATURES = ("sphere", "basis")
NOISES = ("gaussian", "bounded")
CLIPS = ("none", "label", "noise")


def _features(key, horizon: int, d: int, kind: str, a: float) -> jax.Array:
    if kind == "basis":
        return a * jnp.eye(d)[jnp.arange(horizon) % d]
    return a * sample_vectors(key, horizon, d, "sphere")


def stochastic(link: Link, d: int, horizon: int, *, features: str = "sphere", noise: str = "gaussian",
               sigma: float = 1.0, noise_bound: float = 1.0, clip: str = "none", y_max: float = 5.0,
               a: float = 1.0, b: float = 1.0, name: str = "stochastic") -> Stream:
    """Labels φ(x_tᵀμ*) + ε_t (see the module docstring); σ is the noise's standard deviation."""

    def sample(key) -> StreamData:
        k_theta, k_x, k_noise, k_sign = jax.random.split(key, 4)
        mu = b * sample_vectors(k_theta, 1, d, "cube")[0]
        x = _features(k_x, horizon, d, features, a)
        z = x @ mu
        if noise == "gaussian":
            eps = sigma * normal(k_noise, (horizon,))
        else:
            hit = jax.random.uniform(k_noise, (horizon,), jnp.float64) < sigma**2 / noise_bound**2
            eps = jnp.where(hit, noise_bound * jax.random.rademacher(k_sign, (horizon,), jnp.float64), 0.0)
        clipped = jnp.zeros(horizon, bool)
        if clip == "noise":
            limit = y_max - a * b
            clipped = jnp.abs(eps) > limit
            eps = jnp.clip(eps, -limit, limit)
        y = link.mean(z) + eps
        if clip == "label":
            clipped = jnp.abs(y) > y_max
            y = jnp.clip(y, -y_max, y_max)
        return StreamData(x, y, z, clipped)

    return Stream(name, d, horizon, link, sample, True, a, b)


def bartlett_directions(x: jax.Array) -> jax.Array:
    """v_t = P_t x_t for every round (T, d), by the backward recursion from P_T = (XᵀX)⁻¹."""

    def back(p, xt):
        v = p @ xt
        return p + jnp.outer(v, v), v

    _, v = jax.lax.scan(back, jnp.linalg.inv(x.T @ x), x, reverse=True)
    return v


def bartlett_labels(x: jax.Array, key: jax.Array, y_max: float) -> tuple[jax.Array, jax.Array]:
    """Labels ±Y of eq. (3.4) for the design ``x`` (T, d): y_t = +Y with probability
    clip(½ + m_t/(2Y), 0, 1), m_t = v_tᵀ s_{t−1}; returns (y (T,), clipped (T,) bool)."""
    v = bartlett_directions(x)
    u = jax.random.uniform(key, (x.shape[0],), jnp.float64)

    def forward(s, inputs):
        xt, vt, ut = inputs
        p = 0.5 + (vt @ s) / (2.0 * y_max)
        y = jnp.where(ut < jnp.clip(p, 0.0, 1.0), y_max, -y_max)
        return s + y * xt, (y, (p < 0.0) | (p > 1.0))

    _, (y, clipped) = jax.lax.scan(forward, jnp.zeros(x.shape[1]), (x, v, u))
    return y, clipped


def adversarial(d: int, horizon: int, *, features: str = "sphere", y_max: float = 5.0,
                a: float = 1.0, name: str = "adversarial") -> Stream:
    """The ±Y labels of Bartlett et al. (2015), eq. (3.4) with the 2Y denominator (module docstring)."""

    def sample(key) -> StreamData:
        k_x, k_y = jax.random.split(key)
        x = _features(k_x, horizon, d, features, a)
        y, clipped = bartlett_labels(x, k_y, y_max)
        return StreamData(x, y, jnp.zeros(horizon), clipped)

    return Stream(name, d, horizon, LINKS["identity"], sample, False, a, 0.0)


def _std(values: dict) -> float:
    """The noise's standard deviation (``sigma``, or its square root when ``sigma_means = "variance"``)."""
    return math.sqrt(values["sigma"]) if values["sigma_means"] == "variance" else values["sigma"]


def _make_stochastic(horizon: int, link: str, sigma_means: str, **values) -> Stream:
    """:func:`stochastic` of a resolved configuration (``sigma`` read as ``sigma_means`` says)."""
    return stochastic(LINKS[link], horizon=horizon, name="stochastic",
                      **{**values, "sigma": _std({"sigma": values["sigma"], "sigma_means": sigma_means})})


def _make_adversarial(horizon: int, **values) -> Stream:
    """:func:`adversarial` of a resolved configuration."""
    return adversarial(horizon=horizon, name="adversarial", **values)


def _finalize_stochastic(values, where):
    """Bounded noise within its bound and, unclipped, labels within ±Y; noise clipping needs Y > AB."""
    std = _std(values)
    if values["noise"] == "bounded" and std > values["noise_bound"]:
        raise ConfigError(f"{where}: field 'sigma' (std {std:g}) must be <= noise_bound = "
                          f"{values['noise_bound']:g} for bounded noise")
    reach = max(abs(float(LINKS[values["link"]].mean(s * values["a"] * values["b"]))) for s in (-1.0, 1.0))
    unclipped = values["noise"] == "bounded" and values["clip"] == "none"
    if unclipped and reach + values["noise_bound"] > values["y_max"]:
        raise ConfigError(f"{where}: field 'y_max': bounded noise promises labels in [−Y, Y] = "
                          f"[{-values['y_max']:g}, {values['y_max']:g}], but max|φ(xᵀμ*)| + R = "
                          f"{reach:g} + {values['noise_bound']:g} exceeds Y; raise y_max, lower noise_bound, "
                          "or clip the labels (clip = 'label')")
    if values["clip"] == "noise" and values["y_max"] <= values["a"] * values["b"]:
        raise ConfigError(f"{where}: field 'y_max' must exceed A·B = {values['a'] * values['b']:g} to "
                          f"clip the noise to ±(Y − AB), got {values['y_max']:g}")
    return values


def _adversarial_horizon(values, horizon, where):
    """The adversarial labels need a full-rank design: at least d rounds."""
    if horizon < values["d"]:
        raise ConfigError(f"{where}: the adversarial labels need a full-rank design, so horizon >= d = "
                          f"{values['d']}, got horizon = {horizon}")


_STREAM_COMMON = (
    Hyper("d", None, "feature dimension d", kind=int, static=True, low=1),
    Hyper("features", "sphere", "x_t uniform on the sphere of radius A, or round robin over A·e_i "
          "(Theorem 5.1's instance)", kind=str, static=True, choices=FEATURES),
    Hyper("y_max", 5.0, "label bound Y (clipping; the adversary's ±Y)", static=True, low=0.0, low_open=True),
    Hyper("a", 1.0, "feature norm A", static=True, low=0.0, low_open=True),
)

STREAM_ENTRIES = (
    EnvEntry(
        "stochastic",
        _make_stochastic,
        _STREAM_COMMON + (
            Hyper("link", "identity", "link φ of the label model", kind=str, static=True, choices=tuple(LINKS)),
            Hyper("noise", "gaussian", "N(0, σ²) noise, or bounded ε = ±R w.p. σ²/(2R²) each (else 0)",
                  kind=str, static=True, choices=NOISES),
            Hyper("sigma", 1.0, "noise scale σ (its std, or its variance: see sigma_means)", static=True, low=0.0),
            Hyper("sigma_means", "std", "whether 'sigma' is the standard deviation or the variance",
                  kind=str, static=True, choices=("std", "variance")),
            Hyper("noise_bound", 1.0, "bound R on |ε| of the bounded noise", static=True, low=0.0, low_open=True),
            Hyper("clip", "none", "clip labels to [−Y, Y], or the noise to ±(Y − AB)", kind=str, static=True,
                  choices=CLIPS),
            Hyper("b", 1.0, "μ* ~ U[−B/√d, B/√d]^d, so ‖μ*‖ ≤ B", static=True, low=0.0),
        ),
        "labels φ(x_tᵀμ*) + ε_t (Zhao et al. 2023, §3.1, Conditions 3.2/3.3)",
        _finalize_stochastic,
    ),
    EnvEntry("adversarial", _make_adversarial, _STREAM_COMMON,
             "±Y labels of Bartlett et al. (2015), Zhao et al. 2023 eq. (3.4)", check_horizon=_adversarial_horizon),
)
"""The online-regression streams (:mod:`nlbandit.envs.registry` collects them)."""
