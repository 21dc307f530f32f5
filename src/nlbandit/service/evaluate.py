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
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from nlbandit.agent import Agent
from nlbandit.core.hyper import ConfigError
from nlbandit.replay.estimators import ESTIMATORS, Estimate, estimate
from nlbandit.service.fleet import NAME
from nlbandit.service.journal import decode_array, read_journal, segments


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
    folder = Path(folder)
    if not (folder / "agent.json").exists():  # a service's state folder, not an agent's: its agent ``agent``
        if not isinstance(agent, str) or not NAME.fullmatch(agent):
            raise ConfigError(f"evaluate: agent {agent!r} is not an agent name (1 to 64 letters, digits, '_', '.' or "
                              "'-', starting with a letter or digit)")
        folder = folder / "agents" / agent
    stored = folder / "agent.json"
    if not stored.exists():
        raise ConfigError(f"evaluate: {folder} holds no agent (no agent.json)")
    config = json.loads(stored.read_text())
    unknown = [e for e in estimators if e not in ESTIMATORS]
    if unknown or not estimators:
        raise ConfigError(f"evaluate: estimators must be among {', '.join(ESTIMATORS)}, got {list(estimators)}")
    d, k = config["d"], config["k"]
    candidate = Agent(policy, d, k, None, seed, estimate_draws=estimate_draws, **(hyperparameters or {}))
    compacted, live = segments(folder, config["folder_id"]), read_journal(folder / "journal.log", config["folder_id"])
    end = compacted[-1].base + len(compacted[-1].records) if compacted else 0
    if live.base is not None and live.base != end:
        raise ConfigError(f"evaluate: {folder}'s journal starts after record {live.base} but its segments end at "
                          f"record {end}: a segment is missing, so the log is incomplete")
    records = [r for segment in compacted for r in segment.records] + live.records  # compacted first
    model_a, model_b = np.eye(d) * ridge, np.zeros(d)  # the DR reward model's ridge statistics
    events: dict[int, tuple] = {}  # event id -> (logged arm, its probability, candidate's row, model's row)
    rows: list[tuple] = []
    for index, record in enumerate(records, 1):
        try:
            _replay(record, candidate, events, rows, model_a, model_b)
        except ValueError as e:
            raise ConfigError(f"evaluate: journal record {index}: the candidate {policy!r} refuses it: {e}") from None
    usable = [r for r in rows if r[2] is not None and r[2] > 0]
    if not usable:
        raise ConfigError(f"evaluate: {folder}'s journal has no rewarded decision with a logged probability")
    arms, rewards, probabilities = (np.array([r[i] for r in usable]) for i in range(3))
    target, q_hat = np.stack([r[3] for r in usable]), np.stack([r[4] for r in usable])
    found = [estimate(name, arms, rewards, probabilities, target, q_hat, resamples=resamples, level=level)
             for name in estimators]
    return Evaluation(found, len(usable), len(rows) - len(usable), float(rewards.mean()), target)


def _replay(record: dict[str, Any], candidate: Agent, events: dict[int, tuple], rows: list[tuple],
            model_a: np.ndarray, model_b: np.ndarray) -> None:
    """Apply one journal record to the candidate (module docstring): a decision's probabilities and the reward
    model's predictions are kept under its event id until its reward moves them, with the reward, to ``rows``
    (the model's statistics ``model_a``, ``model_b`` updated in place)."""
    if record.get("op") in ("decide", "decide_batch"):
        batch = record["op"] == "decide_batch"
        xs = decode_array(record["x"]) if batch else decode_array(record["x"])[None]
        ms = ([None] * len(xs) if record["m"] is None else list(decode_array(record["m"]))) if batch else \
            [None if record["m"] is None else decode_array(record["m"])]
        arms = record["arms"] if batch else [record["arm"]]
        ps = record.get("p") if batch else [record.get("p")]
        ps = ps if ps is not None else [None] * len(arms)
        theta = np.linalg.solve(model_a, model_b)
        for x, m, arm, p in zip(xs, ms, arms, ps):
            event, target = candidate.counterfactual(x, arm, m)
            events[event] = (x[arm], arm, p, target, x @ theta)
    elif record.get("op") == "reward":
        bounds = record["bounds"] if candidate.policy.meta.requires.noise_level else None
        candidate.reward(record["ids"], record["values"], bounds)
        for event, value in zip(record["ids"], record["values"]):
            features, arm, p, target, q_hat = events.pop(event)
            model_a += np.outer(features, features)
            model_b += value * features
            rows.append((arm, value, p, target, q_hat))


__all__ = ["Evaluation", "evaluate_log"]
