"""The simulation engine: metrics on a hand-computed instance, determinism, chunking, resume, grids."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.keys import seed_keys
from nlbandit.core.simulate import SimProgress
from nlbandit.core.types import Policy, PolicyMeta
from nlbandit.policies.exploration import act_info

# Means: arm 0 → 1.0, arm 1 → 0.5, arm 2 → 0.75 (θ* = (1, 0.5)); best arm 0.
ARMS = [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]
THETA = [1.0, 0.5]


def scripted(sequence):
    """A policy that plays ``sequence[t-1]`` in round t (ignores keys), for hand-computed metrics."""
    seq = jnp.asarray(sequence, jnp.int32)
    return Policy(lambda p, k: jnp.zeros(()), lambda p, s, k, c, m, t: (seq[t - 1], act_info(0.0)),
                  lambda p, s, k, c, arm, fb, t: s, PolicyMeta("scripted"))


def test_metrics_match_hand_computation():
    env = nb.make_env("linear", d=2, k=3, noise_std=0.0, theta_star=THETA, arm_set=ARMS)
    plays = [0, 1, 2, 2, 1, 0]
    res = nb.simulate(env, scripted(plays), {}, 6, [0, 7], max_points=6)
    per_round_regret = np.array([0.0, 0.5, 0.25, 0.25, 0.5, 0.0])
    per_round_reward = np.array([1.0, 0.5, 0.75, 0.75, 0.5, 1.0])
    np.testing.assert_array_equal(res.rounds, np.arange(1, 7))
    for s in range(2):
        np.testing.assert_allclose(res.cum_regret[s], np.cumsum(per_round_regret), rtol=0, atol=1e-12)
        np.testing.assert_allclose(res.cum_reward[s], np.cumsum(per_round_reward), rtol=0, atol=1e-12)
        np.testing.assert_array_equal(res.arms[s], plays)
    np.testing.assert_allclose(res.final_regret, [1.5, 1.5], atol=1e-12)


def test_regret_only_counts_available_arms():
    # Playing the worst arm (1, mean 0.5) costs best-available − 0.5: 0.5 when arm 0 is offered, 0.25
    # when only arm 2 is better, 0 when arm 1 is alone.
    env = nb.make_env("linear", d=2, k=3, noise_std=0.0, theta_star=THETA, arm_set=ARMS, avail_prob=0.5)
    res = nb.simulate(env, scripted([1] * 60), {}, 60, [3], max_points=60)
    regret = np.round(np.diff(np.r_[0.0, res.cum_regret[0]]), 12)
    assert set(regret) <= {0.0, 0.25, 0.5} and {0.25, 0.5} <= set(regret)
    # A real policy never picks a masked arm, so its per-round regret is never negative:
    pol, params = nb.make_policy("lin-ucb", nb.ProblemSpec(2, 3, 200))
    res = nb.simulate(env, pol, params, 200, [0, 1])
    assert np.all(np.diff(res.cum_regret, axis=1, prepend=0.0) >= -1e-12)


def test_downsampled_curves_keep_exact_final_values():
    env = nb.make_env("linear", d=5, k=10)
    pol, params = nb.make_policy("lin-ts", nb.ProblemSpec(5, 10, 997))
    full = nb.simulate(env, pol, params, 997, range(3), max_points=2000)
    coarse = nb.simulate(env, pol, params, 997, range(3), max_points=50)
    assert coarse.rounds[-1] == 997 and len(coarse.rounds) <= 51
    np.testing.assert_array_equal(coarse.final_regret, full.final_regret)
    idx = np.searchsorted(full.rounds, coarse.rounds)
    np.testing.assert_array_equal(coarse.cum_regret, full.cum_regret[:, idx])


@pytest.mark.parametrize("name", ["lin-es", "lin-phe"])
def test_deterministic_and_independent_of_chunking(name):
    env = nb.make_env("linear", d=5, k=10)
    pol, params = nb.make_policy(name, nb.ProblemSpec(5, 10, 600), **({"m": 5} if name == "lin-es" else {}))
    a = nb.simulate(env, pol, params, 600, range(4), chunk_size=600)
    b = nb.simulate(env, pol, params, 600, range(4), chunk_size=250)
    np.testing.assert_array_equal(a.arms, b.arms)
    np.testing.assert_array_equal(a.cum_regret, b.cum_regret)
    other = nb.simulate(env, pol, params, 600, range(4, 8), chunk_size=600)
    assert not np.array_equal(a.arms, other.arms)


def test_resume_from_checkpoint_is_bit_identical():
    env = nb.make_env("linear", d=5, k=10)
    pol, params = nb.make_policy("lin-es", nb.ProblemSpec(5, 10, 500), m=4)
    full = nb.simulate(env, pol, params, 500, range(3), chunk_size=100)
    saved = []
    nb.simulate(env, pol, params, 500, range(3), chunk_size=100,
                on_chunk=lambda p: saved.append(p.to_bytes()) if p.t_done == 200 else None)
    resumed = nb.simulate(env, pol, params, 500, range(3), chunk_size=100, resume=SimProgress.from_bytes(saved[0]))
    np.testing.assert_array_equal(resumed.arms, full.arms)
    np.testing.assert_array_equal(resumed.cum_regret, full.cum_regret)
    np.testing.assert_array_equal(resumed.cum_reward, full.cum_reward)


def test_grid_equals_separate_runs_with_common_random_numbers():
    env = nb.make_env("linear", d=5, k=10)
    spec = nb.ProblemSpec(5, 10, 300)
    pol, p1 = nb.make_policy("lin-ts", spec, v=0.1)
    _, p2 = nb.make_policy("lin-ts", spec, v=1.0)
    grid = jax.tree.map(lambda a, b: jnp.stack([a, b]), p1, p2)  # the policy's params record, stacked
    g = nb.simulate(env, pol, grid, 300, range(3), grid=True)
    assert g.cum_regret.shape[:2] == (2, 3)
    for i, p in enumerate((p1, p2)):
        single = nb.simulate(env, pol, p, 300, range(3))
        np.testing.assert_array_equal(g.arms[i], single.arms)
        np.testing.assert_allclose(g.cum_regret[i], single.cum_regret, rtol=1e-12)


def test_common_random_numbers_across_policies():
    # Same seed ⇒ same instance and same noise for every policy: LinUCB and uniform play different arms,
    # but reward − mean of the played arm (the noise) is identical round by round.
    env = nb.make_env("linear", d=2, k=3, noise_std=1.0, arm_set=ARMS)
    means = np.asarray(ARMS) @ np.asarray(jax.device_get(env.reset(seed_keys(5).env_reset)).theta)
    noises = []
    for name in ("lin-ucb", "uniform"):
        pol, params = nb.make_policy(name, nb.ProblemSpec(2, 3, 50))
        res = nb.simulate(env, pol, params, 50, [5], max_points=50)
        rewards = np.diff(res.cum_reward[0], prepend=0.0)
        noises.append((res.arms[0], rewards - means[res.arms[0]]))
    assert not np.array_equal(noises[0][0], noises[1][0])
    np.testing.assert_allclose(noises[0][1], noises[1][1], rtol=0, atol=1e-12)


def test_history_policies_refuse_runs_longer_than_their_buffer():
    env = nb.make_env("linear", d=3, k=4)
    pol, params = nb.make_policy("lin-phe", nb.ProblemSpec(3, 4, 100))
    with pytest.raises(ValueError, match="exceeds the 100 rounds"):
        nb.simulate(env, pol, params, 101, [0])
    with pytest.raises(ValueError, match="horizon must be"):
        nb.simulate(env, pol, params, 0, [0])
