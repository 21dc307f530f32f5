"""``nlbandit serve``: an :class:`~nlbandit.agent.Agent` behind an HTTP API, with durable state.

State folder (one per service, held by one process at a time):

* ``lock``: locked (``flock``) by the service holding the folder, with its pid; a second service on the
  folder is refused at start-up, and the lock goes with the process that held it (also after ``kill -9``);
* ``agent.json``: the agent's configuration (policy, hyperparameters, sizes, seed) and the folder's random
  id, written when the folder is created; a later start with another configuration is refused;
* ``journal.log``: the write-ahead journal (:mod:`nlbandit.service.journal`) of every accepted ``decide``,
  ``decide_batch`` and ``reward``, in the order the agent applied them; a request is answered only after its
  record is on disk;
* ``snapshot.npz``: the agent saved (:meth:`~nlbandit.agent.Agent.save`, atomic) every ``snapshot_every``
  journal records, with the number of records it includes and the folder's id (a snapshot or journal copied
  from another folder is refused);
* ``segments/journal-<first>-<last>.log``: after each snapshot the journal's records move here (a rename) and
  ``journal.log`` starts again after them, so start-up replays at most ``snapshot_every`` records and the live
  journal does not grow without bound; the segments are the decision log that ``nlbandit evaluate`` reads
  (delete old ones to reclaim space: nothing else needs them).

Start-up checks the whole journal and the snapshot before it changes anything: damage to the journal other
than a torn final record, a snapshot that covers more records than the journal holds, or files of another
folder stop it with a message, the files left as they were; a torn final record (a write the crash cut
short, never acknowledged) is cut off, and said so (:attr:`Service.recovered`). It then loads the snapshot
and replays the journal's later records through the agent. The agent is
deterministic given its calls, so the replay rebuilds the state the service had; a replayed decision
must choose the arm the journal recorded, else start-up stops with an error. After ``kill -9`` no accepted
reward is lost (its record was synced before the reply) and none is applied twice (a client that resends it
gets 409, the event having been learnt). A request cut short by the crash was never answered; if its record
reached the file it is replayed, so a resent reward gets 409 and tells the client it counted.

API (JSON bodies; errors are ``{"error": message}`` with a 4xx status, never a 500 for bad input; numbers are
JSON numbers (no strings, booleans, NaN or infinities), within the agent's bounds
(:data:`~nlbandit.agent.MAX_MAGNITUDE`); an agent whose state diverged answers 503):

* ``POST /decide`` ``{"contexts": [[...] × d] × K, "mask": [bool × K]?}`` → ``{"event_id", "arm",
  "probability", "method", "score", "bonus"}``;
* ``POST /decide_batch`` ``{"contexts": [B × K × d], "masks": [B × K]?}`` → ``{"decisions": [...]}``;
* ``POST /reward`` ``{"event_id", "value", "variance_bound"?}`` or ``{"rewards": [{"event_id", "value",
  "variance_bound"?}, ...]}`` (all or nothing) → ``{"accepted": n}``; 404 for an event never issued, 409 for
  one already rewarded;
* ``GET /health`` → status, policy, rounds, rewards learnt, pending events, what start-up recovered, and the
  last snapshot failure (a failed snapshot costs nothing but time at the next start: the journal holds every
  record, and the request that triggered it is answered as usual);
* ``GET /metrics`` → request and error counts, journal records, and decide latency percentiles;
* ``GET /`` → the status page (:mod:`nlbandit.service.status`);
* ``GET /openapi.json`` → this API as an OpenAPI 3.1 description (:data:`OPENAPI`).

Limits: bodies of at most :data:`MAX_BODY` bytes, batches of at most :data:`MAX_BATCH` (else 413).

Requests are served one at a time by the agent (it runs on the event loop between awaits), while their
journal syncs overlap (group commit).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import fcntl
import functools
import json
import math
import os
import time
import uuid
from collections import Counter, deque
from pathlib import Path
from typing import Any

import numpy as np

from nlbandit.agent import MAX_MAGNITUDE, Agent, PolicyDiverged, RepeatedReward, UnknownEvent
from nlbandit.atomic import write_bytes
from nlbandit.core.hyper import ConfigError
from nlbandit.service.journal import Journal, compact, decode_array, encode_array, read_journal, segments
from nlbandit.service.status import Activity, render

MAX_BODY = 8 * 2**20
"""Largest request body accepted (bytes); larger ones get 413."""
MAX_BATCH = 1000
"""The most decisions of one ``/decide_batch`` and rewards of one ``/reward`` (more: 413)."""


class RequestError(ValueError):
    """A request the service refuses, with its HTTP status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def agent_config(policy: str, d: int, k: int, horizon: int | None = None, seed: int = 0,
                 **hyperparameters: Any) -> dict[str, Any]:
    """The configuration ``agent.json`` holds (the arguments of :class:`~nlbandit.agent.Agent`; no horizon: the
    agent's horizon-free form)."""
    return {"policy": policy, "d": d, "k": k, "horizon": horizon, "seed": seed, "hyperparameters": hyperparameters}


