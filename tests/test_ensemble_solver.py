"""ensemble_newton_solve, the GLM-ES ensemble solver, against an independent float64 SciPy reference.

Problems are per-arm statistics shaped like a GLM-ES run (Sun, Wang & Xu 2025 §7: K = 50 arms and θ* on the
unit sphere in d = 20, m = 10 members, σ_R = 0.1, λ = 1), and every solve is warm-started as in a real round:
from the argmins of the same statistics one observation earlier.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import optimize, special

import nlbandit  # noqa: F401  (x64)
from nlbandit.models.glm import ensemble_newton_solve, gd_solve
from nlbandit.models.links import LINKS

K, D, M, LAM = 50, 20, 10, 1.0
TOL = 1e-6
"""Relative error ‖θ_j − θ_j*‖ / ‖θ_j*‖ allowed for every member."""

# Independent NumPy forms of (μ, b, μ̇) per link.
NUMPY = {
    "logistic": (special.expit, lambda v: np.logaddexp(0.0, v), lambda v: special.expit(v) * special.expit(-v)),
    "identity": (lambda v: v, lambda v: 0.5 * v * v, np.ones_like),
    "poisson": (np.exp, np.exp, np.exp),
}


def reference(link_name, x, w, s, start):
    """(m, d) float64 argmins of F_j(θ) = Σ_k [w_k b(x_kᵀθ) − s_kj x_kᵀθ] + (λ/2)‖θ‖², member by member:
    SciPy's exact-Hessian trust-region Newton, then three plain Newton steps (F itself is too flat near the
    argmin for the trust region to certify the last digits). Checked: ‖∇F_j‖/λ, which bounds the distance to
    the argmin (F_j is λ-strongly convex), is below 1e-10 (1 + ‖θ‖)."""
    mean, b, dmean = NUMPY[link_name]
    out = []
    for j in range(s.shape[1]):
        def f(th):
            v = x @ th
            return np.sum(w * b(v) - s[:, j] * v) + 0.5 * LAM * th @ th, x.T @ (w * mean(v) - s[:, j]) + LAM * th

        def hess(th):
            return LAM * np.eye(x.shape[1]) + (x * (w * dmean(x @ th))[:, None]).T @ x

        theta = optimize.minimize(f, start[j], jac=True, hess=hess, method="trust-exact", options={"gtol": 1e-8}).x
        for _ in range(3):
            theta = theta - np.linalg.solve(hess(theta), f(theta)[1])
        assert np.linalg.norm(f(theta)[1]) / LAM <= 1e-10 * (1 + np.linalg.norm(theta))
        out.append(theta)
    return np.array(out)


def sphere(rng, n):
    z = rng.normal(size=(n, D))
    return z / np.linalg.norm(z, axis=1, keepdims=True)


def glm_es_round(link_name, reward, seed, t=10_000, warm=10, sigma_r=0.1, theta_norm=1.0):
    """Per-arm statistics of a GLM-ES run after t pulls, and the same one pull earlier.

    Every arm was pulled ``warm`` times (the warm-up), the other pulls went mostly to the best arms (the arm
    of rank r got a share ∝ 2^−r); rewards follow the link's model around θ* (``reward``: 'bernoulli',
    'gaussian' with σ = 0.5, 'poisson'), and every pull added one N(0, σ_R²) draw per member. The last pull
    was of the best arm. Returns x (K, d), (w, s) now and (w, s) before, s being (K, m).
    """
    rng = np.random.default_rng(seed)
    x = sphere(rng, K)
    v = x @ (theta_norm * sphere(rng, 1)[0])
    order = np.argsort(-v)
    w = np.full(K, float(warm))
    w[order] += rng.multinomial(t - warm * K, 0.5 ** np.arange(K) / np.sum(0.5 ** np.arange(K)))
    mu = NUMPY[link_name][0](v)
    draw = {"bernoulli": lambda n: rng.binomial(n.astype(int), mu).astype(float),
            "gaussian": lambda n: n * mu + 0.5 * np.sqrt(n) * rng.normal(size=K),
            "poisson": lambda n: rng.poisson(n * mu).astype(float)}[reward]
    s = draw(w)[:, None] + sigma_r * np.sqrt(w)[:, None] * rng.normal(size=(K, M))
    a = order[0]
    w_before, s_before = w.copy(), s.copy()
    w_before[a] -= 1.0
    s_before[a] -= draw(np.eye(K)[a])[a] + sigma_r * rng.normal(size=M)
    return x, (w, s), (w_before, s_before)


def relative_errors(theta, exact):
    return np.linalg.norm(np.asarray(theta) - exact, axis=1) / np.linalg.norm(exact, axis=1)


SOLVE = jax.jit(ensemble_newton_solve, static_argnums=0, static_argnames=("iterations", "active"))


def solve(link_name, x, w, s, thetas, **options):
    return np.asarray(SOLVE(LINKS[link_name], x, w, s, LAM, thetas, **options))


def one_round(link_name, reward, seed):
    """(x, w, s, warm starts = argmins one pull earlier, argmins now)."""
    x, (w, s), (w0, s0) = glm_es_round(link_name, reward, seed)
    start = reference(link_name, x, w0, s0, np.zeros((M, D)))
    return x, w, s, start, reference(link_name, x, w, s, start)


@pytest.mark.parametrize("link_name, reward, seed", [("logistic", "bernoulli", 0), ("logistic", "gaussian", 1),
                                                     ("identity", "gaussian", 2)])
def test_one_round_at_t_10k_matches_float64_reference(link_name, reward, seed):
    x, w, s, start, exact = one_round(link_name, reward, seed)
    err = relative_errors(solve(link_name, x, w, s, start), exact)
    moved = relative_errors(start, exact)
    assert err.max() <= TOL, f"max relative error {err.max():.2e} (warm starts were {moved.max():.2e} away)"


def chord_only(link_name, x, w, s, thetas, iterations=3):
    """The fixed-Hessian iteration without the safeguard: H at the mean warm start, ``iterations`` steps."""
    mean, _, dmean = NUMPY[link_name]
    h = LAM * np.eye(D) + (x * (w * dmean(x @ thetas.mean(axis=0)))[:, None]).T @ x
    theta = thetas.copy()
    with np.errstate(all="ignore"):
        for _ in range(iterations):
            theta = theta - np.linalg.solve(h, ((w[:, None] * mean(x @ theta.T) - s).T @ x + LAM * theta).T).T
    return theta


@pytest.mark.parametrize("link_name, reward, pulls, sigma_r, theta_norm, spread", [
    ("logistic", "bernoulli", 3, 2.0, 1.0, 0.0),  # just after a 3-pull warm-up, first fit, members far apart
    ("poisson", "poisson", 10, 1.0, 3.0, 0.5),  # the chord iteration diverges (NaN within 5 steps)
])
def test_hard_cases_reach_the_reference_where_the_chord_iteration_alone_fails(link_name, reward, pulls, sigma_r,
                                                                              theta_norm, spread):
    x, (w, s), _ = glm_es_round(link_name, reward, 1, t=pulls * K, warm=pulls, sigma_r=sigma_r,
                                theta_norm=theta_norm)
    start = spread * np.random.default_rng(2).normal(size=(M, D))
    exact = reference(link_name, x, w, s, start)
    chord = relative_errors(chord_only(link_name, x, w, s, start), exact)
    err = relative_errors(solve(link_name, x, w, s, start), exact)
    assert err.max() <= TOL and not chord.max() <= 1e-3, (
        f"solver max relative error {err.max():.2e}, unsafeguarded chord iteration {chord.max():.2e}")


def test_gd100_is_far_from_the_argmin_but_picks_the_same_arms():
    """The paper's solver (100 steps of 0.01 on the mean loss) from the same warm start, in Sun et al.'s
    Fig. 1b setting (logistic link, Gaussian rewards): far from the argmin, yet every member's greedy arm
    on the K rows is the argmin's."""
    x, w, s, start, exact = one_round("logistic", "gaussian", 3)
    ours = solve("logistic", x, w, s, start)
    gd = np.asarray(jax.vmap(lambda s_j, th: gd_solve(LINKS["logistic"], jnp.asarray(x), jnp.asarray(w), s_j, LAM, th,
                                                      100, 0.01, "mean"), in_axes=(1, 0))(jnp.asarray(s), start))
    err, err_gd = relative_errors(ours, exact).max(), relative_errors(gd, exact).max()
    arms = [np.argmax(x @ th.T, axis=0) for th in (exact, ours, gd)]
    message = (f"max relative error: ensemble solver {err:.2e}, GD100 {err_gd:.2e}; "
               f"argmax arms per member: exact {arms[0]}, solver {arms[1]}, GD100 {arms[2]}")
    assert err <= TOL and err_gd >= 1e-4 and err_gd >= 1e3 * err, message
    assert np.array_equal(arms[0], arms[1]) and np.array_equal(arms[0], arms[2]), message


