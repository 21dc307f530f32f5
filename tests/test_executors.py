"""The process executor: an experiment with a tuned series and a timed run gives, bit for bit, the local
executor's results, with the workers' checkpoints stored by the driver; a batch that fails stops the others
and its error reaches the driver."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as queues
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import replace
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from executor_cases import CUT_IN_TWO, EXPERIMENT, assert_same, results, seed_parts
from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.executors import (Job, LocalExecutor, ProcessExecutor, _ForwardingStore,
                                           make_executor, next_job)
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.runner import JOBS_PER_WORKER, MIN_PIECE_SEEDS, balance
from nlbandit.experiments.schedule import run_experiments
from nlbandit.experiments.spec import RunConfig
from nlbandit.store import Store


def test_worker_processes_reproduce_the_local_executor_bit_for_bit(tmp_path, experiment_file):
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=3))
    local, local_checkpoints = results(path, LocalExecutor(), tmp_path / "local.duckdb", chunk_size=100)
    with contextlib.closing(ProcessExecutor(2, checkpoint_every=0)) as executor:
        remote, remote_checkpoints = results(path, executor, tmp_path / "processes.duckdb", chunk_size=100)
    assert_same(local, remote)
    # the tuning's one batch (2 points) held all the call's work: for two workers it was cut in two
    assert sorted(size for _, _, size in local.values()) == [1, 1, 1, 1, 2, 2]
    assert sorted(size for _, _, size in remote.values()) == [1] * 6
    assert sorted(remote_checkpoints) == sorted(local_checkpoints) and remote_checkpoints  # every one, stored


def test_a_worker_sends_its_batchs_checkpoint_once_per_interval_and_every_other_one():
    """A worker's own batch's checkpoints reach the driver once ``every`` seconds of computing have passed since
    the job started or the last one was sent; a checkpoint of another batch (kept rounds) is always kept."""
    sent = queues.SimpleQueue()
    store = _ForwardingStore("own", {}, sent, every=0.3)
    store.save_checkpoint("own", 100, b"a")  # at once: dropped (the next one replaces it)
    time.sleep(0.35)
    store.save_checkpoint("own", 200, b"b")
    store.save_checkpoint("own", 300, b"c")  # just after one was sent: dropped
    store.save_checkpoint("kept", 300, b"k")
    assert [sent.get_nowait()] == [("checkpoint", "own", 200, b"b")] and sent.empty()
    assert store.saved == [("save_checkpoint", ("kept", 300, b"k"))]
    every = _ForwardingStore("own", {}, sent, every=0)
    for t in (1, 2):
        every.save_checkpoint("own", t, b"x")
    assert [sent.get_nowait(), sent.get_nowait()] == [("checkpoint", "own", t, b"x") for t in (1, 2)]


def _run(label, seeds, first=0, horizon=5000):
    return RunConfig(label, (), {"name": "linear"}, {"name": "lin-ucb"}, horizon, seeds, 10, seed_offset=first)


def _runs(label, n, seeds=5, horizon=5000):
    return [_run(f"{label}{i}", seeds, horizon=horizon) for i in range(n)]


def test_a_batch_holding_more_than_a_workers_share_is_cut_in_halves_in_its_place():
    grid, small = _runs("g", 9), [_runs(x, 1) for x in "abc"]
    labels = [[r.label for r in b] for b in balance([grid] + small, 2)]
    assert labels == [[f"g{i}" for i in range(5)], [f"g{i}" for i in range(5, 9)], ["a0"], ["b0"], ["c0"]]
    assert balance([grid] + small, 1) == [grid] + small  # one worker: nothing to balance
    assert [len(b) for b in balance([_runs("g", 8)], 4)] == [2, 2, 2, 2]
    alone = [_runs("x", 1, horizon=10**6)] + small  # a single run is not cut between runs (nor these 5 seeds)
    assert balance(alone, 2) == alone
    tuning = [_runs(x, 25, seeds=1, horizon=300) for x in "pqr"]  # no batch over its share
    assert balance(tuning, 2) == tuning


def _pieces(batches):
    return [[(r.label, r.seed_offset, r.n_seeds) for r in b] for b in batches]


def test_few_batches_are_cut_between_their_seeds_into_one_piece_per_worker():
    """Batches that number fewer than JOBS_PER_WORKER per worker, once cut to their shares, are each cut between
    their seeds as well, in their places: one piece per worker, of at least MIN_PIECE_SEEDS seeds."""
    heavy, grid = [_run("h", 50, first=10)], [_run("a", 11), _run("b", 11)]
    assert _pieces(balance([heavy, grid], 2)) == [[("h", 10, 25)], [("h", 35, 25)],
                                                  [("a", 0, 6), ("b", 0, 6)], [("a", 6, 5), ("b", 6, 5)]]
    assert balance([heavy, grid], 1) == [heavy, grid]
    assert _pieces(balance([heavy], 16)) == [[("h", 10 + 5 * i, 5)] for i in range(10)]  # 5 seeds at least
    assert _pieces(balance([[_run("s", 9)], heavy], 2)) == [[("s", 0, 9)], [("h", 10, 25)], [("h", 35, 25)]]
    regression = [replace(_run("r", 50), loop="regression")]  # (its last bits move with the seeds beside)
    assert balance([regression, heavy], 2) == [regression] + balance([heavy], 2)
    many = [[_run(f"m{i}", 50)] for i in range(4 * 2)]
    assert len(many) == JOBS_PER_WORKER * 2 and MIN_PIECE_SEEDS == 5
    assert balance(many, 2) == many  # enough batches to share out whole


class _Uncounted(LocalExecutor):
    """The local executor, whose workers must not be counted (a call with nothing to compute)."""

    @property
    def slots(self) -> int:
        raise AssertionError("the workers were counted for a call with nothing to compute")


def test_the_workers_are_counted_only_where_there_is_something_to_compute(tmp_path, experiment_file):
    """The Ray executor joins its cluster, or starts a local one, to count its CPUs: a stored experiment, tuned or
    not, one file or several, never asks, so it never starts a cluster."""
    path = experiment_file(EXPERIMENT.format(horizon=50, seeds=2))
    results(path, LocalExecutor(), tmp_path / "e.duckdb")
    results(path, _Uncounted(), tmp_path / "e.duckdb")
    with Store(tmp_path / "e.duckdb") as store:
        run_experiments([load_experiment(path)], store, _Uncounted(), progress=False, log=lambda m: None)


def test_batches_cut_between_their_seeds_for_the_workers_give_the_numbers_of_the_whole_batches(tmp_path,
                                                                                             experiment_file):
    """Three batches of 10 seeds for two workers: each computed as two pieces of 5 seeds (the timed run whole),
    every seed's numbers bit for bit those of the whole batches computed in one process."""
    path = experiment_file(EXPERIMENT.format(horizon=300, seeds=10))
    local, _ = results(path, LocalExecutor(), tmp_path / "local.duckdb")
    with contextlib.closing(ProcessExecutor(2)) as executor:
        remote, _ = results(path, executor, tmp_path / "processes.duckdb")
    assert_same(local, remote)
    assert seed_parts(path, tmp_path / "processes.duckdb") == CUT_IN_TWO


