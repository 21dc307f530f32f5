"""The neural core (network, gradient features, training, designs) against a float64 NumPy reference, and
the neural policies' decisions, data and errors (the contract suite covers the rest)."""

from __future__ import annotations

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_neural as ref  # tests/reference_neural.py

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.core.params import params_record
from nlbandit.models.history import add_row, empty_rows
from nlbandit.models.mlp import MLP, flatten, mlp_apply, mlp_grads, mlp_init, unflatten
from nlbandit.models.mlp_train import Training, data_gradients, train
from nlbandit.models.ridge import diagonal_widths, gram_update, mahalanobis_widths
from nlbandit.policies.exploration import member_draw

RNG_SEED = 20251110
RNG = np.random.default_rng(RNG_SEED)  # restarted before each test (conftest.py)
KEY = jax.random.key(0)  # SGD's minibatch draws (the full-batch optimisers ignore it)


def _x(n: int, d: int) -> np.ndarray:
    x = RNG.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("depth, scale", [(1, "ntk"), (2, "none"), (3, "ntk"), (4, "ntk")])
def test_outputs_and_per_example_gradients_match_numpy_backprop(depth, scale):
    arch = MLP(5, 6, depth, False, scale)
    theta = mlp_init(arch, jax.random.key(depth), "standard", "float64")
    x = _x(7, 5)
    c = math.sqrt(6) if scale == "ntk" else 1.0
    f_ref, g_ref = ref.forward_backward(np.asarray(theta), x, 6, depth, c)
    np.testing.assert_allclose(mlp_apply(arch, theta, jnp.asarray(x)), f_ref, rtol=1e-12, atol=1e-14)
    grads = mlp_grads(arch, theta, jnp.asarray(x))
    assert grads.shape == (7, arch.n_params)
    np.testing.assert_allclose(grads, g_ref, rtol=1e-12, atol=1e-14)
    for k in range(7):  # the vectorised call equals jax.grad of each example alone
        alone = jax.grad(lambda th: mlp_apply(arch, th, jnp.asarray(x[k])))(theta)
        np.testing.assert_allclose(grads[k], alone, rtol=1e-12, atol=1e-14)


def test_gradients_match_float64_finite_differences():
    arch = MLP(4, 8, 3)
    theta = mlp_init(arch, jax.random.key(0), "symmetric", "float64")
    theta = theta + 0.1 * jnp.asarray(RNG.standard_normal(theta.shape))  # off the symmetric point
    x = jnp.asarray(_x(5, 4))
    v = jnp.asarray(RNG.standard_normal(theta.shape))
    eps = 1e-6
    fd = (mlp_apply(arch, theta + eps * v, x) - mlp_apply(arch, theta - eps * v, x)) / (2 * eps)
    np.testing.assert_allclose(mlp_grads(arch, theta, x) @ v, fd, rtol=1e-6, atol=1e-8)


def test_symmetric_init_is_zero_with_duplicated_inputs():
    # Zhou et al. (2020) §3 / spec 003 §1.3: f(x; θ₀) = 0 for every x when the input is [x; x]/√2.
    arch = MLP(5, 20, 3, duplicate=True)
    theta0 = mlp_init(arch, jax.random.key(3), "symmetric")
    assert theta0.dtype == jnp.float32 and arch.n_params == 20 * 10 + 20 * 20 + 20
    x = jnp.asarray(_x(50, 5))
    assert float(jnp.max(jnp.abs(mlp_apply(arch, theta0, x)))) < 1e-5
    w1, w2, w3 = unflatten(arch, theta0)
    np.testing.assert_array_equal(w1[:10, :5], w1[10:, 5:])  # [[W, 0], [0, W]]
    assert not np.any(w1[:10, 5:]) and not np.any(w2[:10, 10:])
    np.testing.assert_array_equal(w3[0, :10], -w3[0, 10:])  # (w, −w)
    # The entries' variances: 4/N for the blocks, 2/N for w (a loose check over the 400 + 100 draws).
    blocks = np.concatenate([np.asarray(w1[:10, :5]).ravel(), np.asarray(w2[:10, :10]).ravel()])
    assert 0.6 * 4 / 20 < blocks.var() < 1.4 * 4 / 20
    # Without duplication the halves differ, so f(x; θ₀) ≠ 0.
    plain = MLP(6, 20, 3)
    assert float(jnp.max(jnp.abs(mlp_apply(plain, mlp_init(plain, jax.random.key(3)), jnp.asarray(_x(50, 6)))))) > 1e-2


