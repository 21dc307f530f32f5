"""The latent logistic bandits h1–h6 of Bae & Lee (2025) (spec 001 §4.2, §4.4) against a float64 NumPy
reference, their context pools, rewards and errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
import reference_neural as ref  # tests/reference_neural.py
from nlbandit.core.hyper import ConfigError
from nlbandit.envs.latent import distinct_indices

NUMPY_LATENTS = {  # spec 001 §4.2's table, written independently of the module
    "h1": lambda x, th, mat: 0.2 * (x @ th) ** 4,
    "h2": lambda x, th, mat: 20.0 * np.cos(x @ th),
    "h3": lambda x, th, mat: 5.0 * np.array([row @ mat @ row for row in x]),
    "h4": lambda x, th, mat: 10.0 * (x @ th) ** 2,
    "h5": lambda x, th, mat: np.array([(mat @ row) @ (mat @ row) for row in x]),
    "h6": lambda x, th, mat: np.cos(3.0 * (x @ th)),
}


@pytest.mark.parametrize("name", sorted(NUMPY_LATENTS))
def test_means_are_the_sigmoid_of_the_latent_function(name):
    env = nb.make_env("latent", d=6, k=4, latent=name, pool=30)
    state = env.reset(jax.random.key(1))
    theta, mat, pool = (np.asarray(a) for a in (state.theta, state.matrix, state.pool))
    assert pool.shape == (30, 6) and np.all(np.abs(pool) <= 1.0) and np.all(np.abs(theta) <= 1.0)
    assert np.all(np.abs(mat) <= 1.0) and not np.allclose(mat, mat.T)  # Θ is not symmetrised
    contexts, mask = env.observe(state, jax.random.key(2), 1)
    assert mask.all()
    expected = 1.0 / (1.0 + np.exp(-NUMPY_LATENTS[name](np.asarray(contexts), theta, mat)))
    np.testing.assert_allclose(env.mean(state, contexts), expected, rtol=1e-12, atol=1e-15)


def test_each_round_offers_distinct_pool_vectors_uniformly():
    n, k, draws = 7, 3, 20000
    picks = np.asarray(jax.vmap(lambda key: distinct_indices(key, n, k))(jax.random.split(jax.random.key(0), draws)))
    assert all(len(set(row)) == k for row in picks) and picks.min() >= 0 and picks.max() < n
    # Every index is offered with probability k/n, in every position with probability 1/n (5 standard errors).
    counts = np.stack([np.bincount(picks[:, j], minlength=n) for j in range(k)]) / draws
    se = np.sqrt((1 / n) * (1 - 1 / n) / draws)
    assert np.abs(counts - 1 / n).max() < 5 * se
    # Every one of the C(7, 3) = 35 subsets appears about equally often (Floyd's algorithm is exact).
    subsets = np.unique(np.sort(picks, axis=1), axis=0, return_counts=True)[1] / draws
    assert len(subsets) == 35 and np.abs(subsets - 1 / 35).max() < 5 * np.sqrt((1 / 35) * (34 / 35) / draws)
    env = nb.make_env("latent", d=3, k=5, pool=5)  # pool = K: every round offers the whole pool
    state = env.reset(jax.random.key(3))
    contexts, _ = env.observe(state, jax.random.key(4), 7)
    np.testing.assert_array_equal(np.sort(np.asarray(contexts), axis=0), np.sort(np.asarray(state.pool), axis=0))


def test_run_draws_show_every_pool_vector_once():
    env = nb.make_env("latent", d=4, k=5, pool=40, pool_draw="run", vectors="sphere")
    state = env.reset(jax.random.key(5))
    np.testing.assert_allclose(np.linalg.norm(np.asarray(state.pool), axis=1), 1.0, rtol=1e-12)
    shown = np.concatenate([np.asarray(env.observe(state, jax.random.key(t), t)[0]) for t in range(1, 9)])
    assert len(np.unique(shown, axis=0)) == 40  # 8 rounds × 5 arms: the whole pool, once
    again = np.asarray(env.observe(state, jax.random.key(0), 9)[0])
    np.testing.assert_array_equal(again, shown[:5])  # past the pool's end it starts over


def test_rewards_are_bernoulli_with_the_mean():
    env = nb.make_env("latent", d=5, k=4, latent="h6", pool=10)
    state = env.reset(jax.random.key(6))
    contexts, _ = env.observe(state, jax.random.key(7), 1)
    p = float(env.mean(state, contexts)[2])
    draws = 20000
    rewards = np.asarray(jax.vmap(lambda key: env.pull(state, key, 1, contexts, 2).reward)(
        jax.random.split(jax.random.key(8), draws)))
    assert set(np.unique(rewards)) <= {0.0, 1.0}
    assert abs(rewards.mean() - p) < 5 * np.sqrt(p * (1 - p) / draws)


def test_a_policy_runs_on_it_with_finite_pseudo_regret():
    env = nb.make_env("latent", d=4, k=5, latent="h4", pool=50)
    policy, params = nb.make_policy("uniform", nb.ProblemSpec(4, 5, 60))
    res = nb.simulate(env, policy, params, 60, range(3), chunk_size=60)
    regret = np.asarray(res.cum_regret)
    assert np.all(np.isfinite(regret)) and np.all(np.diff(regret, axis=-1) >= -1e-12) and regret[..., -1].min() > 0


@pytest.mark.parametrize("options, message", [
    (dict(pool=3), "field 'pool' must be >= k = 5"),
    (dict(latent="h7"), "latent"),
    (dict(pool_draw="epoch"), "pool_draw"),
    (dict(vectors="cube"), "vectors"),
])
def test_bad_latent_configurations_are_refused(options, message):
    with pytest.raises(ConfigError, match=message):
        nb.make_env("latent", d=4, k=5, **options)


def test_presented_contexts_are_the_engines():
    # The pseudo-regret the engine records equals the one recomputed from the replayed contexts and its arms.
    from nlbandit.core.keys import seed_keys
    from nlbandit.models.ntk import presented_contexts

    env = nb.make_env("latent", d=4, k=5, latent="h2", pool=40)
    policy, params = nb.make_policy("uniform", nb.ProblemSpec(4, 5, 50))
    res = nb.simulate(env, policy, params, 50, [7], chunk_size=50, max_points=50)
    contexts = presented_contexts(env, 7, 50)
    state = env.reset(seed_keys(jnp.uint32(7)).env_reset)
    means = np.asarray(jax.vmap(lambda c: env.mean(state, c))(contexts))
    arms = np.asarray(res.arms)[0]
    regret = np.cumsum(means.max(axis=1) - means[np.arange(50), arms])
    np.testing.assert_allclose(np.asarray(res.cum_regret)[0, -1], regret[-1], rtol=1e-9)


def test_realized_effective_dimension_grows_with_the_pool():
    # spec 001 §7.1 item 12: more distinct vectors, larger d̃ (T = 2000, K = 5; the last pool is T·K, each
    # vector shown once).
    from nlbandit.models.mlp import MLP
    from nlbandit.models.ntk import realized_effective_dimension

    arch = MLP(20, 20, 2)
    dims = [realized_effective_dimension(nb.make_env("latent", d=20, k=5, pool=n, pool_draw=draw), 3, 2000, arch, 1.0)
            for n, draw in ((10, "round"), (50, "round"), (2500, "round"), (10000, "run"))]
    assert all(a < b for a, b in zip(dims, dims[1:])), dims


def test_realized_effective_dimension_against_numpy():
    """d̃ = log det((r/λ₀) Σ g gᵀ/m + I) over the T·K presented contexts, the gradients g at the seed's
    block-symmetric θ₀ by tests/reference_neural.py's backpropagation (f scaled by √m), in NumPy float64."""
    from nlbandit.core.keys import seed_keys
    from nlbandit.models.mlp import MLP, mlp_init
    from nlbandit.models.ntk import presented_contexts, realized_effective_dimension

    env, arch, lam0, r = nb.make_env("latent", d=4, k=3, pool=10), MLP(4, 20, 2), 0.7, 0.25
    for seed in (0, 3):
        x = np.asarray(presented_contexts(env, seed, 40), np.float64).reshape(-1, 4)
        theta0 = np.asarray(mlp_init(arch, seed_keys(jnp.uint32(seed)).policy_init, "symmetric", "float64"))
        _, grads = ref.forward_backward(theta0, x, width=20, depth=2, scale=np.sqrt(20))
        expected = np.linalg.slogdet((r / lam0) * grads.T @ grads / 20 + np.eye(grads.shape[1]))[1]
        assert realized_effective_dimension(env, seed, 40, arch, lam0, r) == pytest.approx(expected, rel=1e-10)


