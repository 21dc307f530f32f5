"""One agent of ``nlbandit serve``: an :class:`~nlbandit.agent.Agent` with durable state in a folder of its own.

Agent folder (``DIR/agents/<name>/`` of a service's state folder, held by one process at a time):

* ``lock``: locked (``flock``) by the process serving the agent, with its pid; a second one is refused,
  and the lock goes with the process that held it (also after ``kill -9``);
* ``agent.json``: the agent's configuration (policy, hyperparameters, sizes, seed), every hyperparameter as
  resolved at creation (``resolved``: a later change of a default leaves the agent as it was), the folder's
  random id and the agent's first event id (the first of the block of ids its fleet gave it:
  :mod:`~nlbandit.service.fleet`), written when the folder is created; a later start with another
  configuration is refused;
* ``journal.log``: the write-ahead journal (:mod:`nlbandit.service.journal`) of every accepted ``decide``,
  ``decide_batch`` and ``reward``, in the order the agent applied them; a request is answered only after its
  record is on disk;
* ``snapshot.npz``: the agent saved (:meth:`~nlbandit.agent.Agent.save`, atomic) every ``snapshot_every``
  journal records, with the number of records it includes and the folder's id (a snapshot or journal copied
  from another folder is refused);
* ``segments/journal-<first>-<last>.log``: after each snapshot the journal's records move here (a rename) and
  ``journal.log`` starts again after them, so start-up replays at most ``snapshot_every`` records and the live
  journal does not grow without bound; the segments are the decision log that ``nlbandit evaluate`` reads
  whole. A start-up reads only those after the snapshot's records (all of them if the snapshot is gone), so
  old ones can be deleted to reclaim space where the log is not to be evaluated whole.

Start-up checks the whole journal and the snapshot before it changes anything: damage to the journal other
than a torn tail, a snapshot that covers more records than the journal holds, or files of another
folder stop it with a message, the files left as they were; a torn tail (writes the crash cut short or never
wrote back, never acknowledged) is cut off, and said so (:attr:`Service.recovered`). It then loads the snapshot
and replays the later records through the agent: the journal's, and the segments' where the snapshot is older
than the journal's first record or was moved away (damaged). The agent is
deterministic given its calls, so the replay rebuilds the state the service had; a replayed decision
must choose the arm the journal recorded, else start-up stops with an error. After ``kill -9`` no accepted
reward is lost (its record was synced before the reply) and none is applied twice (a client that resends it
gets 409, the event having been learnt). A request cut short by the crash was never answered; if its record
reached the file it is replayed, so a resent reward gets 409 and tells the client it counted.

Its requests (``decide``, ``decide_batch``, ``reward``: :meth:`Service.decide` ...) take parsed JSON bodies
and raise :class:`RequestError` with an HTTP status for what they refuse; :mod:`nlbandit.service.server` routes
HTTP to them, and :mod:`nlbandit.service.fleet` holds many such agents in one state folder.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import functools
import json
import math
import os
import shutil
import uuid
from collections import Counter, deque
from pathlib import Path
from typing import Any

import jax
import numpy as np

from nlbandit.agent import AGENT_OPTIONS, MAX_MAGNITUDE, Agent, PolicyDiverged, RepeatedReward, UnknownEvent
from nlbandit.atomic import remove_leftovers, write_bytes
from nlbandit.core.hyper import ConfigError
from nlbandit.policies.warmup import Warmup
from nlbandit.service.journal import (Journal, JournalDamaged, compact, decode_array, encode_array, read_journal,
                                      records_after, segment_files, segments)
from nlbandit.service.status import Activity

MAX_BODY = 8 * 2**20
"""Largest request body accepted (bytes); larger ones get 413."""
MAX_BATCH = 1000
"""The most decisions of one ``/decide_batch`` and rewards of one ``/reward`` (more: 413)."""
EVENT_ID_BLOCK = 2**36
"""Event ids per block: block b holds the ids b·2**36 + 1 .. (b + 1)·2**36. An agent of the service numbers its
decisions within the block of its first id and is refused (409) a decision past its end, so that its ids never
reach another block; a :class:`~nlbandit.service.fleet.Fleet` gives each agent it creates a block of its own.
2**36 ≈ 6.9·10¹⁰ decisions: 80 days at 10,000 a second; the 2**16 blocks below :data:`~nlbandit.agent.MAX_EVENT_ID`
are a folder's agent creations."""