def test_standard_init_is_pytorch_default_bounds():
    arch = MLP(7, 5, 3, scale="none")
    for w, (rows, cols) in zip(unflatten(arch, mlp_init(arch, jax.random.key(1), "standard")), arch.shapes()):
        assert w.shape == (rows, cols) and float(jnp.max(jnp.abs(w))) <= 1 / math.sqrt(cols)


def _data(k=6, d=4, n=40, m=None):
    """A fixed arm set, n pulls of random arms with random rewards, as history rows and as per-arm rows."""
    arms = _x(k, d).astype(np.float32)
    pulls = RNG.integers(0, k, n)
    y = RNG.standard_normal((n,) if m is None else (n, m)).astype(np.float32)
    hist = empty_rows(128, d, m, "float32")
    per_arm = empty_rows(k, d, m, "float32")._replace(x=jnp.asarray(arms))
    for i, a in enumerate(pulls):
        hist = add_row(hist, jnp.asarray(arms[a]), a, jnp.asarray(y[i]), False)
        per_arm = add_row(per_arm, jnp.asarray(arms[a]), a, jnp.asarray(y[i]), True)
    return arms, pulls, y, hist, per_arm


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("depth, scale, duplicate, loss", [(1, "ntk", False, "squared"), (2, "none", True, "logistic"),
                                                          (3, "ntk", False, "squared"), (4, "ntk", True, "logistic")])
