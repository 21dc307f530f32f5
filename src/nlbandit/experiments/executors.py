"""Where an experiment's batches are computed: in this process (:class:`LocalExecutor`), in worker processes
on this machine's cores (:class:`ProcessExecutor`), or on the workers of a Ray cluster (:class:`RayExecutor`,
the ``ray`` extra).

A batch is a :class:`Job`: a module-level function that computes it and stores its runs through the ``store`` it
is given (:meth:`nlbandit.store.Store.save_runs`, checkpoints through ``load_checkpoint`` /
``save_checkpoint``). Locally that store is the results database. On a Ray worker it is a :class:`BatchStore`
that holds what the job saves and returns it; the driver then writes it into the database, so the driver stays
the only writer of the DuckDB file (a local worker process sends its checkpoints to the driver too). A batch
computes the same numbers wherever it runs (same code, same chunking, same seeds): the Ray executor's results
are bit-identical to the local executor's on the same kind of machine (the XLA flags and ``NLBANDIT_*``
variables of the driver are passed to the workers).

A worker that dies (process killed, node lost) has its batch retried by Ray on another worker, up to
``max_retries`` times, from the checkpoint the database held when the batch was sent (from its first round
when there was none); a batch that raises an error is not retried, the error is raised on the driver.
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queues
import threading
import time
import warnings
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from nlbandit.core.hyper import ConfigError


@dataclass(frozen=True)
class Job:
    """One batch to compute.

    Attributes:
      key: the batch's checkpoint key in the store (:func:`nlbandit.loops.base.batch_id`).
      compute: a module-level function, called as ``compute(store, log=..., progress=..., **kwargs)``; it
        stores the batch's runs through ``store``.
      kwargs: its other keyword arguments (picklable: the experiment, the batch, its tag in log lines, the
        chunk size).
      reads: the keys of further checkpoints it reads (sent with it, as its own is: e.g. the rounds that a run's
        simulation kept for its timing session).
      late: only a job computed alone, after all the others, waits for its results (the simulation of a run whose
        phases a claim reads: its timing session): started after every waiting job that is not late (by the
        executors that order their jobs; Ray's starts every job at once).
    """

    key: str
    compute: Callable[..., None]
    kwargs: dict[str, Any] = field(default_factory=dict)
    reads: tuple[str, ...] = ()
    late: bool = False


def next_job(todo: deque[Job]) -> Job:
    """Take from ``todo`` the job to start next: its first that is not :attr:`Job.late`, else its first."""
    job = next((j for j in todo if not j.late), todo[0])
    todo.remove(job)
    return job


More = Callable[[str, float], list[Job]]
"""``more(key, seconds)``: called by :meth:`Executor.run` once job ``key``'s results are stored (it took ``seconds``
where it ran); returns further jobs for the same call, computed before the jobs not started yet."""


class Executor(Protocol):
    """Computes jobs and has their results stored in ``store``; ``slots`` of them at once."""

    slots: int

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool,
            more: Optional[More] = None, idle: Optional[Callable[[], None]] = None) -> dict[str, float]:
        """Compute every job, and those ``more`` adds; return when all are stored, with the seconds each took where
        it ran, by key. ``idle()`` is called while jobs compute elsewhere and nothing waits to be stored (each call
        one short piece of the caller's own work, e.g. a report); an executor that computes in this process never
        calls it."""

    def run_alone(self, jobs: list[Job], store: Any, *, log: Callable[[str], None],
                  progress: bool) -> dict[str, float]:
        """Compute the jobs one at a time with nothing else computing beside them (a claim reads their time), as
        :meth:`run`."""

    def close(self) -> None:
        """Release what the executor holds (a cluster it started)."""


class LocalExecutor:
    """Jobs one after the other in this process, storing straight into the database (checkpointed)."""

    slots = 1

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool,
            more: Optional[More] = None, idle: Optional[Callable[[], None]] = None) -> dict[str, float]:
        """Compute the jobs in order (:func:`next_job`), each one ``more`` adds next; return the seconds each took
        (``idle`` is not called: nothing computes elsewhere)."""
        todo, seconds = deque(jobs), {}
        while todo:
            job = next_job(todo)
            seconds[job.key] = _timed(job, store, log=log, progress=progress)
            if more is not None:
                todo.extendleft(reversed(more(job.key, seconds[job.key])))
        return seconds

    def run_alone(self, jobs: list[Job], store: Any, *, log: Callable[[str], None],
                  progress: bool) -> dict[str, float]:
        """Compute the jobs in order (as :meth:`run`)."""
        return self.run(jobs, store, log=log, progress=progress)

    def close(self) -> None:
        """Nothing to release."""


def sent_checkpoints(job: Job, store: Any) -> dict[str, bytes | None]:
    """The checkpoints sent with ``job`` to a worker: its own and those it reads (:attr:`Job.reads`), as ``store``
    holds them now."""
    return {key: store.load_checkpoint(key) for key in (job.key, *job.reads)}


class BatchStore:
    """The store a job sees on a worker: the checkpoints the database held when the job was sent
    (:func:`sent_checkpoints`), and a record of what the job saves (its runs, the phase timings of a run timed
    apart, a checkpoint of another batch than its own), which the driver writes into the database in the same order
    (:func:`replay`)."""

    def __init__(self, key: str, checkpoints: dict[str, bytes | None]):
        self._key, self._checkpoints = key, checkpoints
        self.saved: list[tuple[str, tuple]] = []  # (Store method, its arguments)

    def load_checkpoint(self, batch_id: str) -> bytes | None:
        """A checkpoint sent with the job (None for any other)."""
        return self._checkpoints.get(batch_id)

    def save_checkpoint(self, batch_id: str, t_done: int, progress: bytes) -> None:
        """Discard a checkpoint of the job's own batch taken on the worker (a retried job starts again from the one
        it was sent with); record any other for the driver to store."""
        if batch_id != self._key:
            self.saved.append(("save_checkpoint", (batch_id, t_done, progress)))

    def drop_checkpoint(self, batch_id: str) -> None:
        """Record the removal of a checkpoint for the driver."""
        self.saved.append(("drop_checkpoint", (batch_id,)))

    def save_runs(self, batch_id: str, rows: list[dict[str, Any]]) -> None:
        """Record finished runs for the driver to store."""
        self.saved.append(("save_runs", (batch_id, rows)))

    def save_phases(self, series_id: str, seeds: range, sessions: Any, rows: tuple[int, int], session: str) -> None:
        """Record a run's phase timings for the driver to store (after its runs)."""
        self.saved.append(("save_phases", (series_id, seeds, sessions, rows, session)))


