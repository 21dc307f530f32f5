"""Results store: an embedded DuckDB database, keyed per seed.

A run (:class:`~nlbandit.experiments.spec.RunConfig`) is a *series* — its resolved configuration and the hash
of the code that computes it, its identity less its seed range — on a range of seeds. Results are stored per
(series, seed), so a run whose seeds are partly stored (the same configuration with more seeds, a tuning
candidate on the seeds of the reported run) computes only the missing ones. Each seed's results are the same
whichever seeds were computed beside it (:meth:`nlbandit.loops.base.Loop.compute`: float64 arms bit for bit;
XLA may vectorise a float sum over 2 seeds otherwise than over S and move a curve's last bit, which a float32
network can carry into a near-tie's arm, seen on 2026-11-27: Kveton Fig. 2's DeepFPL, Bae's NeuralLog-UCB-2 on h5).

Tables:

* ``series``: one row per series, keyed by ``series_id`` (:func:`series_of`), with its identity as JSON (its
  ``code`` field is the source hash, :meth:`nlbandit.experiments.spec.RunConfig.identity`).
* ``parts``: one row per computation that stored seeds of a series: its seed range (``first_seed``,
  ``n_seeds``) and timing (the batch of ``batch_size`` runs it was computed in, side by side).
* ``seeds``: (series_id, seed) → the part that computed it (``part_first``, ``part_seeds``) and the chosen arm
  of every round as an integer list.
* ``curves``: (series_id, seed, metric, t, value) at the recorded rounds, long format: the cumulative curves
  that the run's loop stores (:attr:`nlbandit.loops.base.Loop.metrics`, e.g. ``regret`` and ``reward``).
* ``phases``: (series_id, part_first, part_seeds, t, select_s, update_s, update_rows, select_rows, session, process)
  for the parts whose two phases were timed apart (:mod:`nlbandit.core.phases`): seconds per seed spent selecting
  and updating at sampled rounds t, each timed call of the selection computing ``select_rows`` rows and each of the
  update ``update_rows`` (the part's seeds, repeated), in the timing ``session`` named by the key of the runs timed
  together and the number of processes they were timed in (:func:`nlbandit.experiments.runner.phase_session`), by
  the ``process`` numbered from 0 (the same rounds timed once in each). Timings stored while a session was timed in
  one process become its process 0 on opening. Timings of earlier layouts get NULL in the columns they lack on
  opening and are then neither read nor count as timed (a claim that reads them has its run computed and timed
  again): those stored before the rows were counted were timed on the part's seeds alone, whose share of a call's
  fixed cost can stand in for a cheap phase's own; those with one ``call_rows`` column for both phases, before the
  timed calls kept their buffers on malloc's heap, can hold page faults that the engine does not pay
  (:func:`nlbandit.core.phases.heap_allocations`); those without a session were timed one run per process, between
  the chunks of its simulation, where a run's cost shifts from process to process by more than the differences that
  claims compare.
* ``checkpoints``: the latest :class:`~nlbandit.core.simulate.SimProgress` of an unfinished batch of runs; and the
  rounds a simulation kept for its phases' timing session, until that session's timings are stored
  (:func:`nlbandit.experiments.runner.kept_key`).

Every write is one transaction: a killed process leaves either the previous state or the new one, never
half of a run. A run's results and the removal of its batch's checkpoint commit together. A database of the
previous layout (one row per run, keyed by its whole identity) is converted on opening, in one transaction.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

import duckdb
import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS series (
    series_id VARCHAR PRIMARY KEY, experiment VARCHAR, label VARCHAR, config JSON, version VARCHAR,
    horizon BIGINT);
CREATE TABLE IF NOT EXISTS parts (
    series_id VARCHAR, first_seed BIGINT, n_seeds INTEGER, compile_s DOUBLE, run_s DOUBLE, chunk_size INTEGER,
    chunk_seconds DOUBLE[], batch_size INTEGER, finished TIMESTAMP DEFAULT current_timestamp,
    PRIMARY KEY (series_id, first_seed, n_seeds));
CREATE TABLE IF NOT EXISTS seeds (
    series_id VARCHAR, seed BIGINT, part_first BIGINT, part_seeds INTEGER, arms INTEGER[],
    PRIMARY KEY (series_id, seed));
CREATE TABLE IF NOT EXISTS curves (
    series_id VARCHAR, seed BIGINT, metric VARCHAR, t BIGINT, value DOUBLE);
CREATE TABLE IF NOT EXISTS phases (
    series_id VARCHAR, part_first BIGINT, part_seeds INTEGER, t BIGINT, select_s DOUBLE, update_s DOUBLE,
    update_rows INTEGER, select_rows INTEGER, session VARCHAR, process INTEGER);
CREATE TABLE IF NOT EXISTS checkpoints (
    batch_id VARCHAR PRIMARY KEY, t_done BIGINT, progress BLOB, saved TIMESTAMP DEFAULT current_timestamp,
    what VARCHAR);
"""

