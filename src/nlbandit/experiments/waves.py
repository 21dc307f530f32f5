"""Several experiments computed together, in waves, so that the workers are kept busy across files (``nlbandit
check`` of a folder).

One experiment after the other, each worker waits at the end of every file for the other's last batch, and a file
of one batch keeps one worker busy while the other idles. Instead :func:`run_experiments` sends the batches of many
files to the executor together, in *waves*: each wave holds the next step of every file it may take: a tuned file's
tuning runs, then (in a later wave, once they are chosen) its runs; an untuned file's runs at once. A file that
reads a series of an earlier file not finished yet waits for it, so that it finds that file's runs stored as it
would one file at a time: the same batches, so the same numbers (and each series first stored by the same file,
which ``nlbandit results`` names). The timed runs (a claim reads their time) are
computed one at a time with nothing beside them, when no file is left to wave or a waiting file needs them.
"""

from __future__ import annotations

from typing import Callable

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
) -> tuple[list[Experiment], list[float]]:
    """Compute what the store lacks of the experiments ``exps``, tuning them on the way, in waves (module
    docstring); return them tuned, and the seconds their jobs took where they ran, per experiment. With several
    experiments each one's log lines and job tags are headed by its ``paper/name``."""
    exps, n = list(exps), len(exps)
    reads = [series_read(e) for e in exps]
    stage = ["tune" if e.tuning else "run" for e in exps]  # -> "timed" (its timed runs wait) -> "done"
    seconds = [0.0] * n
    timed: list[tuple[int, list[Job]]] = []
    while any(s != "done" for s in stage):
        wave: list[tuple[int, list[Job]]] = []
        for i in range(n):
            if stage[i] in ("tune", "run") and not any(stage[j] != "done" and reads[j] & reads[i] for j in range(i)):
                name = f"{exps[i].paper}/{exps[i].name}" if n > 1 else ""
                if stage[i] == "tune":
                    wave.append((i, tuning_jobs(exps[i], store, slots=executor.slots, chunk_size=chunk_size,
                                                log=log, name=name)))
                else:
                    side_by_side, alone = experiment_jobs(exps[i], store, slots=executor.slots,
                                                          chunk_size=chunk_size, log=log, name=name)
                    wave.append((i, side_by_side))
                    if alone:
                        timed.append((i, alone))
        if not wave:  # every file left waits for timed runs
            for i, jobs in timed:
                seconds[i] += sum(executor.run_alone(jobs, store, log=log, progress=progress).values())
                stage[i] = "done"
            timed = []
            continue
        jobs = [job for _, file_jobs in wave for job in file_jobs]
        if n > 1:
            log(f"wave: {len(jobs)} batch(es) of {len(wave)} file(s)")
        took = executor.run(jobs, store, log=log, progress=progress)
        for i, file_jobs in wave:
            seconds[i] += sum(took[job.key] for job in file_jobs)
            if stage[i] == "tune":
                exps[i], stage[i] = apply_tuning(exps[i], store), "run"
            else:
                stage[i] = "timed" if any(j == i for j, _ in timed) else "done"
    return exps, seconds
