"""FTRL for online GLM regression, its streams and regrets (Zhao, Zhou, He & Gu 2023; spec 000 §6.1 items 1–4
and 6, §6.2 item 7 at small scale, §6.3 item 12, §6.4 item 14, §6.5 item 20), against float64 NumPy/SciPy
references written from the paper's formulas."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit  # noqa: F401  (x64)
from nlbandit import theory
from nlbandit.core.regress import _running_sum, regress
from nlbandit.envs.registry import make_stream
from nlbandit.envs.streams import bartlett_directions, bartlett_labels
from nlbandit.models.ftrl import ftrl
from nlbandit.models.links import LINKS
from nlbandit.policies.learners import ftrl_learner
from reference_glm import logistic_mle


def stream_data(stream, seed=0):
    """The trial ``regress`` plays for ``seed``, as NumPy arrays."""
    data = stream.sample(nlbandit.core.keys.seed_keys(seed).env_reset)
    return tuple(np.asarray(a) for a in data)


def run_ftrl(link_name, x, y, lam, solver="auto"):
    """μ̂_1 … μ̂_{T+1} from the library's FTRL, one update per row."""
    est = ftrl(LINKS[link_name], x.shape[1], x.shape[0], solver)
    update = jax.jit(est.update)
    state, thetas = est.init(lam), []
    for xt, yt in zip(x, y):
        thetas.append(np.asarray(state.theta))
        state = update(state, jnp.asarray(xt), jnp.asarray(yt), lam)
    return np.array(thetas + [np.asarray(state.theta)]), state


def ridge_reference(x, y, lam):
    """μ̂_t = (2λI + Σ_{τ<t} x xᵀ)⁻¹ Σ_{τ<t} y x for t = 1..T+1 (eq. (3.2) with the identity link)."""
    d = x.shape[1]
    return np.array([np.linalg.solve(2 * lam * np.eye(d) + x[:t].T @ x[:t], x[:t].T @ y[:t])
                     for t in range(len(x) + 1)])


def test_closed_form_equals_newton_and_the_ridge_argmin():
    """Spec §6.1 item 1: the Sherman–Morrison closed form and generic Newton both equal (2λI + XᵀX)⁻¹Xᵀy."""
    stream = make_stream("stochastic", 80, d=4, sigma=1.0)
    x, y, _, _ = stream_data(stream)
    ref = ridge_reference(x, y, 4.0)
    closed, state = run_ftrl("identity", x, y, 4.0, "closed-form")
    newton, _ = run_ftrl("identity", x, y, 4.0, "newton")
    np.testing.assert_allclose(closed, ref, atol=1e-10)
    np.testing.assert_allclose(newton, ref, atol=1e-8)
    np.testing.assert_allclose(state.h_inv, np.linalg.inv(8.0 * np.eye(4) + x.T @ x), atol=1e-12)


def test_logistic_newton_matches_scipy():
    """Spec §6.1 item 1: logistic FTRL's Newton estimate equals SciPy's minimiser of λ‖μ‖² + Σ ℓ_τ to 1e-6
    after every round (the reference refits from scratch; λ‖μ‖² is a ridge of 2λ in its (λ'/2)‖μ‖² form)."""
    stream = make_stream("stochastic", 40, d=3, link="logistic", sigma=0.5)
    x, y, _, _ = stream_data(stream)
    lam = theory.ftrl_lambda("logistic")
    thetas, _ = run_ftrl("logistic", x, y, lam)
    for t in (1, 5, 20, 40):
        np.testing.assert_allclose(thetas[t], logistic_mle(x[:t], y[:t], 2 * lam), atol=1e-6)


