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
"""

from __future__ import annotations

import json
from statistics import fmean
from typing import Callable

from nlbandit.core.simulate import SimProgress
from nlbandit.experiments.claims import phased_runs, timed_runs
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.loops import LOOPS
from nlbandit.loops.phases import PHASE_TIMERS, phase_chunk_size
from nlbandit.store import Store


def _batch_key(run: RunConfig) -> str:
    loop = LOOPS[run.loop]
    return json.dumps([run.env, run.policy["name"], loop.split(run.policy)[0], run.horizon, run.n_seeds,
                       run.seed_offset, run.record_points] + loop.batch_fields(run), sort_keys=True)


def batches(runs: list[RunConfig], alone: set[str] = frozenset()) -> list[list[RunConfig]]:
    """Group runs that can be computed side by side; runs with equal ``run_id`` appear once, and those in
    ``alone`` form batches of one."""
    unique = list({r.run_id: r for r in runs}.values())
    groups: dict[str, list[RunConfig]] = {}
    for r in unique:
        groups.setdefault(r.run_id if r.run_id in alone else _batch_key(r), []).append(r)
    return list(groups.values())


def run_experiment(
    exp: Experiment,
    store: Store,
    *,
    progress: bool = True,
    chunk_size: int = 1000,
    log: Callable[[str], None] = print,
    on_checkpoint: Callable[[SimProgress], None] | None = None,
) -> int:
    """Compute every run of ``exp`` that the store does not have yet; return how many were run.

    ``on_checkpoint`` is called after each checkpoint is committed (used by tests to kill a run midway).

    Raises:
      ValueError: when ``exp`` tunes a series and has not been through
        :func:`~nlbandit.experiments.tuning.tune_experiment` (its runs are stand-ins).
    """
    if exp.tuning and not exp.tuned:
        raise ValueError(f"{exp.path}: tune the experiment first (nlbandit.experiments.tuning.tune_experiment)")
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
    for i, batch in enumerate(todo_batches, 1):
        tag = f"[{i}/{len(todo_batches)}]"
        timer = PHASE_TIMERS[exp.loop](batch[0]) if batch[0].run_id in phased else None
        if timer is None:
            LOOPS[exp.loop].run_batch(exp, store, batch, tag, progress=progress, chunk_size=chunk_size, log=log,
                                      on_checkpoint=on_checkpoint)
            continue

        def timed_checkpoint(prog: SimProgress, timer=timer) -> None:
            timer(prog)
            if on_checkpoint is not None:
                on_checkpoint(prog)

        LOOPS[exp.loop].run_batch(exp, store, batch, tag, progress=progress, log=log, on_checkpoint=timed_checkpoint,
                                  chunk_size=phase_chunk_size(chunk_size, batch[0].horizon))
        store.save_phases(batch[0].run_id, timer.samples)
        select, update = (1e6 * fmean(column) for column in list(zip(*timer.samples))[1:])
        log(f"{tag} phases timed apart at {len(timer.samples)} rounds: select {select:.1f}, update {update:.1f} µs "
            "per seed-round")
    return sum(len(b) for b in todo_batches)