class RequestError(ValueError):
    """A request the service refuses, with its HTTP status; ``retry_after``: the seconds after which the same
    request may succeed (a 503 for a passing state, sent as ``Retry-After``), None for a refusal that stands."""

    def __init__(self, status: int, message: str, retry_after: int | None = None):
        super().__init__(message)
        self.status, self.retry_after = status, retry_after


def agent_config(policy: str, d: int, k: int, horizon: int | None = None, seed: int = 0,
                 **hyperparameters: Any) -> dict[str, Any]:
    """The configuration ``agent.json`` holds (the arguments of :class:`~nlbandit.agent.Agent`; no horizon: the
    agent's horizon-free form). Build it from outside input after :func:`check_hyperparameter_names`."""
    return {"policy": policy, "d": d, "k": k, "horizon": horizon, "seed": seed, "hyperparameters": hyperparameters}


CONFIG_FIELDS = ("policy", "d", "k", "horizon", "seed", "hyperparameters")
"""The fields of an agent's configuration (:func:`agent_config`)."""


def check_hyperparameter_names(hyperparameters: dict[str, Any], where: str) -> None:
    """ConfigError where ``hyperparameters`` (a request's, ``serve --set``'s or an evaluation's candidate's) name a
    field of the agent's configuration (:data:`CONFIG_FIELDS`, given as fields of their own) or an option of the
    :class:`~nlbandit.agent.Agent`, which the service and the evaluation set themselves
    (:data:`~nlbandit.agent.AGENT_OPTIONS`): the policy's hyperparameters only."""
    fields = sorted(set(hyperparameters) & set(CONFIG_FIELDS))
    options = sorted(set(hyperparameters) & set(AGENT_OPTIONS) - set(CONFIG_FIELDS))
    if fields:
        raise ConfigError(f"{where} must not hold {fields}: give them as fields (or arguments) of their own")
    if options:
        raise ConfigError(f"{where} must hold the policy's hyperparameters only; {options} are options of the "
                          "agent, not hyperparameters of the policy")


