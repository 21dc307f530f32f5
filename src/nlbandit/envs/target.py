"""Target-class bandits on a classification data set (Kveton et al. 2020 §5.2, spec 002 §4.2).

An instance is a target class c (drawn uniformly from the classes per instance, or fixed). Each round offers
K examples drawn uniformly from the whole data set, distinct within the round; pulling an example of class c
pays Bernoulli(``p_hit`` = 0.75), any other Bernoulli(``p_miss`` = 0.25). One shared model maps an
example's features to its expected reward; the features are the raw ones, an image's pixels divided by 255
(spec 002 §4.2 [R]), other columns min–max scaled to [0, 1].

The K examples of round t are a function of the instance and t (a key kept in the instance, folded with t),
so ``pull`` reads the labels of the very examples ``observe`` showed. ``mean`` finds an example's label from
its features alone: every row's features hash to a 64-bit integer (their float64 bit patterns times fixed odd
integers, summed modulo 2⁶⁴, so the sum is exact in any order) looked up in the data set's sorted hashes;
rows that share their features share the mean of their labels' rewards. The expected reward of the best
arm is p_hit when the round shows a class-c example, so uniform play earns p_miss + (p_hit − p_miss)·p_c and
the oracle about p_hit − (p_hit − p_miss)(1 − p_c)^K (spec 002 §4.2 [D], §6.3 item 17).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.hyper import ConfigError, Hyper
from nlbandit.core.types import Env, EnvFacts, Feedback, ProblemSpec
from nlbandit.data import sources
from nlbandit.data.encode import minmax
from nlbandit.envs.entry import EnvEntry, check_derived, data_version
from nlbandit.envs.latent import distinct_indices

NUMERICS = 1
"""Version of the numbers its environment computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


MAX_FEATURES = 4096
"""The most feature columns :func:`row_hashes` takes."""
_MULTIPLIERS = (np.random.default_rng(20200).integers(0, 2**63, MAX_FEATURES, dtype=np.uint64) * np.uint64(2)
                + np.uint64(1))


class TargetInstance(NamedTuple):
    """One instance: the target class and the key of the per-round draws."""

    target: jax.Array
    key: jax.Array


def row_hashes(x) -> np.ndarray | jax.Array:
    """(n,) uint64 hashes of the rows of ``x`` (n, d), d ≤ :data:`MAX_FEATURES`: Σ_j bits(x_j)·c_j mod 2⁶⁴ with
    fixed odd c_j; exact and order-independent, equal in NumPy and JAX."""
    if isinstance(x, np.ndarray):
        bits = np.ascontiguousarray(x, np.float64).view(np.uint64)
        return (bits * _MULTIPLIERS[:x.shape[1]]).sum(axis=1, dtype=np.uint64)
    bits = jax.lax.bitcast_convert_type(x.astype(jnp.float64), jnp.uint64)
    return jnp.sum(bits * jnp.asarray(_MULTIPLIERS[:x.shape[1]]), axis=1, dtype=jnp.uint64)


