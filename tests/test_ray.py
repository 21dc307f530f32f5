"""The Ray executor (the ``ray`` extra) on a local two-worker cluster: an experiment with a tuned series and a
timed run gives, bit for bit, the local executor's results; a worker killed in the middle of a batch has its
batch retried and the results are still the local ones. Skipped where Ray is not installed."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs the 'ray' extra: pip install -e '.[ray]'")

from nlbandit.experiments.executors import RayExecutor, worker_env  # noqa: E402
from nlbandit.experiments.runner import run_experiment  # noqa: E402
from nlbandit.experiments.spec import load_experiment  # noqa: E402
from nlbandit.experiments.tuning import tune_experiment  # noqa: E402
from nlbandit.store import Store  # noqa: E402

pytestmark = pytest.mark.ray

EXPERIMENT = """
title = "ray"
horizon = {horizon}
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
tune = {{ a = [0.5, 2.0] }}
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


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, runtime_env={"env_vars": worker_env()}, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield
    ray.shutdown()


def _results(path, executor, db):
    exp = load_experiment(path)
    with Store(db) as store:
        exp = tune_experiment(exp, store, progress=False, log=lambda m: None, executor=executor)
        run_experiment(exp, store, progress=False, log=lambda m: None, executor=executor)
        out = {}
        for r in exp.runs + [c for t in exp.tuning for c in t.candidates]:
            stored = store.load(r.run_id, with_arms=True)
            out[r.run_id] = (stored.curves, stored.arms, stored.batch_size)
    return out


def _assert_same(local, remote):
    assert local.keys() == remote.keys()
    for run_id, (curves, arms, size) in local.items():
        other_curves, other_arms, other_size = remote[run_id]
        assert size == other_size
        np.testing.assert_array_equal(arms, other_arms)
        for metric in curves:
            np.testing.assert_array_equal(curves[metric], other_curves[metric])


def test_ray_executor_reproduces_the_local_executor_bit_for_bit(tmp_path, experiment_file, cluster):
    path = experiment_file(EXPERIMENT.format(horizon=300))
    _assert_same(_results(path, None, tmp_path / "local.duckdb"), _results(path, RayExecutor(), tmp_path / "ray.duckdb"))


def test_a_killed_worker_has_its_batch_retried(tmp_path, experiment_file, cluster):
    path = experiment_file(EXPERIMENT.format(horizon=4000))
    local = _results(path, None, tmp_path / "local.duckdb")
    killed, stop = [], threading.Event()

    def kill_one_busy_worker():
        while not stop.is_set() and not killed:
            ps = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout.splitlines()
            busy = [int(line.split()[0]) for line in ps if "ray::run_on_worker" in line]
            if busy:
                os.kill(busy[0], signal.SIGKILL)
                killed.append(busy[0])
            time.sleep(0.05)

    killer = threading.Thread(target=kill_one_busy_worker, daemon=True)
    killer.start()
    try:
        remote = _results(path, RayExecutor(max_retries=2), tmp_path / "ray.duckdb")
    finally:
        stop.set()
        killer.join()
    assert killed, "no busy Ray worker was seen to kill"
    _assert_same(local, remote)