class Service:
    """An agent, its journal and its snapshots in a state folder (module docstring); :meth:`open` builds one."""

    def __init__(self, folder: Path, agent: Agent, journal: Journal, snapshot_every: int, lock: int, folder_id: str,
                 recovered: str):
        self.folder, self.agent, self.journal, self.snapshot_every = folder, agent, journal, snapshot_every
        self._lock, self.folder_id, self.recovered = lock, folder_id, recovered
        self._snapshot_at = agent.meta.get("journal_records", 0)
        self.failed: str | None = None  # why the service stopped taking requests (a journal write failed)
        self.snapshot_error: str | None = None  # why the last snapshot failed (None after one that succeeded)
        self.counts: Counter = Counter()
        self.background = not agent.numpy_round  # jitted policies (networks) train in a thread of their own
        self._trainer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nlbandit-training")
        self._arrivals: deque = deque()  # decisions made when each reward not yet used arrived
        self._used = agent.learnt  # rewards used by a decision so far
        self.staleness: deque = deque(maxlen=10_000)  # decisions between a reward and the first to use it
        self.activity = Activity()  # what the status page shows
        self.latency: deque = deque(maxlen=10_000)  # seconds of the last decide requests (agent + sync)

    @classmethod
    def open(cls, folder: str | os.PathLike, config: dict[str, Any] | None = None,
             snapshot_every: int = 1000) -> "Service":
        """The service of ``folder``: created with ``config`` (:func:`agent_config`) when the folder holds
        none, else recovered from its snapshot and journal (``config``, if given, must equal the stored one).
        The folder stays locked until :meth:`close` (or the process ends).

        Raises:
          ConfigError: another service holds the folder; no configuration for a new folder, a configuration
            that differs from the stored one, or an invalid one; a damaged journal
            (:class:`~nlbandit.service.journal.JournalDamaged`), a snapshot of another folder or beyond the
            journal, or a journal whose replay does not reproduce its decisions. Nothing in the folder is
            changed then (a folder created by this call is removed).
        """
        folder = Path(folder)
        if not isinstance(snapshot_every, int) or isinstance(snapshot_every, bool) or snapshot_every < 1:
            raise ConfigError(f"snapshot_every must be an integer >= 1, got {snapshot_every!r}")
        created = not folder.exists()
        if not created and not folder.is_dir():
            raise ConfigError(f"{folder} is not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        lock = _lock(folder)
        try:
            return cls._recover(folder, config, snapshot_every, lock)
        except BaseException:
            os.close(lock)
            if created:
                (folder / "lock").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    folder.rmdir()
            raise

    @classmethod
    def _recover(cls, folder: Path, config: dict[str, Any] | None, snapshot_every: int, lock: int) -> "Service":
        stored = folder / "agent.json"
        if stored.exists():
            saved = json.loads(stored.read_text())
            folder_id = saved.pop("folder_id", None)
            if not isinstance(folder_id, str):
                raise ConfigError(f"{stored} has no folder id: it was written by an earlier nlbandit, whose journal "
                                  "format this version does not read; start a new folder")
            if config is not None and config != saved:
                raise ConfigError(f"{folder} holds an agent configured as {saved}, not {config}; use another folder")
            config = saved
        elif config is None:
            raise ConfigError(f"{folder} holds no agent: give its policy, d and k (and optionally a horizon) to create "
                              "one")
        else:
            folder_id = uuid.uuid4().hex
        fresh = _warm_up(config)  # also checks the configuration before it is stored
        journal_path, snapshot_path = folder / "journal.log", folder / "snapshot.npz"
        contents = read_journal(journal_path, folder_id)  # checked whole before anything is written
        compacted = segments(folder, folder_id)
        base = contents.base if contents.base is not None else (
            compacted[-1].base + len(compacted[-1].records) if compacted else 0)
        agent = _load_snapshot(snapshot_path, folder_id, fresh) if snapshot_path.exists() else fresh
        start = agent.meta.get("journal_records", 0)
        if not base <= start <= base + len(contents.records):
            raise ConfigError(f"{folder}: the snapshot includes {start} journal records but the journal holds records "
                              f"{base + 1}..{base + len(contents.records)}; the journal or the snapshot was replaced. "
                              "Nothing was changed")
        for i, record in enumerate(contents.records[start - base:], start + 1):
            _replay(agent, record, i)
        if not stored.exists():
            write_bytes(stored, json.dumps({**config, "folder_id": folder_id}, indent=1).encode())
        journal, contents = Journal.open(journal_path, folder_id, base)
        recovered = (f"{agent.rounds} decisions and {agent.rewarded} rewards ({base + len(contents.records)} journal "
                     f"records, {start} of them in the snapshot, {base} in {len(compacted)} compacted segments)")
        if contents.torn:
            recovered += f"; cut off the journal's torn final record, never acknowledged: {contents.torn}"
        return cls(folder, agent, journal, snapshot_every, lock, folder_id, recovered)

    def decide(self, body: Any) -> dict[str, Any]:
        """Apply and journal a ``/decide`` request (not yet durable: await :meth:`durable`)."""
        contexts, mask = _array(body, "contexts", 2), _optional_mask(body, "mask", 1)
        version = self._version()
        decision = self._agent_call(functools.partial(self.agent.decide, learn=not self.background), contexts, mask)
        self._record({"op": "decide", "x": encode_array(contexts), "m": None if mask is None else encode_array(mask),
                      "arm": decision.arm, "p": _finite_or_none(decision.probability), "v": version})
        self.counts["decide"] += 1
        self.activity.decided([decision.arm])
        return _decision_json(decision)

    def decide_batch(self, body: Any) -> dict[str, Any]:
        """Apply and journal a ``/decide_batch`` request."""
        contexts, masks = _array(body, "contexts", 3), _optional_mask(body, "masks", 2)
        if len(contexts) > MAX_BATCH:
            raise RequestError(413, f"a batch of {len(contexts)} decisions; at most {MAX_BATCH} per request")
        version = self._version()
        decisions = self._agent_call(functools.partial(self.agent.decide_batch, learn=not self.background),
                                     contexts, masks)
        self._record({"op": "decide_batch", "x": encode_array(contexts), "v": version,
                      "m": None if masks is None else encode_array(masks), "arms": [d.arm for d in decisions],
                      "p": [_finite_or_none(d.probability) for d in decisions]})
        self.counts["decide"] += len(decisions)
        self.activity.decided([d.arm for d in decisions])
        return {"decisions": [_decision_json(d) for d in decisions]}

    def reward(self, body: Any) -> dict[str, Any]:
        """Apply and journal a ``/reward`` request (one reward or a batch, all or nothing)."""
        items = body.get("rewards") if isinstance(body, dict) and "rewards" in body else [body]
        if not isinstance(items, list) or not items or not all(isinstance(r, dict) for r in items):
            raise RequestError(400, "'rewards' must be a non-empty list of {\"event_id\", \"value\"} objects")
        if len(items) > MAX_BATCH:
            raise RequestError(413, f"a batch of {len(items)} rewards; at most {MAX_BATCH} per request")
        ids, values, bounds = [], [], []
        for i, r in enumerate(items):
            where = "" if len(items) == 1 and "rewards" not in body else f"rewards[{i}]."
            ids.append(_integer(r, "event_id", where))
            values.append(_number(r, "value", where))
            bounds.append(None if r.get("variance_bound") is None else _number(r, "variance_bound", where))
        given = [b is not None for b in bounds]
        if any(given) and not all(given):
            raise RequestError(400, "give variance_bound for every reward of a batch or for none")
        self._agent_call(self.agent.reward, ids, values, bounds if all(given) else None)
        self._record({"op": "reward", "ids": ids, "values": values, "bounds": bounds if all(given) else None})
        self.counts["reward"] += len(ids)
        self._arrivals.extend([self.agent.rounds] * len(ids))
        self.activity.rewarded(values)
        return {"accepted": len(ids)}

    def _version(self) -> int | None:
        """In the background mode, the number of rewards in the state the next decision uses (journalled with
        it, so that a replay learns exactly those first), and the staleness of the rewards it uses for the first
        time (decisions since each arrived); None otherwise."""
        if not self.background:
            return None
        version = self.agent.learnt
        while self._used < version and self._arrivals:
            self.staleness.append(self.agent.rounds - self._arrivals.popleft())
            self._used += 1
        return version

    def _record(self, record: dict[str, Any]) -> None:
        """Journal a request the agent has applied; if that fails, the agent is ahead of its journal, so the
        service stops taking requests (a restart recovers the journal's state, without the unanswered one)."""
        try:
            self.journal.append(record)
        except OSError as e:
            self.failed = f"a journal write failed ({e}); restart the service"
            raise RequestError(503, self.failed) from None

    def _agent_call(self, fn, *args):
        if self.failed:
            raise RequestError(503, self.failed)
        try:
            return fn(*args)
        except UnknownEvent as e:
            raise RequestError(404, str(e)) from None
        except RepeatedReward as e:
            raise RequestError(409, str(e)) from None
        except PolicyDiverged as e:
            raise RequestError(503, str(e)) from None
        except (ValueError, TypeError) as e:
            raise RequestError(400, str(e)) from None

    async def learn(self) -> None:
        """Learn the rewards accepted so far (run after a reward's reply is sent, so that the next decision
        does not wait for the update: :meth:`nlbandit.agent.Agent.learn`); in the background mode in the
        training thread, while decisions go on with the state before it."""
        if self.failed:
            return
        if self.background:
            await asyncio.get_running_loop().run_in_executor(self._trainer, self.agent.learn)
        else:
            self.agent.learn()

    async def durable(self) -> None:
        """Wait until every journal record so far is on disk, then take a snapshot if one is due (a failed
        snapshot does not fail the request, which is durable already: :meth:`snapshot`)."""
        await self.journal.durable()
        if self.journal.records - self._snapshot_at >= self.snapshot_every:
            self.snapshot()

    def snapshot(self) -> bool:
        """Save the agent with the number of journal records it includes (after syncing those records) and the
        folder's id; return whether it was saved. A failure is kept in :attr:`snapshot_error` (shown by
        ``/health``) and tried again at the next due record; a failing journal sync stops the service."""
        try:
            self.journal.sync()
        except OSError as e:
            self.failed = f"a journal sync failed ({e}); restart the service"
            return False
        try:
            self.agent.save(self.folder / "snapshot.npz", meta={"journal_records": self.journal.records,
                                                                "folder": self.folder_id})
        except Exception as e:  # noqa: BLE001 -- the journal holds every record: a snapshot only saves start-up time
            self.snapshot_error = f"the snapshot at journal record {self.journal.records} failed: {e}"
            self.counts["snapshot failed"] += 1
            return False
        self._snapshot_at, self.snapshot_error = self.journal.records, None
        if not self.journal.syncing():  # the journal's records move into a segment (else at the next snapshot)
            try:
                self.journal = compact(self.journal, self.folder_id)
            except OSError as e:
                self.snapshot_error = f"the journal's compaction after record {self.journal.records} failed: {e}"
        return True

    def health(self) -> dict[str, Any]:
        """The agent's status."""
        a = self.agent
        return {"status": "failed: " + self.failed if self.failed else "ok", "policy": a.config["name"], "d": a.spec.d,
                "k": a.spec.k, "rounds": a.rounds, "rewarded": a.rewarded, "pending": len(a.pending),
                "recovered": self.recovered, "snapshot_error": self.snapshot_error}

    def metrics(self) -> dict[str, Any]:
        """Request counts by kind and status, journal records, and decide latency percentiles (ms)."""
        lat = np.sort(np.asarray(self.latency)) * 1e3
        pct = {f"p{q}": float(np.percentile(lat, q)) for q in (50, 90, 99)} if lat.size else {}
        found = {"counts": dict(self.counts), "journal_records": self.journal.records,
                 "decide_latency_ms": {"n": int(lat.size), **pct}}
        if self.background:
            stale = np.asarray(self.staleness)
            found["staleness_decisions"] = {"n": int(stale.size), **({f"p{q}": float(np.percentile(stale, q))
                                                                      for q in (50, 99)} if stale.size else {})}
        return found

    def close(self) -> None:
        """Finish the training under way, sync the journal, close it, and release the folder."""
        self._trainer.shutdown(wait=True)
        self.journal.close()
        os.close(self._lock)


def _new_agent(config: dict[str, Any]) -> Agent:
    """A fresh agent of ``config`` (:func:`agent_config`); ConfigError if it is invalid."""
    return Agent(config["policy"], config["d"], config["k"], config["horizon"], config["seed"],
                 **config["hyperparameters"])


def _lock(folder: Path) -> int:
    """Lock ``folder`` for this process (its ``lock`` file, ``flock``, holding the pid); the descriptor holds the
    lock. ConfigError when another process (or another service of this one) holds it."""
    fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise ConfigError(f"{folder} is held by another nlbandit service (pid {holder}): one service per state "
                          "folder") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _load_snapshot(path: Path, folder_id: str, scratch: Agent) -> Agent:
    """The agent saved in the folder's snapshot, which must be this folder's and of its configuration."""
    try:
        agent = Agent.load(path)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}; move it away to recover from the journal alone") from None
    if agent.meta.get("folder") != folder_id:
        raise ConfigError(f"{path} was written by another state folder (copied here?); move it away to recover "
                          "from the journal alone")
    def identity(a: Agent) -> tuple:  # a horizon-free agent's horizon grows: not part of what it is
        return a.config, a.spec.d, a.spec.k, a.seed, a.horizon_free, a.horizon_free or a.spec.horizon

    if identity(agent) != identity(scratch):
        raise ConfigError(f"{path} holds a {agent.config['name']} agent that is not the one agent.json configures")
    return agent


