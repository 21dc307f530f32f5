"""Robustness of ``nlbandit serve`` against what other teams' services may send it (an audit's findings): sizes
that would crash or exhaust the process, creations that starve the journal's syncs, a lock left held after a
failed creation, a failed removal that lost its agent, and a status page sized by K."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the service needs the test extra's starlette and httpx2")
from starlette.testclient import TestClient  # noqa: E402

from nlbandit.service import app as service_app  # noqa: E402
from nlbandit.service.app import agent_config  # noqa: E402
from nlbandit.service.fleet import Fleet  # noqa: E402
from nlbandit.service.server import create_app  # noqa: E402
from nlbandit.service.status import Activity, render  # noqa: E402

D, K = 3, 4
UCB = {"policy": "lin-ucb", "d": D, "k": K}


def _contexts(i: int = 0) -> list[list[float]]:
    return np.random.default_rng(i).normal(size=(K, D)).round(6).tolist()


@pytest.fixture()
def fleet(tmp_path):
    return Fleet.open(tmp_path / "s", {"default": agent_config("lin-ucb", D, K, seed=1)})


SIZES = [  # (body, what the 400 names): before the bounds, the first and the last two killed the process (SIGABRT)
    ({**UCB, "d": 3_037_000_500}, "d × k"),            # XLA aborted the process (d × d overflows int64)
    ({**UCB, "k": 10**18}, "d × k"),                     # a MemoryError: 500, or gigabytes allocated
    ({**UCB, "horizon": 4 * 10**18, "policy": "lin-phe"}, "field 'horizon' = 4000000000000000000 is more than"),
    ({**UCB, "policy": "glm-es", "hyperparameters": {"m": 4 * 10**18}}, "field 'm' = 4000000000000000000 is more"),
]


def test_sizes_that_would_crash_or_exhaust_the_process_are_refused_before_the_agent_is_built(tmp_path):
    """In a child process (one for the four requests), which an abort would kill: each gets 400 naming the size."""
    code = ("import json, sys\nfrom starlette.testclient import TestClient\n"
            "from nlbandit.service.fleet import Fleet\nfrom nlbandit.service.server import create_app\n"
            "fleet = Fleet.open(sys.argv[1], {})\n"
            "with TestClient(create_app(fleet), raise_server_exceptions=False) as c:\n"
            "    for body in json.loads(sys.argv[2]):\n"
            "        r = c.put('/agents/big', json=body)\n"
            "        print(json.dumps([r.status_code, r.text]), flush=True)\n")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "s"), json.dumps([b for b, _ in SIZES])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.strip().splitlines()]
    assert len(answers) == len(SIZES)
    for (status, text), (_, message) in zip(answers, SIZES):
        assert status == 400 and message in json.loads(text)["error"], text


def test_creations_in_progress_do_not_hold_up_the_journal_syncs_of_other_agents(fleet, monkeypatch):
    """Agent creations (seconds of warm-up each) ran in the event loop's default executor, the one the journal's
    fdatasync runs in: with as many creations as its threads, every decide and reward of every agent waited
    for them (measured: a decide of 7.7 s during eight neural-ucb creations on 2 cores)."""
    release, opened = threading.Event(), service_app.Service.open.__func__

    def slow_open(cls, folder, *args, **kwargs):
        if os.path.basename(folder).startswith("slow"):
            release.wait(30)
        return opened(cls, folder, *args, **kwargs)

    monkeypatch.setattr(service_app.Service, "open", classmethod(slow_open))
    creations = min(32, (os.cpu_count() or 1) + 4) + 1  # more than the default executor's threads
    with TestClient(create_app(fleet)) as c:
        puts = [threading.Thread(target=c.put, args=(f"/agents/slow{i}",), kwargs={"json": UCB})
                for i in range(creations)]
        for t in puts:
            t.start()
        time.sleep(0.5)
        answered: list = []
        decide = threading.Thread(target=lambda: answered.append(c.post("/decide", json={"contexts": _contexts()})))
        start = time.monotonic()
        decide.start()
        decide.join(10)
        waited = time.monotonic() - start
        release.set()
        decide.join()
        for t in puts:
            t.join()
        assert answered and answered[0].status_code == 200
        assert waited < 5, f"a decide waited {waited:.1f} s for agent creations"
        assert len(c.get("/agents").json()["agents"]) == creations + 1


def test_a_creation_that_fails_to_lock_its_folder_leaves_no_lock_held(fleet, monkeypatch):
    """A full disk failed the pid write after the flock: the descriptor leaked with the lock held, and every
    later creation of the name answered 'held by another nlbandit service' until the process restarted."""
    real_pwrite = os.pwrite

    def full(fd, data, offset):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(os.path.join("agents", "x", "lock")):
            raise OSError(28, "No space left on device")
        return real_pwrite(fd, data, offset)

    with TestClient(create_app(fleet)) as c:
        monkeypatch.setattr(os, "pwrite", full)
        r = c.put("/agents/x", json=UCB)
        assert r.status_code == 503 and "No space left" in r.json()["error"]
        monkeypatch.setattr(os, "pwrite", real_pwrite)
        assert not (fleet.folder / "agents" / "x").exists()  # nothing left behind
        r = c.put("/agents/x", json=UCB)
        assert r.status_code == 201, r.text


def test_a_removal_that_cannot_move_the_folder_keeps_the_agent_serving(fleet, monkeypatch):
    """A removal whose rename failed (a read-only or immutable folder) answered 503 but had already dropped and
    closed the agent: it answered 404 until a restart, while its files stayed."""
    with TestClient(create_app(fleet)) as c:
        first = c.post("/decide", json={"contexts": _contexts(0)}).json()["event_id"]

        rename = os.rename

        def refuse(source, target):
            if "deleted" in str(target):
                raise OSError(1, "Operation not permitted")
            rename(source, target)

        monkeypatch.setattr(os, "rename", refuse)
        r = c.delete("/agents/default")
        assert r.status_code == 503 and "Operation not permitted" in r.json()["error"]
        monkeypatch.undo()
        assert [a["name"] for a in c.get("/agents").json()["agents"]] == ["default"]
        r = c.post("/decide", json={"contexts": _contexts(1)})
        assert r.status_code == 200 and r.json()["event_id"] == first + 1
        assert c.post("/reward", json={"event_id": first, "value": 1.0}).status_code == 200
        assert c.delete("/agents/default").status_code == 200


def test_the_status_page_of_an_agent_with_many_arms_stays_small():
    """Every arm had a bar: K = 4,000,000 (d = 1) rendered 346 MB of SVG in 6 s on the event loop."""
    activity = Activity()
    activity.decided([7, 7, 123_456])
    health = {"status": "ok", "policy": "uniform", "d": 1, "k": 4_000_000, "rounds": 3, "rewarded": 0,
              "pending": 3, "recovered": "", "snapshot_error": None}
    start = time.monotonic()
    page = render(health, {"decide_latency_ms": {}, "counts": {}}, activity)
    assert time.monotonic() - start < 1 and len(page) < 200_000
    assert "arm 123456" in page and "arm 7" in page