def test_hand_written_backpropagation_equals_jax_grad_of_the_loss(depth, scale, duplicate, loss, bias):
    arch = MLP(5, 6, depth, duplicate, scale, bias)
    theta = mlp_init(arch, jax.random.key(depth), "standard", "float64")
    rng = np.random.default_rng(depth)  # its own draws
    # Row 3 is 0, so all its pre-activations are exactly 0, where ReLU's derivative is 0 on both sides.
    x = jnp.asarray(rng.standard_normal((9, 5))).at[3].set(0.0)
    n, s = jnp.asarray(rng.integers(0, 4, 9).astype(np.float64)), jnp.asarray(rng.standard_normal(9))

    def data_term(th):
        f = mlp_apply(arch, th, x)
        return jnp.sum((0.5 * n * f * f if loss == "squared" else n * jnp.logaddexp(0.0, f)) - s * f)

    mine = data_gradients(arch, unflatten(arch, theta), x, n, s, loss)
    assert [g.shape for g in mine] == [tuple(shape) for shape in arch.shapes()]
    np.testing.assert_allclose(flatten(mine), jax.grad(data_term)(theta), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("reduction, reg_scale, anchor", [("mean", "width", "init"), ("sum", "one", "zero")])
def test_history_and_per_arm_training_agree_and_match_numpy_gd(reduction, reg_scale, anchor):
    arms, pulls, y, hist, per_arm = _data()
    arch = MLP(4, 8, 3)
    theta0 = mlp_init(arch, jax.random.key(5), "standard")
    lr = 0.01 if reduction == "mean" else 0.001
    how = Training(20, "gd", reduction, anchor, reg_scale, history=True)
    on_history = train(arch, how, theta0, theta0, hist, jnp.float32(1.0), jnp.float32(lr), KEY)
    on_arms = train(arch, how._replace(history=False), theta0, theta0, per_arm, jnp.float32(1.0), jnp.float32(lr),
                   KEY)
    assert on_history.dtype == jnp.float32
    np.testing.assert_allclose(on_arms, on_history, rtol=1e-4, atol=1e-6)  # float32 precision: the same loss
    th = np.asarray(theta0, np.float64)
    expected = ref.gd(th, th if anchor == "init" else 0 * th, arms[pulls].astype(np.float64), np.ones(len(pulls)),
                      y.astype(np.float64), len(pulls), 1.0, lr, 20, 8, 3, math.sqrt(8),
                      8 if reg_scale == "width" else 1, reduction)
    np.testing.assert_allclose(on_history, expected, rtol=1e-4, atol=1e-6)
    assert np.abs(expected - th).max() > 1e-3  # the steps moved θ


def test_logistic_training_on_arms_equals_history_and_lowers_the_cross_entropy():
    rng = np.random.default_rng(14)  # its own draws
    arms = rng.standard_normal((6, 4)).astype(np.float32)
    arms /= np.linalg.norm(arms, axis=1, keepdims=True)
    pulls = rng.integers(0, 6, 40)
    y = (rng.random(40) < 0.3).astype(np.float32)
    hist, per_arm = empty_rows(128, 4, None, "float32"), empty_rows(6, 4, None, "float32")._replace(x=jnp.asarray(arms))
    for a, r in zip(pulls, y):
        hist = add_row(hist, jnp.asarray(arms[a]), a, jnp.asarray(r), False)
        per_arm = add_row(per_arm, jnp.asarray(arms[a]), a, jnp.asarray(r), True)
    arch = MLP(4, 8, 2)
    theta0 = mlp_init(arch, jax.random.key(9), "standard")
    how = Training(50, "gd", "mean", "zero", "one", loss="logistic")
    on_history = train(arch, how, theta0, theta0, hist, jnp.float32(0.1), jnp.float32(0.5), KEY)
    on_arms = train(arch, how._replace(history=False), theta0, theta0, per_arm, jnp.float32(0.1), jnp.float32(0.5),
                    KEY)
    np.testing.assert_allclose(on_arms, on_history, rtol=1e-4, atol=1e-6)

    def cross_entropy(th):
        f = np.asarray(mlp_apply(arch, th, jnp.asarray(arms[pulls])), np.float64)
        return np.mean(np.logaddexp(0.0, f) - y * f)

    assert cross_entropy(on_history) < cross_entropy(theta0) - 0.05


def test_ensemble_training_equals_separate_trainings():
    _, _, _, hist, per_arm = _data(m=3)
    arch = MLP(4, 8, 2)
    theta0 = mlp_init(arch, jax.random.key(6), "standard")
    start = theta0 + 0.01 * jax.random.normal(jax.random.key(7), (3, arch.n_params), jnp.float32)
    for rows, history in ((hist, True), (per_arm, False)):
        how = Training(10, "gd", history=history)
        together = train(arch, how, start, theta0, rows, jnp.float32(1.0), jnp.float32(0.01), KEY)
        for j in range(3):
            alone = train(arch, how, start[j], theta0, rows._replace(y=rows.y[:, j]), jnp.float32(1.0),
                          jnp.float32(0.01), KEY)
            np.testing.assert_allclose(together[j], alone, rtol=1e-5, atol=1e-7)


def test_adam_decreases_the_loss_and_from_init_ignores_the_start():
    arms, pulls, y, hist, _ = _data()
    arch = MLP(4, 8, 3)
    theta0 = mlp_init(arch, jax.random.key(8), "standard")

    def loss(th):
        return float(jnp.mean((mlp_apply(arch, th, jnp.asarray(arms[pulls])) - y) ** 2))

    adam = train(arch, Training(50, "adam"), theta0, theta0, hist, jnp.float32(1e-3), jnp.float32(0.01), KEY)
    assert loss(adam) < 0.9 * loss(theta0)
    # from_init: every call starts from θ₀, whatever the current θ.
    how = Training(5, "gd")
    np.testing.assert_array_equal(train(arch, how._replace(from_init=True), theta0 + 0.5, theta0, hist, 1.0, 0.1, KEY),
                                  train(arch, how, theta0, theta0, hist, 1.0, 0.1, KEY))


def test_sgd_gradient_is_unbiased_and_sgd_training_learns():
    # The minibatch gradient, averaged over 4000 draws of B = 2 observations, is the full-batch gradient
    # within 5 standard errors in every coordinate; 200 SGD steps of B = 4 at 0.1 achieve at least half of the
    # loss decrease of 200 full-batch steps (0.94–0.99 of it over four seeds when written).
    from nlbandit.models.mlp_train import loss_gradient, minibatch_gradient

    arms, pulls, y, hist, _ = _data()
    arch = MLP(4, 8, 3)
    theta0 = mlp_init(arch, jax.random.key(9), "standard")
    how = Training(1, "sgd", batch_size=2)
    full = loss_gradient(arch, how, theta0, theta0, hist.x, hist.n, hist.y, hist.count, jnp.float32(1.0))
    draws = jax.vmap(lambda k: minibatch_gradient(arch, how, theta0, theta0, hist, jnp.float32(1.0), k))(
        jax.random.split(jax.random.key(10), 4000))
    se = np.asarray(draws).std(0) / np.sqrt(4000)
    assert np.all(np.abs(np.asarray(draws).mean(0) - np.asarray(full)) <= 5 * se + 1e-6)

    def loss(th):
        return float(jnp.mean((mlp_apply(arch, th, jnp.asarray(arms[pulls])) - y) ** 2))

    gd = train(arch, Training(200, "gd"), theta0, theta0, hist, jnp.float32(1e-3), jnp.float32(0.1), KEY)
    sgd = train(arch, Training(200, "sgd", batch_size=4), theta0, theta0, hist, jnp.float32(1e-3), jnp.float32(0.1),
                KEY)
    assert loss(theta0) - loss(sgd) >= 0.5 * (loss(theta0) - loss(gd)) > 0
    # Ensemble members draw their own minibatches: equal starts and targets end apart.
    rows = hist._replace(y=jnp.stack([hist.y, hist.y], axis=1))
    pair = train(arch, Training(20, "sgd"), jnp.stack([theta0, theta0]), theta0, rows, 1.0, 0.01, KEY)
    assert np.abs(np.asarray(pair[0] - pair[1])).max() > 1e-6


def test_minibatch_steps_on_each_batch_own_loss():
    # optimizer = "minibatch": a batch at least as large as the history is the whole history, so every step is a
    # full-batch step (sum and mean); a smaller batch's data gradient, averaged over 4000 batches of B = 5 of the
    # n = 40 observations, is B/n times the full data gradient (each observation is in a batch with probability
    # B/n) within 5 standard errors per coordinate; the batch's observations are distinct (a batch of B = n is the
    # history itself, checked above, only if no observation is drawn twice).
    from nlbandit.models.mlp_train import loss_gradient

    arms, pulls, y, hist, _ = _data()
    arch = MLP(4, 8, 3)
    theta0 = mlp_init(arch, jax.random.key(9), "standard")
    lam = jnp.float32(0.3)
    for reduction in ("sum", "mean"):
        for batch in (40, 64):
            mini = train(arch, Training(3, "minibatch", reduction, batch_size=batch), theta0, theta0, hist, lam,
                         jnp.float32(0.01), KEY)
            full = train(arch, Training(3, "gd", reduction), theta0, theta0, hist, lam, jnp.float32(0.01), KEY)
            np.testing.assert_allclose(mini, full, rtol=1e-5, atol=1e-6)
    how = Training(1, "minibatch", "sum", batch_size=5)
    data = loss_gradient(arch, how, theta0, theta0, hist.x, hist.n, hist.y, hist.count, jnp.float32(0.0))
    steps = jax.vmap(lambda k: theta0 - train(arch, how, theta0, theta0, hist, jnp.float32(0.0), jnp.float32(1.0), k))(
        jax.random.split(jax.random.key(11), 4000))
    se = np.asarray(steps).std(0) / np.sqrt(4000)
    assert np.all(np.abs(np.asarray(steps).mean(0) - 5 / 40 * np.asarray(data)) <= 5 * se + 1e-6)


def test_diagonal_and_full_design_widths_match_numpy():
    p, lam = 12, 0.5
    grads = RNG.standard_normal((30, p))
    diag, inv = lam * jnp.ones(p, jnp.float32), jnp.eye(p, dtype=jnp.float32) / lam
    for g in grads.astype(np.float32):
        diag, inv = diag + g * g, gram_update(inv, jnp.asarray(g))[0]
    z = lam * np.eye(p) + grads.T @ grads
    queries = RNG.standard_normal((5, p))
    np.testing.assert_allclose(mahalanobis_widths(inv, jnp.asarray(queries, jnp.float32)),
                               np.sqrt(np.einsum("kp,pq,kq->k", queries, np.linalg.inv(z), queries)), rtol=1e-3)
    np.testing.assert_allclose(diagonal_widths(diag, jnp.asarray(queries, jnp.float32)),
                               np.sqrt((queries**2 / np.diag(z)).sum(1)), rtol=1e-5)


K, D, T = 4, 4, 14


def _drive(name: str, **options):
    """Run a neural policy on a fixed linear instance round by round; yield (t, state before act, contexts,
    act key, arm, info, state after update, params, policy)."""
    env = nb.make_env("linear", d=D, k=K)
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, K, T), width=6, depth=2, steps=3, **options)
    inst = env.reset(jax.random.key(0))
    arms = jnp.asarray(inst.arms, jnp.float32)
    mask = jnp.ones(K, bool)
    p32 = jax.tree.map(lambda a: a.astype(jnp.float32), params)
    state = policy.prepare(p32, policy.init(p32, jax.random.key(1)), jax.random.key(2), arms, mask)
    act, update = jax.jit(policy.act), jax.jit(policy.update)  # compiled once, as the engine runs them
    for t in range(1, T + 1):
        key = jax.random.key(100 + t)
        arm, info = act(p32, state, key, arms, mask, jnp.int32(t))
        reward = jnp.float32(RNG.standard_normal())
        new = update(p32, state, jax.random.key(200 + t), arms, arm, nb.Feedback(reward), jnp.int32(t))
        yield t, state, arms, key, int(arm), info, new, p32, policy
        state = new


