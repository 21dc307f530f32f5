"""The process executor: an experiment with a tuned series and a timed run gives, bit for bit, the local
executor's results, with the workers' checkpoints stored by the driver; a batch that fails stops the others
and its error reaches the driver."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.executors import Job, LocalExecutor, ProcessExecutor, make_executor
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.spec import load_experiment
from nlbandit.experiments.tuning import tune_experiment
from nlbandit.store import Store

EXPERIMENT = """
title = "processes"
horizon = 300
seeds = 3
[tune]
seeds = 2
[env]
name = "logistic"
d = 4
k = 6
[[policies]]
label = "TS"
name = "glm-tsl"
tune = { a = [0.5, 2.0] }
[[policies]]
label = "ES"
name = "lin-es"
m = 4
[[policies]]
label = "UCB"
name = "lin-ucb"
alpha = [0.5, 1.0]
[[claims]]
name = "timed"
text = "a runtime claim: its run stays in the driver"
check = "runtime('UCB [alpha=0.5]') > 0"
"""


class _Recording:
    """A store that records the checkpoints written through it."""

    def __init__(self, store):
        self._store, self.checkpoints = store, []

    def save_checkpoint(self, batch_id, t_done, progress):
        self.checkpoints.append((batch_id, t_done))
        self._store.save_checkpoint(batch_id, t_done, progress)

    def __getattr__(self, name):
        return getattr(self._store, name)


def _results(path, executor, db):
    exp = load_experiment(path)
    with Store(db) as plain:
        store = _Recording(plain)
        exp = tune_experiment(exp, store, progress=False, log=lambda m: None, executor=executor, chunk_size=100)
        run_experiment(exp, store, progress=False, log=lambda m: None, executor=executor, chunk_size=100)
        out = {}
        for r in exp.runs + [c for t in exp.tuning for c in t.candidates]:
            stored = plain.load(r.run_id, with_arms=True)
            out[r.run_id] = (stored.curves, stored.arms, stored.batch_size)
    return out, store.checkpoints


def test_worker_processes_reproduce_the_local_executor_bit_for_bit(tmp_path, experiment_file):
    path = experiment_file(EXPERIMENT)
    local, local_checkpoints = _results(path, LocalExecutor(), tmp_path / "local.duckdb")
    remote, remote_checkpoints = _results(path, ProcessExecutor(2), tmp_path / "processes.duckdb")
    assert local.keys() == remote.keys()
    for run_id, (curves, arms, size) in local.items():
        other_curves, other_arms, other_size = remote[run_id]
        assert size == other_size
        np.testing.assert_array_equal(arms, other_arms)
        for metric in curves:
            np.testing.assert_array_equal(curves[metric], other_curves[metric])
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
