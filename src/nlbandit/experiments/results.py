"""Housekeeping of the results store: which stored runs were computed by the current code.

A run's identity carries the hash of the source that computed it (:mod:`nlbandit.provenance`); a run is
*current* when that hash equals the hash the same policy and environment have now, *stale* otherwise
(the code changed, or the policy or environment no longer exists). Stale runs are never reused — their
key differs from what a run of the current code looks up — so pruning them only frees space and keeps
listings honest.
"""

from __future__ import annotations

from typing import Any

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.spec import run_code
from nlbandit.store import Store


def current_code(identity: dict[str, Any]) -> str | None:
    """The hash that a run with this stored identity would have under the current code (None when its
    policy or environment is no longer registered, or the identity predates code hashes)."""
    try:
        return run_code(identity["policy"]["name"], identity["env"]["name"], identity.get("loop", "bandit"))
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