def _reference_scores(theta, arms, width):
    f, g = ref.forward_backward(np.asarray(theta, np.float64), np.asarray(arms, np.float64), width, 2,
                                math.sqrt(width))
    return f, g


@pytest.mark.parametrize("design", ["diagonal", "full"])
def test_neural_ucb_decisions_and_design_match_numpy(design):
    z_ref = None  # λ·1 (the diagonal U) or λI (the full Z), then + g gᵀ of each chosen arm
    for t, state, arms, key, arm, info, new, params, _ in _drive("neural-ucb", design=design, nu=1.0):
        f, g = _reference_scores(state.theta, arms, 6)
        lam = float(params.lam)
        if z_ref is None:
            z_ref = lam * np.ones(g.shape[1]) if design == "diagonal" else lam * np.eye(g.shape[1])
        widths = (np.sqrt((g**2 / z_ref).sum(1)) if design == "diagonal"
                  else np.sqrt(np.einsum("kp,pq,kq->k", g, np.linalg.inv(z_ref), g)))
        scores = f + np.sqrt(lam * float(params.nu)) * widths
        if t > K:  # after one pull per arm: the UCB argmax (no ties here)
            assert arm == int(np.argmax(scores)), t
            np.testing.assert_allclose(float(info.bonus), scores[arm] - f[arm], rtol=1e-3)
        else:
            assert arm == t - 1 and float(info.probability) == 1.0
        z_ref = z_ref + (g[arm] ** 2 if design == "diagonal" else np.outer(g[arm], g[arm]))
        if design == "full":  # the policy keeps Z⁻¹
            np.testing.assert_allclose(np.asarray(new.design, np.float64), np.linalg.inv(z_ref), rtol=2e-3, atol=2e-4)
        else:
            np.testing.assert_allclose(new.design, z_ref, rtol=1e-4)