def _timed(job: Job, store: Any, **options: Any) -> float:
    """Compute ``job`` with ``store``; return the seconds it took."""
    start = time.perf_counter()
    job.compute(store, **options, **job.kwargs)
    return time.perf_counter() - start


def replay(saved: list[tuple[str, tuple]], store: Any) -> None:
    """Write what a job saved on a worker (:attr:`BatchStore.saved`) into ``store``, in order."""
    for method, args in saved:
        getattr(store, method)(*args)


def run_on_worker(job: Job, checkpoints: dict[str, bytes | None]
                  ) -> tuple[list[tuple[str, tuple]], list[str], float]:
    """Compute ``job`` against a :class:`BatchStore` holding ``checkpoints`` (:func:`sent_checkpoints`); return what
    it saved, its log lines and its seconds."""
    store, lines = BatchStore(job.key, checkpoints), []
    seconds = _timed(job, store, log=lines.append, progress=False)
    return store.saved, lines, seconds


def worker_env() -> dict[str, str]:
    """The environment variables a worker needs to compute what the driver would: ``XLA_FLAGS`` (part of
    every run's code hash) and the ``NLBANDIT_*`` settings (e.g. the data cache)."""
    return {k: v for k, v in os.environ.items() if k == "XLA_FLAGS" or k.startswith("NLBANDIT_")}


CHECKPOINT_EVERY = 10.0
"""The fewest seconds of a job's computing between two checkpoints of its own batch that a :class:`ProcessExecutor`
worker sends to the driver (the first as long after the job starts): each is a transaction of the results database
in the command's process, and the quick tier's batches took 1,017 of them, 616 MB in all, in 6.0 s of its CPU
(2026-11-28), where a batch of a few seconds needs none. A command interrupted loses at most this much of each
batch's work; a batch whose chunks take longer has every chunk's checkpoint sent."""


