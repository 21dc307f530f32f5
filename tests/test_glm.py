"""GLM core: links, objective derivatives, Newton and GD solvers, against float64 SciPy references
(spec 002 §6.1 items 1–3, spec 003 §6.1.5)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, special, stats

import nlbandit  # noqa: F401  (x64)
from nlbandit.models.glm import glm_gradient, glm_hessian, glm_objective, gd_solve, newton_solve
from nlbandit.models.links import LINKS

# Independent NumPy forms of (μ, b) per link.
NUMPY = {
    "logistic": (special.expit, lambda v: np.logaddexp(0.0, v)),
    "identity": (lambda v: v, lambda v: 0.5 * v * v),
    "probit": (stats.norm.cdf, lambda v: v * stats.norm.cdf(v) + stats.norm.pdf(v)),
    "poisson": (np.exp, np.exp),
}


def problem(link_name, n=400, d=5, seed=0):
    """Random features and responses drawn from the link's own model around a random θ*."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (n, d))
    theta = rng.normal(0, 1 / np.sqrt(d), d)
    mu = NUMPY[link_name][0](x @ theta)
    if link_name in ("logistic", "probit"):
        return x, rng.binomial(1, mu).astype(float)
    return x, (rng.poisson(mu) if link_name == "poisson" else mu + 0.5 * rng.normal(size=n)).astype(float)


