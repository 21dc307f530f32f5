"""Environment registry: the names used in experiment files, their hyperparameters and constructors."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable

from nlbandit.core.hyper import ConfigError, Hyper, lookup, resolve_named
from nlbandit.core.types import Env
from nlbandit.data import sources
from nlbandit.data.cache import DataError
from nlbandit.envs import classification, heteroscedastic, latent, streams, synthetic, target
from nlbandit.models.links import LINKS

_VECTOR_DISTS = ("sphere", "cube", "box", "gaussian")
_COMMON = (
    Hyper("d", None, "feature dimension d", kind=int, static=True, low=1),
    Hyper("k", None, "number of arms K (K_max when arms are masked)", kind=int, static=True, low=1),
    Hyper("noise_std", 0.5, "Gaussian reward noise standard deviation σ", static=True, low=0.0),
    Hyper("arms", "sphere", "arm feature distribution", kind=str, static=True, choices=_VECTOR_DISTS),
    Hyper("theta", "sphere", "θ* distribution", kind=str, static=True, choices=_VECTOR_DISTS),
    Hyper("theta_norm", None, "rescale θ* to this norm S (omitted: keep the drawn norm)", static=True,
          low=0.0, low_open=True, optional=True),
    Hyper("theta_var", None, "θ* ~ N(0, v I) with v = 3/d^2 or 3/d (needs theta = 'gaussian')", kind=str,
          static=True, choices=("3/d^2", "3/d"), optional=True),
    Hyper("contexts", "fixed", "one arm pool per instance, or a fresh pool every round", kind=str,
          static=True, choices=("fixed", "fresh")),
    Hyper("theta_star", None, "explicit θ* (d numbers; overrides 'theta' and 'theta_norm')", kind=list,
          static=True, optional=True),
    Hyper("arm_set", None, "explicit fixed arm set (K rows of d numbers; overrides 'arms')", kind=list,
          static=True, optional=True, ndim=2),
    Hyper("avail_prob", 1.0, "probability that an arm is offered in a round", static=True, low=0.0,
          high=1.0, low_open=True),
)


@dataclass(frozen=True)
class EnvEntry:
    """A registered environment family."""

    name: str
    make: Callable[..., Env]
    hypers: tuple[Hyper, ...]
    doc: str


ENVS: dict[str, EnvEntry] = {
    e.name: e
    for e in (
        EnvEntry("linear", synthetic.linear, _COMMON, "linear rewards xᵀθ* + N(0, σ²)"),
        EnvEntry(
            "heteroscedastic",
            heteroscedastic.heteroscedastic,
            (
                _COMMON[0], _COMMON[1],
                Hyper("link", "identity", "mean φ(aᵀθ*): identity or logistic", kind=str, static=True,
                      choices=("identity", "logistic")),
                Hyper("schedule", "constant", "noise level σ_t: constant σ_low, rare bursts of σ_high, decaying, "
                      "or arm-dependent", kind=str, static=True, choices=heteroscedastic.SCHEDULES),
                Hyper("sigma_low", 0.01, "noise level σ_low", static=True, low=0.0),
                Hyper("sigma_high", 1.0, "noise level σ_high (the noise bound of the environment)", static=True,
                      low=0.0),
                Hyper("burst_prob", 0.1, "probability of a σ_high round (schedule = 'burst')", static=True,
                      low=0.0, high=1.0),
                Hyper("arms", "sphere", "arm feature distribution", kind=str, static=True, choices=_VECTOR_DISTS),
                Hyper("theta", "sphere", "θ* distribution", kind=str, static=True, choices=_VECTOR_DISTS),
                Hyper("contexts", "fresh", "a fresh arm set every round (spec 000 §6.5), or one pool", kind=str,
                      static=True, choices=("fixed", "fresh")),
                Hyper("theta_norm", None, "rescale θ* to this norm (omitted: keep the drawn norm)", static=True,
                      low=0.0, low_open=True, optional=True),
            ),
            "heteroscedastic GLM bandit: φ(aᵀθ*) + σ_t·Rademacher, σ_t revealed after acting (Zhao et al. "
            "2023 §6)",
        ),
        EnvEntry(
            "logistic",
            synthetic.logistic,
            _COMMON
            + (
                Hyper("reward", "bernoulli", "Bernoulli(sigmoid) rewards, or sigmoid mean + N(0, σ²)",
                      kind=str, static=True, choices=("bernoulli", "gaussian")),
            ),
            "logistic mean sigmoid(xᵀθ*), Bernoulli or Gaussian-noise rewards",
        ),
        EnvEntry("distance", synthetic.distance, _COMMON, "nonlinear rewards −‖x − θ*‖ + N(0, σ²) (Sun et al. 2025)"),
        EnvEntry("quadratic", synthetic.quadratic,
                 tuple(h for h in _COMMON if h.name in ("d", "k", "noise_std", "arms", "contexts", "arm_set",
                                                        "avail_prob")),
                 "nonlinear rewards 10⁻²·xᵀAAᵀx + N(0, σ²), A ~ N(0, 1)^{d×d} (Sun et al. 2025)"),
        EnvEntry(
            "latent",
            latent.latent,
            (
                _COMMON[0], _COMMON[1],
                Hyper("latent", "h1", "latent function h of the mean sigmoid(h(x))", kind=str, static=True,
                      choices=tuple(latent.LATENTS)),
                Hyper("pool", 2500, "N_vec, the number of distinct context vectors of an instance", kind=int,
                      static=True, low=1),
                Hyper("vectors", "box", "context vectors uniform on [−1, 1]^d or on the unit sphere", kind=str,
                      static=True, choices=latent.VECTORS),
                Hyper("pool_draw", "round", "K distinct vectors per round, or without replacement across the run",
                      kind=str, static=True, choices=latent.POOL_DRAWS),
            ),
            "Bernoulli(sigmoid(h(x))) rewards, h one of Bae & Lee (2025)'s h1–h6, contexts from a pool of "
            "N_vec vectors",
        ),
        EnvEntry(
            "classification",
            classification.from_dataset,
            (
                Hyper("dataset", None, "the data set (`nlbandit data list`)", kind=str, static=True),
                Hyper("encoding", "minmax", "features min–max scaled to [−1, 1], categorical levels random in [−1, 1] "
                      "per run (Bae & Lee), or ordinal codes with L2-normalised rows (Sun, Wang & Xu)", kind=str,
                      static=True, choices=("minmax", "ordinal-l2")),
                Hyper("pool", None, "rows drawn without replacement per instance (omitted: min(2500, rows))",
                      kind=int, static=True, low=1, optional=True),
                Hyper("draw", "uniform", "each round a uniform draw from the pool, or the pool's rows in order",
                      kind=str, static=True, choices=classification.DRAWS),
                Hyper("downsample", 2, "images: average over blocks of this many pixels a side (28 × 28 → 14 × 14 "
                      "at 2; 1 keeps every pixel; minmax encoding only)", kind=int, static=True, low=1),
                Hyper("d", None, "arm feature dimension d₀·K (derived from the data set)", kind=int, static=True,
                      low=1, optional=True),
                Hyper("k", None, "arms K, the number of classes (derived from the data set)", kind=int, static=True,
                      low=2, optional=True),
                Hyper("data_sha256", None, "the data files' checksum (derived: a run is recomputed when they change)",
                      kind=str, static=True, optional=True),
            ),
            "a classification data set as a K-armed bandit: disjoint encoding, reward 1 for the true class (Bae & "
            "Lee 2025 §7; Sun, Wang & Xu 2025 §7.3)",
        ),
        EnvEntry(
            "target-class",
            target.from_dataset,
            (
                Hyper("dataset", None, "the data set (`nlbandit data list`)", kind=str, static=True),
                Hyper("k", 10, "K, examples offered per round (distinct within the round)", kind=int, static=True,
                      low=1),
                Hyper("target", None, "the target class's index (omitted: drawn uniformly per instance)", kind=int,
                      static=True, low=0, optional=True),
                Hyper("p_hit", 0.75, "mean reward of a target-class example", static=True, low=0.0, high=1.0),
                Hyper("p_miss", 0.25, "mean reward of any other example", static=True, low=0.0, high=1.0),
                Hyper("d", None, "feature dimension (derived from the data set)", kind=int, static=True, low=1,
                      optional=True),
                Hyper("data_sha256", None, "the data files' checksum (derived: a run is recomputed when they change)",
                      kind=str, static=True, optional=True),
            ),
            "K random examples of a data set per round, Bernoulli(0.75) for the target class, 0.25 otherwise "
            "(Kveton et al. 2020 §5.2)",
        ),
    )
}


def _data_version(name: str, where: str) -> str:
    """The version of registered data set ``name`` (a :class:`ConfigError` for an unknown name, a
    :class:`DataError` naming ``where`` for one not in the cache)."""
    if name not in sources.SOURCES:
        raise ConfigError(f"{where}: field 'dataset' must be one of {', '.join(map(repr, sources.SOURCES))} "
                          f"(`nlbandit data list`), got {name!r}")
    try:
        return sources.version(name)
    except DataError as e:
        raise DataError(f"{where}: {e}") from None


def _check_derived(values: dict[str, Any], derived: dict[str, Any], name: str, where: str) -> None:
    """Refuse a given field of ``derived`` whose value differs from the one the data set gives."""
    for field, value in derived.items():
        if values[field] is not None and values[field] != value:
            why = ("the data set's files changed since this configuration was resolved" if field == "data_sha256"
                   else f"data set {name!r} gives {value}")
            raise ConfigError(f"{where}: field '{field}' = {values[field]!r} does not match: {why}; omit it")


def _resolve_target(values: dict[str, Any], where: str) -> dict[str, Any]:
    """The target-class bandit's config with d and the data checksum derived from the data set."""
    name = values["dataset"]
    version = _data_version(name, where)
    try:
        x, _, labels, classes = target.table(name, version)
    except ConfigError as e:
        raise ConfigError(f"{where}: field 'dataset': {e}") from None
    derived = {"d": x.shape[1], "data_sha256": version}
    _check_derived(values, derived, name, where)
    if values["target"] is not None and values["target"] >= classes:
        raise ConfigError(f"{where}: field 'target' = {values['target']} is not a class index of data set {name!r} "
                          f"(0..{classes - 1})")
    if values["k"] > labels.size:
        raise ConfigError(f"{where}: field 'k' = {values['k']} is more than the {labels.size} rows of data set {name!r}")
    if x.shape[1] > target.MAX_FEATURES:
        raise ConfigError(f"{where}: data set {name!r} has {x.shape[1]} features; the target-class bandit takes at "
                          f"most {target.MAX_FEATURES}")
    return {"name": "target-class", **values, **derived}