class _ForwardingStore(BatchStore):
    """The store a job sees in a :class:`ProcessExecutor` worker: the checkpoints of its own batch, one per ``every``
    seconds at most (:data:`CHECKPOINT_EVERY`), and log lines go to the driver through ``messages`` as they are
    taken, and what it saves last, after those."""

    def __init__(self, key: str, checkpoints: dict[str, bytes | None], messages: Any, every: float):
        super().__init__(key, checkpoints)
        self._messages, self._every, self._sent = messages, every, time.perf_counter()

    def save_checkpoint(self, batch_id: str, t_done: int, progress: bytes) -> None:
        """Send a checkpoint of the job's own batch to the driver, which stores it, once ``every`` seconds have
        passed since the job started or its last one was sent (else drop it: a later one replaces it); record any
        other (stored after what the job saved before it)."""
        if batch_id != self._key:
            super().save_checkpoint(batch_id, t_done, progress)
        elif time.perf_counter() - self._sent >= self._every:
            self._messages.put(("checkpoint", batch_id, t_done, progress))
            self._sent = time.perf_counter()


_MESSAGES: Any = None  # a ProcessExecutor worker's queue to the driver (set by _start_worker)


def _start_worker(messages: Any, started: Any, cores: list[int], driver: int) -> None:
    """Keep the queue to the driver, exit with the driver (:func:`_exit_with`), and, where the OS allows, pin this
    worker to a core of its own (counted by ``started``), so that each worker's XLA threads share that core
    instead of crowding the others'."""
    global _MESSAGES
    _MESSAGES = messages
    threading.Thread(target=_exit_with, args=(driver,), daemon=True, name="nlbandit-exit-with-driver").start()
    with started.get_lock():
        index, started.value = started.value, started.value + 1
    if hasattr(os, "sched_setaffinity") and index < len(cores):
        os.sched_setaffinity(0, {cores[index]})


def _exit_with(driver: int, every: float = 0.5) -> None:
    """End this worker process once ``driver`` is no longer its parent (the driver died, e.g. ``kill -9``:
    the pool's own shutdown never runs then, and the workers computed on, ~500 MB each, indefinitely)."""
    while os.getppid() == driver:
        time.sleep(every)
    os._exit(1)


def _run_in_process(job: Job, checkpoints: dict[str, bytes | None], checkpoint_every: float) -> None:
    """Compute ``job`` in a worker process, sending its log lines, its own batch's checkpoints (one per
    ``checkpoint_every`` seconds at most) and finally what it saved (runs, phase timings, other checkpoints) and its
    seconds to the driver (in this order through one queue, so that no checkpoint arrives after its batch's runs)."""
    store = _ForwardingStore(job.key, checkpoints, _MESSAGES, checkpoint_every)
    seconds = _timed(job, store, log=lambda line: _MESSAGES.put(("log", line)), progress=False)
    _MESSAGES.put(("done", job.key, store.saved, seconds))


