"""The online agent (nlbandit.agent): the simulator's decisions, rewards learnt exactly once and in any order,
probabilities that are the choice frequencies, save/load round trips, and clear errors."""

from __future__ import annotations

import json
import os
import tracemalloc
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from host_compiled import host_specializations

import nlbandit as nb
from nlbandit.agent import Agent
from nlbandit.core.hyper import ConfigError
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import round_key

D, K, T = 4, 6, 60


def _env(name: str = "logistic"):
    return nb.make_env(name, d=D, k=K) if name != "logistic" else nb.make_env("logistic", d=D, k=K, theta_norm=2.0)


def _play(agent: Agent, env, seed: int, rounds: int, order=None) -> list[int]:
    """Drive ``agent`` on ``env``'s instance of ``seed`` for ``rounds`` rounds with the simulator's draws;
    rewards given back at once (``order`` None) or all at the end in ``order``."""
    keys = seed_keys(jnp.uint32(seed))
    state = env.reset(keys.env_reset)
    arms, owed = [], []
    for t in range(1, rounds + 1):
        contexts, mask = env.observe(state, round_key(keys.env_observe, t), t)
        decision = agent.decide(np.asarray(contexts), np.asarray(mask))
        assert decision.event_id == t
        reward = float(env.pull(state, round_key(keys.env_pull, t), t, contexts, decision.arm).reward)
        arms.append(decision.arm)
        if order is None:
            agent.reward(decision.event_id, reward)
        else:
            owed.append((decision.event_id, reward))
    if order is not None:
        ids, values = zip(*[owed[i] for i in order])
        agent.reward(list(ids), list(values))
    return arms


@pytest.mark.parametrize("name, hyper", [("lin-ucb", {}), ("lin-ts", {}), ("glm-tsl", {"warmup_rounds": 8}),
                                         ("neural-es", {"width": 6, "steps": 3, "duplicate": True})])
def test_decisions_equal_the_simulators(name, hyper):
    """The agent decides as simulate does with the same configuration (the agent's, its practice defaults
    included) and seed."""
    env = _env()
    agent = Agent(name, d=D, k=K, horizon=T, seed=7, **hyper)
    configured = {key: value for key, value in agent.config.items() if key != "name"}
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, K, T), **configured)
    result = nb.simulate(env, policy, params, T, [7])
    assert _play(agent, env, 7, T) == result.arms[0].tolist()


def test_the_agents_practice_defaults_apply_unless_given():
    """lin-ucb's agent default is a constant width (measured, benchmarks/agent_defaults.py); the theory width
    stays available by name, and make_policy keeps the registered (paper) defaults."""
    assert Agent("lin-ucb", d=D, k=K).config["width"] == "constant"
    assert Agent("lin-ucb", d=D, k=K, width="oful").config["width"] == "oful"
    assert nb.make_policy("lin-ucb", nb.ProblemSpec(D, K, T))[0].meta.name == "lin-ucb"
    from nlbandit.policies.registry import resolve_policy

    assert resolve_policy({"name": "lin-ucb"})["width"] == "oful"


def _leaves_close(a, b, rtol):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("numpy_round", [True, False])
def test_delayed_shuffled_rewards_give_the_in_order_state(numpy_round):
    """Lin-UCB's update is a sum over observations, so it commutes (up to rounding): rewards withheld until
    the end and then given back shuffled, in one batch, give the state of the same rewards given back in order
    (both agents decide without feedback in between, so they make the same decisions)."""
    env = _env("linear")
    rounds = 40
    delayed, reference = (Agent("lin-ucb", d=D, k=K, horizon=rounds, seed=1, numpy_round=numpy_round)
                          for _ in range(2))
    assert delayed.numpy_round == numpy_round
    order = np.random.default_rng(0).permutation(rounds)
    assert _play(delayed, env, 1, rounds, order=order.tolist()) == _play(reference, env, 1, rounds,
                                                                          order=list(range(rounds)))
    assert delayed.pending == [] and reference.pending == []
    _leaves_close(delayed.state, reference.state, rtol=1e-9)


def test_each_reward_is_learnt_exactly_once():
    agent = Agent("lin-ucb", d=D, k=K, horizon=T, seed=0)
    x = np.random.default_rng(0).normal(size=(K, D))
    first, second = agent.decide(x), agent.decide(x)
    agent.reward(first.event_id, 1.0)
    before = jax.device_get(agent.state)
    with pytest.raises(ValueError, match="event 1 was already rewarded"):
        agent.reward(first.event_id, 1.0)
    with pytest.raises(ValueError, match="event 3 was never issued"):
        agent.reward(3, 1.0)
    with pytest.raises(ValueError, match="event 2 is rewarded twice in this batch"):  # nothing learnt
        agent.reward([second.event_id, second.event_id], [0.0, 1.0])
    with pytest.raises(ValueError, match="finite"):
        agent.reward(second.event_id, float("nan"))
    _leaves_close(before, agent.state, rtol=0)
    assert agent.pending == [second.event_id]
    agent.reward(second.event_id, 0.0)
    assert agent.pending == []



