"""A small Python client of ``nlbandit serve`` (standard library only), whose retries are safe.

    client = Client("http://127.0.0.1:8000", token=None)
    decision = client.decide(contexts)                # {"event_id", "arm", "probability", "method", ...}
    client.reward(decision["event_id"], 1.0)          # True: counted now; False: it had counted already

    client.create_agent("search", "lin-ts", d=20, k=50)  # True: created; False: it existed, same configuration
    search = Client("http://127.0.0.1:8000", agent="search")  # the named agent's routes
    client.agents()                                   # every agent with its configuration and counters

Without ``agent``, a client uses the unprefixed routes, which serve the agent named ``default``.

Retries. A request whose connection failed before an answer is sent again, up to ``retries`` times with a
growing pause. A reward is safe to resend: the service learns an event once and answers 409 to a second
copy, which :meth:`Client.reward` reports as "already counted" (False) instead of an error, so a reward whose
first answer was lost counts exactly once either way. A decision is not idempotent (a resent one is a new
event, the first left pending), so :meth:`Client.decide` retries only when the connection was refused, before
anything reached the service. Every request answered 503 with ``Retry-After`` (an agent being created or removed:
nothing of the request was applied) is sent again after that many seconds, up to ``retries`` times, so a
reward or a decision sent while its agent is being created still counts once, and a resent creation that meets its
first copy still building finds it built. Any other refusal raises :class:`ServiceError` with the service's
message and status.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Sequence


class ServiceError(RuntimeError):
    """A request the service refused: ``status`` (HTTP) and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


class Client:
    """A client of the service at ``url`` (module docstring); ``token`` for a service that requires one;
    ``agent``: the named agent whose routes it uses (default: the agent ``default``)."""

    def __init__(self, url: str, token: str | None = None, *, agent: str | None = None, timeout: float = 30.0,
                 retries: int = 3, backoff: float = 0.2):
        self.url, self.timeout, self.retries, self.backoff = url.rstrip("/"), timeout, retries, backoff
        self._prefix = "" if agent is None else f"/agents/{urllib.parse.quote(agent, safe='')}"
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"

    def _call(self, method: str, path: str, body: Any = None, *, resend: bool) -> tuple[int, Any]:
        """(status, JSON reply); connection failures retried (all of them with ``resend``, else only refused
        connections, where nothing reached the service), and 503 answers with ``Retry-After`` (module
        docstring)."""
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(self.url + path, data, self._headers, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as reply:
                    return reply.status, json.loads(reply.read())
            except urllib.error.HTTPError as e:
                wait = e.headers.get("Retry-After", "") if e.code == 503 else ""
                if wait.isdigit() and attempt < self.retries:  # nothing of it applied: send it again then
                    time.sleep(min(int(wait), self.timeout))
                    continue
                try:
                    return e.code, json.loads(e.read())
                except ValueError:
                    return e.code, {"error": e.reason}
            except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
                reason = getattr(e, "reason", e)
                refused = isinstance(reason, ConnectionRefusedError) or isinstance(e, ConnectionRefusedError)
                if attempt == self.retries or not (resend or refused):
                    raise
                time.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")

    @staticmethod
    def _ok(status: int, reply: Any) -> Any:
        if status not in (200, 201):
            raise ServiceError(status, reply.get("error", "") if isinstance(reply, dict) else str(reply))
        return reply

    def decide(self, contexts: Sequence, mask: Sequence[bool] | None = None) -> dict[str, Any]:
        """One decision among ``contexts`` (K lists of d numbers): the service's reply."""
        body = {"contexts": _plain(contexts)} | ({} if mask is None else {"mask": _plain(mask)})
        return self._ok(*self._call("POST", self._prefix + "/decide", body, resend=False))

    def decide_batch(self, contexts: Sequence, masks: Sequence | None = None) -> list[dict[str, Any]]:
        """B decisions on the current state: the service's replies."""
        body = {"contexts": _plain(contexts)} | ({} if masks is None else {"masks": _plain(masks)})
        return self._ok(*self._call("POST", self._prefix + "/decide_batch", body, resend=False))["decisions"]

    def reward(self, event_id: int, value: float, variance_bound: float | None = None) -> bool:
        """Give event ``event_id`` its reward; True if it counted now, False if it had counted already (a
        resent reward: safe to call again after any failure)."""
        body = {"event_id": _plain(event_id), "value": _plain(value)} | (
            {} if variance_bound is None else {"variance_bound": _plain(variance_bound)})
        status, reply = self._call("POST", self._prefix + "/reward", body, resend=True)
        if status == 409:
            return False
        self._ok(status, reply)
        return True

    def health(self) -> dict[str, Any]:
        """The agent's counters and status."""
        return self._ok(*self._call("GET", self._prefix + "/health", resend=True))

    def create_agent(self, name: str, policy: str, d: int, k: int, horizon: int | None = None, seed: int = 0,
                     **hyperparameters: Any) -> bool:
        """Create the agent ``name``; True if created now, False if it existed with this configuration (safe
        to resend); ServiceError 409 for an agent of that name with another configuration."""
        body = {"policy": policy, "d": d, "k": k, "horizon": horizon, "seed": seed, "hyperparameters": hyperparameters}
        status, reply = self._call("PUT", f"/agents/{urllib.parse.quote(name, safe='')}", body, resend=True)
        return self._ok(status, reply)["created"]

    def agents(self) -> list[dict[str, Any]]:
        """Every agent of the service with its configuration, counters and status."""
        return self._ok(*self._call("GET", "/agents", resend=True))["agents"]

    def remove_agent(self, name: str) -> None:
        """Remove the agent ``name`` and its files (ServiceError 404 if there is none)."""
        self._ok(*self._call("DELETE", f"/agents/{urllib.parse.quote(name, safe='')}", resend=False))


def _plain(values: Any) -> Any:
    """NumPy arrays and scalars as JSON lists and numbers."""
    return values.tolist() if hasattr(values, "tolist") else values


__all__ = ["Client", "ServiceError"]
