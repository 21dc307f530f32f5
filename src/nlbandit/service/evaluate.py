"""``nlbandit evaluate``: off-policy estimates of a candidate policy's value from a service's own journal.

The journal (:mod:`nlbandit.service.journal`) and its compacted segments hold every decision with its contexts,
arm and probability, and every reward, in the order the service saw them. :func:`evaluate_log` replays them
through a fresh candidate agent in that order: at each logged decision the candidate gives its probabilities
of every arm (:meth:`~nlbandit.agent.Agent.counterfactual`, having learnt exactly the rewards the service had
received by then), and the logged arm is recorded as its decision; at each logged reward the candidate learns it. A
decision whose reward arrived counts once: the estimators of :mod:`nlbandit.replay.estimators` (IPS,
self-normalised IPS, doubly robust) weigh its reward by π_t(a_t) / p_t, π_t the candidate as trained on the
log before round t. What is estimated is therefore the value of the candidate *learning from the logged
data* (the sequence π_1, π_2, ...), each term unbiased when the logged probabilities are right. The doubly
robust reward model is a ridge regression on the arms' features, fitted online on the rewards logged before
each decision (so it never sees the reward it corrects). Decisions logged without a probability (a policy
with none, or an older journal) cannot be reweighted and are skipped, and counted.

:func:`replay_log` is the replay alone (the events, the candidate's probabilities and the reward model's
predictions, up to a number of events), which the experiment loop ``loop = "evaluate"``
(:mod:`nlbandit.loops.evaluate`) estimates on, keying its runs by :func:`log_digest`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from nlbandit.agent import Agent
from nlbandit.core.hyper import ConfigError
from nlbandit.replay.estimators import ESTIMATORS, Estimate, estimates
from nlbandit.service.app import check_hyperparameter_names
from nlbandit.service.fleet import NAME
from nlbandit.service.journal import JournalDamaged, decode_array, read_journal, segments


class Evaluation(NamedTuple):
    """What :func:`evaluate_log` found.

    Attributes:
      estimates: one :class:`~nlbandit.replay.estimators.Estimate` per estimator asked for.
      events: rewarded decisions with a logged probability (those estimated on).
      skipped: rewarded decisions without a logged probability.
      logged_value: the mean reward the logging policy earned on those events.
      target: (n, K) the candidate's probabilities on each event (for checks).
    """

    estimates: list[Estimate]
    events: int
    skipped: int
    logged_value: float
    target: np.ndarray


class Replayed(NamedTuple):
    """A candidate replayed on a log (:func:`replay_log`): its n estimable events (rewarded decisions with a logged
    probability) in the order their rewards arrived.

    Attributes:
      events: (n,) the logged decisions' event ids.
      arms, rewards, propensities: (n,) the logged arm, its reward and the probability with which it was logged.
      target: (n, K) the candidate's probabilities of every arm.
      q_hat: (n, K) the doubly robust reward model's predictions.
      skipped: rewarded decisions without a logged probability among those read.
    """

    events: np.ndarray
    arms: np.ndarray
    rewards: np.ndarray
    propensities: np.ndarray
    target: np.ndarray
    q_hat: np.ndarray
    skipped: int


def agent_folder(folder: str | Path, agent: str = "default", names: tuple[str, str] = ("folder", "agent")) -> Path:
    """The agent folder whose journal is the log: ``folder`` itself when it is one agent's folder (it holds
    ``agent.json``), else the folder of the agent ``agent`` of the service state folder ``folder``.

    Raises:
      ConfigError: naming ``names[0]`` (how the caller calls ``folder``) for a folder that does not exist or is
        neither a service's nor an agent's, ``names[1]`` for an agent name that is not one or that the service
        does not hold (with the names of those it holds).
    """
    folder, (folder_name, agent_name) = Path(folder), names
    if not folder.is_dir():
        why = "no such folder" if not folder.exists() else "not a folder"
        raise ConfigError(f"{folder_name}: {folder} holds no agent: {why}")
    if (folder / "agent.json").exists():
        return folder
    if not isinstance(agent, str) or not NAME.fullmatch(agent):
        raise ConfigError(f"{agent_name}: {agent!r} is not an agent name (1 to 64 letters, digits, '_', '.' or '-', "
                          "starting with a letter or digit)")
    if not (folder / "agents").is_dir():
        raise ConfigError(f"{folder_name}: {folder} holds no agent: it is neither a service's state folder (with "
                          "agents/) nor an agent's folder (with agent.json)")
    if not (folder / "agents" / agent / "agent.json").exists():
        held = sorted(p.parent.name for p in (folder / "agents").glob("*/agent.json"))
        raise ConfigError(f"{agent_name}: the service of {folder} holds no agent {agent!r}; its agents: "
                          f"{', '.join(held) or 'none'}")
    return folder / "agents" / agent


def read_log(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The configuration (``agent.json``) and the journal records (compacted segments first) of the agent folder
    ``folder`` (:func:`agent_folder`).

    Raises:
      ConfigError: a damaged journal or segment, or segments that do not reach the live journal's start.
    """
    config = json.loads((folder / "agent.json").read_text())
    try:
        compacted = segments(folder, config["folder_id"])
    except JournalDamaged as e:
        raise JournalDamaged(f"evaluate replays the agent's whole log from its first record: {e}") from None
    live = read_journal(folder / "journal.log", config["folder_id"])
    end = compacted[-1].base + len(compacted[-1].records) if compacted else 0
    if live.base is not None and live.base != end:
        raise ConfigError(f"evaluate: {folder}'s journal starts after record {live.base} but its segments end at "
                          f"record {end}: a segment is missing, so the log is incomplete")
    return config, [r for segment in compacted for r in segment.records] + live.records


