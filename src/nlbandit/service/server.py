"""``nlbandit serve``: the named agents of a state folder (:class:`~nlbandit.service.fleet.Fleet`) over HTTP.

API (JSON bodies; errors are ``{"error": message}`` with a 4xx status, never a 500 for bad input, a path no
route serves and a method a route does not take included; numbers are JSON numbers (no strings, booleans, NaN or
infinities) within the agent's bounds (:data:`~nlbandit.agent.MAX_MAGNITUDE`); a field a route does not take is
refused; an agent whose state diverged answers 503, and so does, with ``Retry-After``, a request for an agent being
created or removed: nothing of it was applied, send it again then). Agents:

* ``PUT /agents/{name}`` ``{"policy", "d", "k", "horizon"?, "seed"?, "hyperparameters"?}`` → 201 (created,
  durable) or 200 (it exists with this configuration: a resent ``PUT``); 409 for another configuration;
* ``GET /agents`` → ``{"agents": [{"name", "policy", "d", "k", ..., "rounds", "rewarded", "status"}]}``;
* ``GET /agents/{name}`` → the agent's configuration and counters (503 for one start-up could not recover);
  ``DELETE /agents/{name}`` → removed with its files (durable; also one start-up could not recover); 404 for an
  agent that does not exist. Each agent numbers its events in a block of ids of its own, never given to another
  (:mod:`~nlbandit.service.fleet`); 503 for a creation when the folder has given every block.

Per agent (``/agents/{name}/...``; the unprefixed routes serve the agent named ``default``):

* ``POST decide`` ``{"contexts": [[...] × d] × K, "mask": [bool × K]?}`` → ``{"event_id", "arm",
  "probability", "method", "score", "bonus"}``; 409 once the agent has issued every id of its block;
* ``POST decide_batch`` ``{"contexts": [B × K × d], "masks": [B × K]?}`` → ``{"decisions": [...]}`` (409, none
  made, for a batch past the block's end);
* ``POST reward`` ``{"event_id", "value", "variance_bound"?}`` or ``{"rewards": [{"event_id", "value",
  "variance_bound"?}, ...]}`` (all or nothing) → ``{"accepted": n}``; 404 for an event never issued, 409 for
  one already rewarded;
* ``GET health`` → status, policy, rounds, rewards learnt, pending events, what start-up recovered, and the
  last snapshot failure; ``GET metrics``: its request counts, journal records, latencies (and staleness);
  ``GET status``: its status page.

Service-wide: ``GET /health`` (the default agent's health if there is one, else the service's), ``GET
/metrics`` (totals with each agent's; Prometheus text for ``Accept: text/plain``), ``GET /`` (the status
page: every agent), ``GET /openapi.json`` (:data:`OPENAPI`).

Every answered request is durable (its journal record synced). Limits: bodies of at most
:data:`~nlbandit.service.app.MAX_BODY` bytes, batches of at most :data:`~nlbandit.service.app.MAX_BATCH`
(else 413). Requests run one at a time on the event loop, whatever their agent; journal syncs overlap.
"""

from __future__ import annotations

import contextlib
import os
import resource
import socket
import time
from collections import Counter, deque
from typing import Any

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.service.app import MAX_BATCH, MAX_BODY, RequestError, Service, parse_json
from nlbandit.service.fleet import DEFAULT, Fleet, config_of
from nlbandit.service.status import render, render_index
from nlbandit.service.tokens import Tokens


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_MATRIX = {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}
_DECISION = _schema({"event_id": {"type": "integer"}, "arm": {"type": "integer"},
                     "probability": {"type": ["number", "null"]}, "method": {"type": "string"},
                     "score": {"type": ["number", "null"]}, "bonus": {"type": ["number", "null"]}},
                    ["event_id", "arm", "probability", "method"])
_REWARD = _schema({"event_id": {"type": "integer"}, "value": {"type": "number"},
                   "variance_bound": {"type": "number"}}, ["event_id", "value"])