DIAGNOSED = """
horizon = 40
seeds = 2
diagnostics = ["effective-dimension"]
[[env]]
case = "small"
name = "latent"
d = {d}
k = 3
pool = 10
[[env]]
case = "large"
name = "latent"
d = {d}
k = 3
pool = 500
[[policies]]
label = "greedy"
name = "neurallog-ucb-1"
nu = 0.0
"""


def test_report_diagnostic_is_the_realised_effective_dimension_of_each_case_and_seed(tmp_path):
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.models.mlp import MLP
    from nlbandit.models.ntk import realized_effective_dimension
    from nlbandit.policies.neurallog import lambda0
    from nlbandit.policies.neurallog_report import effective_dimensions

    path = tmp_path / "e.toml"
    path.write_text(DIAGNOSED.format(d=4))
    exp = load_experiment(path)
    table = effective_dimensions(exp)
    assert [label for label, _ in table] == ["case=small", "case=large"]
    lam0 = float(lambda0(2, 1.0, 0.05, 1.0))
    for (_, values), pool in zip(table, (10, 500)):
        env = nb.make_env("latent", d=4, k=3, pool=pool)
        direct = [realized_effective_dimension(env, s, 40, MLP(4, 20, 2), lam0) for s in (0, 1)]
        np.testing.assert_allclose(values, direct, rtol=1e-12)
    path.write_text(DIAGNOSED.format(d=5))
    with pytest.raises(ConfigError, match="even d"):
        load_experiment(path)


