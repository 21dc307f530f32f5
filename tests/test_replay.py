"""Logged-data replay (nlbandit.core.replay, Li et al. 2011): an event is accepted exactly when the policy
plays the logged arm, and nothing is updated otherwise; with uniform logging the replayed reward estimates the
policy's value (checked against the truth and against IPS on the same data)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from nlbandit.core.replay import Logged, replay
from nlbandit.core.types import ActInfo, Policy, PolicyMeta
from nlbandit.replay.estimators import estimate

NAN = jnp.float64(jnp.nan)


def _policy(act, update=lambda state, arm, reward: state + 1, init=0):
    """A hand-built policy: ``act(state, contexts) -> arm``; its state counts updates unless told otherwise."""
    return Policy(lambda params, key: jnp.asarray(init),
                  lambda params, state, key, contexts, mask, t: (act(state, contexts), ActInfo(NAN, NAN, NAN)),
                  lambda params, state, key, contexts, arm, feedback, t: update(state, arm, feedback.reward),
                  PolicyMeta("test"))


def _data(n=400, k=4, seed=0):
    rng = np.random.default_rng(seed)
    contexts = rng.normal(size=(n, k, 3))
    logged = rng.integers(0, k, n)
    reward = rng.uniform(size=n)
    return Logged(contexts, logged, reward)


def test_accepts_exactly_the_events_whose_logged_arm_the_policy_plays():
    data = _data()
    greedy = _policy(lambda state, ctx: jnp.argmax(ctx[:, 0]))
    choice = np.argmax(data.contexts[:, :, 0], axis=1)
    agree = choice == data.logged
    res = replay(data, greedy, {}, 10_000, range(3), passes=1)  # one pass: every event is read once
    assert res.accepted.tolist() == [agree.sum()] * 3
    np.testing.assert_allclose(res.cum_reward[:, -1], data.reward[agree].sum())
    for s in range(3):
        assert sorted(res.arms[s, :agree.sum()].tolist()) == sorted(choice[agree].tolist())
        assert res.events[s, agree.sum() - 1] <= 400 and np.all(np.diff(res.events[s, :agree.sum()]) > 0)
    short = replay(data, greedy, {}, 10, range(2), passes=1)
    assert short.accepted.tolist() == [10, 10] and short.cum_reward.shape == (2, 10)


def test_a_skipped_event_updates_nothing():
    data = _data()._replace(logged=np.zeros(400, np.int64))
    # plays arm (number of updates) mod K: the first event (logged arm 0) is accepted and updates once; had a
    # skipped event updated the state too, arm 0 would come round again every K events
    rotating = _policy(lambda state, ctx: state % 4)
    res = replay(data, rotating, {}, 50, range(2), passes=2)
    assert res.accepted.tolist() == [1, 1] and np.all(res.events[:, 0] == 1)


def test_uniform_logging_replay_estimates_the_policy_value_like_ips():
    rng = np.random.default_rng(3)
    n, k = 20_000, 3
    contexts = rng.normal(size=(n, k, 2))
    means = 1 / (1 + np.exp(-2 * contexts[:, :, 0]))  # Bernoulli mean of each arm given its context
    logged = rng.integers(0, k, n)  # uniform logging
    reward = (rng.uniform(size=n) < means[np.arange(n), logged]).astype(float)
    data = Logged(contexts, logged, reward)
    greedy = _policy(lambda state, ctx: jnp.argmax(ctx[:, 0]))
    truth = means[np.arange(n), np.argmax(contexts[:, :, 0], axis=1)].mean()
    res = replay(data, greedy, {}, 5000, range(4), passes=1)
    ctr = res.cum_reward[:, -1] / res.accepted
    ips = estimate("ips", logged, reward, np.full(n, 1 / k), np.eye(k)[np.argmax(contexts[:, :, 0], axis=1)])
    se = np.sqrt(truth * (1 - truth) / res.accepted.mean())
    assert np.all(np.abs(ctr - truth) < 4 * se) and ips.lo <= truth <= ips.hi
    assert abs(ctr.mean() - ips.value) < 4 * se  # the same accepted events, reweighted: close to each other


@pytest.mark.parametrize("change, message", [
    (dict(logged=np.full(400, 4)), "logged arms must be integers in 0..3"),
    (dict(reward=np.full(400, np.inf)), "must be finite"),
    (dict(reward=np.ones(3)), "logged, reward"),
])
def test_malformed_logged_data_is_refused(change, message):
    with pytest.raises(ValueError, match=message):
        replay(_data()._replace(**change), _policy(lambda state, ctx: 0), {}, 10, range(1))


@pytest.mark.parametrize("name", ["lin-ucb", "neurallog-ts-2"])
def test_registered_policies_replay(name):
    import nlbandit as nb
    from nlbandit.policies.registry import make_policy

    data = _data(n=300, k=4)
    policy, params = make_policy(name, nb.ProblemSpec(3, 4, 40))
    res = replay(data, policy, params, 40, range(2), passes=3)
    assert res.accepted.tolist() == [40, 40] and np.all(np.diff(res.cum_reward, axis=1) >= 0)


def test_a_grid_equals_its_points_run_alone():
    import jax

    import nlbandit as nb
    from nlbandit.policies.registry import make_policy

    data = _data(n=300, k=4)
    policy, params = make_policy("lin-ucb", nb.ProblemSpec(3, 4, 30))
    field = params._fields[0]
    values = jax.numpy.asarray([0.1, 2.0])
    grid = params._replace(**{field: values})
    both = replay(data, policy, jax.tree.map(lambda a: jax.numpy.broadcast_to(a, (2,)), grid), 30, range(2),
                  grid=True, passes=3)
    for i, v in enumerate(values):
        alone = replay(data, policy, params._replace(**{field: v}), 30, range(2), passes=3)
        np.testing.assert_array_equal(both.cum_reward[i], alone.cum_reward)
        np.testing.assert_array_equal(both.arms[i], alone.arms)


def test_the_replay_loop_refuses_a_run_that_ran_out_of_passes(monkeypatch):
    # (it stored the clicks of fewer accepted events than the horizon, which the click rate then divided by T)
    from types import SimpleNamespace

    from nlbandit.core.hyper import ConfigError
    from nlbandit.experiments.spec import RunConfig
    from nlbandit.loops import replay as loop_module
    from nlbandit.policies.registry import resolve_policy

    data = _data(n=40, k=5)
    monkeypatch.setattr(loop_module.obd, "load", lambda: None)
    monkeypatch.setattr(loop_module.obd, "bandit", lambda _: SimpleNamespace(
        contexts=data.contexts, logged=data.logged, click=data.reward))

    def run(passes):
        env = {"name": "obd", "passes": passes, "d": 3, "k": 5, "data_sha256": "x"}
        return RunConfig("U", (), env, resolve_policy({"name": "uniform"}), 30, 2, 10, "replay")

    done = loop_module.ReplayLoop().compute([run(40)], [0, 1])  # 40 passes of 40 events: ~320 accepted
    assert done.curves[0]["events"].shape == (2, 10)
    with pytest.raises(ConfigError, match="a run accepted [0-9]+ events in 1 passes over the logged data, fewer than "
                                          "the horizon's 30; raise the \\[env\\] field 'passes'"):
        loop_module.ReplayLoop().compute([run(1)], [0, 1])  # one pass of 40 events: ~8 accepted