def _warm_up(config: dict[str, Any]) -> Agent:
    """Compile the agent's functions on a throwaway agent of ``config`` (compiled functions are shared by
    agents of the same policy and shapes), so that the first request does not wait for compilation; return
    a fresh agent of ``config``. ConfigError if the configuration is invalid."""
    scratch = _new_agent(config)
    x = np.zeros((config["k"], config["d"]))
    low, high = scratch.policy.meta.requires.reward_range or (0.0, 0.0)
    value = min(max(0.0, low), high)
    bound = 0.0 if scratch.policy.meta.requires.noise_level else None
    for _ in range(2):
        try:
            scratch.reward(scratch.decide(x).event_id, value, bound)
        except ValueError:
            break  # a policy that refuses the dummy round compiles on the first request instead
    return _new_agent(config)


def _replay(agent: Agent, record: dict[str, Any], index: int) -> None:
    """Apply journal record number ``index`` to ``agent`` as the service did."""
    op, version = record.get("op"), record.get("v")
    if version is not None:  # decided in the background-training mode: on the state with ``v`` rewards learnt
        agent.learn(upto=version)
    if op == "decide":
        decision = agent.decide(decode_array(record["x"]), None if record["m"] is None else decode_array(record["m"]),
                                learn=version is None)
        arms = [decision.arm]
    elif op == "decide_batch":
        arms = [d.arm for d in agent.decide_batch(decode_array(record["x"]),
                                                   None if record["m"] is None else decode_array(record["m"]),
                                                   learn=version is None)]
    elif op == "reward":
        agent.reward(record["ids"], record["values"], record["bounds"])
        return
    else:
        raise ConfigError(f"journal record {index}: unknown operation {op!r}")
    expected = record["arms"] if op == "decide_batch" else [record["arm"]]
    if arms != expected:
        raise ConfigError(f"journal record {index}: the replayed decision chose arm(s) {arms}, the journal "
                          f"recorded {expected}; the agent is not the one that wrote the journal (another "
                          "nlbandit or JAX version?)")


