"""Hyperparameter tuning of an experiment's series before its reported runs (the ``[tune]`` table of
:mod:`nlbandit.experiments.schema`; Bae & Lee 2025's protocol, spec 001 §4.1: "for each (algorithm,
environment) choose the (ν, λ) pair minimizing the mean final cumulative regret over a separate set of
tuning seeds, then report fresh seeds").

For every tuned series and environment case, each point of its grid is simulated on the tuning seeds
(``offset .. offset + seeds − 1``, disjoint from the reported seeds by construction); the points that
differ only in traced hyperparameters run side by side in one compiled batch, on common random numbers.
The point with the best mean final value of the objective (the first in grid order on a tie) becomes the
series' run on that case, computed on the reported seeds like any other run. Tuning runs are stored per seed
like any run (the tuning seeds of the point's series), so a second call reuses them and the report reads them
back for its tuning table.

A grid point whose training diverges (the engine refuses a non-finite state) is never chosen, as a grid
search over a learning rate must allow: it is stored with infinite regret (and −∞ reward: the store keeps no
NaN) and reported as diverged. When a batch fails so, the points the engine's error names (every one that diverged
in the chunk where the batch stopped) are stored so and the batch runs again with a healthy point of its own
standing in for each (the same shapes: no new compilation), until it completes; its stand-ins' results are
dropped. So a grid whose points diverge together, as a learning-rate grid's large steps do, runs twice rather than
once per diverged point.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from nlbandit.experiments.claims import t_quantile_975
from nlbandit.experiments.executors import Executor, Job, LocalExecutor
from nlbandit.experiments.runner import Slots, balanced, batches, missing, named, named_jobs
from nlbandit.experiments.spec import Experiment, RunConfig, Tuning
from nlbandit.loops import LOOPS
from nlbandit.loops.base import Computed, batch_id, stored_rows
from nlbandit.store import Store

METRIC = {"min-regret": "regret", "max-reward": "reward"}
"""The stored curve each objective reads."""
DIVERGED = "its state became non-finite"
"""What :func:`~nlbandit.core.simulate.simulate`'s error says of a diverged training."""
GRID_POINTS = r"diverged in this chunk: grid points \[([\d, ]+)\]"
"""How that error names the diverged points of a grid (their indices in the batch)."""


@dataclass(frozen=True)
class TuningResult:
    """A finished tuning: the objective's mean final value and the half-width of its 95% Student-t interval
    per grid point (over the tuning seeds; NaN for one seed or a point that diverged), and the index of the chosen
    point."""

    tuning: Tuning
    means: tuple[float, ...]
    ci95: tuple[float, ...]
    chosen: int


def tuning_job(store: Store, *, log: Callable[[str], None], progress: bool, exp: Experiment, batch: list[RunConfig],
               tag: str, chunk_size: int) -> None:
    """Compute a batch of tuning runs on their seeds with the experiment's loop
    (:meth:`~nlbandit.loops.base.Loop.compute`, without checkpoints: a tuning batch is short) and store them
    (the ``compute`` of a :class:`~nlbandit.experiments.executors.Job`). A point that diverges is stored as
    diverged and the batch runs again with a healthy point in its place (module docstring)."""
    first, loop = batch[0], LOOPS[exp.loop]
    log(f"{tag} tuning {first.label} ({first.case_label or 'one case'}): {len(batch)} point(s) x {first.n_seeds} "
        f"seeds x {first.horizon} rounds")
    diverged: set[int] = set()
    while True:
        stand_in = min(set(range(len(batch))) - diverged)
        source = [stand_in if i in diverged else i for i in range(len(batch))]  # same shapes: no recompilation
        try:
            out = loop.compute([batch[i] for i in source], list(first.seeds), chunk_size=chunk_size,
                               progress=tag if progress else False)
            break
        except ValueError as e:
            named = re.search(GRID_POINTS, str(e)) if len(batch) > 1 else None
            if DIVERGED not in str(e) or (named is None and len(batch) > 1):
                raise
            failed = [int(j) for j in named.group(1).split(",")] if named else [0]  # slots of the batch
            log(f"{tag} diverged, never chosen: {e}")
            for i in sorted({source[j] for j in failed}):  # a stand-in's slot names the stand-in
                _store_diverged(store, exp, batch[i], loop, chunk_size)
                diverged.add(i)
            if len(diverged) == len(batch):
                return
            log(f"{tag} run again with a stand-in for the {len(diverged)} diverged point(s)")
    log(f"{tag} done: compile {out.compile_s:.2f} s, run {out.run_s:.2f} s")
    keep = [i for i in range(len(batch)) if i not in diverged]
    kept = [batch[i] for i in keep]
    store.save_runs(batch_id(kept), stored_rows(exp, kept, replace(out, curves=[out.curves[i] for i in keep],
                                                                  arms=[out.arms[i] for i in keep])))


