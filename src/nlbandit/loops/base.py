"""The interface every experiment loop implements (:class:`Loop`), and the pieces its runners share.

A loop is one way of turning an experiment file's runs into stored results: the bandit simulation
(:mod:`nlbandit.loops.bandit`), online regression (:mod:`nlbandit.loops.regression`), and later the
logged-data replay. It owns everything that differs between them — which registries its ``[env]`` and
``[[policies]]`` tables name, how a series is resolved against its environment, which modules' source keys
its runs, how a batch of runs is computed, which curves it stores and which columns its report adds — so
that ``experiments/spec.py``, ``experiments/runner.py``, the store and the report hold no branch on the
loop. A new loop is one module defining a :class:`Loop` subclass and one line in :data:`nlbandit.loops.LOOPS`.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import jax.numpy as jnp
import numpy as np

from nlbandit import __version__

if TYPE_CHECKING:  # type names only: experiments/ imports this package, not the other way round
    from nlbandit.experiments.spec import Experiment, RunConfig
    from nlbandit.store import Store


@dataclass
class Computed:
    """A batch computed by :meth:`Loop.compute`, on the seeds it was given.

    Attributes:
      rounds: (P,) the recorded rounds.
      curves: per run of the batch, in order, its curves by metric (:attr:`Loop.metrics`), (S, P) each.
      arms: per run, the chosen arm of every round, (S, T), or (S, 0) for a loop that stores none.
      compile_s, run_s, chunk_size, chunk_seconds: the batch's timing.
      note: what the log's closing line adds (e.g. runs that stopped short).
    """

    rounds: np.ndarray
    curves: list[dict[str, np.ndarray]]
    arms: list[np.ndarray]
    compile_s: float
    run_s: float
    chunk_size: int
    chunk_seconds: list[float] = field(default_factory=list)
    note: str = ""


class Loop(ABC):
    """One experiment loop.

    Attributes:
      name: the value of an experiment file's ``loop`` field.
      metrics: the cumulative curves each run stores, by name; the first is the regret that tables,
        plots and claims read.
      series_env: whether a ``[[policies]]`` table may carry its own environment fields (``env = {...}``).
      tunable: whether an experiment file of this loop may have a ``[tune]`` table (its resolution of tuning
        candidates and its objectives' curves are the bandit loop's).
      diagnostics: the report diagnostics its experiment files may ask for (``diagnostics = [...]``).
    """

    name: str
    metrics: tuple[str, ...]
    series_env: bool = False
    tunable: bool = False
    diagnostics: tuple[str, ...] = ()

    @abstractmethod
    def fixed_env_fields(self, env: dict[str, Any], where: str) -> tuple[str, ...]:
        """The fields of an ``[env]`` table that are never grids (the name, array-valued fields)."""

    @abstractmethod
    def case_env(self, env: dict[str, Any], horizon: int, n_seeds: int, record_points: int,
                 where: str) -> dict[str, Any]:
        """One environment case of the file, validated as far as it can be before the series are known
        (with :func:`~nlbandit.core.memory.check_memory` when its arrays are known)."""

    @abstractmethod
    def resolve_series(self, policy: dict[str, Any], env: dict[str, Any], series_env: dict[str, Any],
                       horizon: int, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """Validate one series configuration on one environment case; return (the run's resolved environment,
        its resolved policy)."""

    @abstractmethod
    def split(self, policy: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """A resolved policy's (static keyword arguments, traced hyperparameters)."""

    def batch_fields(self, run: "RunConfig") -> list[Any]:
        """What, beyond the environment, the policy's static part and the sizes, runs must share to be
        computed side by side."""
        return []

    def data_sources(self, env: dict[str, Any]) -> dict[str, Any]:
        """The real data sets an ``[env]`` table of this loop reads, by name, with their sources
        (:mod:`nlbandit.data.sources`: ``available(name)``, ``fetch(name)``), fetched before its runs."""
        return {}

    @abstractmethod
    def code_modules(self, policy: str, env: str) -> tuple[str, ...]:
        """The modules whose source (with everything they import) computes a run of ``policy`` on ``env``."""

    @abstractmethod
    def memory(self, env: dict[str, Any], policy: dict[str, Any] | None, horizon: int, n_seeds: int,
               record_points: int) -> dict[str, int]:
        """Bytes of one run's dominant arrays over ``n_seeds``, by name (checked against the machine's memory at
        load): the loop's own and, given its resolved ``policy``, the policy's (for a bandit policy
        :func:`~nlbandit.core.memory.policy_parts`, as the engine checks them)."""

    @abstractmethod
    def describe(self, batch: list["RunConfig"], resume: bytes | None = None) -> str:
        """What the log says of a batch it starts (from checkpoint ``resume``), e.g. ``Lin-UCB: 10 seeds x
        1000 rounds``."""

    @abstractmethod
    def compute(self, batch: list["RunConfig"], seeds: list[int], *, chunk_size: int = 1000,
                progress: str | bool = False, on_chunk: Callable | None = None,
                resume: bytes | None = None) -> Computed:
        """Compute ``batch`` (runs differing only in traced hyperparameters) side by side on ``seeds``; each
        seed's results are the same whichever seeds run beside it (up to float rounding, which a float32 network
        can carry into a near-tie's arm: :mod:`nlbandit.report.runlist`). A loop that checkpoints calls
        ``on_chunk(progress)`` after each chunk (``progress.t_done``, ``progress.to_bytes()``) and resumes
        from ``resume``, those bytes; the others ignore both."""

    def run_batch(self, exp: "Experiment", store: "Store", batch: list["RunConfig"], tag: str, *, progress: bool,
                  chunk_size: int, log: Callable[[str], None], on_checkpoint: Callable | None) -> None:
        """Compute ``batch`` on its seeds (:meth:`compute`) and store its results
        (:meth:`nlbandit.store.Store.save_runs`, with the curves named in :attr:`metrics`); in one piece, or,
        for a loop whose :meth:`compute` checkpoints, saving a checkpoint after every chunk (``on_checkpoint``
        is called after each is committed) and resuming from the last one."""
        key = batch_id(batch)
        saved = store.load_checkpoint(key)
        log(f"{tag} {self.describe(batch, saved)}")

        def checkpoint(prog: Any) -> None:
            store.save_checkpoint(key, prog.t_done, prog.to_bytes())
            if on_checkpoint is not None:
                on_checkpoint(prog)

        out = self.compute(batch, list(batch[0].seeds), chunk_size=chunk_size, progress=tag if progress else False,
                           on_chunk=checkpoint, resume=saved)
        store.save_runs(key, stored_rows(exp, batch, out))
        per = 1e6 * out.run_s / (batch[0].horizon * batch[0].n_seeds * len(batch))
        log(f"{tag} done: compile {out.compile_s:.2f} s, run {out.run_s:.2f} s ({per:.2f} µs per seed-round)"
            + (f"; {out.note}" if out.note else ""))

    @abstractmethod
    def regret_name(self, runs: list["RunConfig"]) -> str:
        """The axis and table label of the first metric, e.g. ``cumulative pseudo-regret``."""

    def report_columns(self) -> tuple[str, ...]:
        """Extra columns of the report's results table, after the case."""
        return ()

    def report_cells(self, run: "RunConfig", curves: dict[str, np.ndarray]) -> tuple[str, ...]:
        """The cells of :meth:`report_columns` for one stored run (its curves by metric, (S, P) each)."""
        return ()

    def report_notes(self) -> list[str]:
        """Paragraphs printed above the results table (what the extra columns mean)."""
        return []


