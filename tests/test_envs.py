"""Synthetic environments: instance generation options, fresh arm sets, masks, reward laws."""

import jax
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import round_key


def instance(env, seed=0):
    return jax.device_get(env.reset(seed_keys(seed).env_reset))


def test_instance_distributions():
    sphere = instance(nb.make_env("linear", d=6, k=40, arms="sphere", theta="sphere"))
    np.testing.assert_allclose(np.linalg.norm(sphere.arms, axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(sphere.theta), 1.0, atol=1e-12)
    cube = instance(nb.make_env("linear", d=6, k=400, arms="cube"))
    assert np.all(np.abs(cube.arms) <= 1 / np.sqrt(6)) and np.all(np.linalg.norm(cube.arms, axis=1) <= 1)
    assert np.abs(cube.arms).max() > 0.9 / np.sqrt(6)  # fills the cube, not a sphere
    gauss = np.array([instance(nb.make_env("linear", d=6, k=2, theta="gaussian"), s).theta for s in range(300)])
    assert abs(gauss.std() - 1.0) < 0.05 and abs(gauss.mean()) < 0.05  # N(0, I), not normalised
    scaled = instance(nb.make_env("logistic", d=6, k=2, theta_norm=3.0))
    np.testing.assert_allclose(np.linalg.norm(scaled.theta), 3.0, atol=1e-12)


def test_instances_depend_on_the_seed_only():
    env = nb.make_env("linear", d=4, k=5)
    a, b, c = instance(env, 1), instance(env, 1), instance(env, 2)
    np.testing.assert_array_equal(a.arms, b.arms)
    assert not np.array_equal(a.arms, c.arms)


def test_fresh_contexts_and_masks():
    env = nb.make_env("linear", d=3, k=8, contexts="fresh", avail_prob=0.3)
    state, keys = instance(env), seed_keys(0)
    observed = [env.observe(state, round_key(keys.env_observe, t), t) for t in range(1, 401)]
    ctx = np.array([c for c, _ in observed])
    masks = np.array([m for _, m in observed])
    assert not np.array_equal(ctx[0], ctx[1])  # a new pool each round
    np.testing.assert_allclose(np.linalg.norm(ctx, axis=2), 1.0, atol=1e-12)
    assert masks.any(axis=1).all()  # never an empty round
    # Each arm offered with probability 0.3, plus the always-offered minimum: P = 0.3 + 0.7^8/8 ≈ 0.307.
    assert abs(masks.mean() - (0.3 + 0.7**8 / 8)) < 0.02
    fixed = nb.make_env("linear", d=3, k=8)
    c1, m1 = fixed.observe(state, round_key(keys.env_observe, 1), 1)
    np.testing.assert_array_equal(c1, state.arms)
    assert np.asarray(m1).all()


@pytest.mark.parametrize("reward", ["bernoulli", "gaussian"])
def test_logistic_rewards_have_sigmoid_means(reward):
    env = nb.make_env("logistic", d=2, k=2, reward=reward, noise_std=0.5, theta_star=[1.5, -1.0],
                      arm_set=[[1.0, 0.0], [0.0, 1.0]])
    state, keys = instance(env), seed_keys(3)
    ctx = np.asarray(state.arms)
    pulls = jax.vmap(lambda t: env.pull(state, round_key(keys.env_pull, t), t, ctx, 0).reward)(np.arange(1, 20001))
    mu = 1 / (1 + np.exp(-1.5))
    np.testing.assert_allclose(np.asarray(env.mean(state, ctx)), [mu, 1 / (1 + np.exp(1.0))], rtol=1e-12)
    sd = np.sqrt(mu * (1 - mu)) if reward == "bernoulli" else 0.5
    assert abs(float(pulls.mean()) - mu) < 4 * sd / np.sqrt(20000)
    if reward == "bernoulli":
        assert set(np.unique(np.asarray(pulls))) == {0.0, 1.0}
    else:
        assert abs(float(pulls.std()) - 0.5) < 0.02


@pytest.mark.parametrize("name", ["probit", "poisson"])
def test_probit_and_poisson_rewards_have_their_links_means(name):
    """Y ~ Bernoulli(Φ(xᵀθ*)) and Y ~ Poisson(exp(xᵀθ*)): means against float64 SciPy, empirical means within
    4 standard errors over 20,000 pulls, rewards of the right kind."""
    from scipy import stats

    env = nb.make_env(name, d=2, k=2, theta_star=[0.8, -0.5], arm_set=[[1.0, 0.0], [0.0, 1.0]])
    state, keys = instance(env), seed_keys(4)
    ctx = np.asarray(state.arms)
    expected = stats.norm.cdf([0.8, -0.5]) if name == "probit" else np.exp([0.8, -0.5])
    np.testing.assert_allclose(np.asarray(env.mean(state, ctx)), expected, rtol=1e-12)
    pulls = np.asarray(jax.vmap(lambda t: env.pull(state, round_key(keys.env_pull, t), t, ctx, 0).reward)(
        np.arange(1, 20001)))
    mu = expected[0]
    sd = np.sqrt(mu * (1 - mu)) if name == "probit" else np.sqrt(mu)  # Bernoulli / Poisson variance
    assert abs(pulls.mean() - mu) < 4 * sd / np.sqrt(20000)
    assert set(np.unique(pulls)) == {0.0, 1.0} if name == "probit" else (pulls == np.round(pulls)).all()
    assert env.facts.link == name


@pytest.mark.parametrize("name", ["probit", "poisson"])
def test_glm_policies_learn_probit_and_poisson_bandits(name):
    """The GLM policies accept these links (link = "env"): each ends far below uniform play's regret (measured
    at 1,000 rounds, 4 seeds: probit 3.0-28.8 against 303.9, Poisson 6.3-45.8 against 1093.1; the margin is a
    quarter of uniform's); a logistic model of Poisson counts is refused (its rewards are outside [0, 1])."""
    env = nb.make_env(name, d=4, k=8)
    uniform = nb.simulate(env, *nb.make_policy("uniform", env, horizon=1000), seeds=range(4)).cum_regret[:, -1]
    for policy in ("glm-ucb", "glm-tsl", "glm-fpl"):
        run = nb.simulate(env, *nb.make_policy(policy, env, horizon=1000, link="env"), seeds=range(4))
        assert run.cum_regret[:, -1].mean() < 0.25 * uniform.mean(), policy
    if name == "poisson":  # counts are outside the logistic link's [0, 1]
        with pytest.raises(ValueError, match=r"environment 'poisson' gives rewards in \[0, inf\] but link 'logistic'"):
            nb.make_policy("glm-ucb", env, horizon=1000, link="logistic")


def test_linear_rewards_are_mean_plus_gaussian_noise():
    env = nb.make_env("linear", d=2, k=1, noise_std=0.3, theta_star=[0.2, 0.4], arm_set=[[1.0, 1.0]])
    state, keys = instance(env), seed_keys(0)
    ctx = np.asarray(state.arms)
    pulls = np.asarray(jax.vmap(lambda t: env.pull(state, round_key(keys.env_pull, t), t, ctx, 0).reward)(
        np.arange(1, 20001)))
    assert abs(pulls.mean() - 0.6) < 4 * 0.3 / np.sqrt(20000) and abs(pulls.std() - 0.3) < 0.01


def test_kveton_instances():
    """Kveton et al. (2020) §5.1: arms uniform on [−1, 1]^d, θ* ~ N(0, v I) with v = 3/d² or 3/d."""
    box = instance(nb.make_env("logistic", d=5, k=400, arms="box"))
    assert np.abs(box.arms).max() <= 1 and np.abs(box.arms).max() > 0.99
    assert abs(box.arms.var() - 1 / 3) < 0.02
    for var, v in (("3/d^2", 3 / 25), ("3/d", 3 / 5)):
        env = nb.make_env("logistic", d=5, k=2, theta="gaussian", theta_var=var)
        thetas = np.array([instance(env, s).theta for s in range(400)])
        assert abs(thetas.var() / v - 1) < 0.1
    with pytest.raises(ValueError, match="theta_var"):  # ConfigError is a ValueError
        nb.make_env("logistic", d=5, k=2, theta_var="3/d")


def test_distance_and_quadratic_means_and_noise():
    """Sun, Wang & Xu (2025) §7.1 / spec 003 §4.2: −‖x − θ*‖ and 10⁻²·xᵀAAᵀx with A ~ N(0, 1)^{d×d}, plus
    N(0, σ²) noise; arms and θ* on the unit sphere."""
    dist, quad = instance(nb.make_env("distance", d=6, k=30)), instance(nb.make_env("quadratic", d=6, k=30))
    x, theta = np.asarray(dist.arms), np.asarray(dist.theta)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(theta), 1.0, rtol=1e-12)
    env = nb.make_env("distance", d=6, k=30)
    np.testing.assert_allclose(env.mean(dist, x), -np.linalg.norm(x - theta, axis=1), rtol=1e-12)
    a, xq = np.asarray(quad.theta), np.asarray(quad.arms)
    assert a.shape == (6, 6) and abs(a.mean()) < 0.5 and 0.4 < a.std() < 1.6
    env = nb.make_env("quadratic", d=6, k=30, noise_std=0.3)
    means = np.asarray(env.mean(quad, xq))
    np.testing.assert_allclose(means, 1e-2 * np.einsum("kd,de,fe,kf->k", xq, a, a, xq), rtol=1e-12)
    keys = seed_keys(0)
    pulls = np.asarray(jax.vmap(lambda t: env.pull(quad, round_key(keys.env_pull, t), t, xq, 3).reward)(
        np.arange(1, 20001)))
    assert abs(pulls.mean() - means[3]) < 4 * 0.3 / np.sqrt(20000) and abs(pulls.std() - 0.3) < 0.01
    assert not nb.make_env("quadratic", d=6, k=30).facts.link  # not a GLM: GLM policies refuse it


