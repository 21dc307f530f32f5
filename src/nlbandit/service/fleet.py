"""The named agents of one ``nlbandit serve``: created, served, removed and recovered one by one.

State folder ``DIR`` (held by one process at a time):

* ``lock``: locked (``flock``) by the service holding the folder, with its pid (a second service on the
  folder is refused; the lock goes with the process, also after ``kill -9``);
* ``agents/<name>/``: one agent's folder (:class:`~nlbandit.service.app.Service`: its ``agent.json``,
  journal, snapshots and segments), so each agent is journalled, snapshotted, compacted and recovered on its
  own;
* ``deleted/``: agents being removed. A removal renames the agent's folder into it (atomic, synced) before
  answering, then deletes it; start-up finishes a removal a crash interrupted;
* ``event_ids.json``: ``{"next_block": n}``, the first block of event ids
  (:data:`~nlbandit.service.app.EVENT_ID_BLOCK`, 2**36 ids) no agent of the folder has been given. Each new agent
  gets block n, ids n·2**36 + 1 .., and the file says n + 1 (written atomically) before the agent's folder is
  created, so no two agents created with this file, removed ones included, issue the same event id: a reward
  sent to the wrong agent's route, or a late one for a removed agent's event sent to a new agent of its name, is
  refused (404) instead of being learnt for another decision. A fresh folder's first agent numbers from 1. A
  folder of an earlier version keeps its agents' ids (numbered from 1 each, so those agents still share theirs),
  and new agents start past every block that its agents and its ``retired/<name>.json`` files (the first id
  after a removed agent's, which that version kept per name) have reached. The file is part of the folder's
  state, as the journals are: a folder restored without it gives blocks of agents removed since again.

An agent exists once its folder holds ``agent.json`` (written atomically before ``PUT /agents/{name}`` is
answered). Start-up recovers every agent independently: one that cannot be recovered (a damaged journal, a
foreign snapshot) is listed with the reason and answers 503, its files left as they were, while the others
serve; a folder that a crash left before its ``agent.json`` (a creation never answered, holding no journal)
is removed.

Jitted agents (networks) share one training thread, so their training takes one core however many there are.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any

from nlbandit.agent import MAX_EVENT_ID
from nlbandit.atomic import sync_folder, write_bytes
from nlbandit.core.hyper import ConfigError
from nlbandit.service.app import (CONFIG_FIELDS, EVENT_ID_BLOCK, RequestError, Service, agent_config,
                                  check_folder, check_hyperparameter_names, lock_folder)

DEFAULT = "default"
"""The agent that the unprefixed routes (``/decide``, ``/reward``, ``/decide_batch``, ``/health``) serve, and
that ``nlbandit serve DIR --policy P --d D --k K`` creates."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""An agent's name: 1 to 64 letters, digits, ``_``, ``.`` or ``-``, starting with a letter or digit."""
BLOCKS = "event_ids.json"
"""The state folder's file of the next block of event ids to give an agent (module docstring)."""
MAX_BLOCKS = MAX_EVENT_ID // EVENT_ID_BLOCK
"""How many blocks of event ids a state folder can give out, so how many agents it can create (2**16: ids stay
within 2**52, exact in a JSON client's double)."""
_FIELDS = dict(zip(CONFIG_FIELDS, (str, int, int, (int, type(None)), int, dict)))  # (each field's JSON type)
BUSY_RETRY = 1
"""The seconds a request for an agent being created or removed is told to wait before it is sent again (503,
``Retry-After``)."""
MAX_ARM_NUMBERS = 2**22
"""The most numbers of one decision's contexts, d × k, for an agent created through the service (4,194,304:
what an 8 MiB body can carry at two bytes a number). Larger sizes are refused before the agent is built: a large
k alone allocated k booleans, and the warm-up k × d floats, before the agent's own checks (which bound each size
by 2**31 - 1, :mod:`nlbandit.arguments`)."""


