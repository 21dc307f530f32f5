"""Many named agents in one service (nlbandit.service.fleet, the /agents routes): created, served, removed and
recovered one by one, each with its own journal."""

from __future__ import annotations

import json
import re

import jax
import numpy as np
import pytest

pytest.importorskip("starlette", reason="the service needs the test extra's starlette and httpx2")
from starlette.testclient import TestClient  # noqa: E402

from nlbandit.core.hyper import ConfigError  # noqa: E402
from nlbandit.service.evaluate import estimable_events, read_log, replay_log  # noqa: E402
from nlbandit.service.app import EVENT_ID_BLOCK as BLOCK  # noqa: E402
from nlbandit.service.fleet import MAX_BLOCKS, Fleet, config_of  # noqa: E402
from nlbandit.service.server import create_app  # noqa: E402

D, K = 3, 4
UCB = {"policy": "lin-ucb", "d": D, "k": K, "seed": 1}
TS = {"policy": "lin-ts", "d": D, "k": K, "hyperparameters": {"v": 0.5}}


def _contexts(i: int) -> list[list[float]]:
    return np.random.default_rng(i).normal(size=(K, D)).round(6).tolist()


def _play(c: TestClient, name: str, rounds: int, first: int = 0) -> None:
    for i in range(first, first + rounds):
        d = c.post(f"/agents/{name}/decide", json={"contexts": _contexts(i)})
        assert d.status_code == 200, d.text
        r = c.post(f"/agents/{name}/reward", json={"event_id": d.json()["event_id"], "value": float(i % 2)})
        assert r.status_code == 200, r.text


def _states_equal(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y))
               for x, y in zip(jax.tree.leaves(a.agent.state), jax.tree.leaves(b.agent.state), strict=True))


def test_agents_are_created_served_listed_and_removed_while_the_service_runs(tmp_path):
    folder = tmp_path / "s"
    with TestClient(create_app(Fleet.open(folder))) as c:
        assert c.get("/agents").json() == {"agents": []}
        r = c.put("/agents/home-page", json=UCB)
        assert r.status_code == 201 and r.json()["created"] is True and r.json()["policy"] == "lin-ucb"
        assert c.put("/agents/home-page", json=UCB).status_code == 200  # a resent PUT: the same agent
        r = c.put("/agents/home-page", json=TS)
        assert r.status_code == 409 and "another configuration" in r.json()["error"]
        assert c.put("/agents/search.v2", json=TS).status_code == 201
        _play(c, "home-page", 5)
        _play(c, "search.v2", 3)
        listed = {a["name"]: a for a in c.get("/agents").json()["agents"]}
        assert {n: (a["policy"], a["rounds"], a["rewarded"], a["status"]) for n, a in listed.items()} == {
            "home-page": ("lin-ucb", 5, 5, "ok"), "search.v2": ("lin-ts", 3, 3, "ok")}
        assert c.get("/agents/search.v2").json()["hyperparameters"] == {"v": 0.5}
        r = c.post("/decide", json={"contexts": _contexts(0)})  # the unprefixed routes serve 'default'
        assert r.status_code == 404 and "no agent named 'default'" in r.json()["error"]
        assert c.delete("/agents/home-page").json() == {"removed": "home-page"}
        assert not (folder / "agents" / "home-page").exists() and not any((folder / "deleted").iterdir())
        r = c.post("/agents/home-page/decide", json={"contexts": _contexts(0)})
        assert r.status_code == 404 and c.delete("/agents/home-page").status_code == 404
        assert c.put("/agents/home-page", json=UCB).status_code == 201  # a new agent under the old name
        assert c.get("/agents/home-page").json()["rounds"] == 0
        text = c.get("/metrics", headers={"Accept": "text/plain"}).text
        assert 'nlbandit_rounds{agent="search.v2"} 3' in text and "nlbandit_agents 2" in text
        assert c.get("/metrics").json()["counts"]["decide"] == 8