class ProcessExecutor:
    """Jobs computed by ``workers`` processes on this machine (started afresh, ``spawn``), each storing its
    checkpoints and runs through the driver. With one job, or one worker, :meth:`run` computes in this process
    (:class:`LocalExecutor`, with its progress bar); :meth:`run_alone` computes timed jobs on a worker.

    Each worker runs one batch at a time, pinned to a core of its own where the OS allows (its XLA threads then
    share that core); on this project's 2-core machine two workers computed kveton2020/fig1_logistic (quick, 24
    batches) in 97.3 s against 168.6 s in one process, bit for bit the same runs (docs/performance.md). The
    workers start at the first :meth:`run` that needs them and serve every later one until :meth:`close`, so a
    command of many files and phases starts its interpreters once and each worker keeps the programs it traced
    and compiled. A job that raises an error stops the others (their processes are terminated; their checkpoints
    stay; the next :meth:`run` starts new workers) and the error is raised here; a worker that dies raises
    ``BrokenProcessPool``; workers whose driver dies (``kill -9``) exit within a second.

    Args:
      workers: the number of worker processes (default: the cores this process may use).
      checkpoint_every: the fewest seconds of a job's computing between two checkpoints of its batch that its
        worker sends to be stored (:data:`CHECKPOINT_EVERY`; 0: every one the batch takes).
    """

    def __init__(self, workers: int | None = None, checkpoint_every: float = CHECKPOINT_EVERY):
        if workers is None:
            workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
        if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, (int, float)) or \
                not 0 <= checkpoint_every < float("inf"):
            raise ConfigError(f"checkpoint_every must be a number of seconds >= 0, got {checkpoint_every!r}")
        self.workers, self.checkpoint_every = workers, float(checkpoint_every)
        self._pool: ProcessPoolExecutor | None = None
        self._messages: Any = None

    @property
    def slots(self) -> int:
        """How many jobs compute at once: one per worker."""
        return self.workers

    def _start(self) -> tuple[ProcessPoolExecutor, Any]:
        """The worker pool and its queue to the driver, started at the first call."""
        if self._pool is None:
            context = multiprocessing.get_context("spawn")  # a fresh interpreter: no fork of JAX's threads
            self._messages = context.Queue()
            cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=context, initializer=_start_worker,
                initargs=(self._messages, context.Value("i", 0), cores if self.workers <= len(cores) else [],
                          os.getpid()))
        return self._pool, self._messages

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool,
            more: Optional[More] = None, idle: Optional[Callable[[], None]] = None) -> dict[str, float]:
        """Compute the jobs, ``workers`` at a time, storing their checkpoints and runs as they arrive; the jobs
        ``more`` adds are sent before the others not started yet, a late one after those that are not
        (:func:`next_job`; at most two per worker wait in the pool)."""
        if self.workers == 1 or (len(jobs) <= 1 and more is None):
            return LocalExecutor().run(jobs, store, log=log, progress=progress, more=more)
        log(f"{len(jobs)} batch(es) on {min(self.workers, len(jobs))} worker processes")
        return self._compute(jobs, store, log, more, idle)

    def run_alone(self, jobs: list[Job], store: Any, *, log: Callable[[str], None],
                  progress: bool) -> dict[str, float]:
        """Compute the jobs one at a time on a worker, the others idle: pinned to a core as the batches are
        (this process is not), so that a measured time is that of the setting the experiments run in (with one
        worker: in this process)."""
        if self.workers == 1:
            return LocalExecutor().run(jobs, store, log=log, progress=progress)
        return {key: seconds for job in jobs for key, seconds in self._compute([job], store, log).items()}

    def _compute(self, jobs: list[Job], store: Any, log: Callable[[str], None], more: Optional[More] = None,
                 idle: Optional[Callable[[], None]] = None) -> dict[str, float]:
        """Send ``jobs`` (and those ``more`` adds, first) to the workers, at most two per worker at a time, and
        store what each sends back as it arrives; call ``idle`` while nothing arrives."""
        pool, messages = self._start()
        seconds: dict[str, float] = {}
        todo, sent = deque(jobs), {}  # sent: key -> future, until its results are stored

        def send() -> None:
            while todo and len(sent) < 2 * self.workers:
                job = next_job(todo)
                sent[job.key] = pool.submit(_run_in_process, job, sent_checkpoints(job, store), self.checkpoint_every)

        try:
            send()
            while sent:
                for future in wait(list(sent.values()), timeout=0, return_when=FIRST_COMPLETED).done:
                    future.result()  # raises a job's error, or BrokenProcessPool for a dead worker
                try:
                    message = messages.get(timeout=0.2)
                except queues.Empty:
                    if idle is not None:
                        idle()
                    continue
                if message[0] == "log":
                    log(message[1])
                elif message[0] == "checkpoint":
                    store.save_checkpoint(*message[1:])
                else:
                    replay(message[2], store)
                    seconds[message[1]] = message[3]
                    del sent[message[1]]
                    if more is not None:
                        todo.extendleft(reversed(more(message[1], message[3])))
                    send()
        except BaseException:
            self._stop(wait=False)
            raise
        return seconds

    def _stop(self, wait: bool) -> None:
        """End the workers: after their jobs (``wait``), or now, terminating the batches still computing."""
        if self._pool is None:
            return
        pool, messages, self._pool, self._messages = self._pool, self._messages, None, None
        if wait:
            pool.shutdown()
        else:
            pool.shutdown(wait=False, cancel_futures=True)
            for process in multiprocessing.active_children():  # the batches still computing: stop them
                if process.name.startswith("SpawnProcess"):
                    process.terminate()
        messages.close()

    def close(self) -> None:
        """End the worker processes."""
        self._stop(wait=True)