def test_make_env_resolves_a_configuration_once(monkeypatch):
    """Equal arguments give the same environment without validating them again (an experiment builds one per
    series and grid point); a bad value is refused every time, a value JSON cannot spell (an array) too; NumPy scalars
    are the Python values they hold."""
    from nlbandit.core.hyper import ConfigError
    from nlbandit.envs import registry

    calls = []
    resolve = registry.resolve_env
    monkeypatch.setattr(registry, "resolve_env", lambda *a, **k: calls.append(a) or resolve(*a, **k))
    monkeypatch.setattr(registry, "_MADE", {})
    env = nb.make_env("linear", d=3, k=7, noise_std=0.25)
    assert nb.make_env("linear", k=7, noise_std=0.25, d=3) is env and len(calls) == 1
    assert nb.make_env("linear", d=3, k=7, noise_std=0.5) is not env and len(calls) == 2
    for _ in range(2):
        with pytest.raises(ConfigError, match="noise_std"):
            nb.make_env("linear", d=3, k=7, noise_std=-1.0)
    assert len(calls) == 4
    for _ in range(2):  # a value JSON cannot spell: validated (and refused) as any other
        with pytest.raises(ConfigError, match=r"field 'd' must be an integer >= 1, got array\(\[3, 4\]\)"):
            nb.make_env("linear", d=np.array([3, 4]), k=7, noise_std=0.25)
    assert len(calls) == 6
    assert nb.make_env("linear", d=np.int64(3), k=7, noise_std=np.float32(0.25)) is env and len(calls) == 6