@pytest.mark.parametrize(("name", "body", "message"), [
    ("a/b", UCB, None),  # a route that does not exist
    ("-x", UCB, "agent name '-x'"),
    ("x" * 65, UCB, "1 to 64 letters"),
    ("ok", {"policy": "lin-ucb", "d": D}, "field 'k' is required"),
    ("ok", {**UCB, "horizn": 10}, "unknown field(s) ['horizn']"),
    ("ok", {**UCB, "d": "3"}, "field 'd' must be an integer"),
    ("ok", {**UCB, "d": True}, "field 'd' must be an integer"),
    ("ok", {**UCB, "hyperparameters": [1]}, "field 'hyperparameters' must be an object"),
    ("ok", {**UCB, "d": 0}, "field 'd' must be an integer >= 1, got 0"),  # refused by the agent's own checks
    ("ok", {**UCB, "policy": "no-such-policy"}, "field 'policy' must be one of"),
    ("ok", {**UCB, "hyperparameters": {"alpha": -1.0}}, "field 'alpha' must be a number >= 0, got -1.0"),
    ("ok", {**UCB, "hyperparameters": {"d": 5}}, "must not hold ['d']"),
    ("ok", {**UCB, "hyperparameters": {"estimate_draws": 2**50}}, "['estimate_draws'] are options of the agent"),
    ("ok", {**UCB, "hyperparameters": {"first_event_id": 5}}, "['first_event_id'] are options of the agent"),
    ("ok", {**UCB, "hyperparameters": {"alpha": [1, 2]}}, "field 'alpha' must be a number >= 0, got [1, 2]"),
    ("ok", {**UCB, "hyperparameters": {"no_such": 1}}, "unknown argument 'no_such'"),
    # in range, but beyond float64's: the agent refuses it (a ZeroDivisionError once, a 500)
    ("ok", {**UCB, "hyperparameters": {"lam": 1e-320}}, "initial state is not finite with lam=1e-320"),
    ("ok", {**UCB, "hyperparameters": {"alpha": 10**400}}, "field 'alpha' must be a number >= 0, got inf"),
])
def test_a_refused_creation_leaves_nothing_behind(tmp_path, name, body, message):
    folder = tmp_path / "s"
    with TestClient(create_app(Fleet.open(folder))) as c:
        r = c.put(f"/agents/{name}", json=body)
        assert r.status_code in (400, 404), r.text
        if message is not None:
            assert r.status_code == 400 and message in r.json()["error"]
        assert c.get("/agents").json() == {"agents": []}
    assert list((folder / "agents").iterdir()) == []


def test_each_agent_recovers_on_its_own_and_a_damaged_one_does_not_stop_the_others(tmp_path):
    folder = tmp_path / "s"
    fleet = Fleet.open(folder, snapshot_every=4)
    with TestClient(create_app(fleet)) as c:
        for name, config in (("a", UCB), ("b", TS), ("c", UCB)):
            assert c.put(f"/agents/{name}", json=config).status_code == 201
        _play(c, "a", 7)
        _play(c, "b", 9, first=100)
        _play(c, "c", 2, first=200)
        before = dict(fleet.agents)  # (closing the service empties it)
    again = Fleet.open(folder)
    assert sorted(again.agents) == ["a", "b", "c"] and again.unavailable == {}
    for name in "abc":
        assert again.agents[name].agent.rounds == before[name].agent.rounds
        assert _states_equal(again.agents[name], before[name]), name
    again.close()

    journal = folder / "agents" / "b" / "journal.log"
    data = journal.read_bytes()
    journal.write_bytes(data[:20] + bytes([data[20] ^ 1]) + data[21:])  # damage in b's journal header
    damaged = journal.read_bytes()
    with TestClient(create_app(Fleet.open(folder, {"b": config_of(TS)}))) as c:  # (asked for: it exists)
        r = c.post("/agents/b/decide", json={"contexts": _contexts(0)})
        assert r.status_code == 503 and "could not be recovered" in r.json()["error"]
        assert [a["status"].split(":")[0] for a in c.get("/agents").json()["agents"]] == ["ok", "unavailable", "ok"]
        _play(c, "a", 1, first=7)  # the others serve
        assert c.put("/agents/b", json=TS).status_code == 503
    assert journal.read_bytes() == damaged  # left as it was, for the operator
    (folder / "agents" / "c" / "agent.json").write_text("{not json")
    again = Fleet.open(folder)
    assert sorted(again.agents) == ["a"] and "agent.json is not valid JSON" in again.unavailable["c"]
    again.close()