class Service:
    """An agent, its journal and its snapshots in a state folder (module docstring); :meth:`open` builds one."""

    def __init__(self, folder: Path, config: dict[str, Any], agent: Agent, journal: Journal, snapshot_every: int,
                 lock: int, folder_id: str, recovered: str, trainer: concurrent.futures.Executor | None = None):
        self.folder, self.config, self.agent, self.journal = folder, config, agent, journal
        self.snapshot_every, self._lock, self.folder_id, self.recovered = snapshot_every, lock, folder_id, recovered
        self._snapshot_at = agent.meta.get("journal_records", 0)
        self.failed: str | None = None  # why the service stopped taking requests (a journal write failed)
        self.snapshot_error: str | None = None  # why the last snapshot failed (None after one that succeeded)
        self.counts: Counter = Counter()
        self.background = not agent.numpy_round  # jitted policies (networks) train in a thread of their own
        self._owns_trainer = trainer is None
        self._trainer = trainer or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nlbandit-training")
        self._training: concurrent.futures.Future | None = None  # this agent's latest training step
        self.closed = False
        self._arrivals: deque = deque()  # decisions made when each reward not yet used arrived
        self._used = agent.learnt  # rewards used by a decision so far
        self.staleness: deque = deque(maxlen=10_000)  # decisions between a reward and the first to use it
        self.activity = Activity()  # what the status page shows
        self.latency: deque = deque(maxlen=10_000)  # seconds of the last decide requests (agent + sync)

    @classmethod
    def open(cls, folder: str | os.PathLike, config: dict[str, Any] | None = None, snapshot_every: int = 1000,
             trainer: concurrent.futures.Executor | None = None, first_event_id: int = 1) -> "Service":
        """The service of ``folder``: created with ``config`` (:func:`agent_config`) when the folder holds
        none (its agent's event ids from ``first_event_id``: :class:`~nlbandit.agent.Agent`), else recovered from
        its snapshot and journal (``config``, if given, must equal the stored one).
        The folder stays locked until :meth:`close` (or the process ends). A jitted agent trains in ``trainer``
        (one thread shared by the agents of a :class:`~nlbandit.service.fleet.Fleet`; default: its own).

        Raises:
          ConfigError: another service holds the folder; no configuration for a new folder, a configuration
            that differs from the stored one, or an invalid one; a damaged journal
            (:class:`~nlbandit.service.journal.JournalDamaged`), a snapshot of another folder or beyond the
            journal, or a journal whose replay does not reproduce its decisions. Nothing in the folder is
            changed then (a folder created by this call is removed).
        """
        folder = Path(folder)
        created = check_folder(folder, snapshot_every)
        folder.mkdir(parents=True, exist_ok=True)
        try:
            lock = lock_folder(folder)
        except BaseException:
            if created:  # (a full disk failed the pid's write: nothing is left behind)
                shutil.rmtree(folder, ignore_errors=True)
            raise
        try:
            return cls._recover(folder, config, snapshot_every, lock, trainer, first_event_id)
        except BaseException:
            os.close(lock)
            if created:  # (its agent.json too, where the journal's creation failed after it)
                shutil.rmtree(folder, ignore_errors=True)
            raise

    @classmethod
    def _recover(cls, folder: Path, config: dict[str, Any] | None, snapshot_every: int, lock: int,
                 trainer: concurrent.futures.Executor | None, first_event_id: int) -> "Service":
        stored = folder / "agent.json"
        if stored.exists():
            try:
                saved = json.loads(stored.read_text())
            except ValueError as e:
                raise ConfigError(f"{stored} is not valid JSON ({e}); restore it") from None
            folder_id = saved.pop("folder_id", None) if isinstance(saved, dict) else None
            if not isinstance(folder_id, str):
                raise ConfigError(f"{stored} has no folder id: it was written by an earlier nlbandit, whose journal "
                                  "format this version does not read; start a new folder")
            resolved, first_event_id = saved.pop("resolved", None), saved.pop("first_event_id", 1)
            if config is not None and config != saved:
                raise ConfigError(f"{folder} holds an agent configured as {saved}, not {config}; use another folder")
            config = saved
        elif config is None:
            raise ConfigError(f"{folder} holds no agent: give its policy, d and k (and optionally a horizon) to create "
                              "one")
        else:
            folder_id, resolved = uuid.uuid4().hex, None
        fresh = _warm_up(config, resolved, first_event_id)  # also checks the configuration before it is stored
        journal_path, snapshot_path = folder / "journal.log", folder / "snapshot.npz"
        contents = read_journal(journal_path, folder_id)  # checked whole before anything is written
        kept = segment_files(folder)
        base = contents.base if contents.base is not None else (kept[-1][1] if kept else 0)
        agent = _load_snapshot(snapshot_path, folder_id, fresh) if snapshot_path.exists() else fresh
        start = agent.meta.get("journal_records", 0)
        if start > base + len(contents.records):
            raise ConfigError(f"{folder}: the snapshot includes {start} journal records but the journal holds records "
                              f"{base + 1}..{base + len(contents.records)}; the journal or the snapshot was replaced. "
                              "Nothing was changed")
        earlier: list[dict[str, Any]] = []
        if start < base:  # no snapshot (moved away) or an older one: the records since are in the segments
            try:
                compacted = segments(folder, folder_id, start)
                reach = compacted[-1].base + len(compacted[-1].records) if compacted else start
                if reach != base:
                    raise JournalDamaged(f"the segments end at record {reach}, the journal starts after record {base}")
            except JournalDamaged as e:
                held = f"its snapshot includes {start}" if snapshot_path.exists() else "it has no snapshot"
                raise JournalDamaged(f"{folder}: the agent needs journal records {start + 1}..{base} from segments/ "
                                     f"({held}), which do not hold them: {e}. Restore the snapshot or those "
                                     "segments; nothing was changed") from None
            earlier = records_after(compacted, start)
        for i, record in enumerate(earlier + contents.records[max(start - base, 0):], start + 1):
            _replay(agent, record, i)
        if not stored.exists():  # with the hyperparameters as resolved today: later defaults do not change it
            resolved = {name: value for name, value in fresh.config.items() if name != "name"}
            write_bytes(stored, json.dumps({**config, "resolved": resolved, "folder_id": folder_id,
                                            "first_event_id": first_event_id}, indent=1).encode())
        journal, contents = Journal.open(journal_path, folder_id, base)
        recovered = (f"{agent.rounds} decisions and {agent.rewarded} rewards ({base + len(contents.records)} journal "
                     f"records, {start} of them in the snapshot, {base} in {len(kept)} compacted segments"
                     + (f", {len(earlier)} replayed from them)" if earlier else ")"))
        if contents.torn:
            recovered += f"; cut off the journal's torn tail, never acknowledged: {contents.torn}"
        left = sum(remove_leftovers(folder / name, older_than=0) for name in ("snapshot.npz", "agent.json"))
        if left:  # (the folder is locked: a temporary file here is one a killed process never renamed)
            recovered += f"; removed {left} temporary file(s) of a snapshot or configuration a crash cut short"
        return cls(folder, config, agent, journal, snapshot_every, lock, folder_id, recovered, trainer)

    def decide(self, body: Any) -> dict[str, Any]:
        """Apply and journal a ``/decide`` request (not yet durable: await :meth:`durable`)."""
        contexts, mask = _array(body, "contexts", 2), _optional_mask(body, "mask", 1)
        _known_fields(body, ("contexts", "mask"))
        self._check_ids(1)
        rounds = self.agent.rounds
        decision = self._agent_call(functools.partial(self.agent.decide, learn=not self.background), contexts, mask)
        self._record({"op": "decide", "x": encode_array(contexts), "m": None if mask is None else encode_array(mask),
                      "arm": decision.arm, "p": _finite_or_none(decision.probability), "v": self._version(rounds)})
        self.counts["decide"] += 1
        self.activity.decided([decision.arm])
        return _decision_json(decision)

    def decide_batch(self, body: Any) -> dict[str, Any]:
        """Apply and journal a ``/decide_batch`` request."""
        contexts, masks = _array(body, "contexts", 3), _optional_mask(body, "masks", 2)
        _known_fields(body, ("contexts", "masks"))
        if len(contexts) > MAX_BATCH:
            raise RequestError(413, f"a batch of {len(contexts)} decisions; at most {MAX_BATCH} per request")
        self._check_ids(len(contexts))
        rounds = self.agent.rounds
        decisions = self._agent_call(functools.partial(self.agent.decide_batch, learn=not self.background),
                                     contexts, masks)
        self._record({"op": "decide_batch", "x": encode_array(contexts), "v": self._version(rounds),
                      "m": None if masks is None else encode_array(masks), "arms": [d.arm for d in decisions],
                      "p": [_finite_or_none(d.probability) for d in decisions]})
        self.counts["decide"] += len(decisions)
        self.activity.decided([d.arm for d in decisions])
        return {"decisions": [_decision_json(d) for d in decisions]}

    def reward(self, body: Any) -> dict[str, Any]:
        """Apply and journal a ``/reward`` request (one reward or a batch, all or nothing)."""
        batch = isinstance(body, dict) and "rewards" in body
        if batch:
            _known_fields(body, ("rewards",))
        items = body["rewards"] if batch else [body]
        if not isinstance(items, list) or not items or not all(isinstance(r, dict) for r in items):
            raise RequestError(400, "'rewards' must be a non-empty list of {\"event_id\", \"value\"} objects")
        if len(items) > MAX_BATCH:
            raise RequestError(413, f"a batch of {len(items)} rewards; at most {MAX_BATCH} per request")
        ids, values, bounds = [], [], []
        for i, r in enumerate(items):
            where = f"rewards[{i}]." if batch else ""
            _known_fields(r, _REWARD_FIELDS, where)
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

    def _check_ids(self, n: int) -> None:
        """RequestError 409 where ``n`` more decisions would number past the end of the agent's block of event
        ids (:data:`EVENT_ID_BLOCK`), into ids another agent of the fleet may issue."""
        first, issued = self.agent.first_event_id, self.agent.first_event_id - 1 + self.agent.rounds
        last = ((first - 1) // EVENT_ID_BLOCK + 1) * EVENT_ID_BLOCK
        if issued + n > last:
            raise RequestError(409, f"{n} more decision(s) would number past this agent's block of event ids "
                                    f"({first}..{last}; issued up to {issued}): create another agent to go on")

    def _version(self, rounds: int) -> int | None:
        """In the background mode, the number of rewards in the state the decision just made used
        (:attr:`~nlbandit.agent.Agent.decided_with`, read with that state: the training thread may have learnt
        more since), journalled with it so that a replay learns exactly those first; and the staleness of the
        rewards it used for the first time (decisions since each arrived, ``rounds`` made before it). None
        otherwise."""
        if not self.background:
            return None
        version = self.agent.decided_with
        while self._used < version and self._arrivals:
            self.staleness.append(rounds - self._arrivals.popleft())
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
        if self.failed or self.closed:
            return
        if self.background:
            self._training = self._trainer.submit(self.agent.learn)
            await asyncio.wrap_future(self._training)
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
        ``/health``) and tried again at the next due record; a failing journal sync stops the service. None is
        taken once the service has failed: its agent may hold a request the journal refused, which the snapshot
        would keep (and a restart must recover without it)."""
        if self.failed:
            return False
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
        self.closed = True
        if self._owns_trainer:
            self._trainer.shutdown(wait=True)
        elif self._training is not None:
            concurrent.futures.wait([self._training])
        self.journal.close()
        os.close(self._lock)


def _new_agent(config: dict[str, Any], resolved: dict[str, Any] | None = None, first_event_id: int = 1) -> Agent:
    """A fresh agent of ``config`` (:func:`agent_config`), with the policy's hyperparameters ``resolved`` when its
    folder was created (``agent.json``'s, so that a later change of a default, e.g. the agent's practice defaults,
    leaves an existing agent as it was) and its event ids from ``first_event_id``; ConfigError if it is invalid."""
    return Agent(config["policy"], config["d"], config["k"], config["horizon"], config["seed"],
                 first_event_id=first_event_id, check_unread=resolved is None,  # (an existing agent as it was)
                 **{**config["hyperparameters"], **(resolved or {})})


def check_folder(folder: Path, snapshot_every: Any) -> bool:
    """Whether ``folder`` is to be created (it does not exist); ConfigError if it is not a folder or
    ``snapshot_every`` is not an integer >= 1."""
    if not isinstance(snapshot_every, int) or isinstance(snapshot_every, bool) or snapshot_every < 1:
        raise ConfigError(f"snapshot_every must be an integer >= 1, got {snapshot_every!r}")
    created = not folder.exists()
    if not created and not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder")
    return created


def lock_folder(folder: Path) -> int:
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
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except BaseException:  # (a full disk): the descriptor, and with it the lock, must not stay held
        os.close(fd)
        raise
    return fd


def _load_snapshot(path: Path, folder_id: str, scratch: Agent) -> Agent:
    """The agent saved in the folder's snapshot, which must be this folder's and of its configuration."""
    try:
        agent = Agent.load(path)
    except ValueError as e:
        raise ConfigError(f"{path}: {e}; move it away to recover from the journal and its segments") from None
    if agent.meta.get("folder") != folder_id:
        raise ConfigError(f"{path} was written by another state folder (copied here?); move it away to recover "
                          "from the journal and its segments")
    def identity(a: Agent) -> tuple:  # a horizon-free agent's horizon grows: not part of what it is
        return (a.config, a.spec.d, a.spec.k, a.seed, a.horizon_free, a.horizon_free or a.spec.horizon,
                a.first_event_id)

    if identity(agent) != identity(scratch):
        raise ConfigError(f"{path} holds a {agent.config['name']} agent that is not the one agent.json configures")
    return agent


_WARMED: set[str] = set()
"""The configurations (but their seeds) :func:`_warm_up` compiled in this process."""


WARM_UP_ROUNDS = 4
"""Rounds :func:`_warm_up` plays beyond the policy's warm-up plan: two with a mask, two without."""