_CHECKPOINTS_UNNAMED = ["batch_id", "t_done", "progress", "saved"]
"""The ``checkpoints`` columns before each checkpoint said what its batch is (``what``, NULL for those)."""

_SERIES_TABLES = ("series", "parts", "seeds", "curves", "phases")
"""The tables holding a series' rows, keyed by ``series_id``."""

SEED_FIELDS = ("n_seeds", "seed_offset")
"""The fields of a run's identity that name its seeds (``seed_offset`` only when not 0)."""


def key(identity: dict[str, Any]) -> str:
    """The 20-hex-digit hash of a JSON-able identity (keys sorted)."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def series_of(identity: dict[str, Any]) -> tuple[str, range]:
    """A run identity's series key (the :func:`key` of the identity less :data:`SEED_FIELDS` and an
    ``adopted_from`` record) and its seeds."""
    first = identity.get("seed_offset", 0)
    series = {k: v for k, v in identity.items() if k not in SEED_FIELDS and k != "adopted_from"}
    return key(series), range(first, first + identity["n_seeds"])


@dataclass(frozen=True)
class Part:
    """A computation that stored seeds of a series: its range (``first_seed``, ``n_seeds``), the seeds it
    still holds (later computations may have replaced some), the number of runs computed beside it and, where
    its phases were timed apart, the rows of each timed call of the selection and of the update (``phase_rows``)
    and the timing session (``session``; both None: not timed apart, or timed under an earlier layout of the
    ``phases`` table, whose timings are not read)."""

    first_seed: int
    n_seeds: int
    holds: tuple[int, ...]
    batch_size: int
    phase_rows: tuple[int, int] | None
    session: str | None = None

    def is_whole(self, seeds: range) -> bool:
        """Whether this part was computed on exactly ``seeds`` and still holds them all."""
        return (self.first_seed, self.n_seeds) == (seeds.start, len(seeds)) and len(self.holds) == len(seeds)


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
    """A run read back from the store: a series on some of its stored seeds.

    Attributes:
      seeds: the seeds read, ascending; rounds: (P,) recorded rounds; curves: the run's cumulative curves by
        metric, (S, P) each in the order of ``seeds`` (the first metric of its loop is the regret,
        :attr:`cum_regret`); arms: (S, T) or None if not loaded.
      compile_s, run_s, batch_size: timing of the computation the seeds were computed in, ``batch_size`` runs
        side by side. Seeds from several computations (``parts`` > 1), or fewer seeds than their computation
        held, get the run seconds attributable to them (each part's ``run_s`` × its share of the seeds read),
        the sum of the parts' compile seconds, and, when the parts' batch sizes differ, both divided by each
        part's batch size with ``batch_size`` 1.
      phases: for a run computed in one piece with its phases timed apart, (rounds (Q,), select seconds (P, Q),
        update seconds (P, Q)) per seed at the sampled rounds, in each of the P processes its session was timed in;
        None otherwise.
    """

    series_id: str
    label: str
    config: dict[str, Any]
    seeds: tuple[int, ...]
    rounds: np.ndarray
    curves: dict[str, np.ndarray]
    compile_s: float
    run_s: float
    batch_size: int
    parts: int = 1
    arms: np.ndarray | None = None
    phases: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    @property
    def cum_regret(self) -> np.ndarray:
        """(S, P) cumulative regret (the ``regret`` curve every loop stores)."""
        return self.curves["regret"]


_V2_COLUMNS = {
    "runs": ["run_id", "experiment", "label", "config", "version", "horizon", "n_seeds", "compile_s", "run_s",
             "chunk_size", "chunk_seconds", "batch_size", "finished"],
    "curves": ["run_id", "metric", "seed", "t", "value"],
    "arms": ["run_id", "seed", "arms"],
    "phases": ["run_id", "t", "select_s", "update_s"],
}
"""The tables of the previous layout (one row per run, keyed by ``run_id``, seeds numbered from 0), which
:meth:`Store._migrate_v2` converts."""

_PHASES_UNCOUNTED = ["series_id", "part_first", "part_seeds", "t", "select_s", "update_s"]
"""The columns of the ``phases`` table before it counted the rows of a timed call, which opening adds (NULL)."""

_PHASES_ONE_COUNT = _PHASES_UNCOUNTED + ["call_rows"]
"""The columns of the ``phases`` table while both phases were timed on the same rows, whose count opening drops."""

_PHASES_ALONE = _PHASES_UNCOUNTED + ["update_rows", "select_rows"]
"""The columns of the ``phases`` table while each run was timed in its own process, to which opening adds the
session (NULL)."""

_PHASES_ONE_PROCESS = _PHASES_ALONE + ["session"]
"""The columns of the ``phases`` table while each session was timed in one process, to which opening adds the
process, 0 where there is a session."""

_DROP_EMPTY_PARTS = """
DELETE FROM parts WHERE NOT EXISTS (SELECT 1 FROM seeds s WHERE s.series_id = parts.series_id
    AND s.part_first = parts.first_seed AND s.part_seeds = parts.n_seeds);
DELETE FROM phases WHERE NOT EXISTS (SELECT 1 FROM parts p WHERE p.series_id = phases.series_id
    AND p.first_seed = phases.part_first AND p.n_seeds = phases.part_seeds);
"""
"""Remove the parts whose seeds later computations have all replaced, and their phase timings."""


class Store:
    """A DuckDB results file (created with its parent folder on first use).

    Raises:
      StoreBusyError: when another process holds the database.
      StoreError: naming the path and the problem when it cannot be used (:func:`_check_path`, not a
        DuckDB database, or a DuckDB database with other tables).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._names: dict[str, str] = {}  # batch id → what it is (name_batches)
        try:
            _check_path(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.con = duckdb.connect(os.path.abspath(self.path))  # (a file: never ':memory:' nor 'md:...')
        except OSError as e:  # a symlink loop, a path through a file, no permission
            raise StoreError(f"results database {self.path}: {e}") from None
        except duckdb.Error as e:
            message = str(e).splitlines()[0]
            if isinstance(e, duckdb.IOException) and "lock" in message.lower():
                raise StoreBusyError(f"results database {self.path} is in use by another process (one writer at a "
                                     f"time; wait for it or pass another --db): {message}") from None
            raise StoreError(f"results database {self.path} cannot be opened ({message}); pass another --db") from None
        try:
            found = _columns(self.con)
            if {t: [c for c, _ in found.get(t, [])] for t in _V2_COLUMNS} == _V2_COLUMNS and "series" not in found:
                self._migrate_v2()
            elif [c for c, _ in found.get("phases", [])] in (_PHASES_UNCOUNTED, _PHASES_ONE_COUNT, _PHASES_ALONE,
                                                             _PHASES_ONE_PROCESS):
                self._unread_phases([c for c, _ in found["phases"]])
            if [c for c, _ in found.get("checkpoints", [])] == _CHECKPOINTS_UNNAMED:
                self.con.execute("ALTER TABLE checkpoints ADD COLUMN what VARCHAR")
            self._check_schema()
            self.con.execute(_SCHEMA)
        except BaseException:
            self.con.close()
            raise

    def _unread_phases(self, columns: list[str]) -> None:
        """Give a ``phases`` table of an earlier layout (``columns``) this layout's columns, NULL where it lacks them:
        its timings are kept but not read (module doc), except those of one session in one process, which become
        process 0 of their session; one transaction."""
        with self._transaction() as con:
            if columns == _PHASES_ONE_COUNT:
                con.execute("ALTER TABLE phases DROP COLUMN call_rows")
            if columns in (_PHASES_UNCOUNTED, _PHASES_ONE_COUNT):
                con.execute("ALTER TABLE phases ADD COLUMN update_rows INTEGER")
                con.execute("ALTER TABLE phases ADD COLUMN select_rows INTEGER")
            if columns != _PHASES_ONE_PROCESS:
                con.execute("ALTER TABLE phases ADD COLUMN session VARCHAR")
            con.execute("ALTER TABLE phases ADD COLUMN process INTEGER")
            con.execute("UPDATE phases SET process = 0 WHERE session IS NOT NULL")

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
        if "runs" in found:
            columns, previous = ", ".join(c for c, _ in found["runs"]), ", ".join(_V2_COLUMNS["runs"])
            raise StoreError(f"results database {self.path} has a table 'runs' with columns ({columns}), neither "
                             f"nlbandit's layout nor its previous one ({previous}); pass another --db")
        if found and not set(found) & set(expected):
            raise StoreError(f"results database {self.path} holds other tables ({', '.join(sorted(found))}), not "
                             "nlbandit results; pass another --db")

    def _migrate_v2(self) -> None:
        """Convert a database of the previous layout (:data:`_V2_COLUMNS`) in one transaction: each run becomes
        a part of its series on seeds ``seed_offset ..``; where two runs stored the same seed of a series, the
        one finished last is kept."""
        runs = self.con.execute("SELECT run_id, config FROM runs").fetchall()
        mapping = []
        for run_id, config in runs:
            identity = json.loads(config)
            series_id, seeds = series_of(identity)
            series = {k: v for k, v in identity.items() if k not in SEED_FIELDS}
            mapping.append([run_id, series_id, json.dumps(series), seeds.start, len(seeds)])
        with self._transaction() as con:
            con.execute("ALTER TABLE curves RENAME TO curves_v2")
            con.execute("ALTER TABLE phases RENAME TO phases_v2")
            con.execute(_SCHEMA)
            con.execute("CREATE TEMP TABLE runmap (run_id VARCHAR, series_id VARCHAR, config VARCHAR, "
                        "first_seed BIGINT, n_seeds INTEGER)")
            if mapping:
                con.executemany("INSERT INTO runmap VALUES (?, ?, ?, ?, ?)", mapping)
            con.execute("""
                INSERT INTO series SELECT m.series_id, r.experiment, r.label, m.config, r.version, r.horizon
                FROM runs r JOIN runmap m USING (run_id)
                QUALIFY row_number() OVER (PARTITION BY m.series_id ORDER BY r.finished DESC) = 1""")
            con.execute("""
                INSERT INTO parts SELECT m.series_id, m.first_seed, m.n_seeds, r.compile_s, r.run_s, r.chunk_size,
                    r.chunk_seconds, r.batch_size, r.finished FROM runs r JOIN runmap m USING (run_id)""")
            con.execute("""
                INSERT INTO seeds SELECT m.series_id, m.first_seed + a.seed, m.first_seed, m.n_seeds, a.arms
                FROM arms a JOIN runmap m USING (run_id) JOIN runs r USING (run_id)
                QUALIFY row_number() OVER (PARTITION BY m.series_id, m.first_seed + a.seed
                                           ORDER BY r.finished DESC) = 1""")
            con.execute("""
                INSERT INTO curves SELECT m.series_id, m.first_seed + c.seed, c.metric, c.t, c.value
                FROM curves_v2 c JOIN runmap m USING (run_id) JOIN seeds s ON s.series_id = m.series_id
                    AND s.seed = m.first_seed + c.seed AND s.part_first = m.first_seed AND s.part_seeds = m.n_seeds""")
            con.execute("""
                INSERT INTO phases SELECT m.series_id, m.first_seed, m.n_seeds, p.t, p.select_s, p.update_s,
                    NULL, NULL, NULL, NULL
                FROM phases_v2 p JOIN runmap m USING (run_id)""")
            con.execute(_DROP_EMPTY_PARTS)
            for table in ("runs", "arms", "curves_v2", "phases_v2", "runmap"):
                con.execute(f"DROP TABLE {table}")

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

    def parts(self, series_ids: Iterable[str]) -> dict[str, list[Part]]:
        """The stored parts of each of ``series_ids`` that has any, by series."""
        ids = sorted(set(series_ids))
        if not ids:
            return {}
        rows = self.con.execute("""
            SELECT p.series_id, p.first_seed, p.n_seeds, list(s.seed ORDER BY s.seed), p.batch_size,
                (SELECT [max(ph.select_rows), max(ph.update_rows)] FROM phases ph WHERE ph.series_id = p.series_id
                        AND ph.part_first = p.first_seed AND ph.part_seeds = p.n_seeds AND ph.session IS NOT NULL),
                (SELECT max(ph.session) FROM phases ph WHERE ph.series_id = p.series_id
                        AND ph.part_first = p.first_seed AND ph.part_seeds = p.n_seeds)
            FROM parts p JOIN seeds s ON s.series_id = p.series_id AND s.part_first = p.first_seed
                AND s.part_seeds = p.n_seeds
            WHERE list_contains(?, p.series_id)
            GROUP BY p.series_id, p.first_seed, p.n_seeds, p.batch_size ORDER BY p.series_id, p.first_seed""",
                                [ids]).fetchall()
        out: dict[str, list[Part]] = {}
        for series_id, first, n, holds, batch_size, phase_rows, session in rows:
            read = session is not None and phase_rows is not None and None not in phase_rows
            out.setdefault(series_id, []).append(Part(first, n, tuple(holds), batch_size,
                                                      tuple(phase_rows) if read else None, session if read else None))
        return out

    def load_checkpoint(self, batch_id: str) -> bytes | None:
        """The saved progress of a batch, or None."""
        row = self.con.execute("SELECT progress FROM checkpoints WHERE batch_id = ?", [batch_id]).fetchone()
        return None if row is None else bytes(row[0])

    def name_batches(self, names: dict[str, str]) -> None:
        """Say what batches are (batch id → e.g. ``"sun2025/fig1d_distance: Neural-ES (seeds 10-34)"``), for the
        checkpoints this store saves of them from now on (:meth:`checkpoints`); kept in memory only."""
        self._names.update(names)

    def save_checkpoint(self, batch_id: str, t_done: int, progress: bytes) -> None:
        """Replace the batch's checkpoint (atomically), with what the batch is where :meth:`name_batches` said."""
        with self._transaction() as con:
            con.execute("DELETE FROM checkpoints WHERE batch_id = ?", [batch_id])
            con.execute("INSERT INTO checkpoints (batch_id, t_done, progress, what) VALUES (?, ?, ?, ?)",
                        [batch_id, t_done, progress, self._names.get(batch_id)])

    def checkpoints(self) -> list[tuple[str, int, int, str | None]]:
        """(batch id, rounds done, bytes, what the batch is or None) of every saved checkpoint: the progress of
        batches that have not finished (resumed by the command that started them; another seed count or file is
        another batch)."""
        return [tuple(row) for row in self.con.execute(
            "SELECT batch_id, t_done, octet_length(progress), what FROM checkpoints ORDER BY batch_id").fetchall()]

    def drop_checkpoints(self) -> int:
        """Remove every checkpoint; return how many there were."""
        with self._transaction() as con:
            n = con.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
            con.execute("DELETE FROM checkpoints")
        return n

    def drop_checkpoint(self, batch_id: str) -> None:
        """Remove the batch's checkpoint, if any."""
        with self._transaction() as con:
            con.execute("DELETE FROM checkpoints WHERE batch_id = ?", [batch_id])

    def save_runs(self, batch_id: str, rows: list[dict[str, Any]]) -> None:
        """Store computed runs, each as a part of its series, and drop their batch's checkpoint, in one transaction.

        Each row: experiment, label, config (the run's identity: its series and seeds, :func:`series_of`),
        version, rounds (P,), curves (metric name → (S, P), with a ``regret`` curve), arms (S, T), compile_s,
        run_s, chunk_size, chunk_seconds, batch_size (and the run's ``run_id``, not read). Stored seeds of the
        series are replaced, a part computed again on the same seeds loses its phase timings
        (:meth:`save_phases` adds them after).
        """
        with self._transaction() as con:
            for r in rows:
                series_id, seeds = series_of(r["config"])
                n_seeds, n_points = r["curves"]["regret"].shape
                if n_seeds != len(seeds):
                    raise ValueError(f"run {r['label']!r}: curves of {n_seeds} seeds for a run of {len(seeds)}")
                first, last, metrics = seeds.start, seeds.stop - 1, list(r["curves"])
                series = {k: v for k, v in r["config"].items() if k not in SEED_FIELDS}
                con.execute("DELETE FROM series WHERE series_id = ?", [series_id])
                con.execute("INSERT INTO series VALUES (?, ?, ?, ?, ?, ?)",
                            [series_id, r["experiment"], r["label"], json.dumps(series), r["version"],
                             int(r["rounds"][-1])])
                for table in ("seeds", "curves"):
                    con.execute(f"DELETE FROM {table} WHERE series_id = ? AND seed BETWEEN ? AND ?",
                                [series_id, first, last])
                con.execute("DELETE FROM parts WHERE series_id = ? AND first_seed = ? AND n_seeds = ?",
                            [series_id, first, n_seeds])
                con.execute("DELETE FROM phases WHERE series_id = ? AND part_first = ? AND part_seeds = ?",
                            [series_id, first, n_seeds])
                con.execute(
                    "INSERT INTO parts (series_id, first_seed, n_seeds, compile_s, run_s, chunk_size, chunk_seconds,"
                    " batch_size) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [series_id, first, n_seeds, r["compile_s"], r["run_s"], r["chunk_size"],
                     [float(s) for s in r["chunk_seconds"]], r["batch_size"]])
                con.executemany("INSERT INTO seeds VALUES (?, ?, ?, ?, ?)",
                                [[series_id, seed, first, n_seeds, r["arms"][i].tolist()]
                                 for i, seed in enumerate(seeds)])
                size = n_seeds * n_points
                new_curves = {  # noqa: F841  (read by DuckDB's replacement scan)
                    "series_id": np.full(size * len(metrics), series_id),
                    "seed": np.tile(np.repeat(np.arange(first, last + 1, dtype=np.int64), n_points), len(metrics)),
                    "metric": np.repeat(np.array(metrics), size),
                    "t": np.tile(r["rounds"].astype(np.int64), n_seeds * len(metrics)),
                    "value": np.concatenate([np.asarray(r["curves"][m], np.float64).reshape(-1) for m in metrics]),
                }
                con.execute("INSERT INTO curves SELECT * FROM new_curves")
            con.execute(_DROP_EMPTY_PARTS)
            con.execute("DELETE FROM checkpoints WHERE batch_id = ?", [batch_id])

    def save_phases(self, series_id: str, seeds: range, sessions, rows: tuple[int, int], session: str) -> None:
        """Replace the phase timings of the stored part of ``series_id`` computed on ``seeds`` (``sessions``: per
        process, the (t, select seconds, update seconds) per seed of each timed round,
        :class:`~nlbandit.core.phases.PhaseSample`, from calls on ``rows`` = (selection's, update's) rows, in the
        timing ``session``), in one transaction."""
        part, (select_rows, update_rows) = [series_id, seeds.start, len(seeds)], rows
        with self._transaction() as con:
            con.execute("DELETE FROM phases WHERE series_id = ? AND part_first = ? AND part_seeds = ?", part)
            con.executemany("INSERT INTO phases VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            [[*part, int(t), float(a), float(b), int(update_rows), int(select_rows), session, process]
                             for process, samples in enumerate(sessions) for t, a, b in samples])

    def load(self, series_id: str, seeds: Iterable[int], with_arms: bool = False) -> StoredRun:
        """Read ``seeds`` of a stored series back (``KeyError`` naming the series if one of them is not stored;
        ``ValueError`` if they were recorded at different rounds)."""
        return self.load_many([(series_id, seeds)], with_arms)[0]

    def load_many(self, requests: Iterable[tuple[str, Iterable[int]]], with_arms: bool = False) -> list[StoredRun]:
        """:meth:`load` of each (series_id, seeds) of ``requests``, in order, by six queries in all (a report reads
        hundreds of runs, and each query costs milliseconds: 2,504 runs of the quick tier in 2.5 s against 33.6 s
        one by one)."""
        requests = [(series_id, sorted(set(seeds))) for series_id, seeds in requests]
        if not requests:
            return []
        wanted = {  # noqa: F841  (read by DuckDB's replacement scan)
            "i": np.repeat(np.arange(len(requests), dtype=np.int64), [len(w) for _, w in requests]),
            "series_id": np.array([series_id for series_id, w in requests for _ in w], dtype=str),
            "seed": np.array([seed for _, w in requests for seed in w], dtype=np.int64),
        }
        ids = sorted({series_id for series_id, _ in requests})
        con = self.con
        heads = {series_id: (label, config) for series_id, label, config in con.execute(
            "SELECT series_id, label, config FROM series WHERE list_contains(?, series_id)", [ids]).fetchall()}
        held: dict[int, list[tuple[int, int, int]]] = {}
        for i, first, size, n in con.execute(
                "SELECT w.i, s.part_first, s.part_seeds, count(*) FROM wanted w JOIN seeds s USING (series_id, seed)"
                " GROUP BY ALL ORDER BY w.i, s.part_first, s.part_seeds").fetchall():
            held.setdefault(i, []).append((first, size, n))
        timing = {(series_id, first, size): (c, r, b) for series_id, first, size, c, r, b in con.execute(
            "SELECT series_id, first_seed, n_seeds, compile_s, run_s, batch_size FROM parts"
            " WHERE list_contains(?, series_id)", [ids]).fetchall()}
        c = con.execute("SELECT w.i, c.metric, c.t, c.value FROM wanted w JOIN curves c USING (series_id, seed)"
                        " ORDER BY w.i, c.metric, c.seed, c.t").fetchnumpy()
        bounds = np.searchsorted(np.asarray(c["i"]), np.arange(len(requests) + 1))
        arms: dict[int, list] = {}
        if with_arms:
            for i, a in con.execute("SELECT w.i, s.arms FROM wanted w JOIN seeds s USING (series_id, seed)"
                                    " ORDER BY w.i, s.seed").fetchall():
                arms.setdefault(i, []).append(a)
        phases: dict[tuple[str, int, int], list] = {}
        for series_id, first, size, process, t, select_s, update_s in con.execute(
                "SELECT series_id, part_first, part_seeds, process, t, select_s, update_s FROM phases WHERE "
                "list_contains(?, series_id) AND update_rows IS NOT NULL AND select_rows IS NOT NULL AND session IS "
                "NOT NULL AND process IS NOT NULL ORDER BY series_id, part_first, part_seeds, process, t",
                [ids]).fetchall():
            phases.setdefault((series_id, first, size), []).append((process, t, select_s, update_s))
        out = []
        for i, (series_id, seeds) in enumerate(requests):
            parts = held.get(i, [])
            if series_id not in heads or sum(n for *_, n in parts) != len(seeds):
                raise KeyError(series_id)
            rows = slice(bounds[i], bounds[i + 1])
            curves = np.asarray(c["metric"][rows], dtype=object), np.asarray(c["t"][rows]), np.asarray(c["value"][rows])
            out.append(self._stored_run(series_id, heads[series_id], seeds, parts, timing, *curves,
                                        arms.get(i) if with_arms else None, phases))
        return out

    @staticmethod
    def _stored_run(series_id: str, head: tuple[str, str], wanted: list[int], held: list[tuple[int, int, int]],
                    timing: dict, metric: np.ndarray, t: np.ndarray, value: np.ndarray, arms: list | None,
                    phases: dict) -> StoredRun:
        """One :class:`StoredRun` from what :meth:`load_many` read: its parts (first seed, size, seeds read from
        it), their timing, its curve rows ordered by metric, seed and round, its arms, the phase timings."""
        parts = [timing[(series_id, first, size)] + (size, n) for first, size, n in held]
        sizes = {b for _, _, b, _, _ in parts}
        per_batch = len(sizes) > 1
        compile_s = sum(c / (b if per_batch else 1) for c, _, b, _, _ in parts)
        run_s = sum(r * n / size / (b if per_batch else 1) for _, r, b, size, n in parts)
        names = list(dict.fromkeys(metric))
        try:
            rounds = t[metric == names[0]].reshape(len(wanted), -1)
            curves = {m: value[metric == m].reshape(len(wanted), -1) for m in names}
        except ValueError:
            rounds = None
        if rounds is None or not (rounds == rounds[0]).all():
            raise ValueError(f"stored run {series_id}: seeds {wanted[0]}..{wanted[-1]} were recorded at different "
                             "rounds (a diverged tuning point beside finished seeds?); delete it ('nlbandit results "
                             "prune' after a code change) and compute it again")
        timed = None
        if len(held) == 1 and (held[0][0], held[0][1]) == (wanted[0], len(wanted)):
            sampled = phases.get((series_id, wanted[0], len(wanted)))
            if sampled:
                process, t, select_s, update_s = (np.array(column) for column in zip(*sampled))
                n = int(process.max()) + 1  # (rows ordered by process, then round)
                if t.size % n or (np.bincount(process, minlength=n) != t.size // n).any() or (
                        t.reshape(n, -1) != t[:t.size // n]).any():
                    raise ValueError(f"stored run {series_id}: its processes' phase timings are at different rounds; "
                                     "delete it and compute it again")
                timed = (t[:t.size // n], select_s.reshape(n, -1), update_s.reshape(n, -1))
        return StoredRun(series_id, head[0], json.loads(head[1]), tuple(wanted), rounds[0], curves, compile_s, run_s,
                         1 if per_batch else sizes.pop(), len(held), None if arms is None else
                         np.array(arms, dtype=np.int32), timed)

    def index(self) -> list[dict[str, Any]]:
        """Every stored series: series_id, experiment, label, config (its identity, with its ``code`` hash),
        horizon, seeds (the stored seeds, ascending), n_seeds, run_s (of its parts) and finished (its last
        part's time), ordered by experiment and label."""
        rows = self.con.execute("""
            SELECT s.series_id, s.experiment, s.label, s.config, s.horizon,
                (SELECT list(d.seed ORDER BY d.seed) FROM seeds d WHERE d.series_id = s.series_id),
                sum(p.run_s), max(p.finished)
            FROM series s JOIN parts p USING (series_id)
            GROUP BY ALL ORDER BY s.experiment, s.label, max(p.finished)""").fetchall()
        out = []
        for series_id, experiment, label, config, horizon, seeds, run_s, finished in rows:
            out.append(dict(series_id=series_id, experiment=experiment, label=label, config=json.loads(config),
                            horizon=horizon, seeds=list(seeds), n_seeds=len(seeds), run_s=run_s, finished=finished))
        return out

    def adopt(self, series_id: str, new_id: str, config: dict[str, Any]) -> bool:
        """Re-key stored series ``series_id`` as ``new_id`` with identity ``config`` (less its seed fields; every
        row of the series), in one transaction; False, changing nothing, when ``new_id`` is stored already."""
        with self._transaction() as con:
            if con.execute("SELECT count(*) FROM series WHERE series_id = ?", [new_id]).fetchone()[0]:
                return False
            for table in _SERIES_TABLES:
                con.execute(f"UPDATE {table} SET series_id = ? WHERE series_id = ?", [new_id, series_id])
            con.execute("UPDATE series SET config = ? WHERE series_id = ?",
                        [json.dumps({k: v for k, v in config.items() if k not in SEED_FIELDS}), new_id])
        return True

    def delete_series(self, series_ids: list[str]) -> None:
        """Remove stored series (every row of each) in one transaction."""
        with self._transaction() as con:
            for table in _SERIES_TABLES:
                con.execute(f"DELETE FROM {table} WHERE list_contains(?, series_id)", [series_ids])