def _decide(c: TestClient, name: str) -> int:
    r = c.post(f"/agents/{name}/decide", json={"contexts": _contexts(0)})
    assert r.status_code == 200, r.text
    return r.json()["event_id"]


def test_no_two_agents_of_a_folder_issue_the_same_event_id(tmp_path):
    """Each agent numbers its events in a block of ids of its own (BLOCK = 2**36 apart), removed agents'
    included, across restarts: a reward sent to the wrong agent's route, or a late one for a removed agent's
    event sent to a new agent of its name, is refused (404). They used to number from 1 each (then from the
    removed ones' next id per name), and such a reward was learnt for another decision."""
    folder = tmp_path / "s"
    with TestClient(create_app(Fleet.open(folder))) as c:
        r = c.put("/agents/search", json={**UCB, "hyperparameters": {"alpha": -1.0}})
        assert r.status_code == 400  # a failed creation gives its block back
        assert c.put("/agents/search", json=UCB).status_code == 201
        assert c.put("/agents/home", json=TS).status_code == 201
        _play(c, "search", 3)
        stale = _decide(c, "search")
        assert stale == 4 and _decide(c, "home") == BLOCK + 1
        r = c.post("/agents/home/reward", json={"event_id": stale, "value": 1.0})  # the wrong route
        assert r.status_code == 404 and "was never issued" in r.json()["error"]
        assert c.post("/agents/search/reward", json={"event_id": BLOCK + 1, "value": 1.0}).status_code == 404
        assert c.get("/agents/home").json()["rewarded"] == 0 and c.get("/agents/search").json()["rewarded"] == 3
        assert c.delete("/agents/search").status_code == 200 and c.put("/agents/search", json=UCB).status_code == 201
        r = c.post("/agents/search/reward", json={"event_id": stale, "value": 1.0})
        assert r.status_code == 404 and "this agent has issued none yet" in r.json()["error"]
        assert _decide(c, "search") == 2 * BLOCK + 1
        assert c.post("/agents/search/reward", json={"event_id": 2 * BLOCK + 1, "value": 1.0}).status_code == 200
    with TestClient(create_app(Fleet.open(folder))) as c:  # restarted: each agent's numbering is its own
        assert _decide(c, "search") == 2 * BLOCK + 2 and _decide(c, "home") == BLOCK + 2
        assert c.delete("/agents/home").status_code == 200 and c.put("/agents/new", json=UCB).status_code == 201
    with TestClient(create_app(Fleet.open(folder))) as c:  # a removal does not give a block back
        assert _decide(c, "new") == 3 * BLOCK + 1
    replayed = replay_log(folder, "lin-ucb", agent="search")  # off-policy evaluation reads the log's numbering
    assert replayed.events.tolist() == [2 * BLOCK + 1]
    assert estimable_events(read_log(folder / "agents" / "search")[1], 2 * BLOCK + 1) == 1
    journal = folder / "agents" / "search" / "journal.log"
    journal.write_bytes(journal.read_bytes()[:-30] + b"x" * 30)  # damaged: the agent cannot be recovered
    (folder / "agents" / "search" / "agent.json").write_text("{not json")
    with TestClient(create_app(Fleet.open(folder))) as c:
        assert c.delete("/agents/search").status_code == 200 and c.put("/agents/search", json=UCB).status_code == 201
        assert _decide(c, "search") == 4 * BLOCK + 1