def _warm_up(config: dict[str, Any], resolved: dict[str, Any] | None = None, first_event_id: int = 1) -> Agent:
    """Compile the agent's functions on a throwaway agent of ``config`` (compiled functions are shared by
    agents of the same policy and shapes), so that the first requests do not wait for compilation, once per
    configuration but its seed; return a fresh agent of ``config`` (:func:`_new_agent`), its event ids from
    ``first_event_id``. ConfigError if the configuration is invalid.

    The throwaway agent decides and learns through its policy's warm-up plan (:func:`_planned_rounds`) and
    :data:`WARM_UP_ROUNDS` rounds more, every other one with a mask: the rounds after a plan and masked rounds
    run functions of their own (a host round's numba functions compile once per argument type, a mask or
    none; GLM-TSL's first decision after its plan compiled for 2.8 s in the request that made it, before)."""
    key = json.dumps({**config, "seed": None, "resolved": resolved}, sort_keys=True, default=repr)
    if key in _WARMED:
        return _new_agent(config, resolved, first_event_id)
    scratch = _new_agent(config, resolved)
    k, d = config["k"], config["d"]
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (k, d)) / (2.0 * math.sqrt(d))  # features of norm <= 1/2
    offered = np.ones(k, bool)
    low, high = scratch.policy.meta.requires.reward_range or (0.0, 0.0)
    value = min(max(0.0, low), high)
    bound = 0.0 if scratch.policy.meta.requires.noise_level else None

    def play(t: int) -> None:
        scratch.reward(scratch.decide(x, offered if t % 2 == 0 else None).event_id, value, bound)

    try:
        play(1)  # the plan is made at the first decision
        for t in range(2, _planned_rounds(scratch) + WARM_UP_ROUNDS + 1):
            play(t)
    except (ValueError, PolicyDiverged):
        pass  # a policy that refuses (or diverges on) the dummy rounds compiles on the first requests instead
    _WARMED.add(key)
    return _new_agent(config, resolved, first_event_id)


