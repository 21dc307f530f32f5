"""The process executor: an experiment with a tuned series and a timed run gives, bit for bit, the local
executor's results, with the workers' checkpoints stored by the driver; a batch that fails stops the others
and its error reaches the driver."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from executor_cases import EXPERIMENT, assert_same, results
from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.executors import Job, LocalExecutor, ProcessExecutor, make_executor


def test_worker_processes_reproduce_the_local_executor_bit_for_bit(tmp_path, experiment_file):
    path = experiment_file(EXPERIMENT.format(horizon=300))
    local, local_checkpoints = results(path, LocalExecutor(), tmp_path / "local.duckdb", chunk_size=100)
    remote, remote_checkpoints = results(path, ProcessExecutor(2), tmp_path / "processes.duckdb", chunk_size=100)
    assert_same(local, remote)
    assert sorted(remote_checkpoints) == sorted(local_checkpoints) and remote_checkpoints  # every one, stored


def _fail(store, *, log, progress):
    log("failing")
    raise RuntimeError("this batch fails")


def _sleep(store, *, log, progress):
    time.sleep(60)


class _Empty:
    """A store without checkpoints."""

    def load_checkpoint(self, batch_id):
        return None


def test_a_failing_batch_stops_the_others_and_raises_its_error():
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="this batch fails"):
        ProcessExecutor(2).run([Job("slow", _sleep), Job("fails", _fail)], _Empty(), log=lambda m: None,
                               progress=False)
    assert time.perf_counter() - start < 50  # the sleeping batch was not waited for
    time.sleep(0.5)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("SpawnProcess")]


def test_executor_options_are_checked():
    with pytest.raises(ConfigError, match="workers must be an integer >= 1"):
        ProcessExecutor(0)
    with pytest.raises(ConfigError, match="--workers is for --executor processes"):
        make_executor("local", workers=2)
    with pytest.raises(ConfigError, match="--address is for --executor ray"):
        make_executor("processes", address="auto")
    with pytest.raises(ConfigError, match="must be 'local', 'processes' or 'ray'"):
        make_executor("threads")
