"""Where an experiment's batches are computed: in this process (:class:`LocalExecutor`) or on the workers of
a Ray cluster (:class:`RayExecutor`, the ``ray`` extra).

A batch is a :class:`Job`: a module-level function that computes it and stores its runs through the
``store`` it is given (:meth:`nlbandit.store.Store.save_runs`, checkpoints through ``load_checkpoint`` /
``save_checkpoint``). Locally that store is the results database. On a Ray worker it is a :class:`BatchStore`
that holds what the job saves and returns it; the driver then writes it into the database, so the driver
stays the only writer of the DuckDB file. A batch computes the same numbers wherever it runs (same code,
same chunking, same seeds): the Ray executor's results are bit-identical to the local executor's on the same
kind of machine (the XLA flags and ``NLBANDIT_*`` variables of the driver are passed to the workers).

A worker that dies (process killed, node lost) has its batch retried by Ray on another worker, up to
``max_retries`` times, from the checkpoint the database held when the batch was sent (from its first round
when there was none); a batch that raises an error is not retried, the error is raised on the driver.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

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
    """

    key: str
    compute: Callable[..., None]
    kwargs: dict[str, Any] = field(default_factory=dict)


class Executor(Protocol):
    """Computes jobs and has their results stored in ``store``."""

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool) -> None:
        """Compute every job; return when all are stored."""

    def close(self) -> None:
        """Release what the executor holds (a cluster it started)."""


class LocalExecutor:
    """Jobs one after the other in this process, storing straight into the database (checkpointed)."""

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool) -> None:
        """Compute the jobs in order."""
        for job in jobs:
            job.compute(store, log=log, progress=progress, **job.kwargs)

    def close(self) -> None:
        """Nothing to release."""


class BatchStore:
    """The store a job sees on a Ray worker: the checkpoint the database held when the job was sent, and a
    record of the runs the job saves (written into the database by the driver)."""

    def __init__(self, key: str, checkpoint: bytes | None):
        self._key, self._checkpoint = key, checkpoint
        self.saved: list[tuple[str, list[dict[str, Any]]]] = []

    def load_checkpoint(self, batch_id: str) -> bytes | None:
        """The checkpoint sent with the job (None for another batch)."""
        return self._checkpoint if batch_id == self._key else None

    def save_checkpoint(self, batch_id: str, t_done: int, progress: bytes) -> None:
        """Discard a checkpoint taken on the worker: a retried job starts again from the one it was sent with."""

    def save_runs(self, batch_id: str, rows: list[dict[str, Any]]) -> None:
        """Record finished runs for the driver to store."""
        self.saved.append((batch_id, rows))


def run_on_worker(job: Job, checkpoint: bytes | None) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[str]]:
    """Compute ``job`` against a :class:`BatchStore`; return the runs it saved and its log lines."""
    store, lines = BatchStore(job.key, checkpoint), []
    job.compute(store, log=lines.append, progress=False, **job.kwargs)
    return store.saved, lines


def worker_env() -> dict[str, str]:
    """The environment variables a worker needs to compute what the driver would: ``XLA_FLAGS`` (part of
    every run's code hash) and the ``NLBANDIT_*`` settings (e.g. the data cache)."""
    return {k: v for k, v in os.environ.items() if k == "XLA_FLAGS" or k.startswith("NLBANDIT_")}


class RayExecutor:
    """Jobs sent to Ray workers, one CPU each, all at once; their runs stored by the driver as they finish.

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

    def run(self, jobs: list[Job], store: Any, *, log: Callable[[str], None], progress: bool) -> None:
        """Send every job, then store each one's runs as it finishes (the driver is the only writer)."""
        if not jobs:
            return
        import ray

        if not ray.is_initialized():
            with warnings.catch_warnings():  # Ray starts its processes by fork + exec, safe beside JAX's threads
                warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
                ray.init(address=self.address, runtime_env={"env_vars": worker_env()}, log_to_driver=False,
                         include_dashboard=False, logging_level="ERROR")
            self._started = True
        remote = ray.remote(num_cpus=1, max_retries=self.max_retries)(run_on_worker)
        pending = [remote.remote(job, store.load_checkpoint(job.key)) for job in jobs]
        log(f"{len(jobs)} batch(es) sent to Ray ({ray.cluster_resources().get('CPU', 0):g} CPUs)")
        try:
            while pending:
                [ref], pending = ray.wait(pending, num_returns=1)
                saved, lines = ray.get(ref)
                for line in lines:
                    log(line)
                for key, rows in saved:
                    store.save_runs(key, rows)
        finally:
            for ref in pending:  # an error or an interrupt: do not leave the others computing
                ray.cancel(ref, force=True)

    def close(self) -> None:
        """Shut Ray down if this executor started it."""
        if self._started:
            import ray

            ray.shutdown()
            self._started = False


def make_executor(name: str, address: str | None = None) -> Executor:
    """The executor named ``name`` (``local`` or ``ray``)."""
    if name == "local":
        if address is not None:
            raise ConfigError("--address is for --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address)
    raise ConfigError(f"executor must be 'local' or 'ray', got {name!r}")