_CONFIG = _schema({"policy": {"type": "string"}, "d": {"type": "integer"}, "k": {"type": "integer"},
                   "horizon": {"type": ["integer", "null"]}, "seed": {"type": "integer"},
                   "hyperparameters": {"type": "object"}}, ["policy", "d", "k"])
_ERROR = {"description": "refused, nothing changed", "content": {"application/json": {"schema": _schema(
    {"error": {"type": "string"}}, ["error"])}}}
_NAME = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string",
                                                                     "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"}}]


def _call(method: str, summary: str, request: dict[str, Any] | None, reply: dict[str, Any],
          errors: dict[str, str], ok: str = "200") -> dict[str, Any]:
    found = {"summary": summary, "responses": {ok: {"description": "done (durable)", "content": {
        "application/json": {"schema": reply}}}, **{code: {**_ERROR, "description": why}
                                                   for code, why in errors.items()}}}
    if request is not None:
        found["requestBody"] = {"required": True, "content": {"application/json": {"schema": request}}}
    return {method: found}


_BUSY = "; or the agent is being created or removed (with Retry-After: send it again then)"

_AGENT_ROUTES = {
    "decide": _call("post", "Choose an arm among K arms of d features", _schema(
        {"contexts": _MATRIX, "mask": {"type": "array", "items": {"type": "boolean"}}}, ["contexts"]), _DECISION,
        {"400": "malformed, or outside the bounds", "401": "no token", "404": "no such agent",
         "409": "the agent has issued every event id of its block", "413": "too large",
         "503": "the agent diverged, its journal failed, or it could not be recovered; or the service's token "
                "file cannot be used" + _BUSY}),
    "decide_batch": _call("post", "B decisions on the current state", _schema(
        {"contexts": {"type": "array", "items": _MATRIX}, "masks": {"type": "array", "items": {
            "type": "array", "items": {"type": "boolean"}}}}, ["contexts"]),
        _schema({"decisions": {"type": "array", "items": _DECISION}}, ["decisions"]),
        {"400": "malformed", "401": "no token", "404": "no such agent",
         "409": "the batch would number past the end of the agent's block of event ids",
         "413": f"more than {MAX_BATCH} decisions or too large", "503": "as for decide" + _BUSY}),
    "reward": _call("post", "The reward of a decision, or of a batch (all or nothing)", {"oneOf": [_REWARD, _schema(
        {"rewards": {"type": "array", "items": _REWARD}}, ["rewards"])]},
        _schema({"accepted": {"type": "integer"}}, ["accepted"]),
        {"400": "malformed", "401": "no token", "404": "an event never issued, or no such agent",
         "409": "an event already rewarded: it counted once", "413": f"more than {MAX_BATCH} rewards",
         "503": "as for decide" + _BUSY}),
    "health": {"get": {"summary": "The agent's counters and status", "responses": {"200": {
        "description": "status, policy, d, k, rounds, rewarded, pending, recovered, snapshot_error"}}}},
}
OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "nlbandit serve", "version": "2",
             "description": "Named online contextual-bandit agents with durable journals (docs/online.md)."},
    "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
    "security": [{"token": []}, {}],
    "paths": {
        "/agents": {"get": {"summary": "Every agent with its configuration and counters",
                            "responses": {"200": {"description": "{\"agents\": [...]}"}}}},
        "/agents/{name}": {"parameters": _NAME,
                           **_call("put", "Create an agent (200 if it exists with this configuration)", _CONFIG,
                                   {"type": "object"}, {"400": "invalid name or configuration", "401": "no token",
                                                        "409": "it exists with another configuration",
                                                        "503": "every block of event ids given, or the folder "
                                                               "could not be written" + _BUSY}, ok="201"),
                           **_call("get", "The agent's configuration and counters", None, {"type": "object"},
                                   {"404": "no such agent"}),
                           **_call("delete", "Remove the agent and its files", None, {"type": "object"},
                                   {"404": "no such agent", "503": "being created or removed (Retry-After)"})},
        **{f"/agents/{{name}}/{route}": {"parameters": _NAME, **spec} for route, spec in _AGENT_ROUTES.items()},
        **{f"/{route}": spec for route, spec in _AGENT_ROUTES.items() if route != "health"},
        "/health": {"get": {"summary": "The default agent's health, else the service's", "responses": {"200": {
            "description": "status and counters"}}}},
        "/metrics": {"get": {"summary": "Request counts and latencies, in total and per agent: JSON, or Prometheus "
                                        "text for Accept: text/plain",
                             "responses": {"200": {"description": "metrics"}}}},
        "/": {"get": {"summary": "The status page (HTML)", "responses": {"200": {"description": "the page"}}}},
    },
}
"""The service's API as an OpenAPI 3.1 description (``GET /openapi.json``); the unprefixed ``/decide``,
``/decide_batch`` and ``/reward`` are the default agent's."""