def test_a_folder_of_the_earlier_numbering_gives_new_agents_blocks_past_its_ids(tmp_path):
    """A folder without event_ids.json (its agents numbered from 1, or from retired/<name>.json, the next id
    after the removed agents of a name): its agents keep their ids, and new ones start past every block those,
    the retired records and the agents start-up could not recover (their block and the next) reached."""
    folder = tmp_path / "s"
    with TestClient(create_app(Fleet.open(folder))) as c:
        c.put("/agents/kept", json=UCB)
        c.put("/agents/broken", json=UCB)
        _play(c, "kept", 2)
    (folder / "event_ids.json").unlink()
    for name in ("kept", "broken"):  # as the earlier version wrote them: every agent from 1
        config = json.loads((folder / "agents" / name / "agent.json").read_text())
        (folder / "agents" / name / "agent.json").write_text(json.dumps({**config, "first_event_id": 1}))
    (folder / "agents" / "broken" / "journal.log").write_bytes(b"damaged")
    fleet = Fleet.open(folder)
    assert "event ids of new agents from block 2" in fleet.recovered and list(fleet.unavailable) == ["broken"]
    fleet.close()
    (folder / "event_ids.json").unlink()
    (folder / "retired").mkdir()
    (folder / "retired" / "gone.json").write_text(json.dumps({"first_free": 2 * BLOCK + 5}))  # block 2 reached
    with TestClient(create_app(Fleet.open(folder))) as c:
        assert _decide(c, "kept") == 3 and c.put("/agents/gone", json=UCB).status_code == 201
        assert _decide(c, "gone") == 3 * BLOCK + 1
    assert json.loads((folder / "event_ids.json").read_text()) == {"next_block": 4}


@pytest.mark.parametrize("written, reason", [
    ("{}", "'next_block' is None"), ('{"next_block": "3"}', "'next_block' is '3'"),
    ('{"next_block": -1}', "'next_block' is -1"), ('{"next_block": true}', "'next_block' is True"),
    ('{"next_block": 9007199254740992}', "'next_block' is 9007199254740992"), ("[3]", "not a JSON object"),
])
def test_a_damaged_record_of_event_ids_refuses_the_start_up_naming_it(tmp_path, written, reason):
    folder = tmp_path / "s"
    Fleet.open(folder).close()
    (folder / "event_ids.json").write_text(written)
    with pytest.raises(ConfigError, match=r"event_ids.json does not hold \{\"next_block\": an integer in \[0, "
                                          rf"65536\]\}} \({re.escape(reason)}\): restore it"):
        Fleet.open(folder)
    (folder / "event_ids.json").unlink()
    (folder / "retired").mkdir()
    (folder / "retired" / "gone.json").write_text(written.replace("next_block", "first_free"))
    with pytest.raises(ConfigError, match=r"gone.json does not hold \{\"first_free\": an integer in \[1, 2\*\*52\]"):
        Fleet.open(folder)


def test_a_folder_that_has_given_every_block_refuses_new_agents(tmp_path):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "event_ids.json").write_text(json.dumps({"next_block": MAX_BLOCKS}))
    with TestClient(create_app(Fleet.open(folder))) as c:
        r = c.put("/agents/a", json=UCB)
        assert r.status_code == 503 and "every one of the 65536 blocks" in r.json()["error"]
        assert not (folder / "agents" / "a").exists()