def _finite_or_none(v: float) -> float | None:
    """``v``, or None where it is NaN or infinite (JSON has neither)."""
    return v if math.isfinite(v) else None


def _decision_json(d) -> dict[str, Any]:
    return {"event_id": d.event_id, "arm": d.arm, "probability": _finite_or_none(d.probability), "method": d.method,
            "score": _finite_or_none(d.score), "bonus": _finite_or_none(d.bonus)}


def parse_json(data: bytes) -> Any:
    """A request body as JSON, strictly: no NaN or infinities, integers beyond 64 bits read as floats (so a
    401-digit one is refused as a number too large, not an overflow), nesting within Python's limits.

    Raises:
      RequestError: 400, naming what is wrong.
    """
    def constant(name):
        raise RequestError(400, f"the body is not valid JSON: {name} is not a JSON number")

    def integer(text):
        return int(text) if len(text) <= 19 else float(text)
    try:
        return json.loads(data, parse_constant=constant, parse_int=integer)
    except (ValueError, UnicodeDecodeError) as e:
        if isinstance(e, RequestError):
            raise
        raise RequestError(400, f"the body is not valid JSON: {e}") from None
    except RecursionError:
        raise RequestError(400, "the body is not valid JSON: nested too deeply") from None


def _numbers(value: Any, ndim: int) -> bool:
    """Whether ``value`` is a list nested ``ndim`` deep whose leaves are JSON numbers (not booleans, not strings)."""
    if ndim == 0:
        return type(value) in (int, float)
    return isinstance(value, list) and all(_numbers(v, ndim - 1) for v in value)


