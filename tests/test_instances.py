"""Exported instances (nlbandit.instances): the simulator's problem as arrays, and any arm sequence scored on it."""

from __future__ import annotations

import numpy as np
import pytest

import nlbandit as nb
from nlbandit.instances import Instance, export_instance, replay_arms


@pytest.mark.parametrize("env_name", ["linear", "logistic"])
def test_replaying_a_simulations_arms_gives_its_rewards_and_regret(env_name):
    """Rewards to the bit; regret to rounding (the means come from another compiled program, where XLA may
    evaluate the logistic link differently in the last bit)."""
    env = nb.make_env(env_name, d=4, k=7)
    policy, params = nb.make_policy("lin-ts", nb.ProblemSpec(4, 7, 250))
    result = nb.simulate(env, policy, params, 250, [3, 11])
    for i, seed in enumerate((3, 11)):
        instance = export_instance(env, seed, 250, {"d": 4, "k": 7}, chunk=100)
        assert instance.contexts.shape == (250, 7, 4) and instance.rewards.shape == (250, 7)
        scored = replay_arms(instance, result.arms[i])
        assert scored["cum_reward"][-1] == result.cum_reward[i, -1]
        np.testing.assert_allclose(scored["cum_regret"][-1], result.final_regret[i], rtol=1e-12)


def test_save_load_round_trip_and_bad_arm_sequences(tmp_path):
    env = nb.make_env("linear", d=3, k=5)
    instance = export_instance(env, 5, 40, {"d": 3, "k": 5})  # (a seed other than 0, so that a lost one shows)
    loaded = Instance.load(instance.save(tmp_path / "i.npz"))
    for a, b in zip(instance[:4], loaded[:4]):
        assert np.array_equal(a, b)
    assert list(loaded.state) == list(instance.state) == [".theta", ".arms"]
    for name, array in instance.state.items():  # the arrays themselves, each under its own name
        assert np.any(array != 0) and np.array_equal(loaded.state[name], array), name
    assert loaded.env == {"name": "linear", "d": 3, "k": 5} and loaded.seed == instance.seed == 5
    assert [p.name for p in tmp_path.iterdir()] == ["i.npz"]
    with pytest.raises(ValueError, match="40 integer arm indices"):
        replay_arms(instance, np.zeros(39, int))
    with pytest.raises(ValueError, match=r"lie in 0..4"):
        replay_arms(instance, np.full(40, 5))
    masked = instance._replace(mask=instance.mask.copy())
    masked.mask[6, 2] = False
    with pytest.raises(ValueError, match="round 7 chose arm 2, which was not available"):
        replay_arms(masked, np.full(40, 2))
    (tmp_path / "x.npz").write_text("no")
    with pytest.raises(ValueError, match="not a saved instance"):
        Instance.load(tmp_path / "x.npz")


def test_numpy_integers_are_sizes_and_seeds_and_booleans_are_not():
    """A seed or horizon taken from a NumPy array (np.int64) exports the instance a Python int does, saved with a
    Python int seed; a boolean is refused."""
    env = nb.make_env("linear", d=3, k=5)
    plain, numpy = export_instance(env, 3, 20), export_instance(env, np.int64(3), np.int32(20))
    assert all(np.array_equal(a, b) for a, b in zip(plain[:4], numpy[:4])) and type(numpy.seed) is int
    for seed, horizon, field in ((True, 20, "seed"), (3, np.bool_(True), "horizon"), (3.0, 20, "seed")):
        with pytest.raises(ValueError, match=f"{field} must be an integer"):
            export_instance(env, seed, horizon)