def test_neural_es_decisions_data_and_training_match_numpy():
    rows_seen = []
    for t, state, arms, key, arm, info, new, params, policy in _drive("neural-es", m=3):
        words = jax.random.bits(key, (2,), jnp.uint32)
        j = int(member_draw(words[0], params.m_used))
        f, _ = _reference_scores(state.theta[j], arms, 6)
        if t > K:
            assert arm == int(np.argmax(f)), t
            members = np.stack([_reference_scores(th, arms, 6)[0] for th in state.theta])
            assert float(info.probability) == pytest.approx(np.mean(np.argmax(members, 1) == arm), abs=1e-6)
        # Exactly one new row per round with m perturbed copies; earlier rows never change (spec 003 §2.5).
        assert int(new.rows.count) == t
        rows_seen.append(np.asarray(new.rows.y[t - 1]))
        np.testing.assert_array_equal(np.asarray(new.rows.y[:t]), np.stack(rows_seen))
        if t >= K:  # training from the warm-up's last round on: 3 GD steps per member, as the NumPy reference
            x = np.asarray(new.rows.x[:t], np.float64)
            th0 = np.asarray(state.theta0, np.float64)
            for jj in range(3):
                expected = ref.gd(np.asarray(state.theta[jj], np.float64), th0, x, np.ones(t),
                                  np.asarray(new.rows.y[:t, jj], np.float64), t, float(params.lam), float(params.lr),
                                  3, 6, 2, math.sqrt(6), 6, "mean")
                np.testing.assert_allclose(new.theta[jj], expected, rtol=1e-4, atol=1e-6)
        else:
            np.testing.assert_array_equal(new.theta, state.theta)