TOKEN_VARIABLE = "NLBANDIT_SERVE_TOKEN"
"""The environment variable ``nlbandit serve`` reads its token from when ``--token`` is not given."""
LOOPBACK = ("127.0.0.1", "::1", "localhost")
"""The addresses ``nlbandit serve`` binds without a token (only this machine can reach them)."""


def check_binding(host: str, token: str | None, token_file: str | os.PathLike | None = None) -> None:
    """Refuse to bind a non-loopback ``host`` without a token or a token file (anyone who can reach it could decide
    and reward).

    Raises:
      ConfigError: naming the ways to give one.
    """
    if host not in LOOPBACK and not token and token_file is None:
        raise ConfigError(f"serve: binding {host!r} (not loopback) needs a token: --token TOKEN, ${TOKEN_VARIABLE} "
                          "or --token-file PATH; clients then send 'Authorization: Bearer TOKEN'")


class Traffic:
    """The service's own counters: requests by outcome (with those no agent answered: 401, unknown agents) and
    the decide latencies of every agent together."""

    def __init__(self):
        self.counts: Counter = Counter()
        self.latency: deque = deque(maxlen=10_000)

    def percentiles(self) -> dict[str, Any]:
        """``n`` and the p50, p90 and p99 of the latencies, in ms."""
        lat = np.asarray(self.latency) * 1e3
        return {"n": int(lat.size), **({f"p{q}": float(np.percentile(lat, q)) for q in (50, 90, 99)} if lat.size
                                       else {})}


def service_totals(fleet: Fleet, traffic: Traffic) -> dict[str, Any]:
    """Agents, request counts, journal records and decide latencies of the whole service."""
    counts = sum((s.counts for s in fleet.agents.values()), Counter(traffic.counts))
    return {"agents": len(fleet.agents), "unavailable": len(fleet.unavailable), "counts": dict(counts),
            "journal_records": sum(s.journal.records for s in fleet.agents.values()),
            "decide_latency_ms": traffic.percentiles()}


def fleet_metrics(fleet: Fleet, traffic: Traffic) -> dict[str, Any]:
    """``GET /metrics``: :func:`service_totals` and each agent's :meth:`~nlbandit.service.app.Service.metrics`."""
    return {**service_totals(fleet, traffic), "per_agent": {name: s.metrics() for name, s in fleet.agents.items()}}