def target_class(features: np.ndarray, labels: np.ndarray, classes: int, k: int = 10, target: int | None = None,
                 p_hit: float = 0.75, p_miss: float = 0.25, divisor: float = 1.0) -> Env:
    """The target-class bandit of the examples ``features / divisor`` (n, d) with ``labels`` (n,) in
    0..classes−1 (module docstring); ``target`` None draws the class per instance. ``features`` may be bytes
    (an image's pixels, with ``divisor`` 255), read through a table of the 256 quotients so that the values
    are NumPy's to the bit (XLA may divide by multiplying with a reciprocal) and the compiled program embeds
    a constant 8 times smaller. Validation is the registry's."""
    n, d = features.shape
    quotients = np.arange(256, dtype=np.float64) / divisor if features.dtype == np.uint8 else None
    values = quotients[features] if quotients is not None else features / divisor
    hashes, inverse = np.unique(row_hashes(values), return_inverse=True)
    share = np.zeros((hashes.size, classes))
    np.add.at(share, (inverse, labels), 1.0)
    share /= share.sum(axis=1, keepdims=True)  # per distinct feature row: the fraction of each class
    features_c, labels_c = jnp.asarray(features), jnp.asarray(labels, jnp.int32)
    hashes_c, share_c = jnp.asarray(hashes), jnp.asarray(share, jnp.float64)

    def scaled(rows):
        if quotients is not None:
            return jnp.asarray(quotients)[features_c[rows]]
        return features_c[rows] / divisor

    def reset(key):
        k_target, k_draw = jax.random.split(key)
        c = jax.random.randint(k_target, (), 0, classes) if target is None else jnp.int32(target)
        return TargetInstance(c, k_draw)

    def rows(state, t):
        return distinct_indices(jax.random.fold_in(state.key, t), n, k)

    def observe(state, key, t):
        return scaled(rows(state, t)), jnp.ones((k,), bool)

    def mean(state, contexts):
        at = jnp.searchsorted(hashes_c, row_hashes(contexts))
        return p_miss + (p_hit - p_miss) * share_c[at, state.target]

    def pull(state, key, t, contexts, arm):
        hit = labels_c[rows(state, t)[arm]] == state.target
        p = jnp.where(hit, p_hit, p_miss)
        return Feedback((jax.random.uniform(key, (), jnp.float64) < p).astype(jnp.float64))

    return Env("target-class", ProblemSpec(d, k, 0), reset, observe, pull, mean, EnvFacts(reward_range=(0.0, 1.0)))


@functools.lru_cache(maxsize=4)
def table(dataset: str, version: str) -> tuple[np.ndarray, float, np.ndarray, int]:
    """Data set ``dataset``'s features and the divisor that scales them to [0, 1] (an image's pixel bytes and
    255, other columns min–max scaled and 1), its labels and class count, once per process and data
    ``version`` (:func:`nlbandit.data.sources.version`)."""
    data = sources.load(dataset)
    if any(data.categorical):
        raise ConfigError(f"data set {dataset!r} has categorical columns; the target-class bandit needs numeric ones")
    x = np.stack(data.columns, axis=1)
    if data.image is not None and np.all((x >= 0) & (x <= 255) & (x == np.round(x))):
        return x.astype(np.uint8), 255.0, data.labels, len(data.classes)
    return np.stack([(minmax(c) + 1.0) / 2.0 for c in x.T], axis=1), 1.0, data.labels, len(data.classes)


def from_dataset(dataset: str, k: int, target: int | None, p_hit: float, p_miss: float, d: int,
                 data_sha256: str) -> Env:
    """:func:`target_class` of a registered data set with the registry's resolved fields (``d`` and
    ``data_sha256`` derived by the registry)."""
    x, divisor, labels, classes = table(dataset, data_sha256)
    return target_class(x, labels, classes, k, target, p_hit, p_miss, divisor)


def _finalize(values, where):
    """d and the data checksum derived from the data set; a target class, K and a feature count it has."""
    name = values["dataset"]
    version = data_version(name, where)
    try:
        x, _, labels, classes = table(name, version)
    except ConfigError as e:
        raise ConfigError(f"{where}: field 'dataset': {e}") from None
    derived = {"d": x.shape[1], "data_sha256": version}
    check_derived(values, derived, name, where)
    if values["target"] is not None and values["target"] >= classes:
        raise ConfigError(f"{where}: field 'target' = {values['target']} is not a class index of data set {name!r} "
                          f"(0..{classes - 1})")
    if values["k"] > labels.size:
        raise ConfigError(f"{where}: field 'k' = {values['k']} is more than the {labels.size} rows of data set "
                          f"{name!r}")
    if x.shape[1] > MAX_FEATURES:
        raise ConfigError(f"{where}: data set {name!r} has {x.shape[1]} features; the target-class bandit takes at "
                          f"most {MAX_FEATURES}")
    return {**values, **derived}


ENTRIES = (
    EnvEntry(
        "target-class",
        from_dataset,
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
        _finalize,
        lambda config: 4,  # the target and a key; the data set is shared by every instance
    ),
)
"""The target-class bandit (:mod:`nlbandit.envs.registry` collects it)."""
