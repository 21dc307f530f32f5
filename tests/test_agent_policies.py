"""The agent's promises checked beyond tests/test_agent.py's policies: a saved and loaded agent, and a horizon-free
one past its rebuild, continue bit for bit as one never saved or built for the longer horizon, for host rounds
that keep a value derived from the state between calls (the identity link's Gram factor, updated by rank-one steps:
a service whose snapshot lost it could fail its start-up's check that every replayed decision repeats its arm)."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

import nlbandit.agent as agent_module
from nlbandit.agent import Agent

D, K = 3, 4


def _rounds(n: int, fixed: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    arms = rng.normal(size=(K, D)) / 2
    xs = np.stack([arms if fixed else rng.normal(size=(K, D)) / 2 for _ in range(n)])
    masks = rng.random((n, K)) < 0.7
    masks[np.arange(n), rng.integers(0, K, n)] = True
    return xs, masks, rng.normal(size=(n, K)) * 0.3 + 0.5


def _play(agent: Agent, xs, masks, rewards, start: int, stop: int, delay: int = 2, bound: bool = False) -> list:
    """Rounds ``start``..``stop - 1``; each decision's reward given ``delay`` decisions later (so some are pending
    whenever the agent is saved)."""
    decisions = []
    for t in range(start, stop):
        decision = agent.decide(xs[t], masks[t])
        decisions.append(decision)
        late = decision.event_id - delay
        if late in agent.pending:
            agent.reward(late, float(rewards[late - 1, agent._pending[late][1]]),
                         **({"variance_bound": 0.5} if bound else {}))
    return decisions


def _bits(agent: Agent) -> list[np.ndarray]:
    return [np.asarray(jax.random.key_data(a) if jax.numpy.issubdtype(a.dtype, jax.dtypes.prng_key) else a)
            for a in jax.tree.leaves(agent.state)]


def _same(a: list, b: list) -> bool:
    def equal(x, y):
        return x == y or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
    return len(a) == len(b) and all(all(equal(x, y) for x, y in zip(p, q)) for p, q in zip(a, b))


IDENTITY_HOST = [("glm-tsl", {"link": "identity", "warmup_rounds": 2 * D}),
                 ("glm-fpl", {"link": "identity", "warmup_rounds": 2 * D}),
                 ("glm-es", {"link": "identity", "warmup_rounds": 2 * D})]


@pytest.mark.parametrize("name, hyper", IDENTITY_HOST)
def test_a_loaded_host_agent_continues_bit_for_bit_with_pending_decisions(name, hyper, tmp_path):
    """The identity link's host rounds keep the Gram factor of the last state, updated by a rank-one step per
    reward; a loaded agent starts from the saved one, so it continues as the agent never saved, to the bit."""
    xs, masks, rewards = _rounds(24, fixed=True)
    kept, saved = (Agent(name, d=D, k=K, horizon=64, seed=3, **hyper) for _ in range(2))
    assert kept.numpy_round
    before = _play(kept, xs, masks, rewards, 0, 14)
    assert _same(before, _play(saved, xs, masks, rewards, 0, 14))
    loaded = Agent.load(saved.save(tmp_path / "agent.npz"))
    assert loaded.pending == kept.pending != []
    assert _same(_play(kept, xs, masks, rewards, 14, 24), _play(loaded, xs, masks, rewards, 14, 24))
    assert all(np.array_equal(a, b) for a, b in zip(_bits(kept), _bits(loaded)))


def test_a_horizon_free_host_agent_past_its_rebuild_decides_as_one_built_long_enough(monkeypatch):
    """glm-tsl (identity link, per-arm statistics, constant scale): T sizes nothing, so the horizon-free agent
    rebuilt at rounds 9 and 17 keeps the state, and the Gram factor derived from it, of an agent built for T = 64."""
    monkeypatch.setattr(agent_module, "INITIAL_HORIZON", 8)
    xs, masks, rewards = _rounds(24, fixed=True, seed=1)
    name, hyper = IDENTITY_HOST[0]
    free, fixed = Agent(name, d=D, k=K, seed=5, **hyper), Agent(name, d=D, k=K, horizon=64, seed=5, **hyper)
    decisions = _play(free, xs, masks, rewards, 0, 24)
    assert free.spec.horizon == 32
    assert _same([d[:3] + d[4:] for d in decisions],
                 [d[:3] + d[4:] for d in _play(fixed, xs, masks, rewards, 0, 24)])  # (methods: "horizon-free")
    assert all(np.array_equal(a, b) for a, b in zip(_bits(free), _bits(fixed)))


def test_a_saved_factor_that_is_not_the_states_is_derived_afresh(tmp_path):
    """A file whose kept Gram factor is not the state's (edited) loads as one without it: the factor is derived
    from the state, so a crafted file cannot steer the decisions."""
    xs, masks, rewards = _rounds(16, fixed=True, seed=4)
    name, hyper = IDENTITY_HOST[0]
    agent = Agent(name, d=D, k=K, horizon=64, seed=2, **hyper)
    _play(agent, xs, masks, rewards, 0, 10)
    arrays = dict(np.load(agent.save(tmp_path / "agent.npz")))
    assert "host_cache_0" in arrays
    np.savez(tmp_path / "edited.npz", **{**arrays, "host_cache_0": np.eye(D) * 7.0})
    np.savez(tmp_path / "without.npz", **{key: a for key, a in arrays.items() if key != "host_cache_0"})
    edited, without = Agent.load(tmp_path / "edited.npz"), Agent.load(tmp_path / "without.npz")
    assert _same(_play(edited, xs, masks, rewards, 10, 16), _play(without, xs, masks, rewards, 10, 16))