def test_history_layout_gives_the_per_arm_result():
    """``active = (n, B)``: one row per observation, each carrying 1/N_k of its arm's sums, zero-padded to a
    block, is the same objective as the per-arm rows; a further block of other rows lies beyond n and must
    be ignored."""
    x, (w, s), (w0, s0) = glm_es_round("logistic", "bernoulli", 4, t=600)
    start = reference("logistic", x, w0, s0, np.zeros((M, D)))
    arm = np.repeat(np.arange(K), w.astype(int))
    block, n = 128, arm.size
    pad, rng = -n % block, np.random.default_rng(5)
    rows = np.concatenate([x[arm], np.zeros((pad, D)), sphere(rng, block)])
    ones = np.concatenate([np.ones(n), np.zeros(pad), np.ones(block)])
    sums = np.concatenate([(s / w[:, None])[arm], np.zeros((pad, M)), rng.normal(size=(block, M))])
    history = solve("logistic", rows, ones, sums, start, active=(n, block))
    np.testing.assert_allclose(history, solve("logistic", x, w, s, start), rtol=0, atol=1e-10)


def test_fewer_than_two_iterations_is_rejected():
    with pytest.raises(ValueError, match="iterations"):
        ensemble_newton_solve(LINKS["identity"], jnp.eye(D), jnp.ones(D), jnp.zeros((D, M)), LAM,
                              jnp.zeros((M, D)), iterations=1)