def test_neural_ts_samples_with_the_ucb_width():
    for t, state, arms, key, arm, info, new, params, _ in _drive("neural-ts", nu=1.0):
        if t <= K:
            continue
        f, g = _reference_scores(state.theta, arms, 6)
        sigma = np.sqrt(float(params.lam) * float(params.nu) * (g**2 / np.asarray(state.design, np.float64)).sum(1))
        z = np.asarray(jax.random.normal(jax.random.split(key)[0], (K,), jnp.float32), np.float64)
        sample = f + sigma * z
        assert arm == int(np.argmax(sample)), t
        np.testing.assert_allclose(float(info.bonus), sample[arm] - f[arm], rtol=1e-3, atol=1e-5)


def test_neural_phe_redraws_every_perturbation_each_round():
    # Two updates from the same state with different keys give different fits (fresh noise on all rows),
    # while the stored rewards are the plain rewards.
    gen = _drive("neural-phe", sigma_r=1.0)
    for t, state, arms, key, arm, info, new, params, policy in gen:
        if t == K + 3:
            other = policy.update(params, state, jax.random.key(999), arms, jnp.int32(arm),
                                  nb.Feedback(new.rows.y[t - 1]), jnp.int32(t))
            np.testing.assert_array_equal(other.rows.y, new.rows.y)
            assert np.abs(np.asarray(other.theta) - np.asarray(new.theta)).max() > 1e-6
            break


