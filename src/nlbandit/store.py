"""Results store: an embedded DuckDB database.

Tables:

* ``runs``: one row per finished run, keyed by ``run_id`` (hash of the resolved configuration and of the
  source that computes it, see :meth:`nlbandit.experiments.spec.RunConfig.identity`), with that identity
  as JSON (its ``code`` field is the source hash) and timing.
* ``curves``: (run_id, metric, seed, t, value) at the recorded rounds, long format: the cumulative curves
  that the run's loop stores (:attr:`nlbandit.loops.base.Loop.metrics`, e.g. ``regret`` and ``reward``).
* ``arms``: (run_id, seed, arms) with the chosen arm of every round as an integer list.
* ``phases``: (run_id, t, select_s, update_s) for the runs whose two phases were timed apart
  (:mod:`nlbandit.core.phases`): seconds per seed spent selecting and updating at sampled rounds t.
* ``checkpoints``: the latest :class:`~nlbandit.core.simulate.SimProgress` of an unfinished batch of runs.

Every write is one transaction: a killed process leaves either the previous state or the new one, never
half of a run. A run's results and the removal of its batch's checkpoint commit together.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import duckdb
import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, experiment VARCHAR, label VARCHAR, config JSON, version VARCHAR,
    horizon BIGINT, n_seeds INTEGER, compile_s DOUBLE, run_s DOUBLE, chunk_size INTEGER,
    chunk_seconds DOUBLE[], batch_size INTEGER, finished TIMESTAMP DEFAULT current_timestamp);
CREATE TABLE IF NOT EXISTS curves (
    run_id VARCHAR, metric VARCHAR, seed INTEGER, t BIGINT, value DOUBLE);
CREATE TABLE IF NOT EXISTS arms (run_id VARCHAR, seed INTEGER, arms INTEGER[]);
CREATE TABLE IF NOT EXISTS phases (run_id VARCHAR, t BIGINT, select_s DOUBLE, update_s DOUBLE);
CREATE TABLE IF NOT EXISTS checkpoints (
    batch_id VARCHAR PRIMARY KEY, t_done BIGINT, progress BLOB, saved TIMESTAMP DEFAULT current_timestamp);
"""


_RUN_TABLES = ("runs", "curves", "arms", "phases")
"""The tables holding a finished run's rows, keyed by ``run_id``."""


class StoreError(RuntimeError):
    """The results database cannot be used: not a DuckDB file, another program's tables, or not writable."""


class StoreBusyError(StoreError):
    """The results database is locked by another process."""