def log_digest(folder: Path) -> str:
    """SHA-256 of the journal of the agent folder ``folder``, its compacted segments (in order) and its live
    journal, byte for byte: what keys a result computed from the log, so that a log that grew is not taken for
    the old one."""
    h = hashlib.sha256()
    for path in [*sorted((folder / "segments").glob("journal-*.log")), folder / "journal.log"]:
        if path.exists():
            h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def estimable_events(records: list[dict[str, Any]], first_event_id: int = 1) -> int:
    """The number of rewarded decisions with a logged probability (the events :func:`replay_log` estimates on)
    among journal ``records`` of an agent whose event ids start at ``first_event_id``."""
    estimable: dict[int, bool] = {}  # event id -> whether it was logged with a probability
    count, decided = 0, first_event_id - 1
    for record in records:
        if record.get("op") in ("decide", "decide_batch"):
            for p in _probabilities(record):
                decided += 1
                estimable[decided] = _estimable(p)
        elif record.get("op") == "reward":
            count += sum(estimable.pop(i, False) for i in record["ids"])
    return count


def replay_log(folder: str | Path, policy: str, hyperparameters: dict[str, Any] | None = None, *, seed: int = 0,
               agent: str = "default", estimate_draws: int = 1000, ridge: float = 1.0,
               events: int | None = None) -> Replayed:
    """Replay the journal of the agent ``agent`` of the service folder ``folder`` (or of the agent folder ``folder``
    itself) through a fresh candidate ``policy`` (with ``hyperparameters``, seed ``seed``) (module docstring), up
    to its ``events``-th estimable event (None: the whole log).

    Raises:
      ConfigError: ``hyperparameters`` naming the agent's own arguments (seed, d, ...), a folder without a service
        (:func:`agent_folder`), an invalid candidate, a record the candidate refuses, or a journal without a
        rewarded decision that has a logged probability.
    """
    check_hyperparameter_names(hyperparameters or {}, "evaluate: the candidate's hyperparameters")
    folder = agent_folder(folder, agent, ("evaluate: folder", "evaluate: agent"))
    config, records = read_log(folder)
    d, k = config["d"], config["k"]
    candidate = Agent(policy, d, k, None, seed, estimate_draws=estimate_draws,  # the log's event ids
                      first_event_id=config.get("first_event_id", 1), **(hyperparameters or {}))
    model_a, model_b = np.eye(d) * ridge, np.zeros(d)  # the DR reward model's ridge statistics
    pending: dict[int, tuple] = {}  # event id -> (logged arm, its probability, candidate's row, model's row)
    rows: list[tuple] = []
    found = 0
    for index, record in enumerate(records, 1):
        before = len(rows)
        try:
            _replay(record, candidate, pending, rows, model_a, model_b)
        except ValueError as e:
            raise ConfigError(f"evaluate: journal record {index}: the candidate {policy!r} refuses it: {e}") from None
        found += sum(_estimable(r[3]) for r in rows[before:])
        if events is not None and found >= events:
            break
    usable = [r for r in rows if _estimable(r[3])][:events]
    if not usable:
        raise ConfigError(f"evaluate: {folder}'s journal has no rewarded decision with a logged probability")
    ids, arms, rewards, probabilities = (np.array([r[i] for r in usable]) for i in range(4))
    target, q_hat = np.stack([r[4] for r in usable]), np.stack([r[5] for r in usable])
    return Replayed(ids, arms, rewards, probabilities, target, q_hat, len(rows) - len(usable))