def prometheus_text(fleet: Fleet, traffic: Traffic) -> str:
    """:func:`service_totals` and each agent's counters in the Prometheus text exposition format (0.0.4), each
    agent's series labelled ``agent="<name>"``."""
    m = service_totals(fleet, traffic)
    lines = ["# HELP nlbandit_requests_total Requests answered, by outcome.", "# TYPE nlbandit_requests_total counter"]
    lines += [f'nlbandit_requests_total{{outcome="{kind}"}} {count}' for kind, count in sorted(m["counts"].items())]
    for name, help_text in (("agents", "Agents served."), ("unavailable", "Agents start-up could not recover.")):
        lines += [f"# HELP nlbandit_{name} {help_text}", f"# TYPE nlbandit_{name} gauge", f"nlbandit_{name} {m[name]}"]
    for metric, value, help_text in (("journal_records", lambda s: s.journal.records, "Records in the journal."),
                                     ("rounds", lambda s: s.agent.rounds, "Decisions made."),
                                     ("rewarded", lambda s: s.agent.rewarded, "Rewards learnt."),
                                     ("pending", lambda s: len(s.agent.pending), "Decisions awaiting their reward.")):
        lines += [f"# HELP nlbandit_{metric} {help_text}", f"# TYPE nlbandit_{metric} gauge"]
        lines += [f'nlbandit_{metric}{{agent="{name}"}} {value(s)}' for name, s in sorted(fleet.agents.items())]
    lines += ["# HELP nlbandit_decide_latency_ms Decide latency over the last 10,000 requests (agent and journal).",
              "# TYPE nlbandit_decide_latency_ms summary"]
    latency = m["decide_latency_ms"]
    lines += [f'nlbandit_decide_latency_ms{{quantile="0.{q[1:]}"}} {v}' for q, v in latency.items() if q != "n"]
    lines.append(f"nlbandit_decide_latency_ms_count {latency['n']}")
    return "\n".join(lines) + "\n"