def _array(body: Any, name: str, ndim: int) -> np.ndarray:
    if not isinstance(body, dict) or name not in body:
        raise RequestError(400, f"the request must be a JSON object with field {name!r}")
    expected = f"field {name!r} must be a nested list of numbers ({ndim} levels, rectangular)"
    if not _numbers(body[name], ndim):
        raise RequestError(400, expected)
    try:
        a = np.asarray(body[name], np.float64)
    except (TypeError, ValueError, OverflowError):
        raise RequestError(400, expected) from None
    if a.ndim != ndim:
        raise RequestError(400, f"{expected}, got {a.ndim}")
    return a


def _optional_mask(body: Any, name: str, ndim: int) -> np.ndarray | None:
    if body.get(name) is None:
        return None
    try:
        m = np.asarray(body[name])
    except ValueError:  # ragged
        m = np.zeros(0)
    if m.dtype != bool or m.ndim != ndim:
        raise RequestError(400, f"field {name!r} must be a nested list of true/false ({ndim} levels)")
    return m


def _integer(r: dict, name: str, where: str) -> int:
    v = r.get(name)
    if not isinstance(v, int) or isinstance(v, bool):
        raise RequestError(400, f"field '{where}{name}' must be an integer, got {v!r}")
    return v


def _number(r: dict, name: str, where: str) -> float:
    v = r.get(name)
    if type(v) not in (int, float) or not abs(v) <= MAX_MAGNITUDE:
        raise RequestError(400, f"field '{where}{name}' must be a number of magnitude at most {MAX_MAGNITUDE:g}, "
                                f"got {v!r}")
    return float(v)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_MATRIX = {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
_DECISION = _schema({"event_id": {"type": "integer"}, "arm": {"type": "integer"},
                     "probability": {"type": ["number", "null"]}, "method": {"type": "string"},
                     "score": {"type": ["number", "null"]}, "bonus": {"type": ["number", "null"]}},
                    ["event_id", "arm", "probability", "method"])
_REWARD = _schema({"event_id": {"type": "integer"}, "value": {"type": "number"},
                   "variance_bound": {"type": "number"}}, ["event_id", "value"])
_ERROR = {"description": "refused, nothing changed", "content": {"application/json": {"schema": _schema(
    {"error": {"type": "string"}}, ["error"])}}}


def _post(summary: str, request: dict[str, Any], reply: dict[str, Any], errors: dict[str, str]) -> dict[str, Any]:
    return {"post": {"summary": summary, "requestBody": {"required": True, "content": {"application/json": {
        "schema": request}}}, "responses": {"200": {"description": "done (durable)", "content": {
            "application/json": {"schema": reply}}}, **{code: {**_ERROR, "description": why}
                                                       for code, why in errors.items()}}}}


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "nlbandit serve", "version": "1",
             "description": "An online contextual-bandit agent with a durable journal (docs/online.md)."},
    "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
    "security": [{"token": []}, {}],
    "paths": {
        "/decide": _post("Choose an arm among K arms of d features", _schema(
            {"contexts": _MATRIX, "mask": {"type": "array", "items": {"type": "boolean"}}}, ["contexts"]), _DECISION,
            {"400": "malformed, or outside the bounds", "401": "no token", "413": "too large",
             "503": "the agent diverged, or its journal failed"}),
        "/decide_batch": _post("B decisions on the current state", _schema(
            {"contexts": {"type": "array", "items": _MATRIX}, "masks": {"type": "array", "items": {
                "type": "array", "items": {"type": "boolean"}}}}, ["contexts"]),
            _schema({"decisions": {"type": "array", "items": _DECISION}}, ["decisions"]),
            {"400": "malformed", "401": "no token", "413": f"more than {MAX_BATCH} decisions or too large"}),
        "/reward": _post("The reward of a decision, or of a batch (all or nothing)", {"oneOf": [_REWARD, _schema(
            {"rewards": {"type": "array", "items": _REWARD}}, ["rewards"])]},
            _schema({"accepted": {"type": "integer"}}, ["accepted"]),
            {"400": "malformed", "401": "no token", "404": "an event never issued",
             "409": "an event already rewarded: it counted once", "413": f"more than {MAX_BATCH} rewards"}),
        "/health": {"get": {"summary": "The agent's counters and status", "responses": {"200": {
            "description": "status, policy, d, k, rounds, rewarded, pending, recovered, snapshot_error"}}}},
        "/metrics": {"get": {"summary": "Request counts and latencies: JSON, or Prometheus text for Accept: "
                                        "text/plain", "responses": {"200": {"description": "metrics"}}}},
        "/": {"get": {"summary": "The status page (HTML)", "responses": {"200": {"description": "the page"}}}},
    },
}
"""The service's API as an OpenAPI 3.1 description (``GET /openapi.json``)."""