def test_exact_regret_identity():
    """Spec §6.1 item 2 (identity link, d = 5, T = 500, σ = 2): R_stoc(T) = λ‖μ*‖² + ½ Σ (ŷ_t − y_t)² x_tᵀH_t⁻¹x_t
    − ½ ‖μ* − μ̂_{T+1}‖²_{H_T}, H_t = 2λI + Σ_{τ≤t} x xᵀ, to 1e-8 relative; the right side from NumPy."""
    lam, horizon = 4.0, 500
    stream = make_stream("stochastic", horizon, d=5, sigma=2.0)
    x, y, z, _ = stream_data(stream)
    mu = np.linalg.lstsq(x, z, rcond=None)[0]
    hats = ridge_reference(x, y, lam)
    rhs = lam * mu @ mu
    h = 2 * lam * np.eye(5)
    for t in range(horizon):
        h = h + np.outer(x[t], x[t])
        rhs += 0.5 * (x[t] @ hats[t] - y[t]) ** 2 * x[t] @ np.linalg.solve(h, x[t])
    err = mu - hats[-1]
    rhs -= 0.5 * err @ h @ err
    res = regress(stream, ftrl_learner(stream), {"lam": lam}, [0], max_points=horizon)
    np.testing.assert_allclose(res.curves["stochastic"][0, -1], rhs, rtol=1e-8)


