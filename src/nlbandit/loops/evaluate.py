"""The off-policy evaluation loop (``loop = "evaluate"``, the experiment-file form of ``nlbandit evaluate``):
candidate policies of :data:`nlbandit.policies.registry.POLICIES`, each run as an online agent
(:class:`~nlbandit.agent.Agent`, with the agent's practice defaults), replayed on a service's decision log by
:func:`nlbandit.service.evaluate.replay_log` and estimated by IPS, self-normalised IPS and doubly robust with their
bootstrap intervals (:mod:`nlbandit.replay.estimators`; what is estimated is the value of the candidate learning
from the logged data, :mod:`nlbandit.service.evaluate`).

Logs (the ``[env]`` table's ``name``):

* ``service``: the journal of the agent ``agent`` (default ``default``) of the service state folder ``folder`` (or
  of the agent folder ``folder`` itself), a path relative to the experiment file or absolute. Derived fields: the
  sizes ``d`` and ``k``, the ``logger`` (the logging agent's policy and hyperparameters), the ``events`` (rewarded
  decisions with a logged probability) and ``log_sha256`` (:func:`~nlbandit.service.evaluate.log_digest`, of the
  journal and its segments), which keys the runs: a log that grew or changed is another environment, its runs
  computed afresh (and a log that changes between loading the file and computing a run is refused). The horizon
  is the number of events evaluated, the log's first (in the order their rewards arrived); seed s is the
  candidate's seed (a deterministic candidate gives every seed the same numbers).
* ``simulated``: a log written by this loop through the service's own code, in a scratch folder removed after
  use (in memory where ``/dev/shm`` is, since every request is made durable with ``fdatasync``): the logging
  policy ``logger = { name = ..., hyperparameters }`` serves ``horizon`` rounds of the registered environment
  ``environment = { name = ..., hyperparameters }`` (a :class:`~nlbandit.service.fleet.Fleet` agent, each round's
  decision and reward applied as the HTTP server applies them: the request, ``durable``, and for a reward
  ``learn``), on the simulator's instance and rewards for the seed (:func:`~nlbandit.instances.export_instance`),
  each reward given back at once. Seed s is the environment's, the logger's and the candidate's seed, so the
  seeds are independent logs. The environment being known, the loop also stores the candidate's true value on
  the log, (1/n) Σ_t Σ_a π_t(a) μ_t(a) (π_t the candidate's probabilities at event t, μ_t the arms' means).
  The environment and the logger are fields, not registry names the run's code key sees, so that key covers every
  environment's and every policy family's modules.

``resamples`` (default 1000) and ``level`` (0.95) set the bootstrap intervals, ``estimators`` (default ``"ips snips
dr"``) which estimators are computed, their names separated by spaces as ``nlbandit evaluate --estimators`` takes
them, DR among them: ``"dr"`` alone evaluates on the log of a logging policy that played some arm with probability 1
(Lin-UCB, greedy), where IPS and SNIPS are refused as in ``nlbandit evaluate``.

Stored curves, at the recorded events n (the estimates on the log's first n events): ``ips``, ``snips`` and ``dr``
(those of ``estimators``), the estimated value of the candidate per event, with ``<estimator>_lo`` and
``<estimator>_hi``, its bootstrap interval (computed at every recorded point, so ``record_points`` is at most
:data:`MAX_POINTS`); ``truth`` (simulated logs only); and ``regret``, n × the DR estimate: the candidate's estimated
cumulative reward over the n events, which the report's table and plot and the claims' ``regret()`` and ``paired()``
read (as the replay loop's cumulative clicks: without the best arm's value no regret can be estimated). No arms are
stored. The report adds each estimator's value and interval and the truth, and claims may call ``bias``,
``coverage`` and ``halfwidth`` (:mod:`nlbandit.loops.evaluate_report`). A batch is computed in one piece, seed after
seed (a simulated log is written once per batch and seed), without checkpoints; compilation is counted in its run
time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import numpy as np

from nlbandit.agent import INITIAL_HORIZON, agent_policy
from nlbandit.core.hyper import ConfigError, Hyper, resolve
from nlbandit.core.types import ProblemSpec
from nlbandit.discovery import declaring_modules
from nlbandit.envs.registry import ENVS, make_env, resolve_env
from nlbandit.instances import Instance, export_instance
from nlbandit.loops.base import Computed, Loop
from nlbandit.loops.files import NamesPaths
from nlbandit.policies.registry import (POLICIES, build_policy, check_policy_env, policy_entry, policy_memory,
                                        split_policy_config)
from nlbandit.replay.estimators import ESTIMATORS, Unsupported, estimates
from nlbandit.service.app import RequestError, agent_config
from nlbandit.service.evaluate import (agent_folder, check_estimators, estimable_events, log_digest, read_log,
                                       replay_log)
from nlbandit.service.fleet import DEFAULT, Fleet

SOURCES = ("service", "simulated")
"""The logs an ``[env]`` table may name."""
MAX_POINTS = 100
"""The most recorded points: each holds a bootstrap interval per estimator."""
_ESTIMATION = (
    Hyper("estimators", " ".join(ESTIMATORS), "the estimators computed, their names separated by spaces, 'dr' among "
          "them (the table's mean reads it): 'dr' alone for a log whose logging policy played some arm with "
          "probability 1, on which IPS and SNIPS are refused", kind=str),
    Hyper("resamples", 1000, "bootstrap resamples of each interval", kind=int, low=1),
    Hyper("level", 0.95, "level of the bootstrap intervals", low=0.0, high=1.0, low_open=True, high_open=True),
    Hyper("d", None, "feature dimension (derived)", kind=int, optional=True, low=1),
    Hyper("k", None, "arms per decision (derived)", kind=int, optional=True, low=1),
)
_SERVICE = (
    Hyper("name", None, "the log: 'service', a service's journal", kind=str, choices=("service",)),
    Hyper("folder", None, "the service's state folder, or one agent's folder (relative to the experiment file, or "
          "absolute)", kind=str),
    Hyper("agent", DEFAULT, "the agent of the service whose journal is the log", kind=str),
    Hyper("events", None, "rewarded decisions with a logged probability (derived)", kind=int, optional=True, low=0),
    Hyper("log_sha256", None, "the journal's checksum (derived)", kind=str, optional=True),
    *_ESTIMATION,
)
_SIMULATED = (
    Hyper("name", None, "the log: 'simulated', written here by a logging policy on an environment", kind=str,
          choices=("simulated",)),
    *_ESTIMATION,
)
_TABLES = ("environment", "logger")
"""The tables of a simulated log's ``[env]``: the environment and the logging policy, each a registry name with
its hyperparameters."""
_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
"""Where simulated logs are written (None: the system's temporary folder)."""


class EvaluateLoop(Loop, NamesPaths):
    """Off-policy evaluation of candidate policies on a service's log (module docstring)."""

    name = "evaluate"
    metrics = ("regret", *(f"{e}{part}" for e in ESTIMATORS for part in ("", "_lo", "_hi")), "truth")

    def fixed_env_fields(self, env, where):
        """The name and a simulated log's environment and logger tables."""
        return ("name", *_TABLES)

    def locate(self, env, folder):
        """A service log's ``folder`` relative to the experiment file's ``folder``."""
        given = env.get("folder")
        return {**env, "folder": str(folder / given)} if isinstance(given, str) else env

    def case_env(self, env, horizon, n_seeds, record_points, where):
        """The log resolved (a service's read and checked, its sizes, events and checksum derived; a simulated one's
        environment and logger resolved), with at most :data:`MAX_POINTS` recorded points."""
        if record_points > MAX_POINTS:
            raise ConfigError(f"{where}: field 'record_points' = {record_points} is more than {MAX_POINTS}: loop "
                              "'evaluate' computes a bootstrap interval at every recorded point; set it (e.g. 20)")
        source = Hyper("name", None, "the log", kind=str, choices=SOURCES).validate(env.get("name"), where)
        return _service_env(env, horizon, where) if source == "service" else _simulated_env(env, horizon, where)

    def resolve_series(self, policy, env, series_env, horizon, where):
        """The candidate resolved as an online agent of the log's sizes resolves it (the agent's practice defaults),
        and, on a simulated log, checked against its environment (:func:`_check_recorded`)."""
        config = agent_policy(policy.get("name"), {k: v for k, v in policy.items() if k != "name"},
                              ProblemSpec(env["d"], env["k"], INITIAL_HORIZON), where)
        if env["name"] == "simulated":
            config = _check_recorded(config, env, horizon, where)
        return env, config

    def split(self, policy):
        """:func:`~nlbandit.policies.registry.split_policy_config`."""
        return split_policy_config(policy)

    def code_modules(self, policy, env):
        """The off-policy evaluation, the candidate's agent modules and, for a simulated log, the service, the
        instance export and every environment's and policy's modules (module docstring)."""
        found = ("nlbandit.service.evaluate", "nlbandit.replay.estimators", *_agent_modules(policy))
        return found if env != "simulated" else found + _every_module()

    def memory(self, env, policy, horizon, n_seeds, record_points):
        """The curves, the replayed events' probabilities and predictions (K floats each, twice) and their contexts
        (as journal records), a simulated log's instance, the largest bootstrap block and the candidate's arrays."""
        d, k, points = env["d"], env["k"], min(record_points, horizon)
        found = {"curves": 8 * len(self.metrics) * n_seeds * points,
                 "replayed events": 16 * horizon * k + 12 * horizon * k * d,
                 "bootstrap resamples": 16 * 2**22}
        if env["name"] == "simulated":
            found["simulated instance"] = 8 * horizon * k * (d + 3)
        return {**found, **policy_memory(policy, ProblemSpec(d, k, horizon), 1)}

    def describe(self, batch, resume=None):
        """The labels, the case, the seeds, the events and the log."""
        first = batch[0]
        case = f" ({first.case_label})" if first.case else ""
        return (f"{', '.join(r.label for r in batch)}{case}: {first.n_seeds} seeds x {first.horizon} logged events "
                f"({first.env['name']} log of {first.env['logger']['name']})")

    def compute(self, batch, seeds, *, chunk_size=1000, progress=False, on_chunk=None, resume=None):
        """Each run of the batch replayed on each seed's log, its estimates at the recorded events (in one piece)."""
        first = batch[0]
        points = np.unique(np.linspace(1, first.horizon, min(first.record_points, first.horizon)).round().astype(int))
        start = time.perf_counter()
        found: list[list[dict[str, np.ndarray]]] = [[] for _ in batch]
        for seed in seeds:
            with _log(first.env, first.horizon, seed) as log:
                for run, into in zip(batch, found):
                    into.append(_estimates(run, log, seed, points))
        run_s = time.perf_counter() - start
        curves = [{m: np.stack([one[m] for one in per_seed]) for m in per_seed[0]} for per_seed in found]
        return Computed(points, curves, [np.zeros((len(seeds), 0), np.int32)] * len(batch), 0.0, run_s,
                        first.horizon, [run_s])

    def regret_name(self, runs):
        """``estimated cumulative reward (DR)``: n × the doubly robust estimate over the first n logged events."""
        return "estimated cumulative reward (DR)"

    def report_columns(self):
        """Each estimator's value and interval, the truth, and how many seeds' intervals hold it."""
        return ("DR", "IPS", "SNIPS", "truth", "truth in interval (DR, IPS, SNIPS)")

    def report_cells(self, run, curves):
        """Means over seeds at the last event: each estimator's value [interval], the truth; and the seeds whose
        interval holds the truth (— for a service's log, whose truth is unknown, and for an estimator the file's
        ``estimators`` leave out)."""
        final = {m: c[:, -1] for m, c in curves.items()}
        shown = ("dr", "ips", "snips")
        cells = [f"{final[e].mean():.4f} [{final[e + '_lo'].mean():.4f}, {final[e + '_hi'].mean():.4f}]"
                 if e in final else "—" for e in shown]
        if "truth" not in final:
            return (*cells, "—", "—")
        truth = final["truth"]
        held = [str(int(np.sum((final[e + "_lo"] <= truth) & (truth <= final[e + "_hi"])))) if e in final else "—"
                for e in shown]
        return (*cells, f"{truth.mean():.4f}", f"{', '.join(held)} of {truth.size} seeds")

    def report_notes(self):
        """What the table shows."""
        return ["Off-policy evaluation: 'mean' is n × the doubly robust estimate, the candidate's estimated cumulative "
                "reward over the n logged events (no regret without the best arm's value). DR, IPS, SNIPS: the "
                "estimated value per event on the whole log with its bootstrap interval, as means over the seeds "
                "(value [lower, upper]); truth: the candidate's value on the log from the environment's means "
                "(simulated logs; — for a service's log); the last column counts the seeds whose interval holds it."]


class _Log(NamedTuple):
    """A log to evaluate on: the agent folder holding its journal, and the arms' means of each round where known
    (a simulated log's instance), else None."""

    folder: Path
    means: np.ndarray | None


def _service_env(env: dict[str, Any], horizon: int, where: str) -> dict[str, Any]:
    """A service's log resolved: its agent folder found and its journal read (ConfigError naming the field), its
    derived fields computed and checked against any given, and at least ``horizon`` estimable events in it."""
    values = resolve(_SERVICE, env, where)
    folder = agent_folder(values["folder"], values["agent"], (f"{where}: field 'folder'", f"{where}: field 'agent'"))
    try:
        config, records = read_log(folder)
    except ConfigError as e:
        raise ConfigError(f"{where}: field 'folder': {e}") from None
    derived = {"d": config["d"], "k": config["k"], "events": estimable_events(records, config.get("first_event_id", 1)),
               "log_sha256": log_digest(folder)}
    for field, value in derived.items():
        if values[field] is not None and values[field] != value:
            raise ConfigError(f"{where}: field '{field}' = {values[field]!r} does not match the log ({value!r}); "
                              "omit it")
    values["estimators"] = _estimators(values["estimators"], where)
    if derived["events"] < horizon:
        raise ConfigError(f"{where}: the log of {folder} holds {derived['events']} rewarded decisions with a logged "
                          f"probability, fewer than the horizon {horizon} (the events evaluated); set the horizon to "
                          f"at most {derived['events']}")
    return {**values, **derived, "logger": {"name": config["policy"], **config["hyperparameters"]}}


def _simulated_env(env: dict[str, Any], horizon: int, where: str) -> dict[str, Any]:
    """A simulated log resolved: its environment (a registered one that can be simulated) and its logging policy
    (resolved as an online agent resolves it, and checked against the environment, :func:`_check_recorded`)."""
    known = sorted({h.name for h in _SIMULATED} | set(_TABLES))
    unknown = sorted(set(env) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown field '{unknown[0]}'; allowed fields: {', '.join(known)}")
    values = resolve(_SIMULATED, {k: v for k, v in env.items() if k not in _TABLES}, where)
    tables = {}
    for field in _TABLES:
        table = env.get(field)
        if not isinstance(table, dict):
            example = '{ name = "linear", d = 5, k = 10, contexts = "fresh" }' if field == "environment" else \
                '{ name = "uniform" }'
            raise ConfigError(f"{where}: field '{field}' must be a table naming a registered "
                              f"{'environment' if field == 'environment' else 'policy'} with its hyperparameters, e.g. "
                              f"{field} = {example}; got {table!r}")
        tables[field] = table
    values["estimators"] = _estimators(values["estimators"], where)
    environment = resolve_env(tables["environment"], f"{where}: environment")
    spec = make_env(**environment).spec
    logger = tables["logger"]
    logger = agent_policy(logger.get("name"), {k: v for k, v in logger.items() if k != "name"},
                          ProblemSpec(spec.d, spec.k, INITIAL_HORIZON), f"{where}: logger")
    found = {**values, "environment": environment, "d": spec.d, "k": spec.k}
    for field in ("d", "k"):
        if values[field] is not None and values[field] != found[field]:
            raise ConfigError(f"{where}: field '{field}' = {values[field]!r} does not match the environment "
                              f"({found[field]!r}); omit it")
    return {**found, "logger": _check_recorded(logger, found, horizon, f"{where}: logger")}


def _estimators(given: str, where: str) -> str:
    """The ``estimators`` field checked as ``nlbandit evaluate --estimators`` is
    (:func:`~nlbandit.service.evaluate.check_estimators`), with DR among them, in :data:`ESTIMATORS`' order."""
    field = f"{where}: field 'estimators'"
    names = check_estimators(given.split(), field)
    if "dr" not in names:
        raise ConfigError(f"{field} = {given!r} leaves out 'dr', whose estimate the table's mean and plot read "
                          "(n × the DR estimate): add it")
    return " ".join(name for name in ESTIMATORS if name in names)


def _check_recorded(config: dict[str, Any], env: dict[str, Any], horizon: int, where: str) -> dict[str, Any]:
    """A policy resolved for a simulated log, checked against its environment
    (:func:`~nlbandit.policies.registry.check_policy_env`), and refused if it reads a noise level revealed with each
    reward, which the log does not record."""
    config = check_policy_env(config, make_env(**env["environment"]), horizon, where)
    if build_policy(config, ProblemSpec(env["d"], env["k"], horizon))[0].meta.requires.noise_level:
        raise ConfigError(f"{where}: field 'name': policy {config['name']!r} reads a noise level revealed with each "
                          "reward, which a simulated log does not record")
    return config


@functools.cache
def _agent_modules(policy: str) -> tuple[str, ...]:
    """The modules that compute an online agent of ``policy``: the agent, the policy's family and its host round's
    and practice defaults' modules."""
    declared = [m.__name__ for attribute in ("HOST_ROUNDS", "AGENT_DEFAULTS")
                for m in declaring_modules("nlbandit.policies", attribute) if policy in getattr(m, attribute)]
    return ("nlbandit.agent", *policy_entry(policy).modules(), *declared)


@functools.cache
def _every_module() -> tuple[str, ...]:
    """What a simulated log's code key covers beside the candidate: the service, the instance export, every
    environment's constructor and every policy's agent modules (the log's environment and logger are fields)."""
    return ("nlbandit.service.fleet", "nlbandit.instances", *sorted({e.make.__module__ for e in ENVS.values()}),
            *sorted({m for name in POLICIES for m in _agent_modules(name)}))


@contextlib.contextmanager
def _log(env: dict[str, Any], horizon: int, seed: int) -> Iterator[_Log]:
    """The log of ``env`` for ``seed``: a service's, checked to be the one the run is keyed by before and after it
    is read; or a simulated one, written for the seed into a scratch folder removed afterwards."""
    if env["name"] == "service":
        folder = agent_folder(env["folder"], env["agent"])
        _check_unchanged(folder, env)
        yield _Log(folder, None)
        _check_unchanged(folder, env)
        return
    instance = export_instance(make_env(**env["environment"]), seed, horizon, env["environment"])
    with tempfile.TemporaryDirectory(prefix="nlbandit-log-", dir=_SCRATCH) as scratch:
        asyncio.run(_write_log(Path(scratch), env["logger"], instance, seed))
        yield _Log(Path(scratch) / "agents" / DEFAULT, instance.means)


def _check_unchanged(folder: Path, env: dict[str, Any]) -> None:
    """Refuse a service's log whose journal is no longer the one the run is keyed by."""
    if log_digest(folder) != env["log_sha256"]:
        raise ConfigError(f"the log of {folder} has changed since the experiment file was loaded (its SHA-256 is "
                          "not the run's): load the file again, which keys its runs by the log as it is now")


async def _write_log(folder: Path, logger: dict[str, Any], instance: Instance, seed: int) -> None:
    """Serve the rounds of ``instance`` by the agent ``default`` of a new service in ``folder`` running ``logger``
    with seed ``seed``, each decision's and reward's request applied as the HTTP server applies it
    (:mod:`nlbandit.service.server`), each reward given back at once."""
    _, k, d = instance.contexts.shape
    hyperparameters = {name: value for name, value in logger.items() if name != "name"}
    fleet = Fleet.open(folder, {DEFAULT: agent_config(logger["name"], d, k, seed=seed, **hyperparameters)})
    try:
        service = fleet.service(DEFAULT)
        for t, (contexts, mask, pay) in enumerate(zip(instance.contexts, instance.mask, instance.rewards), 1):
            try:
                decision = service.decide({"contexts": contexts.tolist(),
                                           "mask": None if mask.all() else mask.tolist()})
                await service.durable()
                service.reward({"event_id": decision["event_id"], "value": float(pay[decision["arm"]])})
                await service.durable()
            except RequestError as e:
                raise ConfigError(f"the simulated log's logging policy {logger['name']!r} refused round {t}: {e}") \
                    from None
            await service.learn()
    finally:
        fleet.close()


def _estimates(run: Any, log: _Log, seed: int, points: np.ndarray) -> dict[str, np.ndarray]:
    """The curves of ``run`` (its candidate with seed ``seed``) on ``log``: each estimator's value and interval on
    the first n events for n in ``points``, n × the DR estimate, and the truth where the means are known."""
    hyperparameters = {name: value for name, value in run.policy.items() if name != "name"}
    found = replay_log(log.folder, run.policy["name"], hyperparameters, seed=seed, events=run.horizon)
    if len(found.events) < run.horizon:
        raise ConfigError(f"the log of {log.folder} holds {len(found.events)} rewarded decisions with a logged "
                          f"probability ({found.skipped} without one), fewer than the horizon {run.horizon}")
    curves: dict[str, np.ndarray] = {}
    names = tuple(run.env["estimators"].split())
    try:
        at = [estimates(names, found.arms[:n], found.rewards[:n], found.propensities[:n], found.target[:n],
                        found.q_hat[:n], resamples=run.env["resamples"], level=run.env["level"]) for n in points]
    except Unsupported as e:  # (a logging policy that plays some arm with probability 1: the file's choice)
        where = f"the simulated log of {run.env['logger']['name']}" if log.means is not None else \
            f"the log of {log.folder}"
        raise ConfigError(f"{run.label}, seed {seed}, on {where}: {e}; for DR alone: estimators = \"dr\" in the "
                          "[env] table") from None
    for name in names:
        for part, field in (("", "value"), ("_lo", "lo"), ("_hi", "hi")):
            curves[name + part] = np.array([getattr(e[name], field) for e in at])
    curves["regret"] = points * curves["dr"]
    if log.means is not None:
        values = (found.target * log.means[found.events - 1]).sum(axis=1)
        curves["truth"] = np.cumsum(values)[points - 1] / points
    return curves
