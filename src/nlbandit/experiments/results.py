"""Housekeeping of the results store: which stored runs were computed by the current code.

A run's identity carries the hash of the source that computed it (:mod:`nlbandit.provenance`); a run is
*current* when that hash equals the hash the same policy and environment have now, *stale* otherwise
(the code changed, or the policy or environment no longer exists). Stale runs are never reused — their
key differs from what a run of the current code looks up — so pruning them only frees space and keeps
listings honest.

Most edits to hashed code change no number (a refactor, a renamed variable): :func:`revalidate` recomputes a
sample of a stale run's seeds (its first and its last) under the current code and, when their arms equal the
stored ones bit for bit and their curves to a relative 1e-9 (:func:`matches`), adopts the run under its
current key (its identity records the run id and code it was adopted from), so the whole run is not
recomputed. A run whose sample differs stays stale. The stale runs that the runner would compute side by
side (:func:`~nlbandit.experiments.runner.batch_key`: a tuning grid's points) are recomputed together, one
compilation per batch as when they were computed; a float32 (neural) run whose batch is not the one it was
computed in (some of its points current already, or deleted) may round otherwise and then stays stale
(float64 policies give the same numbers either way, ``tests/test_contract.py``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.data.cache import DataError
from nlbandit.experiments.runner import batch_key
from nlbandit.experiments.spec import RunConfig, run_code
from nlbandit.loops import DEFAULT_LOOP, LOOPS
from nlbandit.store import Store


def current_code(identity: dict[str, Any]) -> str | None:
    """The hash that a run with this stored identity would have under the current code (None when its
    policy or environment is no longer registered, or the identity predates code hashes)."""
    try:
        return run_code(identity["policy"]["name"], identity["env"]["name"], identity.get("loop", DEFAULT_LOOP))
    except (ConfigError, KeyError, TypeError):
        return None


def annotated_runs(store: Store) -> list[dict[str, Any]]:
    """:meth:`Store.index` with ``code`` (the stored hash, '' for runs from before code hashes) and
    ``current`` (whether it matches the current code) added to every run."""
    out = []
    for run in store.index():
        stored = run["config"].get("code", "")
        out.append({**run, "code": stored, "current": bool(stored) and stored == current_code(run["config"])})
    return out


def prune_stale(store: Store) -> list[dict[str, Any]]:
    """Delete every stale run; return the runs deleted."""
    stale = [r for r in annotated_runs(store) if not r["current"]]
    if stale:
        store.delete_runs([r["run_id"] for r in stale])
    return stale


def sample_seeds(n_seeds: int) -> list[int]:
    """The indices of the seeds :func:`revalidate` recomputes: the first and the last."""
    return sorted({0, n_seeds - 1})


CURVE_RTOL = 1e-9
"""How close a recomputed curve must be to the stored one, relative to the curve's largest magnitude."""


def matches(out: Any, i: int, stored: Any, idx: list[int]) -> bool:
    """Whether run ``i`` of a batch computed now on the seeds ``idx`` of its runs (``out``,
    :class:`~nlbandit.loops.base.Computed`) gives the ``stored`` run's (:class:`~nlbandit.store.StoredRun`) arms
    of those seeds bit for bit and its curves to :data:`CURVE_RTOL`: XLA vectorises a program over 2 seeds
    otherwise than over S, so a seed's per-round float64 regret may differ in its last bit from the one computed
    beside S − 1 others (seen: 1e-13 on a cumulative regret of 10⁴ rounds, with every arm equal), while a change
    of numbers changes arms or curves far beyond it."""
    if not (np.array_equal(out.arms[i], stored.arms[idx]) and np.array_equal(out.rounds, stored.rounds)):
        return False
    return all(np.allclose(out.curves[i][m], stored.curves[m][idx], rtol=0,
                           atol=CURVE_RTOL * max(1.0, float(np.max(np.abs(stored.curves[m][idx])))))
               for m in stored.curves)


def revalidate(store: Store, log: Callable[[str], None] = print) -> tuple[list[str], list[str]]:
    """Adopt every stale run whose policy and environment still exist and whose :func:`matches` holds under
    its current key; return the run ids (adopted, left stale)."""
    groups: dict[str, list[tuple[dict[str, Any], RunConfig]]] = {}
    for row in annotated_runs(store):
        if not row["current"] and current_code(row["config"]) is not None:
            run = RunConfig.from_identity(row["config"], row["label"])
            groups.setdefault(batch_key(run), []).append((row, run))
    adopted, stale = [], []
    for group in groups.values():
        runs = [run for _, run in group]
        idx = sample_seeds(runs[0].n_seeds)
        try:
            out, error = LOOPS[runs[0].loop].compute(runs, [runs[0].seed_offset + i for i in idx]), None
        except (ConfigError, DataError, KeyError, TypeError, ValueError) as e:
            out, error = None, e
        for i, (row, run) in enumerate(group):
            what = f"{row['experiment']}: {row['label']} ({row['run_id']})"
            if out is None:
                log(f"{what}: cannot be computed under the current code ({error}); left stale")
                stale.append(row["run_id"])
            elif not matches(out, i, store.load(row["run_id"], with_arms=True), idx):
                log(f"{what}: seeds {idx} computed now differ from the stored ones; left stale")
                stale.append(row["run_id"])
            elif store.adopt(row["run_id"], run.run_id,
                             {**run.identity(), "adopted_from": {"run_id": row["run_id"], "code": row["code"]}}):
                log(f"{what}: seeds {idx} recomputed equal; adopted as {run.run_id}")
                adopted.append(row["run_id"])
            else:
                log(f"{what}: the current code's run {run.run_id} is stored already; left stale")
                stale.append(row["run_id"])
    return adopted, stale
