"""Classification data sets as K-armed contextual bandits (Bae & Lee 2025 §7 and App. J, spec 001 §4.3; Sun,
Wang & Xu 2025 §7.3, spec 003 §4.8).

A round shows one sample x ∈ ℝ^{d₀} of a K-class data set as K arms by the disjoint encoding
x⁽ᵏ⁾ = (0, …, x, …, 0) ∈ ℝ^{d₀K}, x in block k (:func:`nlbandit.data.encode.disjoint`); pulling arm k pays 1
when k is the sample's class, else 0.

One instance (``reset``, one per seed) is a pool of ``pool`` rows drawn without replacement from the data set,
with, for categorical columns, a value drawn uniformly in [−1, 1] for every level of every column (spec 001
§4.3: "fixed per run"). Each round's sample is

* ``draw = "uniform"``: a row of the pool drawn uniformly at random (spec 001 §4.3: T = 2000 draws from a
  per-repeat pool of 2500); or
* ``draw = "sequential"``: the pool's rows in their (random) order, the t-th row in round t, from the start
  again after the last (spec 003 §4.8: the rows shuffled with the repetition's seed, the next one each round).

The draw of round t is a function of the instance and t (a key kept in the instance, folded with t), so
``pull`` pays the label of the very sample that ``observe`` showed.

Regret. ``mean`` is the conditional probability that each arm is the class, given the round's features: the
label frequencies among the pool's rows equal to the sample (found by comparing x, block 0 of arm 0, with
every row). For a sample whose features no other row with a different class shares, that is the one-hot of
its class, and the pseudo-regret of a round is 1 for a mistake, 0 otherwise — the papers' regret, the
number of mistakes. Where rows share features but not classes, no policy can tell them apart, and the
pseudo-regret counts a mistake of the best possible classifier (the most frequent class) as no regret.
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
from nlbandit.data.encode import bandit_table, disjoint
from nlbandit.envs.entry import EnvEntry, check_derived, data_version

NUMERICS = 1
"""Version of the numbers its environment computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


DRAWS = ("uniform", "sequential")


class ClassificationInstance(NamedTuple):
    """One instance: the pool's features (N, d₀), their classes (N,) and the key of the per-round draws."""

    pool: jax.Array
    labels: jax.Array
    key: jax.Array


def classification(numeric: np.ndarray, codes: np.ndarray, levels: tuple[int, ...], labels: np.ndarray, k: int,
                   pool: int, draw: str = "uniform", name: str = "classification") -> Env:
    """The bandit of a data set's rows: ``numeric`` (n, d_num) features as they are, ``codes`` (n, d_cat) the
    level indices of categorical columns with ``levels`` levels each (each mapped to a value in [−1, 1]
    drawn per instance, placed after the numeric columns), ``labels`` (n,) classes in 0..k−1; ``pool`` ≤ n rows
    per instance, drawn each round as ``draw`` says (module docstring). Validation is the registry's."""
    n, d_num = numeric.shape
    d_cat = codes.shape[1]
    d0 = d_num + d_cat
    spec = ProblemSpec(d0 * k, k, 0)
    numeric_c = jnp.asarray(numeric, jnp.float64)
    codes_c = jnp.asarray(codes, jnp.int32)
    labels_c = jnp.asarray(labels, jnp.int32)
    most = max(levels, default=1)

    def reset(key):
        k_rows, k_levels, k_draw = jax.random.split(key, 3)
        rows = jax.random.permutation(k_rows, n)[:pool]
        values = jax.random.uniform(k_levels, (d_cat, most), jnp.float64, -1.0, 1.0)
        cats = values[jnp.arange(d_cat), codes_c[rows]]  # (pool, d_cat)
        return ClassificationInstance(jnp.concatenate([numeric_c[rows], cats], axis=1), labels_c[rows], k_draw)

    def row(state, t):
        if draw == "sequential":
            return (t - 1) % pool
        return jax.random.randint(jax.random.fold_in(state.key, t), (), 0, pool)

    def observe(state, key, t):
        return disjoint(state.pool[row(state, t)], k), jnp.ones((k,), bool)

    def mean(state, contexts):
        same = jnp.all(state.pool == contexts[0, :d0], axis=1)  # (pool,)
        counts = jnp.zeros((k,), jnp.float64).at[state.labels].add(same.astype(jnp.float64))
        return counts / jnp.maximum(counts.sum(), 1.0)

    def pull(state, key, t, contexts, arm):
        return Feedback((state.labels[row(state, t)] == arm).astype(jnp.float64))

    return Env(name, spec, reset, observe, pull, mean, EnvFacts(reward_range=(0.0, 1.0)))


@functools.lru_cache(maxsize=8)
def table(dataset: str, version: str, encoding: str, downsample: int):
    """Data set ``dataset``'s bandit features, level codes, levels and labels
    (:func:`~nlbandit.data.encode.bandit_table`), computed once per process and data ``version``
    (:func:`nlbandit.data.sources.version`)."""
    data = sources.load(dataset)
    return (*bandit_table(data, encoding, downsample), data.labels)


def from_dataset(dataset: str, encoding: str, pool: int, draw: str, downsample: int, d: int, k: int,
                 data_sha256: str) -> Env:
    """:func:`classification` of a registered data set with the registry's resolved fields (``d``, ``k`` and
    ``data_sha256`` derived from the data by the registry; the data is read at this ``data_sha256``)."""
    return classification(*table(dataset, data_sha256, encoding, downsample), k, pool, draw)


def _finalize(values, where):
    """d, k, pool and the data checksum derived from the data set.

    Raises:
      DataError: the data set is not in the cache (with what to do), or its files are corrupted.
      ConfigError: a given d, k, pool or checksum that does not fit the data set.
    """
    name = values["dataset"]
    version = data_version(name, where)
    numeric, codes, levels, labels = table(name, version, values["encoding"], values["downsample"])
    n, k = labels.size, int(labels.max()) + 1
    derived = {"d": (numeric.shape[1] + codes.shape[1]) * k, "k": k, "data_sha256": version}
    check_derived(values, derived, name, where)
    if values["pool"] is not None and values["pool"] > n:
        raise ConfigError(f"{where}: field 'pool' = {values['pool']} is more than the {n} rows of data set {name!r}")
    return {**values, **derived, "pool": values["pool"] or min(2500, n)}


ENTRIES = (
    EnvEntry(
        "classification",
        from_dataset,
        (
            Hyper("dataset", None, "the data set (`nlbandit data list`)", kind=str, static=True),
            Hyper("encoding", "minmax", "features min–max scaled to [−1, 1], categorical levels random in [−1, 1] "
                  "per run (Bae & Lee), or ordinal codes with L2-normalised rows (Sun, Wang & Xu)", kind=str,
                  static=True, choices=("minmax", "ordinal-l2")),
            Hyper("pool", None, "rows drawn without replacement per instance (omitted: min(2500, rows))",
                  kind=int, static=True, low=1, optional=True),
            Hyper("draw", "uniform", "each round a uniform draw from the pool, or the pool's rows in order",
                  kind=str, static=True, choices=DRAWS),
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
        _finalize,
        lambda config: config["pool"] * (config["d"] // config["k"] + 1),  # the pool's rows and labels
    ),
)
"""The classification bandit (:mod:`nlbandit.envs.registry` collects it)."""