class RayExecutor:
    """Jobs sent to Ray workers, one CPU each, all at once; their runs stored by the driver as they finish. The
    batches are cut for the cluster's CPUs (:attr:`slots`), as for the worker processes of one machine.

    Args:
      address: the cluster to join (``ray.init``'s ``address``: ``"auto"``, ``"ray://host:10001"``, ...);
        ``None`` joins the cluster named by ``$RAY_ADDRESS``, else starts a local one on this machine's
        cores (shut down by :meth:`close`).
      max_retries: how many times a job whose worker died is sent again.
    """

    def __init__(self, address: str | None = None, max_retries: int = 3):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise ConfigError("--executor ray needs Ray: pip install 'nlbandit[ray]' (or -e '.[ray]' in a "
                              "checkout)") from None
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        self.address, self.max_retries = address, max_retries
        self._started = False  # whether this executor called ray.init (and close shuts Ray down)

    @property
    def slots(self) -> int:
        """The cluster's CPUs, each job taking one: asked as the jobs are cut for it (an autoscaling cluster's
        count as it is then), which joins the cluster, or starts the local one, on the first call."""
        import ray

        self._join()
        return max(1, int(ray.cluster_resources().get("CPU", 1)))

    def _join(self) -> None:
        """Join the cluster (:attr:`address`) unless this process has joined one already."""
        import ray

        if not ray.is_initialized():
            with warnings.catch_warnings():  # Ray starts its processes by fork + exec, safe beside JAX's threads
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                ray.init(address=self.address, runtime_env={"env_vars": worker_env()}, log_to_driver=False,
                         include_dashboard=False, logging_level="ERROR")
            self._started = True

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool,
            more: Optional[More] = None, idle: Optional[Callable[[], None]] = None) -> dict[str, float]:
        """Send every job, then store each one's runs as it finishes (the driver is the only writer), sending the
        jobs ``more`` adds at once; call ``idle`` while none finishes."""
        if not jobs:
            return {}
        import ray

        self._join()
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries)(run_on_worker)
        pending: dict[Any, str] = {}

        def send(new: list[Job]) -> None:
            pending.update({remote.remote(job, sent_checkpoints(job, store)): job.key for job in new})

        send(jobs)
        log(f"{len(jobs)} batch(es) sent to Ray ({ray.cluster_resources().get('CPU', 0):g} CPUs)")
        seconds: dict[str, float] = {}
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=None if idle is None else 0.2)
                if not ready:
                    idle()
                    continue
                key = pending.pop(ready[0])
                saved, lines, seconds[key] = ray.get(ready[0])
                for line in lines:
                    log(line)
                replay(saved, store)
                if more is not None:
                    send(more(key, seconds[key]))
        finally:
            for ref in pending:  # an error or an interrupt: do not leave the others computing
                ray.cancel(ref, force=True)
        return seconds

    def run_alone(self, jobs: list[Job], store: Any, *, log: Callable[[str], None],
                  progress: bool) -> dict[str, float]:
        """Compute the jobs one at a time in this process (the driver's machine), as the Ray workers' machines and
        their load are not known."""
        return LocalExecutor().run(jobs, store, log=log, progress=progress)

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self._started:
            import ray

            ray.shutdown()
            self._started = False


def make_executor(name: str, address: str | None = None, workers: int | None = None) -> Executor:
    """The executor named ``name``: ``local``, ``processes`` (``workers`` of them, default one per core) or
    ``ray`` (joining ``address``)."""
    if address is not None and name != "ray":
        raise ConfigError("--address is for --executor ray")
    if workers is not None and name != "processes":
        raise ConfigError("--workers is for --executor processes")
    if name == "local":
        return LocalExecutor()
    if name == "processes":
        return ProcessExecutor(workers)
    if name == "ray":
        return RayExecutor(address)
    raise ConfigError(f"executor (--executor or $NLBANDIT_EXECUTOR) must be 'local', 'processes' or 'ray', "
                      f"got {name!r}")