def evaluate_log(folder: str | Path, policy: str, hyperparameters: dict[str, Any] | None = None, *, seed: int = 0,
                 agent: str = "default", estimators: tuple[str, ...] = ESTIMATORS, estimate_draws: int = 1000,
                 ridge: float = 1.0, resamples: int = 1000, level: float = 0.95) -> Evaluation:
    """Off-policy estimates of ``policy`` (with ``hyperparameters``, seed ``seed``) on the journal of the agent
    ``agent`` of the service folder ``folder`` (or of the agent folder ``folder`` itself) (module docstring);
    each estimator's bootstrap interval at ``level``.

    Raises:
      ConfigError: a folder without a service, an invalid candidate, an unknown estimator, or a journal
        without a rewarded decision that has a logged probability.
    """
    estimators = check_estimators(estimators, "evaluate: estimators")
    r = replay_log(folder, policy, hyperparameters, seed=seed, agent=agent, estimate_draws=estimate_draws,
                   ridge=ridge)
    by_name = estimates(estimators, r.arms, r.rewards, r.propensities, r.target, r.q_hat, resamples=resamples,
                        level=level)
    return Evaluation([by_name[name] for name in estimators], len(r.events), r.skipped, float(r.rewards.mean()),
                      r.target)


def check_estimators(names: Any, field: str) -> tuple[str, ...]:
    """``names`` as the estimators to compute: a non-empty sequence of names among
    :data:`~nlbandit.replay.estimators.ESTIMATORS`, none twice (``nlbandit evaluate --estimators``,
    :func:`evaluate_log` and the ``estimators`` field of ``loop = "evaluate"`` all check them here); a ConfigError
    naming ``field`` otherwise."""
    given = names
    names = [names] if isinstance(names, str) else list(names) if isinstance(names, (list, tuple)) else None
    if not names or any(name not in ESTIMATORS for name in names):
        raise ConfigError(f"{field} must be one or more of {', '.join(ESTIMATORS)}, got {given!r}")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"{field} names {twice[0]!r} more than once")
    return tuple(names)


def _probabilities(record: dict[str, Any]) -> list[float | None]:
    """The logged probability of each decision of a ``decide`` or ``decide_batch`` record (None where the policy
    gave none, or an older journal kept none)."""
    if record["op"] == "decide":
        return [record.get("p")]
    return record.get("p") or [None] * len(record["arms"])


def _estimable(p: float | None) -> bool:
    """Whether a decision logged with probability ``p`` can be reweighted (it has a positive one)."""
    return p is not None and p > 0


def _replay(record: dict[str, Any], candidate: Agent, events: dict[int, tuple], rows: list[tuple],
            model_a: np.ndarray, model_b: np.ndarray) -> None:
    """Apply one journal record to the candidate (module docstring): a decision's probabilities and the reward
    model's predictions are kept under its event id until its reward moves them, with the event id and the
    reward, to ``rows`` (the model's statistics ``model_a``, ``model_b`` updated in place)."""
    if record.get("op") in ("decide", "decide_batch"):
        batch = record["op"] == "decide_batch"
        xs = decode_array(record["x"]) if batch else decode_array(record["x"])[None]
        ms = ([None] * len(xs) if record["m"] is None else list(decode_array(record["m"]))) if batch else \
            [None if record["m"] is None else decode_array(record["m"])]
        arms = record["arms"] if batch else [record["arm"]]
        theta = np.linalg.solve(model_a, model_b)
        for x, m, arm, p in zip(xs, ms, arms, _probabilities(record)):
            event, target = candidate.counterfactual(x, arm, m)
            events[event] = (x[arm], arm, p, target, x @ theta)
    elif record.get("op") == "reward":
        bounds = record["bounds"] if candidate.policy.meta.requires.noise_level else None
        candidate.reward(record["ids"], record["values"], bounds)
        for event, value in zip(record["ids"], record["values"]):
            features, arm, p, target, q_hat = events.pop(event)
            model_a += np.outer(features, features)
            model_b += value * features
            rows.append((event, arm, value, p, target, q_hat))


__all__ = ["Evaluation", "Replayed", "agent_folder", "estimable_events", "evaluate_log", "log_digest", "read_log",
           "replay_log"]
