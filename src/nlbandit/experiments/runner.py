"""Run an experiment's missing runs into the store, batching grids.

Runs that share the environment, the policy's static hyperparameters and the sizes differ only in
traced hyperparameters; they form one *batch* computed side by side by the experiment's loop
(:meth:`nlbandit.loops.base.Loop.run_batch`: one compilation, common random numbers), which stores it and,
where it checkpoints, resumes an interrupted batch bit-identically. A run whose time a runtime claim reads
(:func:`~nlbandit.experiments.claims.timed_runs`) is computed alone, and computed again alone when the
store has it from a batch of several (another experiment's grid), since a batch runs at the pace of its
slowest lane.
"""

from __future__ import annotations

import json
from typing import Callable

from nlbandit.core.simulate import SimProgress
from nlbandit.experiments.claims import timed_runs
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.loops import LOOPS
from nlbandit.store import Store


def _batch_key(run: RunConfig) -> str:
    loop = LOOPS[run.loop]
    return json.dumps([run.env, run.policy["name"], loop.split(run.policy)[0], run.horizon, run.n_seeds,
                       run.record_points] + loop.batch_fields(run), sort_keys=True)


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
    """
    sizes = store.batch_sizes([r.run_id for r in exp.runs])
    timed = timed_runs(exp)
    retime = {i for i in timed if sizes.get(i, 1) > 1}
    done = set(sizes) - retime
    todo = [r for r in exp.runs if r.run_id not in done]
    if done:
        log(f"{len(done)} run(s) already in {store.path}, skipped")
    if retime:
        log(f"{len(retime)} run(s) stored from a batch of several computed again alone: a runtime claim reads "
            "their time")
    todo_batches = batches(todo, timed)
    for i, batch in enumerate(todo_batches, 1):
        LOOPS[exp.loop].run_batch(exp, store, batch, f"[{i}/{len(todo_batches)}]", progress=progress,
                                  chunk_size=chunk_size, log=log, on_checkpoint=on_checkpoint)
    return sum(len(b) for b in todo_batches)
