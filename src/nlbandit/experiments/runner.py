"""Run an experiment's missing runs into the store, batching grids.

Runs that share the environment, the policy's static hyperparameters and the sizes differ only in
traced hyperparameters; they form one *batch* computed side by side by the experiment's loop
(:meth:`nlbandit.loops.base.Loop.run_batch`: one compilation, common random numbers), which stores it and,
where it checkpoints, resumes an interrupted batch bit-identically.
"""

from __future__ import annotations

import json
from typing import Callable

from nlbandit.core.simulate import SimProgress
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.loops import LOOPS
from nlbandit.store import Store


def _batch_key(run: RunConfig) -> str:
    loop = LOOPS[run.loop]
    return json.dumps([run.env, run.policy["name"], loop.split(run.policy)[0], run.horizon, run.n_seeds,
                       run.record_points] + loop.batch_fields(run), sort_keys=True)


def batches(runs: list[RunConfig]) -> list[list[RunConfig]]:
    """Group runs that can be computed side by side; runs with equal ``run_id`` appear once."""
    unique = list({r.run_id: r for r in runs}.values())
    groups: dict[str, list[RunConfig]] = {}
    for r in unique:
        groups.setdefault(_batch_key(r), []).append(r)
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
    done = store.finished([r.run_id for r in exp.runs])
    todo = [r for r in exp.runs if r.run_id not in done]
    if len(todo) < len(exp.runs):
        log(f"{len({r.run_id for r in exp.runs} & done)} run(s) already in {store.path}, skipped")
    todo_batches = batches(todo)
    for i, batch in enumerate(todo_batches, 1):
        LOOPS[exp.loop].run_batch(exp, store, batch, f"[{i}/{len(todo_batches)}]", progress=progress,
                                  chunk_size=chunk_size, log=log, on_checkpoint=on_checkpoint)
    return sum(len(b) for b in todo_batches)
