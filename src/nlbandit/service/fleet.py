"""The named agents of one ``nlbandit serve``: created, served, removed and recovered one by one.

State folder ``DIR`` (held by one process at a time):

* ``lock``: locked (``flock``) by the service holding the folder, with its pid (a second service on the
  folder is refused; the lock goes with the process, also after ``kill -9``);
* ``agents/<name>/``: one agent's folder (:class:`~nlbandit.service.app.Service`: its ``agent.json``,
  journal, snapshots and segments), so each agent is journalled, snapshotted, compacted and recovered on its
  own;
* ``deleted/``: agents being removed. A removal renames the agent's folder into it (atomic, synced) before
  answering, then deletes it; start-up finishes a removal a crash interrupted;
* ``retired/<name>.json``: the first event id free after the agents of that name removed so far, written
  (atomically) before a removal's rename. An agent created under the name later numbers its decisions from
  there, so a late or resent reward for a removed agent's event is refused (404) instead of being learnt for
  another decision. Where the removed agent could not be recovered (its decisions unknown), the ids jump by
  :data:`UNKNOWN_DECISIONS`.

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
import uuid
from pathlib import Path
from typing import Any

from nlbandit.agent import MAX_EVENT_ID
from nlbandit.atomic import sync_folder, write_bytes
from nlbandit.core.hyper import ConfigError
from nlbandit.service.app import RequestError, Service, agent_config, check_folder, lock_folder

DEFAULT = "default"
"""The agent that the unprefixed routes (``/decide``, ``/reward``, ``/decide_batch``, ``/health``) serve, and
that ``nlbandit serve DIR --policy P --d D --k K`` creates."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
"""An agent's name: 1 to 64 letters, digits, ``_``, ``.`` or ``-``, starting with a letter or digit."""
UNKNOWN_DECISIONS = 2**32
"""How far the event ids of an agent created after the removal of an unrecoverable one of its name start beyond
its first event id (its number of decisions cannot be read)."""
_FIELDS = {"policy": str, "d": int, "k": int, "horizon": (int, type(None)), "seed": int, "hyperparameters": dict}
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
    reserved = sorted(set(hyperparameters) & set(_FIELDS))
    if reserved:
        raise RequestError(400, f"field 'hyperparameters' must not hold {reserved}: give them as fields of their own")
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

    @classmethod
    def open(cls, folder: str | os.PathLike, agents: dict[str, dict[str, Any]] | None = None,
             snapshot_every: int = 1000) -> "Fleet":
        """The service of ``folder`` with every agent it holds recovered, and the agents of ``agents`` (name:
        :func:`~nlbandit.service.app.agent_config`) created where missing (an existing one must have that
        configuration). The folder stays locked until :meth:`close`.

        Raises:
          ConfigError: another service holds the folder; a folder of the earlier one-agent layout; an invalid
            name or configuration in ``agents``, or one that differs from the stored agent's. Nothing is left
            behind in a folder this call created.
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

    def service(self, name: str) -> Service:
        """The agent named ``name``; RequestError 404 (no such agent), 409 (being created or removed) or 503
        (start-up could not recover it, with the reason)."""
        found = self.agents.get(name)
        if found is not None:
            return found
        if name in self._busy:
            raise RequestError(409, f"agent {name!r} is being created or removed; try again")
        if name in self.unavailable:
            raise RequestError(503, f"agent {name!r} could not be recovered: {self.unavailable[name]}")
        hint = " (create it: PUT /agents/default, or nlbandit serve DIR --policy ...)" if name == DEFAULT else ""
        raise RequestError(404, f"no agent named {name!r}{hint}; GET /agents lists them")

    def _exists(self, name: str, config: dict[str, Any]) -> bool:
        """Whether the agent ``name`` exists with ``config``; RequestError 409 for one of another configuration
        or being created or removed, 503 for one start-up could not recover, 400 for an invalid name."""
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
        first = self._first_free(name)
        try:
            service = Service.open(self.folder / "agents" / name, config, self.snapshot_every, self.trainer, first)
        except (ConfigError, ValueError, TypeError) as e:
            raise RequestError(400, str(e)) from None
        sync_folder(self.folder / "agents")
        return service

    def create(self, name: str, config: dict[str, Any]) -> bool:
        """Create the agent ``name`` with ``config`` (durable when this returns); return False if it exists
        already with that configuration (a resent ``PUT``).

        Raises:
          RequestError: 409 for an agent of another configuration (or one being created or removed), 503 for
            one start-up could not recover, 400 for an invalid name or configuration.
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
          RequestError: 404 for no such agent, 409 for one being created or removed.
        """
        check_name(name)
        if name not in self.agents and name not in self.unavailable:
            self.service(name)  # raises 404 or 409
        previous = self._first_free(name)  # (a damaged record refuses the removal before anything changes)
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
                self._retire(name, service, previous)
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

    def _first_free(self, name: str) -> int:
        """The first event id after those of the agents named ``name`` removed so far (1 for none)."""
        path = self.folder / "retired" / f"{name}.json"
        if not path.exists():
            return 1
        try:
            first = json.loads(path.read_text())["first_free"]
        except (OSError, ValueError, KeyError, TypeError):
            first = None
        if not isinstance(first, int) or isinstance(first, bool) or not 1 <= first <= MAX_EVENT_ID:
            raise RequestError(503, f"{path} does not hold {{\"first_free\": an integer in [1, 2**52]}}: restore "
                                    "it, or delete it to number the events of a new agent of this name from 1 again")
        return first

    def _retire(self, name: str, service: Service | None, previous: int) -> None:
        """Record (atomically, durably) the first event id after those of the agent ``name`` being removed (whose
        own first id was at least ``previous``): after its last decision, or :data:`UNKNOWN_DECISIONS` beyond its
        first id where it could not be recovered."""
        if service is not None:
            first_free = service.agent.first_event_id + service.agent.rounds
        else:
            try:
                first = json.loads((self.folder / "agents" / name / "agent.json").read_text()).get("first_event_id", 1)
            except (OSError, ValueError, AttributeError):
                first = None
            if not isinstance(first, int) or isinstance(first, bool):
                first = previous
            first_free = min(max(first, previous) + UNKNOWN_DECISIONS, MAX_EVENT_ID)
        retired = self.folder / "retired"
        if not retired.is_dir():
            retired.mkdir()
            sync_folder(self.folder)
        write_bytes(retired / f"{name}.json", json.dumps({"first_free": first_free}).encode())

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


__all__ = ["DEFAULT", "Fleet", "MAX_ARM_NUMBERS", "NAME", "check_name", "check_sizes", "config_of"]