def _resolve_classification(values: dict[str, Any], where: str) -> dict[str, Any]:
    """The classification bandit's config with d, k, pool and the data checksum derived from the data set.

    Raises:
      DataError: the data set is not in the cache (with what to do), or its files are corrupted.
      ConfigError: a given d, k, pool or checksum that does not fit the data set.
    """
    name = values["dataset"]
    version = _data_version(name, where)
    numeric, codes, levels, labels = classification.table(name, version, values["encoding"], values["downsample"])
    n, k = labels.size, int(labels.max()) + 1
    derived = {"d": (numeric.shape[1] + codes.shape[1]) * k, "k": k, "data_sha256": version}
    _check_derived(values, derived, name, where)
    if values["pool"] is not None and values["pool"] > n:
        raise ConfigError(f"{where}: field 'pool' = {values['pool']} is more than the {n} rows of data set {name!r}")
    return {"name": "classification", **values, **derived, "pool": values["pool"] or min(2500, n)}


def env_entry(name: Any, where: str = "env") -> EnvEntry:
    """The registry entry for ``name``; :class:`ConfigError` listing the known names otherwise."""
    return lookup(ENVS, name, where)


def resolve_env(config: dict[str, Any], where: str = "env") -> dict[str, Any]:
    """Validate an environment config ``{"name": ..., **hyperparameters}``; return it with defaults filled."""
    entry = env_entry(config.get("name"), where)
    values = resolve_named(entry, config, where)
    if entry.name == "classification":
        return _resolve_classification(values, where)
    if entry.name == "target-class":
        return _resolve_target(values, where)
    if entry.name == "latent":  # rewards are 0 or 1: nothing to bound
        if values["pool"] < values["k"]:
            raise ConfigError(f"{where}: field 'pool' must be >= k = {values['k']} (each round offers k distinct "
                              f"vectors of the pool), got {values['pool']}")
        return {"name": entry.name, **values}
    # Rewards and regret must stay finite: per round |xᵀθ*| ≤ ‖x‖‖θ*‖ (‖x‖ + ‖θ*‖ for the distance bandit,
    # 10⁻²‖A‖²_F‖x‖² for the quadratic one), plus the noise, summed over up to 2³¹
    # rounds (the engine's limit) must stay far below float64's maximum 1.8e308 (policies square rewards too).
    root_d = math.sqrt(values["d"])  # ‖v‖ ≤ 1 on the sphere and in the cube, ≤ √d in the box, and for N(0, I_d)
    norm = {"sphere": 1.0, "cube": 1.0, "box": root_d, "gaussian": root_d + 10.0}  # ≤ √d + 10 w.p. 1 − e⁻⁵⁰
    if values.get("arm_set"):
        arm_field, x_norm = "arm_set", max(math.hypot(*row) for row in values["arm_set"])
    else:
        arm_field, x_norm = "arms", norm[values["arms"]]
    if entry.name == "quadratic":  # ‖A‖²_F ~ χ²(d²) is below d² + 100d except with negligible probability
        theta_field, theta_bound = "d", math.sqrt(1e-2 * (values["d"] ** 2 + 100 * values["d"]))
    elif values.get("theta_star"):
        theta_field, theta_bound = "theta_star", math.hypot(*values["theta_star"])
    elif values.get("theta_norm"):
        theta_field, theta_bound = "theta_norm", values["theta_norm"]
    else:  # θ* ~ N(0, v I) has v ≤ 3
        theta_field, theta_bound = "theta", norm[values["theta"]] * (math.sqrt(3) if values.get("theta_var") else 1)
    if entry.name == "heteroscedastic":
        noise_field, noise = "sigma_high", values["sigma_high"]
    else:  # float32 normal draws are below 10 in magnitude
        noise_field, noise = "noise_std", 10 * values["noise_std"]
    if entry.name == "distance":
        signal = x_norm + theta_bound
    elif entry.name == "quadratic":
        signal = x_norm * theta_bound * x_norm * theta_bound
    else:
        signal = x_norm * theta_bound
    per_round = signal + noise
    if per_round * 2**31 > 1e100:
        sizes = {arm_field: x_norm, theta_field: theta_bound, noise_field: noise}
        raise ConfigError(f"{where}: field '{max(sizes, key=sizes.get)}' makes rewards too large: |mean| + noise "
                          f"can reach {per_round:.3g} per round (‖x‖ ≤ {x_norm:.3g}, ‖θ*‖ ≤ {theta_bound:.3g}, noise "
                          f"≤ {noise:.3g}); summed over up to 2³¹ rounds that must stay below 1e100, far from "
                          "float64's maximum 1.8e308")
    if entry.name == "heteroscedastic":
        if values["sigma_low"] > values["sigma_high"]:
            raise ConfigError(f"{where}: field 'sigma_low' = {values['sigma_low']:g} must be <= sigma_high = "
                              f"{values['sigma_high']:g}")
        return {"name": entry.name, **values}
    d, k = values["d"], values["k"]
    if values.get("theta_star") is not None and len(values["theta_star"]) != d:
        raise ConfigError(f"{where}: field 'theta_star' must have d = {d} entries, got {len(values['theta_star'])}")
    if values.get("theta_var") is not None and values["theta"] != "gaussian":
        raise ConfigError(f"{where}: field 'theta_var' needs theta = 'gaussian', got {values['theta']!r}")
    if values["arm_set"] is not None:
        if values["contexts"] != "fixed":
            raise ConfigError(f"{where}: field 'arm_set' needs contexts = 'fixed', got {values['contexts']!r}")
        if len(values["arm_set"]) != k or len(values["arm_set"][0]) != d:
            raise ConfigError(f"{where}: field 'arm_set' must be K = {k} rows of d = {d} numbers, got "
                              f"{len(values['arm_set'])} rows of {len(values['arm_set'][0])}")
    return {"name": entry.name, **values}