def _fail(store, *, log, progress):
    log("failing")
    raise RuntimeError("this batch fails")


def _sleep(store, *, log, progress):
    time.sleep(60)


class _Empty:
    """A store without checkpoints."""

    def load_checkpoint(self, batch_id):
        return None


def _say(store, *, log, progress, name):
    log(name)


def test_a_late_job_starts_after_every_waiting_job_that_is_not():
    # a is late: b, then d (which b's results add, first), then c, and a last; with only late jobs, in order.
    jobs = [Job("a", _say, dict(name="a"), late=True), Job("b", _say, dict(name="b")), Job("c", _say, dict(name="c"))]
    started: list[str] = []
    LocalExecutor().run(jobs, _Empty(), log=started.append, progress=False,
                        more=lambda key, seconds: [Job("d", _say, dict(name="d"))] if key == "b" else [])
    assert started == ["b", "d", "c", "a"]
    todo = deque([Job("x", _say, late=True), Job("y", _say, late=True)])
    assert [next_job(todo).key for _ in range(2)] == ["x", "y"]


def test_a_failing_batch_stops_the_others_and_raises_its_error():
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="this batch fails"):
        ProcessExecutor(2).run([Job("slow", _sleep), Job("fails", _fail)], _Empty(), log=lambda m: None,
                               progress=False)
    assert time.perf_counter() - start < 50  # the sleeping batch was not waited for
    time.sleep(0.5)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("SpawnProcess")]


def _pid(store, *, log, progress):
    time.sleep(0.5)  # (long enough that both workers take a job)
    log(str(os.getpid()))


