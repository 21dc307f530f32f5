"""The Ray executor (the ``ray`` extra) on a local two-worker cluster: an experiment with a tuned series and a
timed run gives, bit for bit, the local executor's results, its batches whole or cut between their seeds for the
cluster's CPUs; a worker killed in the middle of a batch has its batch retried and the results are still the local
ones. Skipped where Ray is not installed."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs the 'ray' extra: pip install -e '.[ray]'")

from executor_cases import CUT_IN_TWO, EXPERIMENT, assert_same, results, seed_parts  # noqa: E402
from nlbandit.experiments.executors import RayExecutor, worker_env  # noqa: E402

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, runtime_env={"env_vars": worker_env()}, include_dashboard=False, log_to_driver=False,
             logging_level="ERROR")
    yield
    ray.shutdown()


def test_ray_executor_reproduces_the_local_executor_bit_for_bit(tmp_path, experiment_file, cluster):
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=3))
    local, _ = results(path, None, tmp_path / "local.duckdb")
    remote, _ = results(path, RayExecutor(), tmp_path / "ray.duckdb")
    assert_same(local, remote)


def test_the_batches_are_cut_for_the_clusters_cpus(tmp_path, experiment_file, cluster):
    """The executor counts the cluster's two CPUs, so a call's three batches of 10 seeds are computed as pieces of
    5 seeds (the timed run whole, in the driver): every seed's numbers bit for bit the local executor's whole
    batches."""
    assert RayExecutor().slots == 2
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=10))
    local, _ = results(path, None, tmp_path / "local.duckdb")
    remote, _ = results(path, RayExecutor(), tmp_path / "ray.duckdb")
    assert_same(local, remote)
    assert seed_parts(path, tmp_path / "ray.duckdb") == CUT_IN_TWO


def test_a_killed_worker_has_its_batch_retried(tmp_path, experiment_file, cluster):
    path = experiment_file(EXPERIMENT.format(horizon=4000, seeds=3))
    local, _ = results(path, None, tmp_path / "local.duckdb")
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
        remote, _ = results(path, RayExecutor(max_retries=2), tmp_path / "ray.duckdb")
    finally:
        stop.set()
        killer.join()
    assert killed, "no busy Ray worker was seen to kill"
    assert_same(local, remote)
