"""The Ray executor's driver side in the default suite, against a stand-in for the ``ray`` module (the real cluster's
tests, tests/test_ray.py, need the 'ray' extra and are skipped without it): what it asks of Ray (one CPU per job,
its retries, the workers' environment), the batches cut for the cluster's CPUs, results bit for bit the local
executor's when the jobs finish in another order than they were sent, the jobs still pending cancelled when one
fails, and Ray shut down only by the executor that started it."""

from __future__ import annotations

import sys
import types

import pytest

from executor_cases import CUT_IN_TWO, EXPERIMENT, assert_same, results, seed_parts
from nlbandit.experiments.executors import RayExecutor, worker_env


class _Ref:
    """A job sent to the stand-in: computed when the driver gets it."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args


class FakeRay(types.ModuleType):
    """The part of Ray's API the executor uses, computing each job in this process when the driver gets it. ``wait``
    hands back the job sent last, so jobs finish in the reverse of their order; ``fail`` names how many jobs finish
    before one raises."""

    def __init__(self, cpus: int, fail: int | None = None):
        super().__init__("ray")
        self.cpus, self.fail, self.got, self.taken = cpus, fail, 0, []
        self.initialised, self.inits, self.shutdowns, self.options, self.sent, self.cancelled = False, [], 0, [], [], []

    def is_initialized(self):
        return self.initialised

    def init(self, **kwargs):
        self.initialised = True
        self.inits.append(kwargs)

    def shutdown(self):
        self.initialised = False
        self.shutdowns += 1

    def cluster_resources(self):
        assert self.initialised, "asked a cluster's resources before joining it"
        return {"CPU": float(self.cpus)}

    def remote(self, **options):
        self.options.append(options)

        def wrap(fn):
            return types.SimpleNamespace(remote=lambda *args: self._send(fn, args))

        return wrap

    def _send(self, fn, args):
        self.sent.append(_Ref(fn, args))
        return self.sent[-1]

    def wait(self, refs, num_returns=1, timeout=None):
        assert num_returns == 1 and refs
        return [refs[-1]], refs[:-1]

    def get(self, ref):
        self.taken.append(ref)
        if self.got == self.fail:
            raise RuntimeError("a worker's job failed")
        self.got += 1
        return ref.fn(*ref.args)

    def cancel(self, ref, force=False):
        self.cancelled.append(ref)


@pytest.fixture
def fake_ray(monkeypatch):
    """``fake_ray(cpus, fail=None)``: a :class:`FakeRay` installed as the ``ray`` module."""
    def install(cpus: int, fail: int | None = None) -> FakeRay:
        fake = FakeRay(cpus, fail)
        monkeypatch.setitem(sys.modules, "ray", fake)
        return fake

    return install


def test_the_driver_cuts_for_the_clusters_cpus_and_stores_jobs_in_any_order(tmp_path, experiment_file, fake_ray,
                                                                           monkeypatch):
    monkeypatch.setenv("NLBANDIT_MARKER", "sent to the workers")
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=10))
    local, _ = results(path, None, tmp_path / "local.duckdb")
    fake = fake_ray(cpus=2)
    executor = RayExecutor(max_retries=5)
    remote, _ = results(path, executor, tmp_path / "ray.duckdb")
    assert_same(local, remote)  # (the jobs finished last-sent first)
    assert seed_parts(path, tmp_path / "ray.duckdb") == CUT_IN_TWO
    assert len(fake.inits) == 1 and fake.inits[0]["runtime_env"] == {"env_vars": worker_env()}
    assert fake.inits[0]["address"] is None and worker_env()["NLBANDIT_MARKER"] == "sent to the workers"
    assert fake.options and all(o == {"num_cpus": 1, "max_retries": 5} for o in fake.options)
    assert fake.got == len(fake.sent) > 0 and not fake.cancelled
    executor.close()
    executor.close()
    assert fake.shutdowns == 1  # it started Ray, so it shuts it down, once


def test_one_cpu_computes_each_batch_whole(tmp_path, experiment_file, fake_ray):
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=10))
    fake_ray(cpus=1)
    results(path, RayExecutor(), tmp_path / "ray.duckdb")
    assert all(parts == [tuple(range(10))] for parts in seed_parts(path, tmp_path / "ray.duckdb").values())


def test_a_failed_job_cancels_the_pending_ones_and_ray_started_elsewhere_is_left_running(tmp_path, experiment_file,
                                                                                      fake_ray):
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=10))
    fake = fake_ray(cpus=2, fail=3)  # (the tuning's two jobs and one of the runs' finish)
    fake.init()  # joined by someone else before
    executor = RayExecutor()
    with pytest.raises(RuntimeError, match="a worker's job failed"):
        results(path, executor, tmp_path / "ray.duckdb")
    assert len(fake.inits) == 1  # not joined again
    pending = {id(r) for r in fake.sent} - {id(r) for r in fake.taken}  # (sent, never got)
    assert fake.got == 3 and pending and sorted(map(id, fake.cancelled)) == sorted(pending)
    executor.close()
    assert fake.shutdowns == 0 and fake.is_initialized()


def test_a_stored_experiment_never_joins_a_cluster(tmp_path, experiment_file, fake_ray):
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=3))
    results(path, None, tmp_path / "r.duckdb")
    fake = fake_ray(cpus=2)
    again, _ = results(path, RayExecutor(), tmp_path / "r.duckdb")
    assert again and not fake.inits and not fake.sent