@pytest.mark.parametrize("link_name", ["identity", "logistic"])
def test_regrets_against_numpy_and_the_bregman_decomposition(link_name):
    """Spec §6.1 item 3: the curves of ``regress`` equal NumPy sums over the reference predictions ẑ_t, and
    R_stoc = Σ D_Φ(ẑ_t, z_t) − Σ ε_t(ẑ_t − z_t) exactly."""
    horizon = 30
    stream = make_stream("stochastic", horizon, d=3, link=link_name, sigma=0.5)
    x, y, z, _ = stream_data(stream)
    lam = theory.ftrl_lambda(link_name)
    if link_name == "identity":
        hats = ridge_reference(x, y, lam)[:-1]
        phi, big_phi = (lambda v: v), (lambda v: 0.5 * v * v)
    else:
        hats = np.array([np.zeros(3)] + [logistic_mle(x[:t], y[:t], 2 * lam) for t in range(1, horizon)])
        phi, big_phi = (lambda v: 1 / (1 + np.exp(-v))), (lambda v: np.logaddexp(0.0, v))
    z_hat = np.einsum("td,td->t", x, hats)
    loss = lambda v: big_phi(v) - y * v  # noqa: E731
    stoch = np.cumsum(loss(z_hat) - loss(z))
    pseudo = np.cumsum(big_phi(z_hat) - big_phi(z) - phi(z) * (z_hat - z))
    eps = y - phi(z)
    res = regress(stream, ftrl_learner(stream), {"lam": lam}, [0], max_points=horizon)
    np.testing.assert_allclose(res.curves["stochastic"][0], stoch, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(res.curves["pseudo"][0], pseudo, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(res.curves["stochastic"][0],
                               res.curves["pseudo"][0] - np.cumsum(eps * (z_hat - z)), rtol=1e-7, atol=1e-9)


def test_curves_are_summed_in_round_order():
    """The regression curves add the rounds one after the other, as the bandit engine's curves are (a float64
    loop here, bit for bit), whatever the batch axes; labels clipped are counted as integers."""
    rng = np.random.default_rng(3)
    for shape in [(4, 777), (2, 3, 200)]:
        values = rng.standard_normal(shape) * 1e3
        expected, total = np.empty(shape), np.zeros(shape[:-1])
        for t in range(shape[-1]):
            total = total + values[..., t]
            expected[..., t] = total
        assert np.array_equal(np.asarray(jax.jit(_running_sum)(jnp.asarray(values))), expected)
    clipped = rng.random((3, 50)) < 0.3
    counts = _running_sum(jnp.asarray(clipped))
    assert jnp.issubdtype(counts.dtype, jnp.integer)
    assert np.array_equal(np.asarray(counts), np.cumsum(clipped, axis=-1))


def test_adversarial_regret_against_lstsq():
    """R_adv(t) = Σ ℓ_τ(μ̂_τ) − min_μ Σ ℓ_τ(μ) against NumPy's least squares on every prefix (t < d included)."""
    horizon = 12
    stream = make_stream("stochastic", horizon, d=4, sigma=1.0)
    x, y, _, _ = stream_data(stream)
    z_hat = np.einsum("td,td->t", x, ridge_reference(x, y, 4.0)[:-1])
    ref = []
    for t in range(1, horizon + 1):
        mu = np.linalg.lstsq(x[:t], y[:t], rcond=None)[0]
        ref.append(np.sum(0.5 * (z_hat[:t] - y[:t]) ** 2) - np.sum(0.5 * (x[:t] @ mu - y[:t]) ** 2))
    res = regress(stream, ftrl_learner(stream), {"lam": 4.0}, [0], adversarial=True, max_points=horizon)
    np.testing.assert_allclose(res.curves["adversarial"][0], ref, atol=1e-9)
    square = regress(stream, ftrl_learner(stream), {"lam": 4.0}, [0], adversarial=True, units="square",
                     max_points=horizon)
    np.testing.assert_allclose(square.curves["adversarial"][0], 2 * np.array(ref), atol=1e-9)


def test_bartlett_recursion_equals_the_literal_definition():
    """Spec §6.1 item 4: v_t = P_t x_t from the backward recursion equals the literal P_t of eq. (3.4),
    P_t⁻¹ = Σ_{τ≤t} x xᵀ + Σ_{τ>t} q_τ/(1+q_τ) x xᵀ with q_τ = x_τᵀP_τx_τ (T = 12, d = 3), to 1e-10."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(12, 3))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q, v_ref = {}, {}
    for t in range(11, -1, -1):  # q_τ for τ > t is known when P_t is formed
        inv = x[: t + 1].T @ x[: t + 1] + sum(q[s] / (1 + q[s]) * np.outer(x[s], x[s]) for s in range(t + 1, 12))
        p = np.linalg.inv(inv)
        q[t], v_ref[t] = x[t] @ p @ x[t], p @ x[t]
    np.testing.assert_allclose(np.asarray(bartlett_directions(jnp.asarray(x))), [v_ref[t] for t in range(12)],
                               atol=1e-10)


def test_bartlett_labels_have_the_forecasters_conditional_mean():
    """Spec §6.1 item 4: labels are ±Y, E[y_1] = 0 and E[y_2 | y_1] = m_2 = v_2ᵀ(y_1 x_1), over 40,000 label
    draws on a fixed design (within 4 standard errors)."""
    y_max = 5.0
    x = jnp.asarray([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    keys = jax.random.split(jax.random.key(0), 40_000)
    y = np.asarray(jax.vmap(lambda k: bartlett_labels(x, k, y_max)[0])(keys))
    assert set(np.unique(y)) == {-y_max, y_max}
    v2 = np.asarray(bartlett_directions(x))[1]
    assert abs(y[:, 0].mean()) <= 4 * y_max / np.sqrt(len(y))
    for sign in (-1.0, 1.0):
        rows = y[y[:, 0] == sign * y_max]
        m2 = v2 @ (sign * y_max * np.asarray(x[0]))
        assert abs(m2) <= y_max
        assert abs(rows[:, 1].mean() - m2) <= 4 * rows[:, 1].std() / np.sqrt(len(rows))


def test_elliptical_potential():
    """Spec §6.1 item 6 (Lemma C.5) with FTRL's Gram inverse: Σ_t ‖x_t‖²_{H_t⁻¹} ≤ 2d log((d·2λ + T)/(d·2λ))
    for unit features, H_t = 2λI + Σ_{τ≤t} x xᵀ."""
    stream = make_stream("stochastic", 400, d=6, sigma=1.0)
    x, y, _, _ = stream_data(stream, seed=4)
    est = ftrl(LINKS["identity"], 6, 400)
    state, total = est.init(0.5), 0.0
    for xt, yt in zip(x, y):
        state = est.update(state, jnp.asarray(xt), jnp.asarray(yt), 0.5)
        total += float(xt @ np.asarray(state.h_inv) @ xt)
    assert 0.0 < total <= 2 * 6 * np.log((6 * 1.0 + 400) / (6 * 1.0))


@pytest.mark.slow
def test_lower_bound_instance_matches_the_exact_expectation():
    """Spec §6.2 item 7 at small scale: over 2000 trials of Theorem 5.1's instance (d = 3, T = 300, σ² = 4),
    the mean regret is within 3 standard errors of ``theory.ftrl_basis_regret``."""
    stream = make_stream("stochastic", 300, d=3, features="basis", sigma=2.0)
    res = regress(stream, ftrl_learner(stream), {"lam": 4.0}, range(2000))
    final = res.curves["stochastic"][:, -1]
    exact = theory.ftrl_basis_regret(3, 300, 4.0, 4.0)
    assert abs(final.mean() - exact) <= 3 * final.std(ddof=1) / np.sqrt(final.size)


def test_lemma_4_7_and_the_adversarial_gap():
    """Spec §6.3 item 12: Σ(ŷ_t − x_tᵀμ*)² ≤ 4 R_stoc + 16σ² log 20 in ≥ 90% of 300 trials (identity link:
    the left side is 2 × the pseudo-regret); spec §6.4 item 14: mean(R_adv − R_stoc) is within ±10% of
    σ²d/2 with unclipped Gaussian noise (d = 5, T = 500, σ² = 4)."""
    stream = make_stream("stochastic", 500, d=5, sigma=2.0)
    res = regress(stream, ftrl_learner(stream), {"lam": 4.0}, range(300), adversarial=True)
    stoch, pseudo, adv = (res.curves[k][:, -1] for k in ("stochastic", "pseudo", "adversarial"))
    assert np.mean(2 * pseudo <= 4 * stoch + 16 * 4.0 * np.log(20)) >= 0.9
    assert abs(np.mean(adv - stoch) / (4.0 * 5 / 2) - 1) <= 0.1


def test_logistic_smoke_against_the_reference_and_theorem_4_1():
    """Spec §6.5 item 20: logistic FTRL (d = 5, T = 2000, σ = 0.5, λ = 4K²/κ = 1.2715) has mean R_stoc about
    2.5 / 5.5 / 7.6 at t = 200 / 1000 / 2000 over 10 trials (per-trial sd about 1: checked within ±1.5,
    about 4 standard errors), below Theorem 4.1's bound in every trial."""
    stream = make_stream("stochastic", 2000, d=5, link="logistic", sigma=0.5)
    res = regress(stream, ftrl_learner(stream), {"lam": theory.ftrl_lambda("logistic")}, range(10),
                  max_points=2000)
    for t, ref in ((200, 2.5), (1000, 5.5), (2000, 7.6)):
        at = res.curves["stochastic"][:, t - 1]
        assert abs(at.mean() - ref) <= 1.5
        assert np.all(at <= theory.ftrl_regret_bound(5, t, 0.25, 0.05, link="logistic"))


def test_grid_over_lambda_equals_separate_runs_and_noise_clipping():
    """A λ grid runs side by side with the same data (common random numbers); clip = 'noise' keeps labels
    in [−Y, Y] and counts the clipped rounds; bounded noise has |ε| ≤ R."""
    stream = make_stream("stochastic", 200, d=3, sigma=4.0, clip="noise", y_max=5.0)
    grid = regress(stream, ftrl_learner(stream), {"lam": [1.0, 4.0]}, range(3), grid=True)
    for i, lam in enumerate((1.0, 4.0)):
        one = regress(stream, ftrl_learner(stream), {"lam": lam}, range(3))
        np.testing.assert_allclose(grid.curves["stochastic"][i], one.curves["stochastic"], rtol=1e-12)
    x, y, z, clipped = stream_data(stream)
    assert np.all(np.abs(y) <= 5.0) and np.all(np.abs(y - z) <= 4.0 + 1e-12)
    assert clipped.sum() == np.sum(np.isclose(np.abs(y - z), 4.0)) > 0
    bounded = make_stream("stochastic", 4000, d=3, noise="bounded", sigma=0.5, noise_bound=2.0)
    _, yb, zb, _ = stream_data(bounded)
    eps = yb - zb
    assert set(np.round(np.unique(eps), 12)) <= {-2.0, 0.0, 2.0}
    assert abs(np.mean(eps**2) / 0.25 - 1) <= 4 * np.sqrt((16 / 0.25 - 1) / 4000)  # Var(ε²)/σ⁴ = R²/σ² − 1