def check_name(name: Any) -> str:
    """``name`` if it is a valid agent name (:data:`NAME`); else RequestError 400 naming the expected form."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise RequestError(400, f"agent name {name!r}: expected 1 to 64 letters, digits, '_', '.' or '-', starting "
                                "with a letter or digit")
    return name


def config_of(body: Any) -> dict[str, Any]:
    """The agent configuration (:func:`~nlbandit.service.app.agent_config`) of a ``PUT /agents/{name}`` body
    ``{"policy", "d", "k", "horizon"?, "seed"?, "hyperparameters"?}``; RequestError 400 naming the field that is
    missing, unknown or of the wrong type (the values themselves are checked by the agent)."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request must be a JSON object {\"policy\", \"d\", \"k\", \"horizon\"?, "
                                "\"seed\"?, \"hyperparameters\"?}")
    unknown = sorted(set(body) - set(_FIELDS))
    if unknown:
        raise RequestError(400, f"unknown field(s) {unknown}; expected {sorted(_FIELDS)}")
    for name in ("policy", "d", "k"):
        if name not in body:
            raise RequestError(400, f"field {name!r} is required")
    for name, kind in _FIELDS.items():
        if name in body and (not isinstance(body[name], kind) or isinstance(body[name], bool)):
            expected = {"policy": "a policy name", "hyperparameters": "an object of name: value",
                        "horizon": "an integer or null"}.get(name, "an integer")
            raise RequestError(400, f"field {name!r} must be {expected}, got {body[name]!r}")
    hyperparameters = body.get("hyperparameters", {})
    try:
        check_hyperparameter_names(hyperparameters, "field 'hyperparameters'")
    except ConfigError as e:
        raise RequestError(400, str(e)) from None
    return agent_config(body["policy"], body["d"], body["k"], body.get("horizon"), body.get("seed", 0),
                        **hyperparameters)


def check_sizes(config: dict[str, Any]) -> None:
    """RequestError 400 where a new agent's d × k is beyond :data:`MAX_ARM_NUMBERS`, before anything is allocated;
    the agent checks the rest (each size, its memory)."""
    d, k = config["d"], config["k"]
    if isinstance(d, int) and isinstance(k, int) and d >= 1 and k >= 1 and d * k > MAX_ARM_NUMBERS:
        raise RequestError(400, f"d × k = {d} × {k} numbers per decision; at most {MAX_ARM_NUMBERS} (an agent of "
                                "the service takes its contexts in one request body)")


