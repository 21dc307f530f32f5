"""Housekeeping of the results store: which stored runs were computed by the current code.

The store keeps *series* (a run's identity less its seeds) with their stored seeds (:mod:`nlbandit.store`).
A series' identity carries the hash of the source that computed it (:mod:`nlbandit.provenance`); a series is
*current* when that hash equals the hash the same policy and environment have now, *stale* otherwise (the
code changed, or the policy or environment no longer exists). Stale series are never reused — their key
differs from what a run of the current code looks up — so pruning them only frees space and keeps listings
honest.

Most edits to hashed code change no number (a refactor, a renamed variable): :func:`revalidate` recomputes a
sample of a stale series' seeds (its first and its last stored seed) under the current code and, when their
arms equal the stored ones bit for bit and their curves to a relative 1e-9 (:func:`matches`), adopts the series
under its current key (its identity records the series id and code it was adopted from), so its seeds are not
recomputed. A series whose sample differs stays stale. The stale series that the runner would compute side by
side (:func:`~nlbandit.experiments.runner.batch_key`: a tuning grid's points) are recomputed together, one
compilation per batch as when they were computed; a float32 (neural) series whose batch is not the one it was
computed in (some of its points current already, or deleted) may round otherwise and then stays stale
(float64 policies give the same numbers either way, ``tests/test_contract.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Sequence

import numpy as np

from nlbandit.compile_flags import identity_flags
from nlbandit.core.hyper import ConfigError
from nlbandit.data.cache import DataError
from nlbandit.envs.registry import resolve_env
from nlbandit.experiments.runner import batch_key
from nlbandit.experiments.spec import RunConfig, run_code
from nlbandit.loops import DEFAULT_LOOP, LOOPS
from nlbandit.loops.base import Computed
from nlbandit.policies.registry import resolve_policy
from nlbandit.store import Store


def current_code(identity: dict[str, Any]) -> str | None:
    """The hash that a run with this stored identity would have under the current code (None when its
    policy or environment is no longer registered, or the identity predates code hashes)."""
    try:
        return run_code(identity["policy"]["name"], identity["env"]["name"], identity.get("loop", DEFAULT_LOOP))
    except (ConfigError, KeyError, TypeError):
        return None


def annotated_runs(store: Store) -> list[dict[str, Any]]:
    """:meth:`Store.index` with ``code`` (the stored hash, '' for series from before code hashes) and
    ``current`` (whether it matches the current code) added to every series."""
    out = []
    for run in store.index():
        stored = run["config"].get("code", "")
        out.append({**run, "code": stored, "current": bool(stored) and stored == current_code(run["config"])})
    return out


def prune_stale(store: Store) -> list[dict[str, Any]]:
    """Delete every stale series; return the series deleted."""
    stale = [r for r in annotated_runs(store) if not r["current"]]
    if stale:
        store.delete_series([r["series_id"] for r in stale])
    return stale


def sample_seeds(seeds: list[int]) -> list[int]:
    """The seeds of a stored series that :func:`revalidate` recomputes: the first and the last."""
    return sorted({min(seeds), max(seeds)})


def recompute_sample(runs: list[RunConfig], sample: list[int], agrees: Callable[[Computed], bool],
                     every: list[int] | None = None) -> Computed:
    """The batch ``runs`` (of equal :func:`~nlbandit.experiments.runner.batch_key`) computed on its ``sample``
    seeds alone, and where that does not satisfy ``agrees``, on ``every`` seed stored (default: the runs' seeds; a
    tuned series' are not contiguous, e.g. 0-2 and 1000000000-1000000001), restricted to ``sample``:
    a float32 network vectorised over 2 seeds can round otherwise than over S and choose another arm at a
    near-tie (Kveton Fig. 2's DeepFPL, Bae's NeuralLog-UCB-2 on h5, 2026-11-27). Raises what the loop's
    ``compute`` raises, and ``ValueError`` for runs compiled with XLA flags (:attr:`RunConfig.xla`) that this
    process does not set."""
    lacking = [f for f in runs[0].xla.split() if f not in identity_flags().split()]
    if lacking:
        raise ValueError(f"compiled with XLA flags {' '.join(lacking)}, which this process does not set (run it "
                         f"with XLA_FLAGS='{' '.join(lacking)}')")
    every = list(runs[0].seeds) if every is None else every
    for seeds in [sample] + ([every] if len(every) > len(sample) else []):
        out = LOOPS[runs[0].loop].compute(runs, seeds)
        at = [seeds.index(s) for s in sample]
        out = replace(out, arms=[a[at] for a in out.arms], curves=[{m: c[at] for m, c in cs.items()}
                                                                   for cs in out.curves])
        if agrees(out):
            break
    return out


CURVE_RTOL = 1e-9
"""How close a recomputed curve must be to the stored one, relative to the curve's largest magnitude."""


def matches(out: Any, i: int, stored: Any) -> bool:
    """Whether run ``i`` of a batch computed now (``out``, :class:`~nlbandit.loops.base.Computed`) gives the
    ``stored`` run's (:class:`~nlbandit.store.StoredRun`, on the same seeds) arms bit for bit and its curves to
    :data:`CURVE_RTOL`: XLA vectorises a program over 2 seeds
    otherwise than over S, so a seed's per-round float64 regret may differ in its last bit from the one computed
    beside S − 1 others (seen: 1e-13 on a cumulative regret of 10⁴ rounds, with every arm equal), while a change
    of numbers changes arms or curves far beyond it."""
    if not (np.array_equal(out.arms[i], stored.arms) and np.array_equal(out.rounds, stored.rounds)):
        return False
    return all(np.allclose(out.curves[i][m], stored.curves[m], rtol=0,
                           atol=CURVE_RTOL * max(1.0, float(np.max(np.abs(stored.curves[m])))))
               for m in stored.curves)


def _with_defaults(resolve: Callable[[dict[str, Any]], dict[str, Any]], config: Any) -> Any:
    """A stored environment or policy configuration resolved by the current code (``resolve``), so that a
    hyperparameter added since appears at its default, as in the configurations the experiment files resolve to
    (the recomputed seeds then say whether that default keeps the stored numbers); as stored where it does not
    resolve (another loop's configuration)."""
    try:
        return resolve(dict(config))
    except (ConfigError, TypeError, ValueError):
        return config


def revalidate(store: Store, log: Callable[[str], None] = print,
               experiments: Sequence[str] | None = None) -> tuple[list[str], list[str]]:
    """Adopt every stale series whose policy and environment still exist and whose :func:`matches` holds under
    its current key (only those of the named ``experiments``, e.g. ``"sun2025/fig1d_distance"``, where given);
    return the series ids (adopted, left stale)."""
    groups: dict[tuple[str, tuple[int, ...], tuple[int, ...]], list[tuple[dict[str, Any], RunConfig]]] = {}
    for row in annotated_runs(store):
        if experiments is not None and row["experiment"] not in experiments:
            continue
        if not row["current"] and current_code(row["config"]) is not None:
            seeds = row["seeds"]
            run = RunConfig.from_identity({**row["config"], "env": _with_defaults(resolve_env, row["config"]["env"]),
                                           "policy": _with_defaults(resolve_policy, row["config"]["policy"]),
                                           "n_seeds": len(seeds), "seed_offset": seeds[0]}, row["label"])
            groups.setdefault((batch_key(run), tuple(sample_seeds(seeds)), tuple(seeds)), []).append((row, run))
    adopted, stale = [], []
    for (_, sample, every), group in groups.items():
        runs = [run for _, run in group]
        stored = store.load_many([(row["series_id"], sample) for row, _ in group], with_arms=True)
        try:
            out, error = recompute_sample(runs, list(sample), lambda o: all(
                matches(o, i, stored[i]) for i in range(len(group))), list(every)), None
        except (ConfigError, DataError, KeyError, TypeError, ValueError) as e:
            out, error = None, e
        for i, (row, run) in enumerate(group):
            what = f"{row['experiment']}: {row['label']} ({row['series_id']})"
            if out is None:
                log(f"{what}: cannot be computed under the current code ({error}); left stale")
                stale.append(row["series_id"])
            elif not matches(out, i, stored[i]):
                log(f"{what}: seeds {list(sample)} computed now (alone and beside the series' other seeds) differ "
                    "from the stored ones; left stale")
                stale.append(row["series_id"])
            elif store.adopt(row["series_id"], run.series_id, {
                    **run.identity(), "adopted_from": {"series_id": row["series_id"], "code": row["code"]}}):
                log(f"{what}: seeds {list(sample)} recomputed equal; adopted as {run.series_id}")
                adopted.append(row["series_id"])
            else:
                log(f"{what}: the current code's series {run.series_id} is stored already; left stale")
                stale.append(row["series_id"])
    return adopted, stale