TOKEN_VARIABLE = "NLBANDIT_SERVE_TOKEN"
"""The environment variable ``nlbandit serve`` reads its token from when ``--token`` is not given."""
LOOPBACK = ("127.0.0.1", "::1", "localhost")
"""The addresses ``nlbandit serve`` binds without a token (only this machine can reach them)."""


def check_binding(host: str, token: str | None) -> None:
    """Refuse to bind a non-loopback ``host`` without a token (anyone who can reach it could decide and reward).

    Raises:
      ConfigError: naming the two ways to give one.
    """
    if host not in LOOPBACK and not token:
        raise ConfigError(f"serve: binding {host!r} (not loopback) needs a token: --token TOKEN or ${TOKEN_VARIABLE}; "
                          "clients then send 'Authorization: Bearer TOKEN'")


def prometheus_text(service: Service) -> str:
    """:meth:`Service.metrics` and the agent's counters in the Prometheus text exposition format (0.0.4)."""
    m, a = service.metrics(), service.agent
    lines = ["# HELP nlbandit_requests_total Requests answered, by outcome.", "# TYPE nlbandit_requests_total counter"]
    lines += [f'nlbandit_requests_total{{outcome="{kind}"}} {count}' for kind, count in sorted(m["counts"].items())]
    for name, value, help_text in (("journal_records", m["journal_records"], "Records in the journal."),
                                   ("rounds", a.rounds, "Decisions made."), ("rewarded", a.rewarded, "Rewards learnt."),
                                   ("pending", len(a.pending), "Decisions awaiting their reward.")):
        lines += [f"# HELP nlbandit_{name} {help_text}", f"# TYPE nlbandit_{name} gauge", f"nlbandit_{name} {value}"]
    lines += ["# HELP nlbandit_decide_latency_ms Decide latency over the last 10,000 requests (agent and journal).",
              "# TYPE nlbandit_decide_latency_ms summary"]
    lines += [f'nlbandit_decide_latency_ms{{quantile="0.{q[1:]}"}} {v}' for q, v in m["decide_latency_ms"].items()
              if q != "n"]
    lines.append(f"nlbandit_decide_latency_ms_count {m['decide_latency_ms']['n']}")
    return "\n".join(lines) + "\n"