class Fleet:
    """The named agents (:class:`~nlbandit.service.app.Service`) of a state folder (module docstring);
    :meth:`open` builds one."""

    def __init__(self, folder: Path, lock: int, snapshot_every: int):
        self.folder, self._lock, self.snapshot_every = folder, lock, snapshot_every
        self.agents: dict[str, Service] = {}
        self.unavailable: dict[str, str] = {}  # agents start-up could not recover, and why
        self.recovered: list[str] = []  # what start-up did beyond recovering the agents
        self._busy: set[str] = set()  # names being created or removed
        self.trainer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nlbandit-training")
        # Creations (seconds of warm-up each) run here, not in the event loop's default executor, where the
        # journals' syncs run: else enough creations at once held every agent's decisions and rewards up.
        self.builder = concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="nlbandit-create")
        self._next_block = 0  # the first block of event ids not given to an agent (set by _recover)
        self._blocks_lock = threading.Lock()  # creations take blocks in the builder's threads

    @classmethod
    def open(cls, folder: str | os.PathLike, agents: dict[str, dict[str, Any]] | None = None,
             snapshot_every: int = 1000) -> "Fleet":
        """The service of ``folder`` with every agent it holds recovered, and the agents of ``agents`` (name:
        :func:`~nlbandit.service.app.agent_config`) created where missing (an existing one must have that
        configuration). The folder stays locked until :meth:`close`.

        Raises:
          ConfigError: another service holds the folder; a folder of the earlier one-agent layout; a damaged
            :data:`BLOCKS` or ``retired/`` record, or a :data:`BLOCKS` that cannot be written; an invalid name or
            configuration in ``agents``, or one that differs from the stored agent's. Nothing is left behind in a
            folder this call created.
        """
        folder = Path(folder)
        created = check_folder(folder, snapshot_every)
        if (folder / "agent.json").exists():
            raise ConfigError(f"{folder} is a state folder of the earlier one-agent layout: move its files into "
                              f"{folder / 'agents' / DEFAULT}/ (the agent the unprefixed routes serve)")
        folder.mkdir(parents=True, exist_ok=True)
        fleet = cls(folder, lock_folder(folder), snapshot_every)
        try:
            fleet._recover()
            for name, config in (agents or {}).items():
                if name in fleet.unavailable:  # it exists; unavailable like the others start-up could not recover
                    continue
                try:
                    fleet.create(check_name(name), config)
                except RequestError as e:
                    raise ConfigError(str(e)) from None
        except BaseException:
            fleet.close()
            if created:
                shutil.rmtree(folder, ignore_errors=True)
            raise
        return fleet

    def _recover(self) -> None:
        for gone in sorted((self.folder / "deleted").glob("*")):
            shutil.rmtree(gone)
            self.recovered.append(f"finished removing {gone.name}")
        (self.folder / "agents").mkdir(exist_ok=True)
        for path in sorted((self.folder / "agents").iterdir()):
            if not path.is_dir() or not NAME.fullmatch(path.name):
                continue
            if not (path / "agent.json").exists() and not (path / "journal.log").exists():
                shutil.rmtree(path)  # a creation the crash cut short: never answered, no journal
                self.recovered.append(f"removed {path.name}, whose creation was never completed")
                continue
            try:
                self.agents[path.name] = Service.open(path, None, self.snapshot_every, self.trainer)
            except ConfigError as e:
                self.unavailable[path.name] = str(e)
            except Exception as e:  # noqa: BLE001 -- whatever is wrong with one agent's files must not stop the others
                self.unavailable[path.name] = f"{path}: {type(e).__name__}: {e}"
        stored = self._stored_blocks()
        self._next_block = max(stored or 0, self._blocks_reached(), self._blocks_of_agents())
        if self._next_block > (stored or 0):  # before any removal could take the agents' record with it
            try:
                self._write_blocks(self._next_block)
            except OSError as e:
                raise ConfigError(f"{self.folder / BLOCKS} could not be written ({e}); the service cannot give new "
                                  "agents event ids apart from its agents' without it") from None
            self.recovered.append(f"event ids of new agents from block {self._next_block}")

    def _stored_blocks(self) -> int | None:
        """The next block of :data:`BLOCKS`, None where there is no such file; ConfigError for a damaged one."""
        path = self.folder / BLOCKS
        if not path.exists():
            return None
        found = _integer_in(path, "next_block", 0, MAX_BLOCKS)
        if not isinstance(found, int):
            raise ConfigError(f'{path} does not hold {{"next_block": an integer in [0, {MAX_BLOCKS}]}} ({found}): '
                              "restore it (it keeps the event ids of new agents apart from those of the agents "
                              "created before)")
        return found

    def _first_id(self, name: str) -> int | None:
        """The first event id in the ``agent.json`` of the agent ``name``; None where it cannot be read."""
        found = _integer_in(self.folder / "agents" / name / "agent.json", "first_event_id", 1, MAX_EVENT_ID, 1)
        return found if isinstance(found, int) else None

    def _blocks_of_agents(self) -> int:
        """One past the last block of event ids that the agents start-up recovered have reached."""
        reached = 0
        for service in self.agents.values():
            last = service.agent.first_event_id - 1 + max(service.agent.rounds, 1)
            reached = max(reached, _block(last) + 1)
        return min(reached, MAX_BLOCKS)

    def _blocks_reached(self) -> int:
        """One past the blocks that the agents start-up could not recover (their decisions unknown: the block of
        their first id and the next; that id from ``agent.json``, else their name's retired id, else 1) and the
        removed agents of an earlier version (``retired/<name>.json``, the first id after those of the removed
        agents of a name, which that version wrote) have reached; ConfigError for a retired file that does not
        say."""
        reached = 0
        retired = {}
        for path in sorted((self.folder / "retired").glob("*.json")):
            first = _integer_in(path, "first_free", 1, MAX_EVENT_ID)
            if not isinstance(first, int):
                raise ConfigError(f'{path} does not hold {{"first_free": an integer in [1, 2**52]}} ({first}): '
                                  "restore it, or delete it if no late reward of a removed agent of that name will "
                                  "come")
            retired[path.stem] = first
            reached = max(reached, _block(first - 1) + 1)
        for name in self.unavailable:
            reached = max(reached, _block(self._first_id(name) or retired.get(name, 1)) + 2)
        return min(reached, MAX_BLOCKS)

    def _write_blocks(self, next_block: int) -> None:
        write_bytes(self.folder / BLOCKS, json.dumps({"next_block": next_block}).encode())

    def _take_block(self) -> int:
        """The first id of a block of event ids of its own for a new agent, recorded (durably) as given before
        the agent's folder is created; RequestError 503 when every block has been given."""
        with self._blocks_lock:
            block = self._next_block
            if block >= MAX_BLOCKS:
                raise RequestError(503, f"every one of the {MAX_BLOCKS} blocks of event ids of {self.folder} has been "
                                        "given to an agent: start a new state folder")
            try:
                self._write_blocks(block + 1)
            except OSError as e:
                raise RequestError(503, f"{self.folder / BLOCKS} could not be written ({e}); no agent was "
                                        "created") from None
            self._next_block = block + 1
        return block * EVENT_ID_BLOCK + 1

    def _return_block(self, first: int, name: str) -> None:
        """Give back the block of ``first`` that the creation of ``name`` took and failed, where no creation took
        one after it and nothing of the agent's folder is left (else it stays unused: a block is never given
        twice)."""
        block = _block(first)
        with self._blocks_lock:
            if self._next_block == block + 1 and not (self.folder / "agents" / name).exists():
                with contextlib.suppress(OSError):
                    self._write_blocks(block)
                    self._next_block = block

    def service(self, name: str) -> Service:
        """The agent named ``name``; RequestError 404 (no such agent) or 503 (being created or removed, with a
        time to retry after; start-up could not recover it, with the reason)."""
        found = self.agents.get(name)
        if found is not None:
            return found
        if name in self._busy:  # (passing: 503 with the time to wait, not 409, which a client reads as final)
            raise RequestError(503, f"agent {name!r} is being created or removed; try again", BUSY_RETRY)
        if name in self.unavailable:
            raise RequestError(503, f"agent {name!r} could not be recovered: {self.unavailable[name]}")
        hint = " (create it: PUT /agents/default, or nlbandit serve DIR --policy ...)" if name == DEFAULT else ""
        raise RequestError(404, f"no agent named {name!r}{hint}; GET /agents lists them")

    def _exists(self, name: str, config: dict[str, Any]) -> bool:
        """Whether the agent ``name`` exists with ``config``; RequestError 409 for one of another configuration,
        503 for one being created or removed or that start-up could not recover, 400 for an invalid name."""
        check_name(name)
        if name not in self.agents and name not in self.unavailable and name not in self._busy:
            return False
        if self.service(name).config != config:
            raise RequestError(409, f"agent {name!r} exists with another configuration ({self.agents[name].config}); "
                                    "remove it first")
        return True

    def _new(self, name: str, config: dict[str, Any]) -> Service:
        """The new agent ``name``, its folder's creation synced; RequestError 400 for an invalid configuration
        (nothing left behind)."""
        check_sizes(config)
        first = self._take_block()
        try:
            service = Service.open(self.folder / "agents" / name, config, self.snapshot_every, self.trainer, first)
        except (ConfigError, ValueError, TypeError) as e:
            self._return_block(first, name)
            raise RequestError(400, str(e)) from None
        except BaseException:
            self._return_block(first, name)
            raise
        sync_folder(self.folder / "agents")
        return service

    def create(self, name: str, config: dict[str, Any]) -> bool:
        """Create the agent ``name`` with ``config`` (durable when this returns); return False if it exists
        already with that configuration (a resent ``PUT``).

        Raises:
          RequestError: 409 for an agent of another configuration, 503 for one being created or removed, for
            one start-up could not recover or for a folder that has given every block of event ids or whose
            :data:`BLOCKS` cannot be written, 400 for an invalid name or configuration.
          OSError: the agent's folder could not be written (nothing is left of it).
        """
        if self._exists(name, config):
            return False
        self.agents[name] = self._new(name, config)
        return True

    async def create_async(self, name: str, config: dict[str, Any]) -> bool:
        """:meth:`create` with the agent built in a worker thread (compiling a new policy takes seconds) while
        the other agents serve."""
        if self._exists(name, config):
            return False
        self._busy.add(name)
        try:
            service = await asyncio.get_running_loop().run_in_executor(self.builder, self._new, name, config)
        finally:
            self._busy.discard(name)
        self.agents[name] = service
        return True

    async def remove(self, name: str) -> None:
        """Remove the agent ``name`` and its files (durable when this returns: its folder has been renamed
        into ``deleted/``); requests already accepted for it finish first.

        Raises:
          RequestError: 404 for no such agent, 503 for one being created or removed.
        """
        check_name(name)
        if name not in self.agents and name not in self.unavailable:
            self.service(name)  # raises 404, or 503 while it is being created or removed
        self._busy.add(name)
        try:
            service = self.agents.pop(name, None)
            why = self.unavailable.pop(name, None)
            closed = False
            try:
                if service is not None:
                    await service.journal.durable()
                    closed = True
                    await asyncio.get_running_loop().run_in_executor(None, service.close)
                gone = self.folder / "deleted" / f"{name}.{uuid.uuid4().hex[:8]}"
                gone.parent.mkdir(exist_ok=True)
                os.rename(self.folder / "agents" / name, gone)
            except OSError:  # its folder was not moved: the agent stays, as it was (reopened if it was closed)
                await self._reinstate(name, service, closed, why)
                raise
            sync_folder(self.folder / "agents")
        finally:
            self._busy.discard(name)
        await asyncio.get_running_loop().run_in_executor(None, shutil.rmtree, gone)

    async def _reinstate(self, name: str, service: Service | None, closed: bool, why: str | None) -> None:
        """Put back the agent ``name`` whose removal failed before its folder moved: the open ``service``, else
        the agent reopened from its folder (unavailable, with the reason, if that fails)."""
        if service is None:
            if why is not None:
                self.unavailable[name] = why
            return
        if not closed:
            self.agents[name] = service
            return
        try:
            self.agents[name] = await asyncio.get_running_loop().run_in_executor(
                self.builder, Service.open, self.folder / "agents" / name, None, self.snapshot_every, self.trainer)
        except Exception as e:  # noqa: BLE001 -- whatever it is, the agent is listed with it rather than lost
            self.unavailable[name] = f"its removal failed, and reopening it failed: {type(e).__name__}: {e}"

    def listing(self) -> list[dict[str, Any]]:
        """Every agent with its configuration and counters (``GET /agents``), the unavailable ones with why."""
        found = [{"name": name, **s.config, "rounds": s.agent.rounds, "rewarded": s.agent.rewarded,
                  "status": "failed: " + s.failed if s.failed else "ok"} for name, s in self.agents.items()]
        found += [{"name": name, "status": "unavailable: " + why} for name, why in self.unavailable.items()]
        return sorted(found, key=lambda a: a["name"])

    def close(self) -> None:
        """Close every agent (finishing their training), then release the folder."""
        for service in self.agents.values():
            with contextlib.suppress(OSError):
                service.close()
        self.agents.clear()
        self.builder.shutdown(wait=True)
        self.trainer.shutdown(wait=True)
        os.close(self._lock)


def _integer_in(path: Path, key: str, low: int, high: int, default: int | None = None) -> int | str:
    """The integer ``key`` of the JSON object in ``path`` if it lies in [low, high] (``default`` where the object
    lacks the key); else a string saying what is wrong (the file cannot be read, or what it holds)."""
    try:
        found = json.loads(path.read_text()).get(key, default)
    except OSError as e:
        return f"it cannot be read: {e}"
    except (ValueError, AttributeError):
        return "not a JSON object"
    if not isinstance(found, int) or isinstance(found, bool) or not low <= found <= high:
        return f"{key!r} is {found!r}"
    return found


def _block(event_id: int) -> int:
    """The block of event ids (:data:`~nlbandit.service.app.EVENT_ID_BLOCK`) that ``event_id`` is in (ids from 1)."""
    return (event_id - 1) // EVENT_ID_BLOCK


__all__ = ["BLOCKS", "DEFAULT", "Fleet", "MAX_ARM_NUMBERS", "MAX_BLOCKS", "NAME", "check_name", "check_sizes",
           "config_of"]