@pytest.mark.parametrize("failing", ["nlbandit.service.journal.write_bytes", "nlbandit.service.fleet.write_bytes"])
def test_a_creation_the_disk_cuts_short_leaves_no_folder_and_gives_no_block_twice(tmp_path, monkeypatch, failing):
    """A journal that could not be created after the agent's agent.json was written left that folder (with its
    first event id) while the block went back to the next agent, so after a restart both issued id 1; a record
    of the blocks that could not be written is answered 503 naming it."""
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    folder = tmp_path / "s"
    with TestClient(create_app(Fleet.open(folder))) as c:
        monkeypatch.setattr(failing, full)
        r = c.put("/agents/x", json=UCB)
        assert r.status_code == 503 and "No space left" in r.json()["error"]
        assert ("event_ids.json could not be written" in r.json()["error"]) == failing.endswith("fleet.write_bytes")
        assert not (folder / "agents" / "x").exists()
        monkeypatch.undo()
        assert c.put("/agents/y", json=UCB).status_code == 201 and _decide(c, "y") == 1
    with TestClient(create_app(Fleet.open(folder))) as c:
        assert [a["name"] for a in c.get("/agents").json()["agents"]] == ["y"]
        assert c.put("/agents/x", json=UCB).status_code == 201 and _decide(c, "x") == BLOCK + 1


def test_start_up_finishes_a_removal_and_drops_a_creation_a_crash_cut_short(tmp_path):
    folder = tmp_path / "s"
    fleet = Fleet.open(folder, {"kept": {"policy": "lin-ucb", "d": D, "k": K, "horizon": None, "seed": 0,
                                         "hyperparameters": {}}})
    fleet.close()
    (folder / "agents" / "half-made").mkdir()
    (folder / "agents" / "half-made" / "lock").write_text("123\n")  # the folder's lock, before its agent.json
    (folder / "deleted" / "gone.1234abcd").mkdir(parents=True)
    (folder / "deleted" / "gone.1234abcd" / "journal.log").write_bytes(b"x")
    again = Fleet.open(folder)
    assert sorted(again.agents) == ["kept"] and not (folder / "agents" / "half-made").exists()
    assert list((folder / "deleted").iterdir()) == [] and len(again.recovered) == 2
    again.close()


def test_a_second_service_on_the_folder_and_the_one_agent_layout_are_refused(tmp_path):
    first = Fleet.open(tmp_path / "s")
    with pytest.raises(ConfigError, match="held by another nlbandit service"):
        Fleet.open(tmp_path / "s")
    first.close()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "agent.json").write_text("{}")
    with pytest.raises(ConfigError, match="earlier one-agent layout: move its files into"):
        Fleet.open(tmp_path / "old")


def test_the_index_page_lists_every_agent(tmp_path):
    with TestClient(create_app(Fleet.open(tmp_path / "s"))) as c:
        for name in ("x", "y"):
            c.put(f"/agents/{name}", json=UCB)
        _play(c, "y", 2)
        page = c.get("/").text
        assert '<a href="/agents/x/status">x</a>' in page and '<a href="/agents/y/status">y</a>' in page
        assert "2 agents" in page and "<script" not in page and "src=" not in page
        assert "<b>lin-ucb</b>" in c.get("/agents/y/status").text


def test_a_creation_the_disk_refuses_answers_503_and_leaves_nothing(tmp_path, monkeypatch):
    import nlbandit.service.app as app_module

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    folder = tmp_path / "s"
    with TestClient(create_app(Fleet.open(folder))) as c:
        monkeypatch.setattr(app_module, "write_bytes", full)
        r = c.put("/agents/x", json=UCB)
        assert r.status_code == 503 and "No space left" in r.json()["error"]
        assert not (folder / "agents" / "x").exists()
        monkeypatch.undo()
        assert c.get("/agents").json() == {"agents": []} and c.put("/agents/x", json=UCB).status_code == 201