def _store_diverged(store: Store, exp: Experiment, run: RunConfig, loop, chunk_size: int) -> None:
    """Store the tuning run ``run`` as diverged: infinite final regret, −∞ reward, no arms."""
    worst = np.full((run.n_seeds, 1), np.inf)
    curves = {m: worst if m == METRIC["min-regret"] else -worst for m in loop.metrics}
    out = Computed(np.array([run.horizon]), [curves], [np.zeros((run.n_seeds, run.horizon), np.int32)], 0.0, 0.0,
                   chunk_size)
    store.save_runs(batch_id([run]), stored_rows(exp, [run], out))


def tuning_results(exp: Experiment, store: Store) -> list[TuningResult]:
    """Every tuning of ``exp`` read back from ``store`` (``KeyError`` when a tuning run is missing; a diverged
    point's mean is infinite, ``ValueError`` when all diverged)."""
    out, stored = [], iter(store.load_many([(c.series_id, c.seeds) for t in exp.tuning for c in t.candidates]))
    for tuning in exp.tuning:
        finals = [next(stored).curves[METRIC[tuning.objective]][:, -1] for _ in tuning.candidates]
        means = [float(np.mean(f)) for f in finals]
        ci = [t_quantile_975(f.size - 1) * float(np.std(f, ddof=1)) / np.sqrt(f.size)
              if f.size > 1 and np.all(np.isfinite(f)) else math.nan for f in finals]  # (one seed: none, not 0)
        if not any(np.isfinite(means)):
            raise ValueError(f"{exp.path}: tuning {tuning.label} ({tuning.case_label or 'one case'}): every grid "
                             "point diverged")
        best = int(np.argmin(means) if tuning.objective == "min-regret" else np.argmax(means))
        out.append(TuningResult(tuning, tuple(means), tuple(ci), best))
    return out


def tuning_jobs(exp: Experiment, store: Store, *, slots: Slots = 1, chunk_size: int = 1000,
                log: Callable[[str], None] = print, name: str = "") -> list[Job]:
    """The jobs that compute the tuning runs of ``exp`` that ``store`` lacks, balanced for ``slots`` workers
    (:func:`~nlbandit.experiments.runner.balance`), after logging what it holds already; ``name`` heads the jobs'
    tags (the file's, when several are computed together)."""
    tag, log = named(name, log)
    lacking = missing(store, [c for t in exp.tuning for c in t.candidates])
    for line in lacking.describe(store, "tuning run"):
        log(line)
    todo = balanced(batches(lacking.todo), slots)
    return named_jobs(store, exp, [Job(batch_id(batch), tuning_job, dict(
        exp=exp, batch=batch, tag=tag(f"tune {i}/{len(todo)}"), chunk_size=chunk_size))
        for i, batch in enumerate(todo, 1)])


def apply_tuning(exp: Experiment, store: Store) -> Experiment:
    """``exp`` with each tuned series' chosen run (by its stored tuning runs) in place of its stand-in and the
    :class:`TuningResult` s in ``tuned`` (``exp`` itself when nothing is tuned)."""
    if not exp.tuning:
        return exp
    results = tuning_results(exp, store)
    chosen = {(r.tuning.label, r.tuning.case): r.tuning.reported[r.chosen] for r in results}
    return replace(exp, runs=[chosen.get((r.label, r.case), r) for r in exp.runs], tuned=tuple(results))


def tune_experiment(exp: Experiment, store: Store, *, progress: bool = True, chunk_size: int = 1000,
                    log: Callable[[str], None] = print, executor: Executor | None = None) -> Experiment:
    """Run the tuning runs of ``exp`` that ``store`` lacks (on ``executor``, by default in this process) and
    return it tuned (:func:`apply_tuning`)."""
    if not exp.tuning:
        return exp
    executor = LocalExecutor() if executor is None else executor
    executor.run(tuning_jobs(exp, store, slots=lambda: executor.slots, chunk_size=chunk_size, log=log), store, log=log,
                 progress=progress)
    return apply_tuning(exp, store)
