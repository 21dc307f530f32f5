"""Run an experiment's missing runs into the store, batching grids.

The store keeps results per seed (:mod:`nlbandit.store`), so a run computes only the seeds its series lacks
(:func:`missing`): raising an experiment's ``seeds`` computes the new ones, and a run stored by another file with
some of the same seeds reuses them. Runs that share the environment, the policy's static hyperparameters, the
sizes and the seeds differ only in traced hyperparameters; they form one *batch* computed side by side by the
experiment's loop (:meth:`nlbandit.loops.base.Loop.run_batch`: one compilation, common random numbers), which
stores it and, where it checkpoints, resumes an interrupted batch bit-identically (in a loop that computes each run
on inputs the runs share, one batch holds any policies: :data:`SHARED_INPUT_LOOPS`). A run whose time a claim reads
(:func:`~nlbandit.experiments.claims.timed_runs`) is computed in a batch of one on all its seeds, and computed again
so when the store has it in pieces or from a batch of several (another experiment's grid), since a batch runs at
the pace of its slowest lane. A run whose simulation's time a claim reads
(:func:`~nlbandit.experiments.claims.runtime_runs`) is computed with nothing beside it. A run whose select and
update times a claim reads (:func:`~nlbandit.experiments.claims.phased_runs`, :mod:`nlbandit.loops.phases`) has
its phases timed apart, on rounds its simulation kept, in one timing session with the other such runs of the same
horizon and seeds (:func:`phase_groups`), so that their costs compare within one process; with
``phase_processes`` > 1 that session is repeated in as many fresh processes (:func:`time_sessions`), so that a
claim reads how much a cost shifts from process to process. Its simulation's own time is not what those claims
read, so it is simulated beside other work (:func:`run_kept_job`, keeping those rounds in the store) and only the
session has nothing beside it (:func:`run_phased_job`).

The batches go to an executor (:mod:`nlbandit.experiments.executors`: this process, worker processes, or Ray
workers); those whose times a claim reads, and the timing sessions, go after the others are done, one at a time
(:meth:`~nlbandit.experiments.executors.Executor.run_alone`).
"""

from __future__ import annotations

import json
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any, Callable, Iterable

from nlbandit.core.phases import (KeptRound, PhaseRows, PhaseSample, PhaseTimer, rounds_from_bytes, rounds_to_bytes,
                                  time_phases)
from nlbandit.core.simulate import SimProgress
from nlbandit.experiments.claims import phased_runs, runtime_runs, timed_runs
from nlbandit.experiments.executors import Executor, Job, LocalExecutor
from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.loops import LOOPS
from nlbandit.loops.base import batch_id
from nlbandit.loops.phases import PHASE_TIMERS, phase_chunk_size
from nlbandit.store import Store


SHARED_INPUT_LOOPS = frozenset({"evaluate"})
"""Loops whose batch computes each of its runs apart, on inputs the runs share, rather than as one program: their
runs of any policies on the same environment, sizes and seeds form one batch. The evaluate loop replays each
candidate on every seed's log, which a batch writes once per seed (a simulated log: through the service's code,
:mod:`nlbandit.loops.evaluate`); a batch per candidate wrote each log once per candidate. Named here, by loop, rather
than as an attribute of :class:`~nlbandit.loops.base.Loop`, whose module is in every run's code hash: how runs are
batched changes none of their numbers (as :data:`nlbandit.loops.phases.PHASE_TIMERS` names the loops that time
phases)."""


def batch_key(run: RunConfig) -> str:
    """What runs computed side by side share: environment, policy name and static hyperparameters (not in a loop
    of :data:`SHARED_INPUT_LOOPS`), sizes, seeds, XLA flags and the loop's own batch fields (they differ in traced
    hyperparameters only)."""
    loop = LOOPS[run.loop]
    policy = [] if run.loop in SHARED_INPUT_LOOPS else [run.policy["name"], loop.split(run.policy)[0]]
    return json.dumps([run.env, *policy, run.horizon, run.n_seeds, run.seed_offset, run.record_points, run.xla]
                      + loop.batch_fields(run), sort_keys=True)