def create_app(fleet: Fleet, max_body: int = MAX_BODY, token: str | Tokens | None = None,
               token_file: str | os.PathLike | None = None):
    """The ASGI application (Starlette) serving ``fleet``; with ``token``, or a file of tokens
    (:mod:`~nlbandit.service.tokens`), or the :class:`~nlbandit.service.tokens.Tokens` given as ``token``, every
    request must carry ``Authorization: Bearer <token>`` of one of them (else 401).

    Raises:
      ConfigError: both ``token`` and ``token_file``, or a token or token file that cannot be used.
    """
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.background import BackgroundTask
    from starlette.middleware import Middleware
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse
    from starlette.routing import Route

    traffic = Traffic()
    tokens = token if isinstance(token, Tokens) else (
        None if token is None and token_file is None else Tokens(token, token_file))

    class Authorize:
        """ASGI middleware: 401 for a request without ``Authorization: Bearer <token>`` of an accepted token
        (503 while the token file cannot be used)."""

        def __init__(self, app):
            self.app = app

        async def __call__(self, scope, receive, send):
            if scope["type"] == "http":
                scheme, _, given = dict(scope.get("headers", ())).get(b"authorization", b"").partition(b" ")
                # (an auth scheme's name is case-insensitive, RFC 9110 §11.1)
                refused = tokens.check(given.strip() if scheme.lower() == b"bearer" else b"")
                if refused is not None:
                    status, message = refused
                    traffic.counts[f"error {status}"] += 1
                    refusal = JSONResponse({"error": message}, status_code=status,
                                           headers={"WWW-Authenticate": "Bearer"} if status == 401 else None)
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

    def refused(e: RequestError, service: Service | None) -> JSONResponse:
        (service.counts if service is not None else traffic.counts)[f"error {e.status}"] += 1
        return JSONResponse({"error": str(e)}, status_code=e.status,
                            headers=None if e.retry_after is None else {"Retry-After": str(e.retry_after)})

    async def not_routed(request: Request, e: HTTPException) -> JSONResponse:
        """A path no route serves (404) or a method its route does not take (405, with ``Allow``), as JSON."""
        traffic.counts[f"error {e.status_code}"] += 1
        message = (f"no route {request.url.path}; GET /openapi.json lists them" if e.status_code == 404 else
                   f"{request.method} is not allowed on {request.url.path}; allowed: {e.headers.get('Allow', '')}"
                   if e.status_code == 405 and e.headers else e.detail)
        return JSONResponse({"error": message}, status_code=e.status_code, headers=e.headers)

    def agent_handler(kind: str):
        async def handle(request: Request) -> JSONResponse:
            start, service = time.perf_counter(), None
            try:
                body = await body_of(request)  # (first: the agent may be removed while the body arrives)
                service = fleet.service(request.path_params.get("name", DEFAULT))
                reply = getattr(service, kind)(body)
                await service.durable()
            except RequestError as e:
                return refused(e, service)
            except ClientDisconnect:
                return JSONResponse({"error": "client disconnected"}, status_code=400)
            except OSError as e:  # the journal could not be synced: the reply cannot promise durability
                service.failed = f"a journal sync failed ({e}); restart the service"
                return JSONResponse({"error": service.failed}, status_code=503)
            if kind == "decide":
                seconds = time.perf_counter() - start
                service.latency.append(seconds)
                traffic.latency.append(seconds)
            learn = BackgroundTask(service.learn) if kind == "reward" else None
            return JSONResponse(reply, background=learn)
        return handle

    def agent_view(view):
        async def handle(request: Request):
            try:
                return view(fleet.service(request.path_params["name"]))
            except RequestError as e:
                return refused(e, None)
        return handle

    async def agent(request: Request) -> JSONResponse:
        name = request.path_params["name"]
        try:
            if request.method == "PUT":
                created = await fleet.create_async(name, config_of(await body_of(request)))
                service = fleet.service(name)
                return JSONResponse({"name": name, **service.config, "created": created},
                                    status_code=201 if created else 200)
            if request.method == "DELETE":
                removed = fleet.agents.get(name)
                await fleet.remove(name)
                if removed is not None:  # the service's request counters stay monotonic
                    traffic.counts.update(removed.counts)
                return JSONResponse({"removed": name})
            service = fleet.service(name)
            return JSONResponse({"name": name, **service.config, **service.health()})
        except RequestError as e:
            return refused(e, None)
        except ClientDisconnect:
            return JSONResponse({"error": "client disconnected"}, status_code=400)
        except OSError as e:  # the folder could not be written (a full disk): nothing was acknowledged
            traffic.counts["error 503"] += 1
            return JSONResponse({"error": f"agent {name!r}: the state folder could not be written ({e})"},
                                status_code=503)

    async def agents(request: Request) -> JSONResponse:
        return JSONResponse({"agents": fleet.listing()})

    async def health(request: Request) -> JSONResponse:
        if DEFAULT in fleet.agents:
            return JSONResponse({**fleet.agents[DEFAULT].health(), "agents": len(fleet.agents)})
        if DEFAULT in fleet.unavailable:
            return JSONResponse({"status": "unavailable: " + fleet.unavailable[DEFAULT], "agents": len(fleet.agents)},
                                status_code=503)
        return JSONResponse({"status": "ok", "agents": len(fleet.agents), "unavailable": sorted(fleet.unavailable),
                             "recovered": fleet.recovered})

    async def openapi(request: Request) -> JSONResponse:
        return JSONResponse(OPENAPI)

    async def index(request: Request) -> HTMLResponse:
        return HTMLResponse(render_index(fleet.listing(), service_totals(fleet, traffic)))

    async def metrics(request: Request):
        accept = request.headers.get("accept", "")
        if "text/plain" in accept or "openmetrics" in accept or request.query_params.get("format") == "prometheus":
            return PlainTextResponse(prometheus_text(fleet, traffic), media_type="text/plain; version=0.0.4")
        return JSONResponse(fleet_metrics(fleet, traffic))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        fleet.close()

    routes = [Route("/agents", agents), Route("/agents/{name}", agent, methods=["GET", "PUT", "DELETE"]),
              Route("/agents/{name}/health", agent_view(lambda s: JSONResponse(s.health()))),
              Route("/agents/{name}/metrics", agent_view(lambda s: JSONResponse(s.metrics()))),
              Route("/agents/{name}/status", agent_view(lambda s: HTMLResponse(render(s.health(), s.metrics(),
                                                                                       s.activity)))),
              Route("/health", health), Route("/metrics", metrics), Route("/", index), Route("/openapi.json", openapi)]
    for kind in ("decide", "decide_batch", "reward"):
        routes += [Route(f"/{kind}", agent_handler(kind), methods=["POST"]),
                   Route(f"/agents/{{name}}/{kind}", agent_handler(kind), methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan, middleware=[] if tokens is None else [Middleware(Authorize)],
                     exception_handlers={HTTPException: not_routed})


def _enough_files() -> None:
    """Raise the open-file limit to its hard maximum: each agent holds its journal and its lock open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def serve(folder: str | os.PathLike, config: dict[str, Any] | None = None, host: str = "127.0.0.1",
          port: int = 8000, snapshot_every: int = 1000, max_body: int = MAX_BODY, token: str | None = None,
          token_file: str | os.PathLike | None = None) -> None:
    """Open (or create) the service of ``folder`` (with the agent ``default`` of ``config`` created if given
    and missing) and serve it with uvicorn until interrupted; ``token`` (default: ``$NLBANDIT_SERVE_TOKEN``, unless
    ``token_file`` is given), or one of the tokens of ``token_file`` (:mod:`~nlbandit.service.tokens`), is required
    by every request, and one of them by a non-loopback ``host``."""
    if token_file is None:
        token = token or os.environ.get(TOKEN_VARIABLE) or None
    check_binding(host, token, token_file)
    tokens = None if token is None and token_file is None else Tokens(token, token_file)  # (before the folder)
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        raise ConfigError("nlbandit serve needs starlette and uvicorn: pip install 'nlbandit[serve]' (or -e "
                          "'.[serve]' in a checkout)") from None
    listening = _listening(host, port)  # before the folder: a port in use leaves nothing behind
    port = listening.getsockname()[1]  # (the one chosen for port 0)
    _enough_files()
    try:
        fleet = Fleet.open(folder, None if config is None else {DEFAULT: config}, snapshot_every)
    except BaseException:
        listening.close()
        raise
    held = ", ".join(f"{name} ({s.config['policy']}, d = {s.config['d']}, k = {s.config['k']})"
                     for name, s in list(fleet.agents.items())[:5]) + (", ..." if len(fleet.agents) > 5 else "")
    count = f"{len(fleet.agents)} agent{'' if len(fleet.agents) == 1 else 's'}"
    print(f"nlbandit serve: {count} from {folder}" + (f": {held}" if held else "")
          + "".join(f"; {name} UNAVAILABLE: {why}" for name, why in fleet.unavailable.items())
          + "".join(f"; {what}" for what in fleet.recovered)
          + (f"; default recovered {fleet.agents[DEFAULT].recovered}" if DEFAULT in fleet.agents else "")
          + f"; listening on http://{host}:{port}"
          + (f" (requests need a token of {token_file})" if token_file is not None else
             " (requests need the token)" if token else ""), flush=True)
    uvicorn.Server(uvicorn.Config(create_app(fleet, max_body, tokens), log_level="warning")).run(sockets=[listening])


def _listening(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` for uvicorn to listen on; ConfigError naming them where it cannot be
    (a port in use, an address not of this machine)."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"serve: the port must be in 0..65535, got {port}")
    # (IPPROTO_TCP named: asyncio turns Nagle's algorithm off only on the connections of a socket that names it;
    # without it each reply waited ~40 ms for the client's delayed ACK, p50 44 ms against 1.6, benchmarks/service.py)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(f"serve: cannot listen on {host}:{port}: {e.strerror or e}") from None
    return sock


__all__ = ["LOOPBACK", "OPENAPI", "TOKEN_VARIABLE", "Traffic", "check_binding", "create_app", "fleet_metrics",
           "prometheus_text", "serve", "service_totals"]