def test_a_decision_past_the_end_of_the_agents_block_is_refused(tmp_path):
    """An agent whose next ids would leave its block (into another agent's) is refused the decision (409), a
    batch whole, with nothing changed; decisions up to the block's last id are made."""
    from nlbandit.service.app import RequestError, Service

    service = Service.open(tmp_path / "a", config_of(UCB), first_event_id=BLOCK - 2)
    try:
        batch = {"contexts": [_contexts(i) for i in range(4)]}
        with pytest.raises(RequestError, match=rf"4 more decision\(s\) would number past this agent's block of event "
                                               rf"ids \({BLOCK - 2}\.\.{BLOCK}; issued up to "
                                               rf"{BLOCK - 3}\)") as refused:
            service.decide_batch(batch)
        assert refused.value.status == 409 and service.agent.rounds == 0
        batch["contexts"].pop()
        assert [d["event_id"] for d in service.decide_batch(batch)["decisions"]] == [BLOCK - 2 + i
                                                                                      for i in range(3)]
        with pytest.raises(RequestError, match="1 more decision") as refused:
            service.decide({"contexts": _contexts(5)})
        assert refused.value.status == 409 and service.agent.rounds == 3
        service.reward({"event_id": BLOCK, "value": 1.0})  # its rewards are still taken
    finally:
        service.close()


def test_unknown_routes_and_methods_and_a_busy_agent_are_answered_in_json(tmp_path):
    """A path no route serves (404) and a method its route does not take (405, with Allow) answer JSON like every
    other error; a request for an agent being created or removed answers 503 with Retry-After (nothing of it
    applied: a client sends it again), not 409, which a client of the reward route reads as 'counted once'."""
    fleet = Fleet.open(tmp_path / "s")
    with TestClient(create_app(fleet)) as c:
        r = c.post("/nope", json={})
        assert r.status_code == 404 and r.json() == {"error": "no route /nope; GET /openapi.json lists them"}
        r = c.get("/decide")
        assert r.status_code == 405 and r.headers["allow"] == "POST" and "GET is not allowed on /decide" in \
            r.json()["error"]
        assert c.put("/agents/a", json=UCB).status_code == 201
        fleet._busy.add("b")  # as while its creation runs in a worker thread
        for method, path, body in [("put", "/agents/b", UCB), ("post", "/agents/b/reward", {"event_id": 1,
                                                                                            "value": 1.0}),
                                   ("post", "/agents/b/decide", {"contexts": _contexts(0)}), ("delete", "/agents/b",
                                                                                             None)]:
            r = c.request(method.upper(), path, json=body)
            assert (r.status_code, r.headers.get("retry-after")) == (503, "1"), (method, path, r.text)
            assert "is being created or removed; try again" in r.json()["error"]
        assert c.get("/metrics").json()["counts"]["error 503"] == 4


def test_the_client_sends_a_request_answered_503_with_retry_after_again(tmp_path):
    """Client: a 503 with Retry-After (an agent being created) is sent again after that long, up to its retries, so
    the reward counts (True, not the 409 of a repeat); a 503 without it, or past the retries, raises."""
    import http.server
    import threading

    from nlbandit.client import Client, ServiceError

    answers, seen = [], []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            seen.append(self.rfile.read(int(self.headers["Content-Length"])))
            status, headers, body = answers.pop(0)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = Client(f"http://127.0.0.1:{server.server_address[1]}", agent="b", retries=2)
        busy = (503, {"Retry-After": "0"}, {"error": "agent 'b' is being created or removed; try again"})
        answers[:] = [busy, busy, (200, {}, {"accepted": 1})]
        assert client.reward(7, 1.0) is True and len(seen) == 3 and len(set(seen)) == 1
        answers[:] = [busy, busy, busy]
        with pytest.raises(ServiceError, match="503: agent 'b' is being created"):
            client.reward(7, 1.0)
        answers[:] = [(503, {}, {"error": "diverged"})]
        with pytest.raises(ServiceError, match="503: diverged"):
            client.decide([[0.0] * D] * K)
        assert answers == []
    finally:
        server.shutdown()
        server.server_close()
