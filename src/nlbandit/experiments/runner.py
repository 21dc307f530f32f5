"""Run an experiment's missing runs into the store, batching grids.

Runs that share the environment, the policy's static hyperparameters and the sizes differ only in
traced hyperparameters; they form one *batch* computed side by side by the experiment's loop
(:meth:`nlbandit.loops.base.Loop.run_batch`: one compilation, common random numbers), which stores it and,
where it checkpoints, resumes an interrupted batch bit-identically. A run whose time a runtime claim reads
(:func:`~nlbandit.experiments.claims.timed_runs`) is computed alone, and computed again alone when the
store has it from a batch of several (another experiment's grid), since a batch runs at the pace of its
slowest lane; a run whose select and update times a claim reads is computed alone with its phases timed
apart (:func:`~nlbandit.experiments.claims.phased_runs`, :mod:`nlbandit.loops.phases`; a resumed run keeps
the samples taken after it resumed).

The batches go to an executor (:mod:`nlbandit.experiments.executors`: this process, or Ray workers), except
those whose times a claim reads: they run in this process, one after the other, after the others are done.
"""

from __future__ import annotations

import json
from statistics import fmean
from typing import Callable

from nlbandit.core.simulate import SimProgress
from nlbandit.experiments.claims import phased_runs, timed_runs
from nlbandit.experiments.executors import Executor, Job, LocalExecutor
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.loops import LOOPS
from nlbandit.loops.base import batch_id
from nlbandit.loops.phases import PHASE_TIMERS, phase_chunk_size
from nlbandit.store import Store


def batch_key(run: RunConfig) -> str:
    """What runs computed side by side share: environment, policy name and static hyperparameters, sizes,
    seeds and the loop's own batch fields (they differ in traced hyperparameters only)."""
    loop = LOOPS[run.loop]
    return json.dumps([run.env, run.policy["name"], loop.split(run.policy)[0], run.horizon, run.n_seeds,
                       run.seed_offset, run.record_points] + loop.batch_fields(run), sort_keys=True)


def batches(runs: list[RunConfig], alone: set[str] = frozenset()) -> list[list[RunConfig]]:
    """Group runs that can be computed side by side; runs with equal ``run_id`` appear once, and those in
    ``alone`` form batches of one."""
    unique = list({r.run_id: r for r in runs}.values())
    groups: dict[str, list[RunConfig]] = {}
    for r in unique:
        groups.setdefault(r.run_id if r.run_id in alone else batch_key(r), []).append(r)
    return list(groups.values())


def run_batch_job(store: Store, *, log: Callable[[str], None], progress: bool, exp: Experiment,
                  batch: list[RunConfig], tag: str, chunk_size: int,
                  on_checkpoint: Callable[[SimProgress], None] | None = None) -> None:
    """Compute one batch with its experiment's loop (:meth:`nlbandit.loops.base.Loop.run_batch`): the
    ``compute`` of a :class:`~nlbandit.experiments.executors.Job`."""
    LOOPS[exp.loop].run_batch(exp, store, batch, tag, progress=progress, chunk_size=chunk_size, log=log,
                              on_checkpoint=on_checkpoint)


def run_experiment(
    exp: Experiment,
    store: Store,
    *,
    progress: bool = True,
    chunk_size: int = 1000,
    log: Callable[[str], None] = print,
    on_checkpoint: Callable[[SimProgress], None] | None = None,
    executor: Executor | None = None,
) -> int:
    """Compute every run of ``exp`` that the store does not have yet; return how many were run.

    ``executor`` computes the batches (default: :class:`~nlbandit.experiments.executors.LocalExecutor`);
    ``on_checkpoint`` is called after each checkpoint is committed (used by tests to kill a run midway; local
    batches only).

    Raises:
      ValueError: when ``exp`` tunes a series and has not been through
        :func:`~nlbandit.experiments.tuning.tune_experiment` (its runs are stand-ins), or ``on_checkpoint``
        is given with another executor than the local one.
    """
    if exp.tuning and not exp.tuned:
        raise ValueError(f"{exp.path}: tune the experiment first (nlbandit.experiments.tuning.tune_experiment)")
    executor = LocalExecutor() if executor is None else executor
    if on_checkpoint is not None and not isinstance(executor, LocalExecutor):
        raise ValueError("on_checkpoint is called by the local executor only")
    sizes = store.batch_sizes([r.run_id for r in exp.runs])
    timed, phased = timed_runs(exp), phased_runs(exp)
    retime = {i for i in timed if sizes.get(i, 1) > 1} | ((phased & set(sizes)) - store.phased(list(phased)))
    done = set(sizes) - retime
    todo = [r for r in exp.runs if r.run_id not in done]
    if done:
        log(f"{len(done)} run(s) already in {store.path}, skipped")
    if retime:
        log(f"{len(retime)} run(s) computed again alone, stored from a batch of several or without their "
            "phases timed: a runtime claim reads their time")
    todo_batches = batches(todo, timed)
    tags = [f"[{i}/{len(todo_batches)}]" for i in range(1, len(todo_batches) + 1)]
    here = timed | phased  # computed in this process, after the others: a claim reads their time
    jobs = [Job(batch_id(b), run_batch_job, dict(exp=exp, batch=b, tag=tag, chunk_size=chunk_size,
                                                 on_checkpoint=on_checkpoint))
            for b, tag in zip(todo_batches, tags) if b[0].run_id not in here]
    executor.run(jobs, store, log=log, progress=progress)
    for batch, tag in zip(todo_batches, tags):
        if batch[0].run_id in phased:
            _run_phased(exp, store, batch, tag, progress=progress, chunk_size=chunk_size, log=log,
                        on_checkpoint=on_checkpoint)
        elif batch[0].run_id in timed:
            run_batch_job(store, log=log, progress=progress, exp=exp, batch=batch, tag=tag, chunk_size=chunk_size,
                          on_checkpoint=on_checkpoint)
    return sum(len(b) for b in todo_batches)


def _run_phased(exp: Experiment, store: Store, batch: list[RunConfig], tag: str, *, progress: bool,
                chunk_size: int, log: Callable[[str], None],
                on_checkpoint: Callable[[SimProgress], None] | None) -> None:
    """Compute a batch of one run with its select and update phases timed apart, and store the timings."""
    timer = PHASE_TIMERS[exp.loop](batch[0])

    def timed_checkpoint(prog: SimProgress) -> None:
        timer(prog)
        if on_checkpoint is not None:
            on_checkpoint(prog)

    LOOPS[exp.loop].run_batch(exp, store, batch, tag, progress=progress, log=log, on_checkpoint=timed_checkpoint,
                              chunk_size=phase_chunk_size(chunk_size, batch[0].horizon))
    store.save_phases(batch[0].run_id, timer.samples)
    select, update = (1e6 * fmean(column) for column in list(zip(*timer.samples))[1:])
    log(f"{tag} phases timed apart at {len(timer.samples)} rounds: select {select:.1f}, update {update:.1f} µs "
        "per seed-round")