def _planned_rounds(agent: Agent) -> int:
    """The length of ``agent``'s warm-up plan (:class:`~nlbandit.policies.warmup.Warmup` records in its state), 0
    for a policy without one."""
    plans = [leaf for leaf in jax.tree.leaves(agent.state, is_leaf=lambda a: isinstance(a, Warmup))
             if isinstance(leaf, Warmup)]
    return max((int(plan.length) for plan in plans), default=0)


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
    if a.size == 0:
        raise RequestError(400, f"field {name!r} is empty; give at least one "
                                + ("set of contexts" if ndim == 3 else "arm"))
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


_REWARD_FIELDS = ("event_id", "value", "variance_bound")


def _known_fields(body: dict, allowed: tuple[str, ...], where: str = "") -> None:
    """RequestError 400 naming the fields of ``body`` that are not among ``allowed`` (a misspelt ``mask`` would
    otherwise be ignored, and a masked-out arm chosen)."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise RequestError(400, f"unknown field(s) {', '.join(repr(where + u) for u in unknown)}; expected "
                                f"{', '.join(repr(where + a) for a in allowed)}")


def _required(r: dict, name: str, where: str) -> Any:
    if name not in r:
        raise RequestError(400, f"field '{where}{name}' is required")
    return r[name]


def _integer(r: dict, name: str, where: str) -> int:
    v = _required(r, name, where)
    if isinstance(v, float) and v.is_integer() and abs(v) >= 2**63:  # (parse_json: beyond 64 bits)
        raise RequestError(400, f"field '{where}{name}' must be an integer of at most 64 bits, got one of about "
                                f"{v:.3g}")
    if not isinstance(v, int) or isinstance(v, bool):
        raise RequestError(400, f"field '{where}{name}' must be an integer, got {v!r}")
    return v


def _number(r: dict, name: str, where: str) -> float:
    v = _required(r, name, where)
    if type(v) not in (int, float) or not abs(v) <= MAX_MAGNITUDE:
        raise RequestError(400, f"field '{where}{name}' must be a number of magnitude at most {MAX_MAGNITUDE:g}, "
                                f"got {v!r}")
    return float(v)


__all__ = ["MAX_BATCH", "MAX_BODY", "RequestError", "Service", "agent_config", "check_folder", "lock_folder",
           "parse_json"]