@pytest.mark.parametrize("latent", ["h1", "h3", "h6"])
def test_regret_accounting_zero_for_the_oracle_and_in_unit_steps_otherwise(latent):
    # Spec 001 §7.1 item 8: per-round pseudo-regret in [0, 1], zero for the oracle, cumulative sum monotone.
    from nlbandit.core.keys import seed_keys
    from nlbandit.core.types import Policy, PolicyMeta
    from nlbandit.models.ntk import presented_contexts
    from nlbandit.policies.exploration import act_info

    env = nb.make_env("latent", d=6, k=4, latent=latent, pool=50)
    seed, horizon = 7, 60
    instance = env.reset(seed_keys(jnp.uint32(seed)).env_reset)

    def act(params, state, key, contexts, mask, t):  # knows this seed's instance
        means = env.mean(instance, contexts)
        return jnp.argmax(jnp.where(mask, means, -jnp.inf)), act_info(jnp.max(means))

    oracle = Policy(lambda params, key: jnp.zeros(()), act,
                    lambda params, state, key, contexts, arm, feedback, t: state, PolicyMeta("oracle"))
    res = nb.simulate(env, oracle, {}, horizon, [seed], progress=False)
    assert np.all(res.cum_regret == 0.0)
    uniform, params = nb.make_policy("uniform", nb.ProblemSpec(6, 4, horizon))
    res = nb.simulate(env, uniform, params, horizon, [seed], progress=False)
    contexts = presented_contexts(env, seed, horizon)
    means = np.asarray(jax.vmap(lambda c: env.mean(instance, c))(contexts))
    step = means.max(axis=1) - means[np.arange(horizon), np.asarray(res.arms[0])]
    assert np.all((step >= 0) & (step <= 1)) and step.max() > 0
    np.testing.assert_allclose(res.cum_regret[0], np.cumsum(step)[res.rounds - 1], rtol=1e-9)


def test_report_diagnostic_of_a_stratified_case_reads_each_seed_on_its_own_value(tmp_path):
    # (it read the first run of a case, and a stratified case has none of its own: StopIteration)
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.models.mlp import MLP
    from nlbandit.models.ntk import realized_effective_dimension
    from nlbandit.policies.neurallog import lambda0
    from nlbandit.policies.neurallog_report import effective_dimensions

    path = tmp_path / "e.toml"
    path.write_text(DIAGNOSED.format(d=4).replace("pool = 10\n", 'pool = [10, 500]\nstrata = "pool"\n'))
    (label, values), _ = effective_dimensions(load_experiment(path))
    lam0 = float(lambda0(2, 1.0, 0.05, 1.0))
    direct = [realized_effective_dimension(nb.make_env("latent", d=4, k=3, pool=pool), s, 40, MLP(4, 20, 2), lam0)
              for pool, s in ((10, 0), (500, 1))]
    assert label == "case=small"
    np.testing.assert_allclose(values, direct, rtol=1e-12)