@pytest.mark.parametrize("numpy_round", [True, False])
def test_an_agent_shared_by_threads_issues_each_event_once_and_saves_a_loadable_file(numpy_round, tmp_path):
    """Four threads deciding and rewarding on one agent (a threaded web server): without the call lock 1,200
    decisions gave 598 distinct event ids, 1,200 rewards were learnt for 598 rounds, and the saved file failed to
    load ('the header's rounds, rewarded and pending events are inconsistent')."""
    import threading

    agent = Agent("lin-ucb", d=D, k=K, seed=0, numpy_round=numpy_round)
    ids: list[int] = []

    def play(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(150):
            decision = agent.decide(rng.normal(size=(K, D)) / 4)
            ids.append(decision.event_id)
            agent.reward(decision.event_id, 1.0)

    threads = [threading.Thread(target=play, args=(s,)) for s in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(ids) == list(range(1, 601)) and (agent.rounds, agent.rewarded, agent.pending) == (600, 600, [])
    loaded = Agent.load(agent.save(tmp_path / "shared.npz"))
    assert (loaded.rounds, loaded.rewarded) == (600, 600)


@pytest.mark.parametrize("numpy_round", [True, False])
def test_learning_when_idle_changes_no_decision(numpy_round):
    """Rewards learnt by ``learn`` right away, or by the next ``decide`` (for the jitted round, in one program
    with the decision): the same decisions and the same state."""
    env = _env("linear")
    idle, lazy = (Agent("lin-ts", d=D, k=K, horizon=T, seed=6, estimate_draws=0, numpy_round=numpy_round)
                  for _ in range(2))
    keys = seed_keys(jnp.uint32(6))
    state = env.reset(keys.env_reset)
    for t in range(1, 41):
        contexts = np.asarray(env.observe(state, round_key(keys.env_observe, t), t)[0])
        first, second = idle.decide(contexts), lazy.decide(contexts)
        np.testing.assert_equal(tuple(first), tuple(second))  # NaN (no probability) equal to NaN
        for agent in (idle, lazy):
            agent.reward(first.event_id, float(contexts[first.arm, 0]))
        assert idle.learn() == 1 and idle.learn() == 0
    _leaves_close(idle.state, lazy.state, rtol=1e-12)


def test_the_callers_buffer_can_change_before_the_reward():
    """The agent learns the contexts it decided on, not what the caller's array holds later (a service
    reuses its buffer)."""
    rng = np.random.default_rng(3)
    rows = [rng.normal(size=(K, D)) for _ in range(5)]
    reused, fresh = (Agent("lin-ucb", d=D, k=K, horizon=T, seed=0) for _ in range(2))
    buffer = np.empty((K, D))
    for x in rows:
        buffer[:] = x
        late = reused.decide(buffer)
        buffer[:] = 0.0  # overwritten before the reward arrives
        reused.reward(late.event_id, 1.0)
        fresh.reward(fresh.decide(x.copy()).event_id, 1.0)
    _leaves_close(reused.state, fresh.state, rtol=0)

@pytest.mark.parametrize("numpy_round", [True, False])
def test_exact_probabilities_are_the_choice_frequencies_and_sum_to_one(numpy_round):
    """Lin-ES (m = 5) reports the fraction of its members that choose the arm: on one state and one arm set,
    decisions with other round keys report the same probability for the same arm, these probabilities sum to
    one over the arms chosen, and each matches the arm's frequency."""
    env = _env("linear")
    agent = Agent("lin-es", d=D, k=K, horizon=3000, seed=3, m=5, numpy_round=numpy_round)
    _play(agent, env, 3, 10)
    x = np.random.default_rng(2).normal(size=(K, D))
    batch = agent.decide_batch(np.repeat(x[None], 2000, axis=0))
    arms = np.array([d.arm for d in batch])
    probs = np.array([d.probability for d in batch])
    assert {d.method for d in batch} == {"exact"}
    total = 0.0
    for arm in np.unique(arms):
        p = probs[arms == arm]
        assert np.all(p == p[0]), arm
        freq = np.mean(arms == arm)
        assert abs(freq - p[0]) <= 5 * np.sqrt(p[0] * (1 - p[0]) / len(arms)) + 1e-3, (arm, freq, p[0])
        total += p[0]
    assert abs(total - 1.0) <= 1e-12


@pytest.mark.parametrize("numpy_round", [True, False])
def test_estimated_probabilities_match_the_choice_frequency(numpy_round):
    """Lin-TS has no closed-form probability: the agent estimates it from its Gaussian score law on the host
    round, by redraws on the jitted one; decisions on the same state and arm set (other round keys) choose
    the arm at that rate."""
    env = _env("linear")
    agent = Agent("lin-ts", d=D, k=K, horizon=500, seed=4, estimate_draws=4000, numpy_round=numpy_round)
    _play(agent, env, 4, 10)
    x = np.random.default_rng(5).normal(size=(K, D)) * 0.3
    batch = agent.decide_batch(np.repeat(x[None], 300, axis=0))
    how = "conditional Gaussian draws" if numpy_round else "redraws"
    assert all(d.method.startswith(f"estimate: 4000 {how}, se ") for d in batch)
    arms = np.array([d.arm for d in batch])
    for arm in np.unique(arms):
        estimates = np.array([d.probability for d in batch if d.arm == arm])
        q = estimates.mean()
        assert np.all(np.abs(estimates - q) <= 6 * np.sqrt(q * (1 - q) / 4000) + 1e-3), arm
        freq = np.mean(arms == arm)
        assert abs(freq - q) <= 5 * np.sqrt(q * (1 - q) / len(arms)) + 0.01, (arm, freq, q)
    assert Agent("lin-ts", d=D, k=K, horizon=T, estimate_draws=0).decide(x).method == "none"


@pytest.mark.parametrize("name, hyper", [
    ("glm-tsl", {"warmup_rounds": 4}), ("glm-fpl", {"warmup_rounds": 4}),
    ("glm-fpl", {"warmup_rounds": 4, "link": "identity"}),
    pytest.param("rep-glm-fpl", {"explore_fraction": 0.05}, marks=pytest.mark.slow)])  # 8–13 s: its Newton redraws
def test_policies_drawing_while_learning_estimate_the_law_of_their_update(name, hyper):
    """GLM-TSL samples θ̃ and GLM-FPL / repGLM-FPL fit perturbed rewards in their update, so redrawing
    ``act`` alone would report probability 1: the estimate redraws through the policy's ``resample``. Its
    estimates match the frequencies of the next decision over 2,000 replays of the last update with other
    keys (each replay then deciding with its own key), through the jitted policy: for GLM-TSL and GLM-FPL with
    the identity link, the host round's Gaussian score law is checked against the jitted update's draws; 5
    standard errors of both plus 0.01."""
    env, draws, replays = _env(), 1000, 2000
    agent = Agent(name, d=D, k=K, horizon=100, seed=6, estimate_draws=draws, **hyper)
    _play(agent, env, 6, 20)
    before = jax.tree.map(jnp.asarray, agent.state)
    keys = seed_keys(jnp.uint32(6))
    x = np.asarray(env.observe(env.reset(keys.env_reset), round_key(keys.env_observe, 21), 21)[0])  # fixed arms
    last = agent.decide(x)
    agent.reward(last.event_id, 1.0)
    batch = agent.decide_batch(np.repeat(x[None], 10, axis=0))
    gaussian = name == "glm-tsl" or hyper.get("link") == "identity"  # a host round's Gaussian score law
    how = "conditional Gaussian draws" if gaussian else "redraws"
    assert all(d.method.startswith(f"estimate: {draws} {how}") for d in batch)

    policy, params, mask = agent.policy, agent._params, jnp.ones(K, bool)
    feedback = nb.core.types.Feedback(jnp.float32(1.0) if policy.meta.dtype == "float32" else jnp.float64(1.0), None)

    def next_arm(key):
        k_update, k_act = jax.random.split(key)
        state = policy.update(params, before, k_update, jnp.asarray(x, policy.meta.dtype), last.arm, feedback,
                              last.event_id)
        return policy.act(params, state, k_act, jnp.asarray(x, policy.meta.dtype), mask, last.event_id + 1)[0]

    arms = np.asarray(jax.jit(jax.vmap(next_arm))(jax.random.split(jax.random.PRNGKey(11), replays)))
    frequencies = np.bincount(arms, minlength=K) / replays
    assert frequencies.max() < 0.99, "the problem does not exercise the exploration"
    for arm in {d.arm for d in batch}:
        q = float(np.mean([d.probability for d in batch if d.arm == arm]))
        margin = 5 * np.sqrt(q * (1 - q) * (1 / replays + 1 / draws)) + 0.01
        assert abs(frequencies[arm] - q) <= margin, (arm, frequencies[arm], q)


@pytest.mark.parametrize("name, hyper", [("deep-fpl", {}), ("neural-phe", {"width": 6, "steps": 3,
                                                                         "duplicate": True})])
def test_policies_without_a_redraw_of_their_training_report_no_probability(name, hyper):
    """DeepFPL and Neural-PHE train on random targets; retraining per redraw is no estimate: NaN, and why."""
    agent = Agent(name, d=D, k=K, horizon=T, seed=1, **hyper)
    _play(agent, _env(), 1, 12)
    decision = agent.decide(np.random.default_rng(0).normal(size=(K, D)))
    assert np.isnan(decision.probability)
    assert decision.method == f"none: {name} draws its exploration while learning and has no redraw of it"


def test_decide_batch_equals_repeated_decide():
    x = np.random.default_rng(0).normal(size=(5, K, D))
    masks = np.ones((5, K), bool)
    masks[2, :3] = False
    one, many = (Agent("lin-ts", d=D, k=K, horizon=T, seed=9, estimate_draws=0) for _ in range(2))
    singles = [one.decide(xi, mi) for xi, mi in zip(x, masks)]
    assert many.decide_batch(x, masks) == singles
    assert singles[2].arm >= 3


def test_save_and_load_round_trip(tmp_path):
    env = _env()
    agent = Agent("glm-tsl", d=D, k=K, horizon=T, seed=2, warmup_rounds=8, backend="history",
                  warmup="round-robin")
    _play(agent, env, 2, 20)
    x = np.random.default_rng(1).normal(size=(K, D))
    open_event = agent.decide(x)
    path = agent.save(tmp_path / "sub" / "agent.npz")
    assert [p.name for p in path.parent.iterdir()] == ["agent.npz"]  # no temporary file left behind
    loaded = Agent.load(path)
    for a, b in zip(jax.tree.leaves(agent.state), jax.tree.leaves(loaded.state), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b)) and a.dtype == b.dtype
    assert loaded.pending == [open_event.event_id] and loaded.rounds == agent.rounds
    assert repr(loaded) == repr(agent)
    assert repr(agent).startswith(f"<Agent 'glm-tsl' d={D} k={K} horizon={T} seed=2: {agent.rounds} decisions, "
                                  f"{agent.rewarded} rewarded, 1 pending; ")
    assert "warmup_rounds=8" in repr(agent) and "backend='history'" in repr(agent)
    for a in (agent, loaded):
        a.reward(open_event.event_id, 1.0)
    assert [agent.decide(x) for _ in range(5)] == [loaded.decide(x) for _ in range(5)]


def test_events_number_from_first_event_id_and_the_numbering_survives_save_and_load(tmp_path):
    """The same decisions as an agent numbered from 1, under ids shifted by first_event_id - 1 (a service's
    agent replacing a removed one of its name), in rewards, pending events, errors and a saved file."""
    x = np.random.default_rng(3).normal(size=(K, D))
    plain, shifted = Agent("lin-ts", d=D, k=K, seed=4), Agent("lin-ts", d=D, k=K, seed=4, first_event_id=101)
    for agent, first in ((plain, 1), (shifted, 101)):
        decisions = [agent.decide(x) for _ in range(3)] + agent.decide_batch(np.stack([x, x]))
        assert [d.event_id for d in decisions] == list(range(first, first + 5))
        agent.reward([first + 1, first + 3], [1.0, 0.0])
        with pytest.raises(ValueError, match=f"event {first - 1} was never issued .*{first}..{first + 4}"):
            agent.reward(first - 1, 1.0)
    assert [d.arm for d in (plain.decide(x), plain.decide(x))] == [d.arm for d in (shifted.decide(x),
                                                                                   shifted.decide(x))]
    loaded = Agent.load(shifted.save(tmp_path / "shifted.npz"))
    assert loaded.pending == shifted.pending == [101, 103, 105, 106, 107] and loaded.first_event_id == 101
    loaded.reward(107, 1.0)
    assert loaded.decide(x).event_id == 108
    for bad in (0, -1, 1.5, True, 2**52 + 1):
        with pytest.raises(ConfigError, match="field 'first_event_id' must be an integer in"):
            Agent("lin-ucb", d=D, k=K, first_event_id=bad)


def test_load_refuses_truncated_foreign_and_other_version_files(tmp_path):
    agent = Agent("lin-ucb", d=D, k=K, horizon=T)
    agent.decide(np.zeros((K, D)))
    path = agent.save(tmp_path / "a.npz")
    data = path.read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a readable saved agent"):
        Agent.load(tmp_path / "cut.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(ValueError, match="not a readable saved agent"):
        Agent.load(tmp_path / "text.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="no saved-agent header"):
        Agent.load(tmp_path / "other.npz")
    with pytest.raises(ValueError, match="no file"):
        Agent.load(tmp_path / "missing.npz")
    with zipfile.ZipFile(path) as z:
        arrays = {n.removesuffix(".npy"): np.load(z.open(n)) for n in z.namelist()}
    header = arrays["header"].tobytes().decode().replace('"version": 1', '"version": 99')
    np.savez(tmp_path / "v99.npz", **{**arrays, "header": np.frombuffer(header.encode(), np.uint8)})
    with pytest.raises(ValueError, match="format version 99; this nlbandit reads version 1"):
        Agent.load(tmp_path / "v99.npz")
    np.savez(tmp_path / "shape.npz", **{**arrays, "state_0": np.zeros(7)})
    with pytest.raises(ValueError, match="incompatible version"):
        Agent.load(tmp_path / "shape.npz")


@pytest.mark.parametrize("numpy_round", [True, False])
def test_second_agent_of_the_same_shapes_compiles_nothing(numpy_round):
    """The jitted round's programs, or the host round's draw blocks, are compiled once for both agents."""
    x = np.random.default_rng(0).normal(size=(K, D))
    first = Agent("lin-es", d=D, k=K, horizon=T, seed=0, m=4, numpy_round=numpy_round)
    first.reward(first.decide(x).event_id, 1.0)
    first.decide(x)
    if numpy_round:
        programs = (first._act_draws._program, first._update_draws._program)
    else:
        programs = (first._programs.act, first._programs.update_act)
    sizes = [p._cache_size() for p in programs]
    assert min(sizes) >= 1
    second = Agent("lin-es", d=D, k=K, horizon=T, seed=1, m=4, sigma_r=0.3, numpy_round=numpy_round)  # a
    second.reward(second.decide(x).event_id, 0.0)  # traced hyperparameter differs
    second.decide(x)
    assert [p._cache_size() for p in programs] == sizes
    assert (second._act_draws._program is programs[0]) if numpy_round else (second._programs.act is programs[0])


def test_the_host_round_compiles_once_whatever_the_callers_arrays():
    """Read-only, Fortran-ordered or strided contexts and masks, and the read-only arrays of the initial state,
    reach the host round's numba functions as the one argument type every later round has, so that none is
    compiled again for them (each compilation of GLM-TSL's learning step takes seconds)."""
    x = np.random.default_rng(2).normal(size=(K, D)) / 2
    mask = [True] * (K - 1) + [False]

    def play(agent, contexts, offered):
        for t in range(6):
            decision = agent.decide(contexts, offered if t % 2 else None)
            agent.reward(decision.event_id, float(t % 3 == 0))
        agent.learn()

    play(Agent("glm-tsl", d=D, k=K, horizon=T, seed=0, warmup_rounds=2), x, np.array(mask))
    compiled = host_specializations()
    assert compiled > 0, "the host round's numba functions were not found"
    strided = np.zeros((K, 2 * D))
    strided[:, ::2] = x
    read_only = np.asfortranarray(x)
    read_only.flags.writeable = False
    for contexts, offered in ((read_only, np.asarray(jnp.asarray(mask))), (strided[:, ::2], np.repeat(mask, 2)[::2])):
        play(Agent("glm-tsl", d=D, k=K, horizon=T, seed=1, warmup_rounds=2), contexts, offered)
        assert host_specializations() == compiled


def test_bad_input_is_refused_with_the_field_named():
    agent = Agent("glm-ucb", d=D, k=K, horizon=3, warmup="round-robin", warmup_rounds=1, backend="history")
    x = np.zeros((K, D))
    with pytest.raises(ValueError, match=r"contexts must have shape \(k, d\) = \(6, 4\)"):
        agent.decide(np.zeros((K, D + 1)))
    with pytest.raises(ValueError, match="finite"):
        agent.decide(np.full((K, D), np.nan))
    with pytest.raises(ValueError, match="mask offers no arm"):
        agent.decide(x, np.zeros(K, bool))
    with pytest.raises(ValueError, match="mask must be a boolean array"):
        agent.decide(x, np.ones(K))
    event = agent.decide(x).event_id
    with pytest.raises(ValueError, match=r"outside \[0.0, 1.0\]"):
        agent.reward(event, 2.0)
    with pytest.raises(ValueError, match="omit variance_bound"):
        agent.reward(event, 1.0, variance_bound=0.5)
    agent.decide(x), agent.decide(x)
    with pytest.raises(ValueError, match="history of at most"):
        agent.decide(x)
    with pytest.raises(ConfigError, match="'horizon' must be an integer >= 1"):
        Agent("lin-ucb", d=D, k=K, horizon=0)
    with pytest.raises(ConfigError, match="unknown argument 'bogus'; the Agent's own are horizon, seed, .* and "
                                          "policy 'lin-ucb' takes alpha, delta, lam"):
        Agent("lin-ucb", d=D, k=K, horizon=T, bogus=1)
    with pytest.raises(ConfigError, match="unknown argument 'horizn'; the Agent's own are horizon"):
        Agent("lin-ucb", d=D, k=K, horizn=T)
    with pytest.raises(ConfigError, match=r"field 'estimate_draws' must be an integer in \[0, 100000\], got 2251"):
        Agent("lin-ts", d=D, k=K, estimate_draws=2**51)  # once accepted, then a MemoryError at the first decision
    ok = Agent("lin-ucb", d=D, k=K, horizon=T)
    event = ok.decide(x).event_id
    for bad, message in [(None, "event_id must be an integer, or a list, tuple or 1-D array of them, got NoneType"),
                         ({event: 1}, "got dict"), (np.array([[event]]), r"must be 1-D, got shape \(1, 1\)")]:
        with pytest.raises(ValueError, match=message):  # (a dict once rewarded its keys)
            ok.reward(bad, 1.0)
    with pytest.raises(ValueError, match=r"masks must have shape \(B, k\) .* got shape \(\)"):
        ok.decide_batch(x[None], masks=True)
    ok.reward(np.array(event), 1.0)  # a 0-d array is one event id
    assert ok.rewarded == 1
    for name in ("no-such-policy", ["lin-ucb"]):  # (the argument is 'policy', not an experiment file's 'name')
        with pytest.raises(ConfigError, match=r"Agent policy .*: field 'policy' must be one of ada-ofu-ecolog, .*"
                                              r"\(or <policy>@anytime\), got"):
            Agent(name, d=D, k=K, horizon=T)


def test_fewer_arms_and_unserialisable_meta_get_a_hint(tmp_path):
    agent = Agent("lin-ucb", d=D, k=K)
    with pytest.raises(ValueError, match="to offer fewer arms, pad the contexts to k rows and mask the extra ones"):
        agent.decide(np.zeros((K - 1, D)))
    with pytest.raises(ValueError, match="meta must be JSON-serialisable"):
        agent.save(tmp_path / "a.npz", meta={"x": np.float32(1)})
    with pytest.raises(ValueError, match="meta must be a dict"):
        agent.save(tmp_path / "a.npz", meta=[1, 2])
    assert list(tmp_path.iterdir()) == []


def test_the_agent_refuses_the_values_the_http_api_refuses():
    """Booleans, strings and complex numbers (the HTTP API's 400s) are refused by the agent too: they were
    converted (a complex context lost its imaginary part with a warning, ["0.5"] became 0.5, True 1.0)."""
    agent = Agent("lin-ucb", d=D, k=K, horizon=T)
    x = np.zeros((K, D))
    for bad in (x + 1j, x.astype(str), x.astype(bool), [["1"] * D] * K):
        with pytest.raises(ValueError, match="contexts must be real numbers"):
            agent.decide(bad)
        with pytest.raises(ValueError, match="contexts must be real numbers"):
            agent.decide_batch(np.asarray(bad)[None])
    events = [agent.decide(x).event_id for _ in range(2)]
    for value in (True, "1.0", 1 + 0j, np.bool_(True)):
        with pytest.raises(ValueError, match="must be a finite number"):
            agent.reward(events[0], value)
    with pytest.raises(ValueError, match="must be a finite number"):
        agent.reward(events, ["0.5", "1"])
    mor = Agent("mor-ucb", d=D, k=K, horizon=T)
    event = mor.decide(x).event_id
    with pytest.raises(ValueError, match="variance_bound of event 1 must be a number"):
        mor.reward(event, 0.3, variance_bound="0.5")
    assert agent.pending == events and mor.pending == [event]
    agent.reward(events, [np.float32(0.5), 1])  # NumPy and Python numbers are numbers


def test_the_agent_validates_through_the_same_path_as_make_policy():
    """A configuration a family refuses is refused by the agent before anything is compiled, with the message
    ``make_policy`` gives for an environment of those sizes; the default neural network builds for an odd d
    (its input duplicated), where it once failed inside JAX at the first decision."""
    agent = Agent("neural-ucb", d=5, k=3, horizon=50, width=4, steps=2)
    assert agent.config["duplicate"] is True
    assert agent.decide(np.ones((3, 5))).arm in range(3)
    refused = dict(duplicate=False), dict(link="identity", warmup="round-robin", warmup_rounds=60)
    for name, hyper in zip(("neural-ucb", "glm-ucb"), refused):
        with pytest.raises(ConfigError) as online:
            Agent(name, d=5, k=3, horizon=50, **hyper)
        with pytest.raises(ConfigError) as offline:
            nb.make_policy(name, nb.make_env("linear", d=5, k=3), horizon=50, **hyper)
        assert str(online.value).split(": ", 1)[1] == str(offline.value).split(": ", 1)[1]
        with pytest.raises(ConfigError, match=str(offline.value).split(": ", 1)[1][:40]):
            nb.make_policy(name, nb.ProblemSpec(5, 3, 50), **hyper)


@pytest.mark.parametrize("name", ["neural-ucb", "neural-ts", "neural-greedy", "neural-es", "neural-phe"])
def test_default_neural_networks_build_for_every_input_dimension(name):
    for d in (1, 2, 5):  # traced, not run: a network that cannot be built fails while tracing
        policy, params = nb.make_policy(name, nb.ProblemSpec(d, 3, 20))
        state = jax.eval_shape(lambda: policy.init(params, jax.random.key(0)))
        arm, _ = jax.eval_shape(lambda s: policy.act(params, s, jax.random.key(1), jnp.ones((3, d)), jnp.ones(3, bool),
                                                     jnp.asarray(1)), state)
        assert arm.shape == ()


@pytest.mark.parametrize("numpy_round", [True, False])
def test_a_learning_step_that_raises_learns_each_reward_once(numpy_round, monkeypatch):
    """Rewards learnt before a failing update leave the queue: a retry learns the rest, each reward once (they
    were learnt again on every retry). The final state is the state of learning them without the failure."""
    x = np.random.default_rng(3).normal(size=(K, D))
    agents = [Agent("lin-ucb", d=D, k=K, horizon=T, seed=1, numpy_round=numpy_round) for _ in range(2)]
    for agent in agents:
        events = [agent.decide(x).event_id for _ in range(5)]
        agent.reward(events, [1.0, 0.0, 1.0, 1.0, 0.0])
    faulty, learnt = agents[0], []
    if numpy_round:
        real = faulty._host.update

        def update(params, state, draws, contexts, arm, reward, t):
            if t == 3 and 3 not in learnt:
                learnt.append(3)
                raise FloatingPointError("a failing update")
            learnt.append(t)
            return real(params, state, draws, contexts, arm, reward, t)
        faulty._host = faulty._host._replace(update=update)
    else:
        real = faulty._programs.update

        def update(params, state, stream, contexts, arm, reward, bound, t):
            if t == 3 and 3 not in learnt:
                learnt.append(3)
                raise FloatingPointError("a failing update")
            learnt.append(t)
            return real(params, state, stream, contexts, arm, reward, bound, t)
        faulty._programs = faulty._programs._replace(update=update)
    with pytest.raises(FloatingPointError):
        faulty.learn()
    assert faulty.learn() == 3
    assert learnt == [1, 2, 3, 3, 4, 5]  # 3 failed once, then every event learnt once
    for a, b in zip(jax.tree.leaves(faulty.state), jax.tree.leaves(agents[1].state), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_contexts_and_rewards_beyond_the_documented_magnitude_are_refused():
    """A finite but huge feature vector once overflowed glm-ucb's statistics (every later decide failed, also
    after a restart; contexts x 1e150-1e308 raised ZeroDivisionError / LinAlgError): refused at the door."""
    from nlbandit.agent import MAX_MAGNITUDE

    agent = Agent("glm-ucb", d=D, k=K, horizon=T)  # per-arm statistics: round 1's arms are kept
    x = np.random.default_rng(0).normal(size=(K, D))
    for scale in (1e150, 1e300, 2 * MAX_MAGNITUDE / np.abs(x[0]).max()):
        with pytest.raises(ValueError, match="magnitude at most 1e\\+06"):
            agent.decide(np.vstack([x[:1] * scale, x[1:]]))  # one arm scaled
    at_bound = np.vstack([x[:1] * MAX_MAGNITUDE / np.abs(x[0]).max(), x[1:]])  # the bound itself is accepted
    agent.reward(agent.decide(at_bound).event_id, 1.0)
    assert np.isfinite(agent.decide(at_bound).score)
    lin = Agent("lin-ucb", d=D, k=K, horizon=T)
    with pytest.raises(ValueError, match="magnitude at most"):
        lin.reward(lin.decide(x).event_id, 1e300)


def test_a_diverged_network_stops_deciding_with_a_message():
    """Features x 1e3 make neural-ucb's training diverge; the agent served NaN scores silently (90 of 100
    decisions). Now every decision it returns has a finite score, and it stops as simulate does."""
    from nlbandit.agent import PolicyDiverged

    agent = Agent("neural-ucb", d=4, k=3, horizon=200, seed=0)
    rng = np.random.default_rng(0)
    with pytest.raises(PolicyDiverged, match="no longer finite after learning the rewards up to event"):
        for _ in range(100):
            decision = agent.decide(rng.normal(size=(3, 4)) * 1e3)
            assert np.isfinite(decision.score)
            agent.reward(decision.event_id, float(rng.random() < 0.5))
    assert agent.rounds < 100


def test_an_agent_too_large_for_memory_is_refused_before_allocating():
    with pytest.raises(ConfigError, match=r"needs about 149 GiB of memory .* more than this machine"):
        Agent("lin-ucb", d=100_000, k=3, horizon=100)  # once aborted the Python process


def _arrays(path):
    with zipfile.ZipFile(path) as z:
        return {n.removesuffix(".npy"): np.load(z.open(n)) for n in z.namelist()}


def _with_header(tmp_path, arrays, name, change):
    header = json.loads(arrays["header"].tobytes().decode())
    change(header)
    np.savez(tmp_path / name, **{**arrays, "header": np.frombuffer(json.dumps(header).encode(), np.uint8)})
    return tmp_path / name


CRAFTED = {  # a change to a saved header -> the message it must get
    "missing d": (lambda h: h.pop("d"), "field 'd' must be an integer >= 1, got None"),
    "string d": (lambda h: h.update(d="4"), "field 'd' must be an integer >= 1, got '4'"),
    "huge seed": (lambda h: h.update(seed=2**70), r"field 'seed' must be an integer in \[0, 2\*\*32 - 1\]"),
    "pending out of range": (lambda h: h.update(pending=[[99, 0]]), "inconsistent"),
    "pending arm out of range": (lambda h: h.update(pending=[[h["rounds"], K]]), "inconsistent"),
    "rewarded beyond rounds": (lambda h: h.update(rewarded=h["rounds"] + 5), "inconsistent"),
    "no policy": (lambda h: h.pop("policy"), "does not resolve"),
    "meta not an object": (lambda h: h.update(meta=[1]), "'meta' must be an object"),
    "learnt_upto a string": (lambda h: h.update(learnt_upto="x"), r"'learnt_upto' must be an integer in \[0, rounds"),
    "learnt_upto beyond rounds": (lambda h: h.update(learnt_upto=10**9), "'learnt_upto' must be an integer in"),
    "first_event_id zero": (lambda h: h.update(first_event_id=0), "field 'first_event_id' must be an integer in"),
}


@pytest.mark.parametrize("case", CRAFTED)
def test_load_refuses_crafted_headers_with_the_field_named(tmp_path, case):
    agent = Agent("lin-ucb", d=D, k=K, horizon=T)
    agent.reward(agent.decide(np.ones((K, D))).event_id, 1.0)
    agent.decide(np.ones((K, D)))
    change, message = CRAFTED[case]
    with pytest.raises(ValueError, match=message):
        Agent.load(_with_header(tmp_path, _arrays(agent.save(tmp_path / "a.npz")), "x.npz", change))


def test_load_refuses_a_nan_state_a_huge_declared_array_and_a_fifo(tmp_path):
    agent = Agent("lin-ucb", d=D, k=K, horizon=T)
    arrays = _arrays(agent.save(tmp_path / "a.npz"))
    np.savez(tmp_path / "nan.npz", **{**arrays, "state_0": np.full_like(arrays["state_0"], np.nan)})
    with pytest.raises(ValueError, match="NaN or infinite"):
        Agent.load(tmp_path / "nan.npz")
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:  # a member whose .npy header declares 7 TiB
        for name, a in arrays.items():
            with z.open(f"{name}.npy", "w") as f:
                if name == "state_0":
                    np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False,
                                                             "shape": (2**40, 1)})
                    f.write(b"\0" * 64)
                else:
                    np.lib.format.write_array(f, a)
    with pytest.raises(ValueError, match="declares 8796093022208 bytes of float64 but holds 64"):
        Agent.load(tmp_path / "huge.npz")
    bomb = np.zeros(10**7)  # 80 MB that compress to 80 kB: not read, whether unknown or of the wrong shape
    np.savez_compressed(tmp_path / "extra.npz", **arrays, junk=bomb)
    np.savez_compressed(tmp_path / "wrong.npz", **{**arrays, "state_0": bomb})
    _with_header(tmp_path, arrays, "leaves.npz", lambda h: h.update(state_leaves=10**9))
    np.savez(tmp_path / "deep.npz", **{**arrays, "header": np.frombuffer(b"[" * 100_000, np.uint8)})
    with pytest.raises(ValueError, match="has no saved-agent header"):  # (once a RecursionError)
        Agent.load(tmp_path / "deep.npz")
    tracemalloc.start()
    try:
        assert Agent.load(tmp_path / "extra.npz").rounds == 0
        with pytest.raises(ValueError, match="the saved state does not match"):
            Agent.load(tmp_path / "wrong.npz")
        with pytest.raises(ValueError, match="the saved state does not match"):
            Agent.load(tmp_path / "leaves.npz")  # (once a list of 10⁹ entries first)
        assert tracemalloc.get_traced_memory()[1] < bomb.nbytes / 4
    finally:
        tracemalloc.stop()
    os.mkfifo(tmp_path / "fifo")  # once hung forever
    with pytest.raises(ValueError, match="not a regular file"):
        Agent.load(tmp_path / "fifo")


HORIZON_FREE = [("lin-phe", {}), ("glm-ucb", {"backend": "history"}), ("glm-tsl", {"backend": "history"}),
                ("neural-ucb", {"width": 8})]


@pytest.mark.parametrize("name, hyper", HORIZON_FREE, ids=[n for n, _ in HORIZON_FREE])
def test_a_horizon_free_agent_grows_its_buffer_and_decides_as_a_long_horizon_one(name, hyper, monkeypatch):
    """Without a horizon the agent doubles its policy's horizon when reached, carrying the history buffer over:
    built for 8 decisions (so it grows three times in 40), it decides as an agent built for 64, where T
    sizes the buffer only."""
    import nlbandit.agent as agent_module

    monkeypatch.setattr(agent_module, "INITIAL_HORIZON", 8)
    env = _env()
    free, fixed = Agent(name, d=D, k=K, seed=3, **hyper), Agent(name, d=D, k=K, horizon=64, seed=3, **hyper)
    assert _play(free, env, 3, 40) == _play(fixed, env, 3, 40)
    assert free.spec.horizon == 64 and free.rounds == 40
    assert "horizon-free: built for T = 64" in free.decide(free._arms).method  # round 1's arms: fixed-arm policies


def test_a_horizon_free_agent_survives_save_and_load(tmp_path, monkeypatch):
    import nlbandit.agent as agent_module

    monkeypatch.setattr(agent_module, "INITIAL_HORIZON", 8)
    env = _env()
    agent = Agent("glm-ucb", d=D, k=K, seed=1, backend="history")
    _play(agent, env, 1, 12)
    loaded = Agent.load(agent.save(tmp_path / "a.npz"))
    assert loaded.horizon_free and loaded.spec.horizon == 16
    x = agent._arms
    assert [agent.decide(x).arm for _ in range(10)] == [loaded.decide(x).arm for _ in range(10)]
    assert loaded.spec.horizon == 32


def test_a_horizon_free_agent_grows_to_the_int32_limit_and_no_further():
    """Doubling from 2**30 stops at 2**31 - 1, the most a saved agent's horizon may be (it once grew to 2**31, which
    save wrote and load refused); the decision after that many is refused naming the limit. (The decisions before
    are stood in for by the agent's round count.)"""
    from nlbandit.arguments import check_sizes

    x = np.random.default_rng(0).normal(size=(4, 3))
    agent = Agent("lin-ucb", 3, 4, seed=0)
    agent.reward(agent.decide(x).event_id, 0.5)
    agent._t = 2**30
    agent.decide(x)
    assert agent.spec.horizon == 2**31 - 1
    check_sizes("Agent.load", horizon=agent.spec.horizon)  # the check load makes of a saved header's horizon
    with pytest.raises(ConfigError, match="field 'horizon' = 2147483648 is more than 2147483647"):
        check_sizes("Agent.load", horizon=2**31)  # what the unbounded doubling saved
    agent._t = 2**31 - 1
    with pytest.raises(ValueError, match=r"^decide: this agent has made 2147483647 decisions and makes at most "):
        agent.decide(x)


def test_values_beyond_float64_and_ragged_or_boolean_input_are_refused_as_the_http_api_refuses_them():
    """Hyperparameters within their ranges but beyond float64's (λ = 1e-320 makes V⁻¹ = I/λ infinite; σ = 1e308
    overflows the width; an integer of 401 digits), a boolean among a batch's rewards and ragged contexts: each a
    ConfigError or ValueError naming what is wrong (once a ZeroDivisionError, an OverflowError, a reward of 1.0 and
    NumPy's own message), nothing applied."""
    x = np.random.default_rng(0).normal(size=(4, 3))
    with pytest.raises(ConfigError, match=r"initial state is not finite with lam=1e-320"):
        Agent("lin-ucb", 3, 4, lam=1e-320)
    with pytest.raises(ValueError, match=r"round 1's arithmetic failed \(ZeroDivisionError.*'sigma': 1e\+308"):
        Agent("lin-ucb", 3, 4, width="oful", sigma=1e308).decide(x)
    with pytest.raises(ConfigError, match=r"field 'alpha' is an integer of 401 digits, beyond float64's range"):
        Agent("lin-ucb", 3, 4, alpha=10**400)
    agent = Agent("lin-ucb", 3, 4)
    first, second = agent.decide(x).event_id, agent.decide(x).event_id
    with pytest.raises(ValueError, match=rf"value of event {second} must be a finite number .*, got True"):
        agent.reward([first, second], [0.5, True])
    assert agent.rewarded == 0
    agent.reward([first, second], np.array([0.5, 0.25]))  # an array's values, as before
    with pytest.raises(ValueError, match=r"^decide: contexts must be an array of real numbers with rows of one len"):
        agent.decide([[1.0, 2.0, 3.0], [1.0, 2.0]])
    assert agent.rounds == 2


def test_a_jitted_agent_shared_with_a_training_thread_never_reads_a_donated_state():
    """Decisions that learn (the jitted update_act, which donates the state it replaces) in one thread while another
    calls learn() and reads state over and over, as docs/online.md allows: no read of a released buffer (once
    thousands of 'Buffer has been deleted or donated' errors in 2,000 decisions), and the same decisions as alone."""
    import threading

    rng = np.random.default_rng(0)
    contexts = [rng.normal(size=(50, 20)) / 5 for _ in range(300)]
    shared, alone = Agent("lin-ucb", 20, 50, seed=0, numpy_round=False), Agent("lin-ucb", 20, 50, seed=0,
                                                                              numpy_round=False)
    errors, stop = [], threading.Event()

    def trainer():
        while not stop.is_set():
            try:
                shared.learn()
                shared.state
            except Exception as e:  # noqa: BLE001 -- any error in the thread fails the test
                errors.append(f"{type(e).__name__}: {e}")

    thread = threading.Thread(target=trainer)
    thread.start()
    arms = []
    for x in contexts:
        arms.append(shared.decide(x).arm)
        shared.reward(shared.rounds, 1.0)
    stop.set()
    thread.join()
    assert errors == []
    expected = []
    for x in contexts:
        expected.append(alone.decide(x).arm)
        alone.reward(alone.rounds, 1.0)
    assert arms == expected


def test_the_host_states_finiteness_check_is_exact_also_where_its_sum_overflows():
    from nlbandit.agent import _finite

    big = np.array([1e308, 1e308])  # finite, but their sum overflows: checked element by element
    assert _finite((np.ones((3, 2)), big, np.int32(7), 2.5))
    for bad in (np.inf, -np.inf, np.nan):
        assert not _finite((np.ones(3), np.array([1.0, bad])))
        assert not _finite((np.ones(3), bad))
    assert _finite((np.array([1, 2], np.int64),))


def test_a_glm_agent_on_changing_contexts_is_told_of_its_history_form_which_serves_them():
    rng = np.random.default_rng(0)
    fixed = Agent("glm-ucb", 3, 4)
    fixed.decide(rng.normal(size=(4, 3)))
    with pytest.raises(ValueError, match="backend='history' with warmup='none'"):
        fixed.decide(rng.normal(size=(4, 3)))
    first_batch = Agent("glm-ucb", 3, 4)  # a first call of several rounds fixes its first round's arms
    x = rng.normal(size=(4, 3))
    with pytest.raises(ValueError, match=r"decide_batch\[1\]: policy 'glm-ucb' keeps per-arm statistics"):
        first_batch.decide_batch(np.stack([x, x[::-1]]))
    assert first_batch.rounds == 0 and len(first_batch.decide_batch(np.stack([x, x]))) == 2
    history = Agent("glm-ucb", 3, 4, backend="history", warmup="none")
    for _ in range(3):
        history.reward(history.decide(rng.normal(size=(4, 3))).event_id, 1.0)
    assert history.rewarded == 3


def test_the_finiteness_check_skips_only_the_arrays_it_checked_before():
    from nlbandit.agent import _finite

    bad = np.array([1.0, np.nan])
    assert _finite([np.ones(2), bad], checked=[None, bad])  # the very same object: checked when it was learnt
    assert not _finite([np.ones(2), bad.copy()], checked=[None, bad])  # a new array is checked


@pytest.mark.parametrize("policy", ["lin-ucb", "lin-ts", "lin-es", "glm-ucb", "ucb-glm", "glm-tsl", "glm-fpl",
                                    "uniform", "greedy", "eps-greedy"])
def test_a_host_round_never_changes_a_states_arrays_in_place(policy):
    """What the finiteness check (which skips arrays carried over unchanged) and the host rounds' per-state
    caches rely on: learning returns new arrays and leaves the previous state's as they were."""
    rng = np.random.default_rng(1)
    agent = Agent(policy, 3, 4, seed=2, **({"link": "identity"} if policy.startswith(("glm", "ucb-glm")) else {}))
    assert agent.numpy_round
    arms = rng.normal(size=(4, 3))
    for t in range(12):
        before = agent._state
        copies = [np.array(a, copy=True) for a in jax.tree.leaves(before)]
        agent.reward(agent.decide(arms).event_id, float(rng.normal()))
        agent.learn()
        assert all(np.array_equal(a, c, equal_nan=True) for a, c in zip(jax.tree.leaves(before), copies)), t


def test_a_non_finite_array_carried_over_by_later_updates_still_stops_the_agent():
    """The finiteness check skips arrays it checked before; one it found non-finite must not count as checked."""
    from nlbandit.agent import PolicyDiverged

    rng = np.random.default_rng(3)
    agent = Agent("lin-ucb", 3, 4)
    events = [agent.decide(rng.normal(size=(4, 3))).event_id for _ in range(3)]
    agent._host = agent._host._replace(update=lambda params, state, *rest: state)  # carries every array over
    agent._state = agent._state._replace(b=np.array([np.nan, 0.0, 0.0]))
    for e in events:
        agent.reward(e, 1.0)
        agent.learn()
    with pytest.raises(PolicyDiverged):
        agent.decide(rng.normal(size=(4, 3)))