def test_the_workers_serve_every_call_until_closed_and_restart_after_an_error():
    executor, pids = ProcessExecutor(2), []
    try:
        for _ in range(2):
            executor.run([Job("a", _pid), Job("b", _pid), Job("c", _pid)], _Empty(), log=pids.append, progress=False)
        first = set(pids[1:4])  # (the first line says how many workers)
        assert len(first) == 2 and set(pids[5:8]) == first  # the second run: the first one's processes
        executor.run_alone([Job("x", _pid)], _Empty(), log=pids.append, progress=False)
        assert pids[8] in first  # a timed job: on a (pinned) worker, not in this process
        with pytest.raises(RuntimeError, match="this batch fails"):
            executor.run([Job("a", _pid), Job("fails", _fail)], _Empty(), log=lambda m: None, progress=False)
        pids.clear()
        executor.run([Job("a", _pid), Job("b", _pid)], _Empty(), log=pids.append, progress=False)
        assert len(set(pids[1:3])) == 2 and not set(pids[1:3]) & first  # new workers after the error
    finally:
        executor.close()
    time.sleep(0.5)
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("SpawnProcess")]


def _named(store, *, log, progress, name):
    time.sleep(0.3)
    log(name)


@pytest.mark.parametrize("executor", [LocalExecutor(), ProcessExecutor(2)], ids=["local", "processes"])
def test_jobs_added_as_one_is_stored_go_before_those_not_started_and_idle_work_runs_meanwhile(executor, monkeypatch):
    """``more`` adds jobs once a job is stored: the local executor computes them next; the process executor sends
    them to its workers before the jobs not sent yet (four at a time for two workers: a-d first; x and y, added when
    the first job is stored, as the first two are, whichever they are; then e and f; an order that timing on a
    loaded machine cannot change). ``idle`` is called while the workers compute (never by the local executor, which
    computes in this process)."""
    jobs = [Job(k, _named, {"name": k}) for k in "abcdef"]
    stored, idle, names, sent = [], [], [], []
    submit = ProcessPoolExecutor.submit
    monkeypatch.setattr(ProcessPoolExecutor, "submit", lambda pool, fn, job, *a: sent.append(job.key) or submit(
        pool, fn, job, *a))

    def more(key, seconds):
        stored.append((key, seconds))
        return [Job("x", _named, {"name": "x"}), Job("y", _named, {"name": "y"})] if len(stored) == 1 else []

    with contextlib.closing(executor):
        took = executor.run(jobs, _Empty(), log=names.append, progress=False, more=more, idle=lambda: idle.append(1))
    names = [n for n in names if len(n) == 1]  # (the processes' first line says how many workers)
    assert sorted(names) == sorted("abcdefxy") and sorted(took) == sorted("abcdefxy")
    if isinstance(executor, ProcessExecutor):
        assert sent == list("abcdxyef") and idle
    else:
        assert names == list("axybcdef") and not sent and not idle
    assert sorted(k for k, _ in stored) == sorted("abcdefxy") and all(took[k] == s >= 0.3 for k, s in stored)


def test_executor_options_are_checked():
    with pytest.raises(ConfigError, match="workers must be an integer >= 1"):
        ProcessExecutor(0)
    for bad in (-1, float("nan"), float("inf"), "10", True):
        with pytest.raises(ConfigError, match="checkpoint_every must be a number of seconds >= 0"):
            ProcessExecutor(2, checkpoint_every=bad)
    with pytest.raises(ConfigError, match="--workers is for --executor processes"):
        make_executor("local", workers=2)
    with pytest.raises(ConfigError, match="--address is for --executor ray"):
        make_executor("processes", address="auto")
    with pytest.raises(ConfigError, match="must be 'local', 'processes' or 'ray'"):
        make_executor("threads")


def _children(pid: int) -> set[int]:
    """The live processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.add(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the process table from /proc")
def test_workers_exit_when_their_driver_is_killed():
    """kill -9 of the driver (``nlbandit run``) left its workers computing (~500 MB each) indefinitely."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from test_executors import _Empty, _sleep; "
            "from nlbandit.experiments.executors import Job, ProcessExecutor; "
            "ProcessExecutor(2).run([Job('a', _sleep), Job('b', _sleep)], _Empty(), log=print, progress=False)")
    driver = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(workers := _children(driver.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(workers) >= 2, "the driver did not start its workers within 120 s"
        time.sleep(1.0)  # the workers' initializers have run
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in workers if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, f"worker processes {left} outlived their driver by 10 s"
