"""Run an experiment's missing runs into the store, batching grids and resuming interrupted batches.

Runs that share the environment, the policy's static hyperparameters and the sizes differ only in
traced hyperparameters; they form one *batch* simulated side by side (``simulate(..., grid=True)``:
one compilation, common random numbers). A batch checkpoints after every chunk; when a process dies,
the next call resumes the batch from its last checkpoint, and the results are bit-identical to an
uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
from typing import Callable

import jax.numpy as jnp
import numpy as np

from nlbandit import __version__
from nlbandit.core.regress import regress
from nlbandit.core.simulate import SimProgress, simulate
from nlbandit.core.types import ProblemSpec
from nlbandit.envs.registry import make_env, make_stream
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.policies.learners import learner_entry, split_learner_config
from nlbandit.policies.registry import build_policy, split_policy_config
from nlbandit.store import Store


def _split(run: RunConfig) -> tuple[dict, dict]:
    return (split_learner_config if run.loop == "regression" else split_policy_config)(run.policy)


def _batch_key(run: RunConfig) -> str:
    static, _ = _split(run)
    extra = [run.policy["regret"], run.policy["units"]] if run.loop == "regression" else []
    return json.dumps([run.env, run.policy["name"], static, run.horizon, run.n_seeds, run.record_points] + extra,
                      sort_keys=True)


def batches(runs: list[RunConfig]) -> list[list[RunConfig]]:
    """Group runs that can be simulated side by side; runs with equal ``run_id`` appear once."""
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
    """Simulate every run of ``exp`` that the store does not have yet; return how many were run.

    ``on_checkpoint`` is called after each checkpoint is committed (used by tests to kill a run midway).
    """
    done = store.finished([r.run_id for r in exp.runs])
    todo = [r for r in exp.runs if r.run_id not in done]
    if len(todo) < len(exp.runs):
        log(f"{len({r.run_id for r in exp.runs} & done)} run(s) already in {store.path}, skipped")
    todo_batches = batches(todo)
    for i, batch in enumerate(todo_batches, 1):
        run_batch = _run_regression_batch if batch[0].loop == "regression" else _run_batch
        run_batch(exp, store, batch, f"[{i}/{len(todo_batches)}]", progress, chunk_size, log, on_checkpoint)
    return sum(len(b) for b in todo_batches)


def _batch_id(batch: list[RunConfig]) -> str:
    return hashlib.sha256(" ".join(sorted(r.run_id for r in batch)).encode()).hexdigest()[:20]


def _traced(batch: list[RunConfig]) -> tuple[dict, bool]:
    """The traced hyperparameters of a batch (with a leading grid axis when it has several runs)."""
    traced = [_split(r)[1] for r in batch]
    grid = len(batch) > 1
    return {k: jnp.asarray([t[k] for t in traced] if grid else traced[0][k], jnp.float64) for k in traced[0]}, grid


def _run_regression_batch(exp, store, batch, tag, progress, chunk_size, log, on_checkpoint) -> None:
    """Online regression (:func:`~nlbandit.core.regress.regress`): seconds per batch, so no checkpoints.

    The stored ``cum_regret`` is each run's chosen regret curve; ``cum_reward`` holds the cumulative
    number of clipped labels (regression has no reward)."""
    first = batch[0]
    stream = make_stream(first.env["name"], first.horizon, **{k: v for k, v in first.env.items() if k != "name"})
    static, _ = _split(first)
    learner = learner_entry(first.policy["name"]).make(stream, **static)
    params, grid = _traced(batch)
    metric, units = first.policy["regret"], first.policy["units"]
    log(f"{tag} {', '.join(r.label for r in batch)}: {first.n_seeds} trials x {first.horizon} rounds ({metric} regret)")
    res = regress(stream, learner, params, range(first.n_seeds), adversarial=metric == "adversarial", units=units,
                  grid=grid, max_points=first.record_points)
    rows = []
    for i, r in enumerate(batch):
        curve = res.curves[metric][i] if grid else res.curves[metric]
        rows.append(dict(
            run_id=r.run_id, experiment=f"{exp.paper}/{exp.name}", label=r.label, config=r.identity(),
            version=__version__, rounds=res.rounds, cum_regret=curve, cum_reward=res.curves["clipped"],
            arms=np.zeros((first.n_seeds, 0), np.int32), compile_s=res.compile_s, run_s=res.run_s,
            chunk_size=first.horizon, chunk_seconds=[res.run_s], batch_size=len(batch)))
    store.save_runs(_batch_id(batch), rows)
    log(f"{tag} done: compile {res.compile_s:.2f} s, run {res.run_s:.2f} s")


def _run_batch(exp, store, batch, tag, progress, chunk_size, log, on_checkpoint) -> None:
    first = batch[0]
    env = make_env(**first.env)
    spec = ProblemSpec(env.spec.d, env.spec.k, first.horizon)
    policy, _ = build_policy(first.policy, spec)
    params, grid = _traced(batch)
    batch_id = _batch_id(batch)

    saved = store.load_checkpoint(batch_id)
    resume = SimProgress.from_bytes(saved) if saved is not None else None
    names = ", ".join(r.label for r in batch)
    case = f" ({first.case_label})" if first.case else ""
    log(f"{tag} {names}{case}: {first.n_seeds} seeds x {first.horizon} rounds"
        + (f", resuming at round {resume.t_done}" if resume else ""))

    def checkpoint(prog: SimProgress) -> None:
        store.save_checkpoint(batch_id, prog.t_done, prog.to_bytes())
        if on_checkpoint is not None:
            on_checkpoint(prog)

    res = simulate(env, policy, params, first.horizon, range(first.n_seeds), grid=grid, chunk_size=chunk_size,
                   max_points=first.record_points, progress=tag if progress else False, on_chunk=checkpoint,
                   resume=resume)
    rows = []
    for i, r in enumerate(batch):
        pick = (lambda a: a[i]) if grid else (lambda a: a)
        rows.append(dict(
            run_id=r.run_id, experiment=f"{exp.paper}/{exp.name}", label=r.label, config=r.identity(),
            version=__version__, rounds=res.rounds, cum_regret=pick(res.cum_regret),
            cum_reward=pick(res.cum_reward), arms=pick(res.arms), compile_s=res.compile_s, run_s=res.run_s,
            chunk_size=res.chunk_size, chunk_seconds=res.chunk_seconds, batch_size=len(batch)))
    store.save_runs(batch_id, rows)
    log(f"{tag} done: compile {res.compile_s:.2f} s, run {res.run_s:.2f} s "
        f"({1e6 * res.run_s / (first.horizon * first.n_seeds * len(batch)):.2f} µs per seed-round)")