def batch_id(batch: list["RunConfig"]) -> str:
    """The store's key of a batch's checkpoint: a hash of its run ids."""
    return hashlib.sha256(" ".join(sorted(r.run_id for r in batch)).encode()).hexdigest()[:20]


def traced_params(loop: Loop, batch: list["RunConfig"]) -> tuple[dict[str, jnp.ndarray], bool]:
    """The traced hyperparameters of a batch as float64 arrays (with a leading grid axis, and ``True``, when
    it has several runs)."""
    traced = [loop.split(r.policy)[1] for r in batch]
    grid = len(batch) > 1
    return {k: jnp.asarray([t[k] for t in traced] if grid else traced[0][k], jnp.float64) for k in traced[0]}, grid


def stored_rows(exp: "Experiment", batch: list["RunConfig"], out: Computed) -> list[dict[str, Any]]:
    """The runs of a computed batch as :meth:`nlbandit.store.Store.save_runs` takes them."""
    return [stored_row(exp, run, out.rounds, out.curves[i], out.arms[i], compile_s=out.compile_s, run_s=out.run_s,
                       chunk_size=out.chunk_size, chunk_seconds=out.chunk_seconds, batch_size=len(batch))
            for i, run in enumerate(batch)]


def pick(array: Any, i: int, grid: bool) -> np.ndarray:
    """Run ``i``'s part of an engine's result: ``array[i]`` for a grid, ``array`` itself for one run."""
    return np.asarray(array[i] if grid else array)


def stored_row(exp: "Experiment", run: "RunConfig", rounds: np.ndarray, curves: dict[str, np.ndarray],
               arms: np.ndarray, *, compile_s: float, run_s: float, chunk_size: int, chunk_seconds: list[float],
               batch_size: int) -> dict[str, Any]:
    """One finished run as :meth:`nlbandit.store.Store.save_runs` takes it."""
    return dict(run_id=run.run_id, experiment=f"{exp.paper}/{exp.name}", label=run.label, config=run.identity(),
                version=__version__, rounds=rounds, curves=curves, arms=arms, compile_s=compile_s, run_s=run_s,
                chunk_size=chunk_size, chunk_seconds=chunk_seconds, batch_size=batch_size)