def instance_floats(config: dict[str, Any]) -> int:
    """Floats one instance of the resolved environment ``config`` holds: its K × d arm pool, plus the d × d
    matrix A of the quadratic bandit (θ* and the rest are negligible beside them); for ``latent``, its
    context pool with the pool's permutation, θ and Θ; for ``classification``, its pool of rows with their
    labels."""
    d, k = config["d"], config["k"]
    if config["name"] == "latent":  # the pool, its permutation, θ and Θ
        return config["pool"] * (d + 1) + d * d + d
    if config["name"] == "classification":  # the pool's rows and labels
        return config["pool"] * (d // k + 1)
    if config["name"] == "target-class":  # the target and a key; the data set is shared by every instance
        return 4
    return d * k + (d * d if config["name"] == "quadratic" else 0)


def make_env(name: str, **hyperparameters: Any) -> Env:
    """Construct a registered environment after validating its hyperparameters.

    Example: ``make_env("linear", d=20, k=50, noise_std=0.5)``.
    """
    config = resolve_env({"name": name, **hyperparameters}, f"env '{name}'")
    return _build_env(name, tuple(sorted((k, v) for k, v in config.items() if k != "name")))


@functools.lru_cache(maxsize=256)
def _build_env(name: str, config: tuple[tuple[str, Any], ...]) -> Env:
    """One :class:`Env` object per resolved configuration, so that simulations of equal environments share
    their compiled programs (:func:`nlbandit.core.simulate.simulate` caches by object)."""
    return ENVS[name].make(**dict(config))


# ---------------------------------------------------------------------------------------------------
# Online-regression streams (``loop = "regression"`` experiment files; Zhao, Zhou, He & Gu 2023)
# ---------------------------------------------------------------------------------------------------

_STREAM_COMMON = (
    Hyper("d", None, "feature dimension d", kind=int, static=True, low=1),
    Hyper("features", "sphere", "x_t uniform on the sphere of radius A, or round robin over A·e_i "
          "(Theorem 5.1's instance)", kind=str, static=True, choices=streams.FEATURES),
    Hyper("y_max", 5.0, "label bound Y (clipping; the adversary's ±Y)", static=True, low=0.0, low_open=True),
    Hyper("a", 1.0, "feature norm A", static=True, low=0.0, low_open=True),
)

STREAMS: dict[str, EnvEntry] = {
    e.name: e
    for e in (
        EnvEntry(
            "stochastic",
            lambda horizon, link, sigma_means, **v: streams.stochastic(
                LINKS[link], horizon=horizon, name="stochastic",
                **{**v, "sigma": math.sqrt(v["sigma"]) if sigma_means == "variance" else v["sigma"]}),
            _STREAM_COMMON + (
                Hyper("link", "identity", "link φ of the label model", kind=str, static=True,
                      choices=tuple(LINKS)),
                Hyper("noise", "gaussian", "N(0, σ²) noise, or bounded ε = ±R w.p. σ²/(2R²) each (else 0)",
                      kind=str, static=True, choices=streams.NOISES),
                Hyper("sigma", 1.0, "noise scale σ (its std, or its variance: see sigma_means)", static=True,
                      low=0.0),
                Hyper("sigma_means", "std", "whether 'sigma' is the standard deviation or the variance",
                      kind=str, static=True, choices=("std", "variance")),
                Hyper("noise_bound", 1.0, "bound R on |ε| of the bounded noise", static=True, low=0.0,
                      low_open=True),
                Hyper("clip", "none", "clip labels to [−Y, Y], or the noise to ±(Y − AB)", kind=str,
                      static=True, choices=streams.CLIPS),
                Hyper("b", 1.0, "μ* ~ U[−B/√d, B/√d]^d, so ‖μ*‖ ≤ B", static=True, low=0.0),
            ),
            "labels φ(x_tᵀμ*) + ε_t (Zhao et al. 2023, §3.1, Conditions 3.2/3.3)",
        ),
        EnvEntry(
            "adversarial",
            lambda horizon, **v: streams.adversarial(horizon=horizon, name="adversarial", **v),
            _STREAM_COMMON,
            "±Y labels of Bartlett et al. (2015), Zhao et al. 2023 eq. (3.4)",
        ),
    )
}


def resolve_stream(config: dict[str, Any], horizon: int, where: str = "env") -> dict[str, Any]:
    """Validate a stream config ``{"name": ..., **hyperparameters}`` for ``horizon`` rounds; fill defaults."""
    entry = lookup(STREAMS, config.get("name"), where)
    values = resolve_named(entry, config, where)
    if entry.name == "adversarial" and horizon < values["d"]:
        raise ConfigError(f"{where}: the adversarial labels need a full-rank design, so horizon >= d = "
                          f"{values['d']}, got horizon = {horizon}")
    if entry.name == "stochastic":
        std = math.sqrt(values["sigma"]) if values["sigma_means"] == "variance" else values["sigma"]
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
    return {"name": entry.name, **values}


def make_stream(name: str, horizon: int, **hyperparameters: Any) -> streams.Stream:
    """Construct a registered online-regression stream after validating its hyperparameters.

    Example: ``make_stream("stochastic", 2000, d=5, sigma=2.0)``.
    """
    config = resolve_stream({"name": name, **hyperparameters}, horizon, f"stream '{name}'")
    return STREAMS[name].make(horizon, **{k: v for k, v in config.items() if k != "name"})