def create_app(service: Service, max_body: int = MAX_BODY, token: str | None = None):
    """The ASGI application (Starlette) serving ``service``; with ``token``, every request must carry
    ``Authorization: Bearer <token>`` (else 401)."""
    import hmac

    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.middleware import Middleware
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
    from starlette.routing import Route

    class Authorize:
        """ASGI middleware: 401 for a request without ``Authorization: Bearer <token>``."""

        def __init__(self, app):
            self.app, self.expected = app, f"Bearer {token}".encode()

        async def __call__(self, scope, receive, send):
            given = dict(scope.get("headers", ())).get(b"authorization", b"")
            if scope["type"] == "http" and not hmac.compare_digest(given, self.expected):
                service.counts["error 401"] += 1
                refusal = JSONResponse({"error": "missing or wrong token: send 'Authorization: Bearer TOKEN'"},
                                       status_code=401, headers={"WWW-Authenticate": "Bearer"})
                await refusal(scope, receive, send)
                return
            await self.app(scope, receive, send)

    async def body_of(request: Request) -> Any:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > max_body):
            raise RequestError(413, f"request body larger than {max_body} bytes")
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > max_body:
                raise RequestError(413, f"request body larger than {max_body} bytes")
        return parse_json(bytes(data))

    def handler(method):
        async def handle(request: Request) -> JSONResponse:
            start = time.perf_counter()
            try:
                reply = method(await body_of(request))
                await service.durable()
            except RequestError as e:
                service.counts[f"error {e.status}"] += 1
                return JSONResponse({"error": str(e)}, status_code=e.status)
            except ClientDisconnect:
                return JSONResponse({"error": "client disconnected"}, status_code=400)
            except OSError as e:  # the journal could not be synced: the reply cannot promise durability
                service.failed = f"a journal sync failed ({e}); restart the service"
                return JSONResponse({"error": service.failed}, status_code=503)
            if method == service.decide:
                service.latency.append(time.perf_counter() - start)
            learn = BackgroundTask(service.learn) if method == service.reward else None
            return JSONResponse(reply, background=learn)
        return handle

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(service.health())

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(OPENAPI)

    async def status(request: Request) -> HTMLResponse:
        return HTMLResponse(render(service.health(), service.metrics(), service.activity))

    async def metrics(request: Request):
        accept = request.headers.get("accept", "")
        if "text/plain" in accept or "openmetrics" in accept or request.query_params.get("format") == "prometheus":
            return PlainTextResponse(prometheus_text(service), media_type="text/plain; version=0.0.4")
        return JSONResponse(service.metrics())

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        service.close()

    return Starlette(routes=[Route("/decide", handler(service.decide), methods=["POST"]),
                             Route("/decide_batch", handler(service.decide_batch), methods=["POST"]),
                             Route("/reward", handler(service.reward), methods=["POST"]),
                             Route("/health", health), Route("/metrics", metrics), Route("/", status),
                             Route("/openapi.json", openapi)],
                     lifespan=lifespan, middleware=[] if token is None else [Middleware(Authorize)])