def test_per_arm_phe_noise_has_the_law_of_the_summed_fresh_draws():
    # backend = "arms": arm k's response sum gets one N(0, n_k σ²) draw per round, the law of the sum of
    # its n_k fresh N(0, σ²) draws; the history form draws one per filled row and none beyond. 4000 rounds:
    # a sample std is within 5% of the truth at > 5 standard errors (SE ≈ 1.1%).
    from nlbandit.models.history import Rows, empty_rows
    from nlbandit.policies.neural import perturbed_rows

    n = jnp.asarray([0.0, 1.0, 4.0, 9.0], jnp.float32)
    arms = Rows(jnp.zeros((4, 2), jnp.float32), n, jnp.zeros(4, jnp.float32), jnp.asarray(14, jnp.int32))
    draws = jax.vmap(lambda k: perturbed_rows(arms, k, 0.5, True).y)(jax.random.split(jax.random.key(3), 4000))
    np.testing.assert_allclose(np.std(np.asarray(draws), axis=0), 0.5 * np.sqrt([0.0, 1.0, 4.0, 9.0]), rtol=0.05)
    history = empty_rows(256, 2, None, jnp.float32)._replace(count=jnp.asarray(130, jnp.int32))
    y = np.asarray(perturbed_rows(history, jax.random.key(4), 0.5, False).y)
    assert (y[:130] != 0).all() and (y[130:] == 0).all() and 0.4 < np.std(y[:130]) < 0.6


def test_training_that_diverges_is_stopped_by_name():
    env = nb.make_env("linear", d=4, k=5, arms="box")
    policy, params = nb.make_policy("neural-ucb", nb.ProblemSpec(4, 5, 50), lr=30.0)
    with pytest.raises(ValueError, match=re.escape("policy 'neural-ucb', seed 0, round 5: its state became "
                                                   "non-finite (training diverged) with params")
                       + ".*lr=30.0"):
        nb.simulate(env, policy, params, 50, [0, 1])


@pytest.mark.parametrize("options, message", [
    (dict(duplicate=False), "the symmetric initialisation needs an even width and an even input dimension, got "
                            "width 20 and input dimension 5; set duplicate = true"),
    (dict(width=7, duplicate=True), "got width 7 and input dimension 10, or use init = 'standard'"),
    (dict(width=0), "field 'width' must be an integer >= 1, got 0"),
    (dict(width=20, depth=0), "field 'depth' must be an integer >= 1, got 0"),
    (dict(width=20, warmup_rounds=100), "the warm-up lasts 100 rounds, longer than the horizon T = 50"),
    (dict(width=20, backend="arms", contexts="fresh"), "fixed"),
    (dict(duplicate=True, optimizer="sgd", backend="arms"), "field 'optimizer' = 'sgd' samples single observations"),
    (dict(duplicate=True, optimizer="sgd", batch_size=0), "field 'batch_size' must be an integer >= 1, got 0"),
])
def test_bad_neural_configurations_are_refused(options, message):
    from nlbandit.policies.registry import check_policy_env, resolve_policy

    odd = "width" not in options or "duplicate" in options  # the first two cases are about the odd d = 5 (where the
    # default, duplicate omitted, duplicates the input: tests/test_agent.py)
    env = nb.make_env("linear", d=5 if odd else 4, k=5, contexts=options.pop("contexts", "fixed"))
    with pytest.raises(ConfigError, match=re.escape(message)):
        config = resolve_policy({"name": "neural-es", **options})
        check_policy_env(config, env, 50)


def test_hand_built_params_records_drive_the_family_constructors():
    from nlbandit.policies.neural import neural_greedy

    policy = neural_greedy(nb.ProblemSpec(2, 3, 10), width=4, depth=2)
    params = params_record("P", ("lam", "lr", "epsilon"))(jnp.float32(1), jnp.float32(0.01), jnp.float32(0))
    state = policy.init(params, jax.random.key(0))
    assert state.theta.dtype == jnp.float32 and state.rows.x.shape == (128, 2)