def batches(runs: list[RunConfig], alone: set[str] = frozenset()) -> list[list[RunConfig]]:
    """Group runs that can be computed side by side; runs with equal ``run_id`` appear once, and those in
    ``alone`` form batches of one."""
    unique = list({r.run_id: r for r in runs}.values())
    groups: dict[str, list[RunConfig]] = {}
    for r in unique:
        groups.setdefault(r.run_id if r.run_id in alone else batch_key(r), []).append(r)
    return list(groups.values())


JOBS_PER_WORKER = 4
"""A call whose batches, once cut to their shares, number fewer than this many per worker has every batch cut between
its seeds as well (:func:`balance`)."""

SEED_EXACT_LOOPS = frozenset({"bandit", "replay", "evaluate"})
"""The loops whose batches :func:`balance` cuts between their seeds for the workers: those whose every seed's
numbers were found bit for bit the same computed beside other seeds or not (the quick scales of ten experiment
files, 4 seeds whole against 2 + 2, 2026-11-29: 81 series of linear, GLM, ensemble and neural policies, DeepFPL and
NeuralLog included). Not the regression loop: its curves moved in the last bits (by up to 1.3e-11), so its numbers
would depend on how many workers computed them."""

MIN_PIECE_SEEDS = 5
"""The fewest seeds a piece of a batch cut between its seeds for the workers keeps (:func:`balance`): the quick
scales' batches of 1-3 seeds stay whole (a piece of another size is another program to compile, and their
compilation is most of their time), and a piece still computes its seeds side by side."""