def serve(folder: str | os.PathLike, config: dict[str, Any] | None, host: str = "127.0.0.1", port: int = 8000,
          snapshot_every: int = 1000, max_body: int = MAX_BODY, token: str | None = None) -> None:
    """Open (or create) the service of ``folder`` and serve it with uvicorn until interrupted; ``token``
    (default: ``$NLBANDIT_SERVE_TOKEN``) is required by every request, and by a non-loopback ``host``."""
    token = token or os.environ.get(TOKEN_VARIABLE) or None
    check_binding(host, token)
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        raise ConfigError("nlbandit serve needs starlette and uvicorn: pip install 'nlbandit[serve]' (or -e "
                          "'.[serve]' in a checkout)") from None

    service = Service.open(folder, config, snapshot_every)
    print(f"nlbandit serve: {service.agent.config['name']} (d = {service.agent.spec.d}, k = {service.agent.spec.k}) "
          f"from {folder}: recovered {service.recovered}; listening on http://{host}:{port}"
          + (" (requests need the token)" if token else ""), flush=True)
    uvicorn.run(create_app(service, max_body, token), host=host, port=port, log_level="warning")


__all__ = ["LOOPBACK", "MAX_BATCH", "MAX_BODY", "OPENAPI", "RequestError", "Service", "TOKEN_VARIABLE", "agent_config",
           "check_binding", "create_app", "prometheus_text", "serve"]