@pytest.mark.parametrize("name, options", [
    ("neural-ucb", {"design": "diagonal"}), ("neural-ts", {"design": "full", "backend": "arms"}),
    ("neural-es", {"m": 4}), ("neural-es", {"m": 3, "backend": "arms"}), ("neural-phe", {}),
    ("neural-greedy", {"warmup_rounds": 2}), ("neural-es@anytime", {"t0": 100, "schedule": "sun2025"}),
    ("deep-fpl", {"hidden": 7}), ("deep-fl", {"batch": 5}), ("rep-glm-fpl", {"explore_fraction": 0.1}),
    ("neurallog-ucb-2", {}), ("ncbf-ucb", {"duplicate": True}), ("neurallog-ts-2", {"mode": "theory"}),
    ("neurallog-ucb-1", {"mode": "theory"})])
def test_the_loader_counts_the_policy_arrays_the_engine_checks(name, options, monkeypatch):
    # One estimate for both doors: the experiment loader's policy parts (policy_memory, per seed from the policy's
    # own init) are the parts simulate checks before compiling (from its vmapped init and prepare), S = 3.
    from nlbandit.core import simulate as engine
    from nlbandit.policies.registry import build_policy, policy_memory, resolve_policy

    network = {} if name.startswith(("deep", "rep")) else {"width": 6, "depth": 3}
    config = resolve_policy({"name": name, **network, **options})
    spec = nb.ProblemSpec(4, 5, 300)
    checked = {}

    def record(parts, what, where):
        checked.update(parts)
        raise RuntimeError("recorded")

    monkeypatch.setattr(engine, "check_memory", record)
    policy, params = build_policy(config, spec)
    env = nb.make_env("logistic", d=4, k=5)
    with pytest.raises(RuntimeError, match="recorded"):
        nb.simulate(env, policy, params, 300, [0, 1, 2])
    mine = policy_memory(config, spec, 3)
    assert mine == {part: checked[part] for part in mine}
    assert mine["policy states (the scan's carry in and out)"] > 0
    if not name.startswith(("deep", "rep")):  # the neural and NeuralLog policies declare their working arrays
        assert any("transient" in part and need > 0 for part, need in mine.items())


def test_a_neural_run_too_large_for_memory_is_refused(experiment_file):
    from nlbandit.experiments.plan import load_experiment

    text = """
    horizon = 100000
    seeds = 1000

    [env]
    name = "quadratic"
    d = 20
    k = 50

    [[policies]]
    label = "ES"
    name = "neural-es"
    m = 50
    width = 100
    """
    from nlbandit.core.hyper import ConfigError

    with pytest.raises(ConfigError, match=r"run 'ES' needs about .* GiB .*policy states \(the scan's carry in and "
                                             r"out\) [\d.]+ GiB, selection: the ensemble's K·m scores \(transient\)"):
        load_experiment(experiment_file(text), "full")


@pytest.mark.slow
def test_neural_es_and_ucb_beat_uniform_and_linear_play_on_the_quadratic_bandit():
    # Issue 13's statistical check: on the quadratic bandit of Sun et al.'s Fig. 1e (d = 20, K = 50, σ = 0.5)
    # at T = 2000, Neural-ES and NeuralUCB (the papers' network and training) have less mean regret over 6
    # instances than uniform play and than LinUCB, whose linear model cannot represent 10⁻²·xᵀAAᵀx (even in x).
    env = nb.make_env("quadratic", d=20, k=50, noise_std=0.5)
    horizon, seeds = 2000, list(range(6))
    regret = {}
    for name, options in (("neural-es", dict(backend="arms")), ("neural-ucb", dict(backend="arms")),
                          ("uniform", {}), ("lin-ucb", {})):
        policy, params = nb.make_policy(name, nb.ProblemSpec(20, 50, horizon), **options)
        regret[name] = nb.simulate(env, policy, params, horizon, seeds).final_regret
    means = {k: float(np.mean(v)) for k, v in regret.items()}
    for neural in ("neural-es", "neural-ucb"):
        assert means[neural] < means["uniform"] and means[neural] < means["lin-ucb"], means