def scipy_fit(link_name, x, w, s, lam):
    mean, b = NUMPY[link_name]

    def f(th):
        v = x @ th
        return np.sum(w * b(v) - s * v) + 0.5 * lam * th @ th, x.T @ (w * mean(v) - s) + lam * th

    res = optimize.minimize(f, np.zeros(x.shape[1]), jac=True, method="L-BFGS-B",
                            options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
    return res.x


@pytest.mark.parametrize("name", list(LINKS))
def test_link_functions_match_numpy_and_mean_is_derivative_of_b(name):
    link, (mean, b) = LINKS[name], NUMPY[name]
    v = np.linspace(-4, 4, 41)
    np.testing.assert_allclose(link.mean(jnp.asarray(v)), mean(v), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(link.log_partition(jnp.asarray(v)), b(v), rtol=1e-12, atol=1e-14)
    h = 1e-5
    np.testing.assert_allclose((b(v + h) - b(v - h)) / (2 * h), mean(v), rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(link.dmean(jnp.asarray(v)), (mean(v + h) - mean(v - h)) / (2 * h), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", list(LINKS))
def test_gradient_and_hessian_match_finite_differences(name):
    link = LINKS[name]
    x, y = problem(name, n=60)
    w, s, lam = np.ones(60), y, 0.7
    theta = np.random.default_rng(1).normal(0, 0.3, 5)
    f = lambda th: float(glm_objective(link, jnp.asarray(th), x, w, s, lam))  # noqa: E731
    g = np.asarray(glm_gradient(link, jnp.asarray(theta), x, w, s, lam))
    h = np.asarray(glm_hessian(link, jnp.asarray(theta), x, w, lam))
    eps, eye = 1e-5, np.eye(5)
    fd_g = np.array([(f(theta + eps * e) - f(theta - eps * e)) / (2 * eps) for e in eye])
    gr = lambda th: np.asarray(glm_gradient(link, jnp.asarray(th), x, w, s, lam))  # noqa: E731
    fd_h = np.array([(gr(theta + eps * e) - gr(theta - eps * e)) / (2 * eps) for e in eye])
    np.testing.assert_allclose(g, fd_g, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(h, fd_h, rtol=1e-5, atol=1e-7)


def per_arm(x_arms, pulls, rewards):
    """(N_k, Y_k) from a sequence of pulled arm indices and their rewards."""
    k = x_arms.shape[0]
    return np.bincount(pulls, minlength=k).astype(float), np.bincount(pulls, rewards, minlength=k)


def test_sufficient_statistics_equal_per_observation_sums():
    rng = np.random.default_rng(2)
    arms = rng.uniform(-1, 1, (30, 6))
    pulls = rng.integers(0, 30, 5000)
    y = rng.binomial(1, 0.4, 5000).astype(float)
    n_k, y_k = per_arm(arms, pulls, y)
    link, theta, lam = LINKS["logistic"], jnp.asarray(rng.normal(0, 0.5, 6)), 1.0
    hist = (arms[pulls], np.ones(5000), y)
    suff = (arms, n_k, y_k)
    scale = 5000.0
    assert abs(float(glm_objective(link, theta, *hist, lam) - glm_objective(link, theta, *suff, lam))) < 1e-9 * scale
    np.testing.assert_allclose(glm_gradient(link, theta, *hist, lam), glm_gradient(link, theta, *suff, lam), atol=1e-9 * scale)
    np.testing.assert_allclose(glm_hessian(link, theta, hist[0], hist[1], lam), glm_hessian(link, theta, arms, n_k, lam),
                               atol=1e-9 * scale)
    th_hist = newton_solve(link, *hist, lam, jnp.zeros(6)).theta
    th_suff = newton_solve(link, *suff, lam, jnp.zeros(6)).theta
    np.testing.assert_allclose(th_hist, th_suff, rtol=0, atol=1e-8)


@pytest.mark.parametrize("name", list(LINKS))
@pytest.mark.parametrize("lam", [1.0, 1e-3])
def test_newton_matches_scipy_lbfgs(name, lam):
    x, y = problem(name)
    w = np.ones(len(y))
    link = LINKS[name]
    res = jax.jit(lambda: newton_solve(link, x, w, y, lam, jnp.zeros(5)))()
    assert bool(res.converged) and int(res.iterations) <= 30
    assert float(jnp.linalg.norm(glm_gradient(link, res.theta, x, w, y, lam))) < 1e-6
    np.testing.assert_allclose(res.theta, scipy_fit(name, x, w, y, lam), rtol=0, atol=1e-5)


def test_masked_history_rows_are_ignored():
    x, y = problem("logistic", n=300)
    w = (np.arange(300) < 180).astype(float)
    link = LINKS["logistic"]
    full = newton_solve(link, x, w, y * w, 1.0, jnp.zeros(5)).theta
    trunc = newton_solve(link, x[:180], np.ones(180), y[:180], 1.0, jnp.zeros(5)).theta
    np.testing.assert_allclose(full, trunc, rtol=0, atol=1e-10)


def test_newton_converges_in_30_iterations_on_random_problems():
    # Spec 002 §6.1.3: from θ = 0, d ≤ 20, up to 10^5 observations (per-arm statistics), 100 problems.
    link, rng = LINKS["logistic"], np.random.default_rng(5)

    def one(key_seed):
        r = np.random.default_rng(key_seed)
        d = int(r.integers(2, 21))
        arms = np.zeros((100, 20))
        arms[:, :d] = r.uniform(-1, 1, (100, d))
        theta = np.zeros(20)
        theta[:d] = r.normal(0, np.sqrt(3 / d), d)
        n_k = r.multinomial(int(r.integers(100, 100_001)), np.ones(100) / 100).astype(float)
        y_k = r.binomial(n_k.astype(int), special.expit(arms @ theta)).astype(float)
        return arms, n_k, y_k

    problems = [one(s) for s in rng.integers(0, 2**31, 100)]
    arms, n_k, y_k = (np.stack(a) for a in zip(*problems))
    res = jax.jit(jax.vmap(lambda a, n, y: newton_solve(link, a, n, y, 1.0, jnp.zeros(20))))(arms, n_k, y_k)
    assert bool(jnp.all(res.converged)) and int(res.iterations.max()) <= 30
    grads = jax.vmap(lambda th, a, n, y: glm_gradient(link, th, a, n, y, 1.0))(res.theta, arms, n_k, y_k)
    assert float(jnp.abs(grads).max()) < 1e-6


def test_unpenalised_limit_matches_plain_logistic_regression():
    # λ = 1e-8 on non-separable data ≈ unpenalised maximum likelihood (SciPy, λ = 0).
    x, y = problem("logistic", n=2000)
    w = np.ones(2000)
    th = newton_solve(LINKS["logistic"], x, w, y, 1e-8, jnp.zeros(5)).theta
    np.testing.assert_allclose(th, scipy_fit("logistic", x, w, y, 0.0), atol=1e-4)


def test_gd_mean_form_is_stable_and_approaches_the_minimiser():
    # Spec 003 §6.1.5: 100 steps of 0.01 on the mean loss, no NaN or divergence, even with 10^4 samples
    # on few arms (the sum form oscillates there).
    rng = np.random.default_rng(7)
    arms = rng.normal(size=(10, 5))
    arms /= np.linalg.norm(arms, axis=1, keepdims=True)
    pulls = np.r_[np.zeros(9000, int), rng.integers(0, 10, 1000)]
    y = special.expit(arms[pulls] @ np.ones(5)) + 0.5 * rng.normal(size=10_000)
    n_k, y_k = per_arm(arms, pulls, y)
    link, theta = LINKS["logistic"], jnp.zeros(5)
    objective = jax.jit(lambda th: glm_objective(link, th, arms, n_k, y_k, 1.0))
    step = jax.jit(lambda th: gd_solve(link, arms, n_k, y_k, 1.0, th))
    values = [float(objective(theta))]
    for _ in range(50):
        theta = step(theta)
        values.append(float(objective(theta)))
    assert np.all(np.isfinite(values)) and np.all(np.diff(values) <= 1e-9)
    sum_form = gd_solve(link, arms, n_k, y_k, 1.0, jnp.zeros(5), reduction="sum")
    assert float(objective(sum_form)) > values[1]  # the paper-literal sum form at 0.01 overshoots on 9,000 pulls
    best = newton_solve(link, arms, n_k, y_k, 1.0, jnp.zeros(5)).theta
    long_run = gd_solve(link, arms, n_k, y_k, 1.0, jnp.zeros(5), steps=200_000, lr=1.0)
    np.testing.assert_allclose(long_run, best, atol=1e-4)