def _columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    """The (name, type) columns of every table of ``con``'s database, by table name."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_catalog ="
        " current_database() AND table_schema = 'main' ORDER BY table_name, ordinal_position").fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, dtype in rows:
        tables.setdefault(table, []).append((column, dtype))
    return tables


@functools.cache
def _expected_columns() -> dict[str, list[tuple[str, str]]]:
    """The columns :data:`_SCHEMA` creates (read from an in-memory database)."""
    con = duckdb.connect(":memory:")
    try:
        con.execute(_SCHEMA)
        return _columns(con)
    finally:
        con.close()


def _writable(path: Path) -> bool:
    """Whether this process may write ``path`` and its mode is not read-only (a file or folder marked
    read-only is left alone even by root, whom ``os.access`` always allows)."""
    return os.access(path, os.W_OK) and bool(path.stat().st_mode & 0o222)


def _check_path(path: Path) -> None:
    """Refuse, before DuckDB opens it, a database path that is not a regular file (a folder; a FIFO would
    block), an empty or read-only file, or one whose folder is a file or read-only (DuckDB writes the
    database and its ``.wal`` file there); an ``OSError`` when the path cannot be inspected."""
    try:
        info = path.stat()
    except FileNotFoundError:
        info = None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise StoreError(f"results database {path} is {kind}; expected a DuckDB file (pass another --db)")
        if info.st_size == 0:
            raise StoreError(f"results database {path} is an empty file (0 bytes), not a DuckDB database; delete "
                             "it or pass another --db")
        if not _writable(path):
            raise StoreError(f"results database {path} is read-only; make it writable or pass another --db")
    folder = path.absolute().parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise StoreError(f"results database {path}: {folder} is a file, not a folder")
    if not _writable(folder):
        raise StoreError(f"results database {path}: folder {folder} is read-only (DuckDB writes the database and "
                         "its .wal file there); pass another --db")


@dataclass
class StoredRun:
    """A finished run read back from the store.

    Attributes:
      rounds: (P,) recorded rounds; curves: the run's cumulative curves by metric, (S, P) each (the first
        metric of its loop is the regret, :attr:`cum_regret`); arms: (S, T) or None if not loaded.
      compile_s, run_s: timing of the batch the run was simulated in (``batch_size`` runs side by side).
      chunk_seconds: per-chunk run times of that batch; chunk_size: rounds per chunk.
      phases: for a run whose phases were timed apart, (rounds (Q,), select seconds (Q,), update seconds
        (Q,)) per seed at the sampled rounds; None otherwise.
    """

    run_id: str
    label: str
    config: dict[str, Any]
    rounds: np.ndarray
    curves: dict[str, np.ndarray]
    compile_s: float
    run_s: float
    chunk_size: int
    chunk_seconds: list[float]
    batch_size: int
    arms: np.ndarray | None = None
    phases: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def cum_regret(self) -> np.ndarray:
        """(S, P) cumulative regret (the ``regret`` curve every loop stores)."""
        return self.curves["regret"]


class Store:
    """A DuckDB results file (created with its parent folder on first use).

    Raises:
      StoreBusyError: when another process holds the database.
      StoreError: naming the path and the problem when it cannot be used (:func:`_check_path`, not a
        DuckDB database, or a DuckDB database with other tables).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            _check_path(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(str(self.path))
        except OSError as e:  # a symlink loop, a path through a file, no permission
            raise StoreError(f"results database {self.path}: {e}") from None
        except duckdb.Error as e:
            message = str(e).splitlines()[0]
            if isinstance(e, duckdb.IOException) and "lock" in message.lower():
                raise StoreBusyError(f"results database {self.path} is in use by another process (one writer at a "
                                     f"time; wait for it or pass another --db): {message}") from None
            raise StoreError(f"results database {self.path} cannot be opened ({message}); pass another --db") from None
        try:
            self._check_schema()
            self.con.execute(_SCHEMA)
        except BaseException:
            self.con.close()
            raise

    def _check_schema(self) -> None:
        """Refuse a database that is not nlbandit's: one of its tables with other columns, or only other tables."""
        found, expected = _columns(self.con), _expected_columns()
        for table, columns in expected.items():
            if table in found and found[table] != columns:
                raise StoreError(f"results database {self.path} has a table '{table}' with columns "
                                 f"({', '.join(c for c, _ in found[table])}), not nlbandit's ("
                                 f"{', '.join(c for c, _ in columns)}); pass another --db" + (
                                     " (a database of an older nlbandit: its runs were keyed by code that has "
                                     "changed since, so none of them would be reused; delete it)"
                                     if table == "curves" and ("cum_reward", "DOUBLE") in found[table] else ""))
        if found and not set(found) & set(expected):
            raise StoreError(f"results database {self.path} holds other tables ({', '.join(sorted(found))}), not "
                             "nlbandit results; pass another --db")

    def close(self) -> None:
        """Close the database."""
        self.con.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def finished(self, run_ids: list[str]) -> set[str]:
        """The subset of ``run_ids`` whose results are stored."""
        if not run_ids:
            return set()
        rows = self.con.execute("SELECT run_id FROM runs WHERE list_contains(?, run_id)", [run_ids]).fetchall()
        return {r[0] for r in rows}

    def batch_sizes(self, run_ids: list[str]) -> dict[str, int]:
        """For the stored runs among ``run_ids``: how many runs were computed side by side with each."""
        if not run_ids:
            return {}
        rows = self.con.execute("SELECT run_id, batch_size FROM runs WHERE list_contains(?, run_id)",
                                [run_ids]).fetchall()
        return dict(rows)

    def phased(self, run_ids: list[str]) -> set[str]:
        """The subset of ``run_ids`` stored with their phases timed apart."""
        if not run_ids:
            return set()
        rows = self.con.execute("SELECT DISTINCT run_id FROM phases WHERE list_contains(?, run_id)",
                                [run_ids]).fetchall()
        return {r[0] for r in rows}

    def load_checkpoint(self, batch_id: str) -> bytes | None:
        """The saved progress of a batch, or None."""
        row = self.con.execute("SELECT progress FROM checkpoints WHERE batch_id = ?", [batch_id]).fetchone()
        return None if row is None else bytes(row[0])

    def save_checkpoint(self, batch_id: str, t_done: int, progress: bytes) -> None:
        """Replace the batch's checkpoint (atomically)."""
        with self._transaction() as con:
            con.execute("DELETE FROM checkpoints WHERE batch_id = ?", [batch_id])
            con.execute("INSERT INTO checkpoints (batch_id, t_done, progress) VALUES (?, ?, ?)",
                        [batch_id, t_done, progress])

    def save_runs(self, batch_id: str, rows: list[dict[str, Any]]) -> None:
        """Store finished runs and drop their batch's checkpoint, in one transaction.

        Each row: run_id, experiment, label, config, version, rounds (P,), curves (metric name → (S, P),
        with a ``regret`` curve), arms (S, T), compile_s, run_s, chunk_size, chunk_seconds, batch_size. A run
        stored again loses its phase timings (:meth:`save_phases` adds them after).
        """
        with self._transaction() as con:
            for r in rows:
                for table in _RUN_TABLES:
                    con.execute(f"DELETE FROM {table} WHERE run_id = ?", [r["run_id"]])
                n_seeds, n_points = r["curves"]["regret"].shape
                metrics = list(r["curves"])
                con.execute(
                    "INSERT INTO runs (run_id, experiment, label, config, version, horizon, n_seeds, compile_s,"
                    " run_s, chunk_size, chunk_seconds, batch_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [r["run_id"], r["experiment"], r["label"], json.dumps(r["config"]), r["version"],
                     int(r["rounds"][-1]), n_seeds, r["compile_s"], r["run_s"], r["chunk_size"],
                     [float(s) for s in r["chunk_seconds"]], r["batch_size"]],
                )
                size = n_seeds * n_points
                new_curves = {  # noqa: F841  (read by DuckDB's replacement scan)
                    "run_id": np.full(size * len(metrics), r["run_id"]),
                    "metric": np.repeat(np.array(metrics), size),
                    "seed": np.tile(np.repeat(np.arange(n_seeds, dtype=np.int32), n_points), len(metrics)),
                    "t": np.tile(r["rounds"].astype(np.int64), n_seeds * len(metrics)),
                    "value": np.concatenate([np.asarray(r["curves"][m], np.float64).reshape(-1) for m in metrics]),
                }
                con.execute("INSERT INTO curves SELECT * FROM new_curves")
                con.executemany("INSERT INTO arms VALUES (?, ?, ?)",
                                [[r["run_id"], s, r["arms"][s].tolist()] for s in range(n_seeds)])
            con.execute("DELETE FROM checkpoints WHERE batch_id = ?", [batch_id])

    def save_phases(self, run_id: str, samples) -> None:
        """Replace the phase timings of a stored run (``samples``: (t, select seconds, update seconds) per
        seed, :class:`~nlbandit.core.phases.PhaseSample`), in one transaction."""
        with self._transaction() as con:
            con.execute("DELETE FROM phases WHERE run_id = ?", [run_id])
            con.executemany("INSERT INTO phases VALUES (?, ?, ?, ?)",
                            [[run_id, int(t), float(a), float(b)] for t, a, b in samples])

    def load(self, run_id: str, with_arms: bool = False) -> StoredRun:
        """Read a finished run back (``KeyError`` if it is not stored)."""
        row = self.con.execute(
            "SELECT label, config, compile_s, run_s, chunk_size, chunk_seconds, batch_size, n_seeds"
            " FROM runs WHERE run_id = ?", [run_id]).fetchone()
        if row is None:
            raise KeyError(run_id)
        label, config, compile_s, run_s, chunk_size, chunk_seconds, batch_size, n_seeds = row
        c = self.con.execute(
            "SELECT metric, t, value FROM curves WHERE run_id = ? ORDER BY metric, seed, t", [run_id]).fetchnumpy()
        metric = np.asarray(c["metric"], dtype=object)
        names = list(dict.fromkeys(metric))
        rounds = np.asarray(c["t"])[metric == names[0]].reshape(n_seeds, -1)[0]
        curves = {m: np.asarray(c["value"])[metric == m].reshape(n_seeds, -1) for m in names}
        arms = None
        if with_arms:
            a = self.con.execute("SELECT arms FROM arms WHERE run_id = ? ORDER BY seed", [run_id]).fetchall()
            arms = np.array([x[0] for x in a], dtype=np.int32)
        p = self.con.execute("SELECT t, select_s, update_s FROM phases WHERE run_id = ? ORDER BY t",
                             [run_id]).fetchnumpy()
        phases = (np.asarray(p["t"]), np.asarray(p["select_s"]), np.asarray(p["update_s"])) if len(p["t"]) else None
        return StoredRun(run_id, label, json.loads(config), rounds, curves, compile_s, run_s, chunk_size,
                         list(chunk_seconds), batch_size, arms, phases)

    def index(self) -> list[dict[str, Any]]:
        """Every finished run: run_id, experiment, label, config (the run's identity, with its ``code``
        hash), horizon, n_seeds, run_s and finished time, ordered by experiment and label."""
        rows = self.con.execute(
            "SELECT run_id, experiment, label, config, horizon, n_seeds, run_s, finished FROM runs"
            " ORDER BY experiment, label, finished").fetchall()
        keys = ("run_id", "experiment", "label", "config", "horizon", "n_seeds", "run_s", "finished")
        return [{**dict(zip(keys, r)), "config": json.loads(r[3])} for r in rows]

    def adopt(self, run_id: str, new_id: str, config: dict[str, Any]) -> bool:
        """Re-key stored run ``run_id`` as ``new_id`` with identity ``config`` (its rows, curves, arms and
        phases), in one transaction; False, changing nothing, when ``new_id`` is stored already."""
        with self._transaction() as con:
            if con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [new_id]).fetchone()[0]:
                return False
            for table in _RUN_TABLES:
                con.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", [new_id, run_id])
            con.execute("UPDATE runs SET config = ? WHERE run_id = ?", [json.dumps(config), new_id])
        return True

    def delete_runs(self, run_ids: list[str]) -> None:
        """Remove finished runs (their row, curves, arms and phases) in one transaction."""
        with self._transaction() as con:
            for table in _RUN_TABLES:
                con.execute(f"DELETE FROM {table} WHERE list_contains(?, run_id)", [run_ids])
