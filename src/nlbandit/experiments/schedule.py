"""Several experiments computed together, so that the workers are kept busy across files (``nlbandit check`` of a
folder).

One experiment after the other, each worker waits at the end of every file for the other's last batch, and a file
of one batch keeps one worker busy while the other idles. Instead :func:`run_experiments` sends the batches of many
files to the executor together, each file's next step as soon as its previous one is stored: a tuned file's tuning
runs, then (once they are chosen) its runs; an untuned file's runs at once. A file that reads a series of an
earlier file not finished yet waits for it, so that it finds that file's runs stored as it would one file at a
time: the same batches, so the same numbers (and each series first stored by the same file, which ``nlbandit
results`` names). The steps that others wait for go first: a newly ready step's batches are sent before those not
started yet. The timed runs (a claim reads their simulation's time) and the timing sessions of the runs whose
phases a claim reads (simulated beside the rest) are computed one at a time with nothing beside them, when nothing
else is left to compute or a waiting file needs them. A file is handed back (``done``) as soon as it is
computed, while the executor's workers compute the others (e.g. to write its report in the meantime).
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional

from nlbandit.experiments.executors import Executor, Job
from nlbandit.experiments.runner import experiment_jobs
from nlbandit.experiments.spec import Experiment
from nlbandit.experiments.tuning import apply_tuning, tuning_jobs
from nlbandit.store import Store


def series_read(exp: Experiment) -> set[str]:
    """Every series whose stored seeds ``exp`` reads or computes: its runs, its tuning runs and every run a tuning
    may choose."""
    tuned = [r for t in exp.tuning for r in t.candidates + t.reported]
    return {r.series_id for r in exp.runs + tuned}


def run_experiments(
    exps: list[Experiment],
    store: Store,
    executor: Executor,
    *,
    progress: bool = True,
    chunk_size: int = 1000,
    log: Callable[[str], None] = print,
    done: Optional[Callable[[int, Experiment, float], None]] = None,
) -> tuple[list[Experiment], list[float]]:
    """Compute what the store lacks of the experiments ``exps``, tuning them on the way (module docstring); return
    them tuned, and the seconds their jobs took where they ran, per experiment. ``done(i, exp, seconds)`` is called
    once for each experiment, tuned and computed, as soon as it is (while the executor's workers compute the others,
    where it has workers: from its ``idle`` calls, one experiment per call), else at the end. With several
    experiments each one's log lines and job tags are headed by its ``paper/name``."""
    exps, n = list(exps), len(exps)
    reads = [series_read(e) for e in exps]
    stage = ["tune" if e.tuning else "run" for e in exps]  # -> "timed" (its timed runs wait) -> "done"
    seconds = [0.0] * n
    owner: dict[str, int] = {}  # job key -> its file
    left: list[set[str]] = [set() for _ in range(n)]  # the current step's jobs not stored yet (none: not sent)
    timed: dict[int, list[Job]] = {}  # file -> its timed runs, computed alone
    finished: deque[int] = deque()  # computed, not handed to `done` yet

    def slots() -> int:
        """The executor's workers, counted only when a step has something to compute."""
        return executor.slots

    def name(i: int) -> str:
        return f"{exps[i].paper}/{exps[i].name}" if n > 1 else ""

    def complete(i: int) -> None:
        """File ``i``'s current step is stored: choose its tuned points, or finish it (its timed runs may wait)."""
        if stage[i] == "tune":
            exps[i], stage[i] = apply_tuning(exps[i], store), "run"
        elif i in timed:
            stage[i] = "timed"
        else:
            stage[i] = "done"
            finished.append(i)

    def ready() -> list[Job]:
        """The batches of every step that may start now (a file whose step has nothing to compute goes on at once,
        and so may a file that waited for it)."""
        jobs: list[Job] = []
        moved = True
        while moved:
            moved = False
            for i in range(n):
                if stage[i] not in ("tune", "run") or left[i] or any(
                        stage[j] != "done" and reads[j] & reads[i] for j in range(i)):
                    continue
                if stage[i] == "tune":
                    new = tuning_jobs(exps[i], store, slots=slots, chunk_size=chunk_size, log=log,
                                      name=name(i))
                else:
                    new, alone = experiment_jobs(exps[i], store, slots=slots, chunk_size=chunk_size,
                                                 log=log, name=name(i))
                    if alone:
                        timed[i] = alone
                if new:
                    left[i] = {job.key for job in new}
                    owner.update((job.key, i) for job in new)
                    jobs += new
                else:
                    complete(i)
                    moved = True
        return jobs

    def more(key: str, took: float) -> list[Job]:
        """Job ``key`` is stored: the steps that may start now, once its file's step is complete."""
        i = owner[key]
        seconds[i] += took
        left[i].discard(key)
        if left[i]:
            return []
        complete(i)
        return ready()

    def idle() -> None:
        """Hand one computed file back, if one waits."""
        if finished:
            i = finished.popleft()
            if done is not None:
                done(i, exps[i], seconds[i])

    while any(s != "done" for s in stage):
        jobs = ready()
        if jobs:
            if n > 1:
                log(f"{len(jobs)} batch(es) of {len({owner[job.key] for job in jobs})} file(s) to start with")
            executor.run(jobs, store, log=log, progress=progress, more=more, idle=idle)
            continue
        for i, alone in timed.items():  # every file left waits for timed runs
            seconds[i] += sum(executor.run_alone(alone, store, log=log, progress=progress).values())
            stage[i] = "done"
            finished.append(i)
        timed.clear()
    while finished:
        idle()
    return exps, seconds