def seed_pieces(batch: list[RunConfig], pieces: int) -> list[list[RunConfig]]:
    """``batch`` cut between its seeds (its runs have the same ones: :func:`batch_key`) into ``pieces`` runs of
    consecutive seeds each (the first ones one seed larger where they do not divide evenly); ``[batch]`` for one
    piece or fewer."""
    n, first = batch[0].n_seeds, batch[0].seed_offset
    pieces = max(1, min(pieces, n))
    sizes = [n // pieces + (i < n % pieces) for i in range(pieces)]
    starts = [first + sum(sizes[:i]) for i in range(pieces)]
    return [batch] if pieces == 1 else [[replace(r, seed_offset=start, n_seeds=size) for r in batch]
                                        for start, size in zip(starts, sizes)]


Slots = int | Callable[[], int]
"""How many workers share a call's jobs, or a function that counts them, asked only when there is something to
compute (:attr:`~nlbandit.experiments.executors.RayExecutor.slots` joins its cluster to count)."""


def balanced(todo: list[list[RunConfig]], slots: Slots) -> list[list[RunConfig]]:
    """:func:`balance` of ``todo`` for ``slots`` workers, counted only where ``todo`` holds a batch."""
    return balance(todo, slots() if callable(slots) else slots) if todo else todo


def balance(todo: list[list[RunConfig]], slots: int) -> list[list[RunConfig]]:
    """``todo``'s batches cut for ``slots`` workers, so that none waits on another's last batch.

    First any batch that holds more than its share of the work is cut in halves (in its place), again until none
    does; the work of a batch is its seed-rounds (runs × seeds × rounds). A batch of several runs is cut between its
    runs, and one program computes each half (two where their sizes differ): a run's numbers did not change with its
    batch's size on the quick tier's 1,252 runs (docs/experiments.md#executors). A batch of a loop of
    :data:`SHARED_INPUT_LOOPS` is cut between its seeds instead, so that each half still computes every run on the
    inputs it shares (each seed's are its own).

    Seed-rounds do not say what a round costs, which differs between policies by orders of magnitude (a network
    trained for 100 steps a round against a rank-one update), so a call of few batches can leave one worker on its
    most expensive batch long after the others are done (sun2025/fig1d at 50 seeds: three of its seven runs took 27,
    54 and 52 of its 141 minutes). So when the batches number fewer than :data:`JOBS_PER_WORKER` per worker, each is
    then cut between its seeds into one piece per worker (:func:`seed_pieces`, pieces of at least
    :data:`MIN_PIECE_SEEDS` seeds, side by side in its place), in a loop of :data:`SEED_EXACT_LOOPS`, whose
    seeds' numbers do not depend on the seeds computed beside them (``tests/test_executors.py``): the workers take
    the pieces of a batch together, whatever it costs."""
    def work(batch: list[RunConfig]) -> int:
        return sum(r.n_seeds * r.horizon for r in batch)

    def halves(batch: list[RunConfig]) -> list[list[RunConfig]]:
        """The two halves of ``batch``, or none where it cannot be cut (a run, or a seed)."""
        if batch[0].loop in SHARED_INPUT_LOOPS:
            return seed_pieces(batch, 2) if batch[0].n_seeds > 1 else []
        half = (len(batch) + 1) // 2
        return [batch[:half], batch[half:]] if len(batch) > 1 else []

    if slots <= 1:
        return todo
    share = sum(work(b) for b in todo) / slots
    out: list[list[RunConfig]] = []
    for batch in todo:
        pending = [batch]
        while pending:
            b = pending.pop(0)
            cut = halves(b) if work(b) > share else []
            if cut:
                pending[:0] = cut
            else:
                out.append(b)
    if len(out) >= JOBS_PER_WORKER * slots:
        return out
    return [piece for b in out for piece in (seed_pieces(b, min(slots, b[0].n_seeds // MIN_PIECE_SEEDS))
                                             if b[0].loop in SEED_EXACT_LOOPS else [b])]


def seed_ranges(seeds: list[int]) -> list[range]:
    """Ascending ``seeds`` as maximal ranges of consecutive seeds."""
    out: list[range] = []
    for s in seeds:
        if out and out[-1].stop == s:
            out[-1] = range(out[-1].start, s + 1)
        else:
            out.append(range(s, s + 1))
    return out


def seeds_text(seeds: Iterable[int]) -> str:
    """``seeds`` as their ranges of consecutive seeds, ``"0-4, 7"`` (:func:`seed_ranges`)."""
    return ", ".join(f"{r.start}" if len(r) == 1 else f"{r.start}-{r.stop - 1}" for r in seed_ranges(sorted(seeds)))


def named_jobs(store: Store, exp: Experiment, jobs: list[Job]) -> list[Job]:
    """``jobs``, with the store told what each one's batch is (:meth:`~nlbandit.store.Store.name_batches`:
    ``paper/file: label, label (seeds 0-9)``), so a checkpoint a batch leaves unfinished says so in ``nlbandit
    results``."""
    def what(batch: list[RunConfig]) -> str:
        seeds = seeds_text({s for run in batch for s in run.seeds})
        return f"{exp.paper}/{exp.name}: {', '.join(dict.fromkeys(r.label for r in batch))} (seeds {seeds})"

    store.name_batches({job.key: what(job.kwargs["batch"]) for job in jobs})
    store.name_batches({kept_key(r): what([r]) + ", rounds kept for its timing session" for job in jobs
                        if job.compute is run_kept_job for r in job.kwargs["batch"]})
    return jobs


@dataclass(frozen=True)
class Missing:
    """What the store lacks of some runs (:func:`missing`).

    Attributes:
      todo: the runs to compute: whole runs, or a run on a range of the seeds it lacks.
      done: how many runs are stored whole; partly: how many have some seeds stored, reused (``reused``
        seeds in all); retimed: how many are computed again whole because a claim reads their time.
    """

    todo: list[RunConfig]
    done: int
    partly: int
    reused: int
    retimed: int

    def describe(self, store: Store, what: str = "run") -> list[str]:
        """The log lines saying what is reused from ``store``."""
        lines = [f"{self.done} {what}(s) already in {store.path}, skipped"] if self.done else []
        if self.partly:
            lines.append(f"{self.partly} {what}(s) partly in {store.path}: {self.reused} stored seed(s) reused, only "
                         "the missing seeds computed")
        if self.retimed:
            lines.append(f"{self.retimed} {what}(s) computed again in a batch of one on all their seeds, stored in "
                         "pieces, from a batch of several or without their phases timed: a claim reads their time")
        return lines


def phase_groups(runs: list[RunConfig], phased: set[str]) -> dict[str, list[RunConfig]]:
    """The runs of ``runs`` in ``phased`` (by ``run_id``, each once) grouped by horizon and seeds: each run's
    group by its ``run_id``. A group's runs are timed by one job, in one session
    (:func:`nlbandit.core.phases.time_phases`), which :func:`phase_session` names."""
    groups: dict[tuple[int, int, int], list[RunConfig]] = {}
    for run in {r.run_id: r for r in runs if r.run_id in phased}.values():
        groups.setdefault((run.horizon, run.seed_offset, run.n_seeds), []).append(run)
    return {run.run_id: group for group in groups.values() for run in group}


def kept_key(run: RunConfig) -> str:
    """The store's key (a checkpoint's) of the rounds that ``run``'s simulation kept for its phases' timing session
    (:func:`run_kept_job`), held until the session's timings are stored."""
    return batch_id([run]) + ".kept"


def phase_session(group: list[RunConfig], processes: int) -> str:
    """The key of the timing session of a phase group (:func:`phase_groups`) timed in ``processes`` processes
    (:func:`time_sessions`): :func:`~nlbandit.loops.base.batch_id` of the group, and the count when above one."""
    return batch_id(group) + (f"x{processes}" if processes > 1 else "")


def missing(store: Store, runs: list[RunConfig], timed: set[str] = frozenset(),
            phased: set[str] = frozenset(), phase_rows: PhaseRows = PhaseRows(), phase_processes: int = 1) -> Missing:
    """What of ``runs`` (equal ``run_id`` counted once) ``store`` lacks. A run in ``timed`` (by ``run_id``) is
    complete only when one stored part computed exactly its seeds alone, one in ``phased`` when that part has
    its phases timed apart on the rows ``phase_rows`` asks for (:meth:`~nlbandit.core.phases.PhaseRows.of_seeds`)
    in the session of its group timed in ``phase_processes`` processes (:func:`phase_session`), as are all its
    group's; it is computed whole otherwise. Any other run lacks only its seeds not stored."""
    unique = list({r.run_id: r for r in runs}.values())
    parts = store.parts(r.series_id for r in unique)
    groups = phase_groups(unique, phased)
    sessions = {id(group): phase_session(group, phase_processes) for group in groups.values()}

    def complete(run: RunConfig) -> bool:
        wanted = (phase_rows.of_seeds(run.n_seeds), sessions[id(groups[run.run_id])]) if run.run_id in phased else None
        return any(p.is_whole(run.seeds) and p.batch_size == 1 and wanted in (None, (p.phase_rows, p.session))
                   for p in parts.get(run.series_id, []))

    whole = {run.run_id for run in unique if (run.run_id in timed or run.run_id in phased) and complete(run)}
    todo, done, partly, reused, retimed = [], 0, 0, 0, 0
    for run in unique:
        held = parts.get(run.series_id, [])
        stored = {s for p in held for s in p.holds}
        if run.run_id in timed or run.run_id in phased:
            if all(r.run_id in whole for r in groups.get(run.run_id, [run])):
                done += 1
            else:
                todo.append(run)
                retimed += bool(stored & set(run.seeds))
            continue
        lacking = [s for s in run.seeds if s not in stored]
        if not lacking:
            done += 1
        elif len(lacking) == run.n_seeds:
            todo.append(run)
        else:
            partly, reused = partly + 1, reused + run.n_seeds - len(lacking)
            todo += [replace(run, seed_offset=r.start, n_seeds=len(r)) for r in seed_ranges(lacking)]
    return Missing(todo, done, partly, reused, retimed)


def run_batch_job(store: Store, *, log: Callable[[str], None], progress: bool, exp: Experiment,
                  batch: list[RunConfig], tag: str, chunk_size: int,
                  on_checkpoint: Callable[[SimProgress], None] | None = None) -> None:
    """Compute one batch with its experiment's loop (:meth:`nlbandit.loops.base.Loop.run_batch`): the
    ``compute`` of a :class:`~nlbandit.experiments.executors.Job`."""
    LOOPS[exp.loop].run_batch(exp, store, batch, tag, progress=progress, chunk_size=chunk_size, log=log,
                              on_checkpoint=on_checkpoint)


def named(name: str, log: Callable[[str], None]) -> tuple[Callable[[str], str], Callable[[str], None]]:
    """(a job's tag from its label, ``log``) headed by the file's ``name`` when several files are computed together
    (both as they are without a name)."""
    if not name:
        return (lambda label: f"[{label}]"), log
    return (lambda label: f"[{name} {label}]"), (lambda line: log(f"{name}: {line}"))


def experiment_jobs(exp: Experiment, store: Store, *, slots: Slots = 1, chunk_size: int = 1000,
                    log: Callable[[str], None] = print, on_checkpoint: Callable[[SimProgress], None] | None = None,
                    name: str = "") -> tuple[list[Job], list[Job]]:
    """The jobs that compute every run of ``exp`` that the store lacks (only its missing seeds, :func:`missing`),
    after logging what it holds already: (the batches computed side by side, balanced for ``slots`` workers, and
    the simulations of the runs whose phases a claim reads, each in a batch of one and late (:func:`run_kept_job`,
    :attr:`~nlbandit.experiments.executors.Job.late`: only their timing sessions wait for them); the runs
    whose time a claim reads, each computed alone, and the timing sessions of the runs whose phases it reads
    (:func:`run_phased_job`)). ``name`` heads the jobs' tags (the file's, when several are computed together).

    Raises:
      ValueError: when ``exp`` tunes a series and has not been through
        :func:`~nlbandit.experiments.tuning.tune_experiment` (its runs are stand-ins).
    """
    if exp.tuning and not exp.tuned:
        raise ValueError(f"{exp.path}: tune the experiment first (nlbandit.experiments.tuning.tune_experiment)")
    tag, log = named(name, log)
    timed, phased, whole = timed_runs(exp), phased_runs(exp), runtime_runs(exp)
    lacking = missing(store, exp.runs, timed, phased, exp.phase_rows, exp.phase_processes)
    for line in lacking.describe(store):
        log(line)
    grouped = batches(lacking.todo, timed)  # (the phased runs are timed runs: batches of one)
    side_by_side = balanced([b for b in grouped if b[0].run_id not in timed], slots)
    groups = phase_groups(exp.runs, phased)  # a phased run's group is missing whole (missing())
    kept = [b for b in grouped if b[0].run_id in phased and b[0].run_id not in whole
            and store.load_checkpoint(kept_key(b[0])) is None]  # (one an interrupted command kept rounds of: timed)
    alone = [b for b in grouped if b[0].run_id in timed and b[0].run_id not in phased]
    alone += list({batch_id(groups[b[0].run_id]): groups[b[0].run_id] for b in grouped if b[0].run_id in phased}
                  .values())
    steps = ([(b, run_batch_job) for b in side_by_side] + [(b, run_kept_job) for b in kept]
             + [(b, run_phased_job if b[0].run_id in phased else run_batch_job) for b in alone])  # alone: after
    jobs = named_jobs(store, exp, [
        Job(batch_id(b), step, dict(exp=exp, batch=b, tag=tag(f"{i}/{len(steps)}"), chunk_size=chunk_size,
                                    on_checkpoint=on_checkpoint),
            reads=tuple(kept_key(r) for r in b) if step is run_phased_job else (), late=step is run_kept_job)
        for i, (b, step) in enumerate(steps, 1)])
    return jobs[:len(side_by_side) + len(kept)], jobs[len(side_by_side) + len(kept):]


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
    """Compute every run of ``exp`` that the store does not have yet (:func:`experiment_jobs`): the batches side by
    side, then the timed runs and timing sessions one at a time; return how many runs (or parts of runs) were
    computed.

    ``executor`` computes the batches (default: :class:`~nlbandit.experiments.executors.LocalExecutor`);
    ``on_checkpoint`` is called after each checkpoint is committed (used by tests to kill a run midway; local
    batches only).

    Raises:
      ValueError: when ``exp`` tunes a series and has not been through
        :func:`~nlbandit.experiments.tuning.tune_experiment` (its runs are stand-ins), or ``on_checkpoint``
        is given with another executor than the local one.
    """
    executor = LocalExecutor() if executor is None else executor
    if on_checkpoint is not None and not isinstance(executor, LocalExecutor):
        raise ValueError("on_checkpoint is called by the local executor only")
    side_by_side, timed = experiment_jobs(exp, store, slots=lambda: executor.slots, chunk_size=chunk_size, log=log,
                                          on_checkpoint=on_checkpoint)
    executor.run(side_by_side, store, log=log, progress=progress)
    executor.run_alone(timed, store, log=log, progress=progress)
    return len({(r.run_id, r.seed_offset) for job in side_by_side + timed for r in job.kwargs["batch"]})


class _Unresumed:
    """``store`` for a simulation that keeps rounds for a timer, which must see every chunk: it starts from its first
    round whatever checkpoint is stored, and saves none (every other method ``store``'s own)."""

    def __init__(self, store: Any):
        self._store = store

    def load_checkpoint(self, batch_id: str) -> None:
        """None: the batch is computed from its first round."""

    def save_checkpoint(self, batch_id: str, t_done: int, progress: bytes) -> None:
        """Nothing: no later computation resumes from it."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _simulate_keeping(exp: Experiment, store: Store, run: RunConfig, keep: Callable[[Any], Any], *, tag: str,
                      chunk_size: int, log: Callable[[str], None], progress: bool,
                      on_checkpoint: Callable[[SimProgress], None] | None) -> None:
    """Compute ``run`` (a batch of one) from its first round and store it, handing ``keep`` its progress after every
    chunk of :func:`~nlbandit.loops.phases.phase_chunk_size` rounds (then ``on_checkpoint``)."""
    def chunk(prog: SimProgress) -> None:
        keep(prog)
        if on_checkpoint is not None:
            on_checkpoint(prog)

    LOOPS[exp.loop].run_batch(exp, _Unresumed(store), [run], tag, progress=progress, log=log, on_checkpoint=chunk,
                              chunk_size=phase_chunk_size(chunk_size, run.horizon))


def run_kept_job(store: Store, *, log: Callable[[str], None], progress: bool, exp: Experiment,
                 batch: list[RunConfig], tag: str, chunk_size: int,
                 on_checkpoint: Callable[[SimProgress], None] | None = None) -> None:
    """Simulate a run whose phases a claim reads (``batch``: it alone), beside other work, and store it; then store
    the rounds its timer keeps (:class:`~nlbandit.core.phases.KeptRound`, under :func:`kept_key`) for its group's
    timing session (:func:`run_phased_job`). The ``compute`` of a :class:`~nlbandit.experiments.executors.Job`."""
    (run,) = batch
    rounds: list[KeptRound] = []

    def keep(prog: SimProgress) -> None:
        if prog.t_done < run.horizon:  # (a timer keeps no round after the last)
            rounds.append(KeptRound.of(prog))

    _simulate_keeping(exp, store, run, keep, tag=tag, chunk_size=chunk_size, log=log, progress=progress,
                      on_checkpoint=on_checkpoint)
    store.save_checkpoint(kept_key(run), run.horizon, rounds_to_bytes(rounds))


def run_phased_job(store: Store, *, log: Callable[[str], None], progress: bool, exp: Experiment,
                   batch: list[RunConfig], tag: str, chunk_size: int,
                   on_checkpoint: Callable[[SimProgress], None] | None = None) -> None:
    """Time the select and update phases of a phase group's runs (:func:`phase_groups`) in one session, in each of
    the experiment's ``phase_processes`` processes (:func:`time_sessions`), and store the timings (the ``compute``
    of a :class:`~nlbandit.experiments.executors.Job`, run with nothing beside it). Each run's timer reads the rounds
    its simulation kept (:func:`run_kept_job`, stored under :func:`kept_key`, removed once the timings are stored);
    a run without them (a claim reads its simulation's time too) is first simulated here, from its first round even
    where a checkpoint of it was stored (an interrupted computation): its timer must see every chunk."""
    timers = []
    for run in batch:
        timer, kept = PHASE_TIMERS[exp.loop](run, exp.phase_rows), store.load_checkpoint(kept_key(run))
        if kept is None:
            _simulate_keeping(exp, store, run, timer, tag=tag, chunk_size=chunk_size, log=log, progress=progress,
                              on_checkpoint=on_checkpoint)
        else:
            for kept_round in rounds_from_bytes(kept):
                timer(kept_round)
        timers.append(timer)
    sessions = time_sessions(exp, batch, timers)
    session, where = phase_session(batch, exp.phase_processes), (
        "one process" if exp.phase_processes == 1 else f"each of {exp.phase_processes} fresh processes")
    for i, (run, timer) in enumerate(zip(batch, timers)):
        samples = [timed[i] for timed in sessions]
        store.save_phases(run.series_id, run.seeds, samples, timer.rows, session)
        select, update = (1e6 * fmean(column) for column in list(zip(*(s for p in samples for s in p)))[1:])
        case = f" ({run.case_label})" if run.case_label else ""
        log(f"{tag} {run.label}{case}: phases timed apart at {len(samples[0])} rounds, in one session with "
            f"{len(batch) - 1} other run(s) in {where}: select {select:.1f}, update {update:.1f} µs per seed-round "
            f"(calls of {timer.rows.select} and {timer.rows.update} rows)")
    for run in batch:
        store.drop_checkpoint(kept_key(run))


def time_sessions(exp: Experiment, batch: list[RunConfig], timers: list[PhaseTimer]) -> list[list[list[PhaseSample]]]:
    """Time the kept rounds of ``timers`` (those of the runs ``batch``, simulated) in one session
    (:func:`~nlbandit.core.phases.time_phases`) in each of ``exp.phase_processes`` processes: with one, in this
    process; with more, in as many fresh ones (``spawn``, one after another, each rebuilding the runs' timers and
    handed their kept rounds), so that the spread of a cost between processes, which one session does not show, is
    measured. Returns per process the samples of each timer."""
    if exp.phase_processes == 1:
        time_phases(timers)
        return [[timer.samples for timer in timers]]
    kept, context = [timer.kept for timer in timers], multiprocessing.get_context("spawn")
    sessions = []
    for _ in range(exp.phase_processes):
        with ProcessPoolExecutor(1, mp_context=context) as process:
            sessions.append(process.submit(_session, exp, batch, kept).result())
    return sessions


def _session(exp: Experiment, batch: list[RunConfig], kept: list[list]) -> list[list[PhaseSample]]:
    """In a fresh process (:func:`time_sessions`): the samples of one session over the rounds ``kept`` of the runs
    ``batch``, per run."""
    timers = [PHASE_TIMERS[exp.loop](run, exp.phase_rows) for run in batch]
    for timer, rounds in zip(timers, kept):
        timer.kept = rounds
    time_phases(timers)
    return [timer.samples for timer in timers]
