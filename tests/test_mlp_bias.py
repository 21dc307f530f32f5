"""The MLP with bias terms (``MLP.bias``; spec 001, amendment of 2026-11-25 item 4): outputs, per-example
gradients, the hand-written backpropagation and training against the float64 NumPy reference
(tests/reference_neural.py), PyTorch's initialisation, the refusals, a policy run, and the offset a bias-free
network cannot fit."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_neural as ref  # tests/reference_neural.py

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.models.history import Rows
from nlbandit.models.mlp import MLP, flatten, mlp_apply, mlp_grads, mlp_init, unflatten
from nlbandit.models.mlp_train import Training, train
from nlbandit.policies.registry import resolve_policy

RNG_SEED = 20261125
RNG = np.random.default_rng(RNG_SEED)  # restarted before each test (conftest.py)
KEY = jax.random.key(0)


def _x(n: int, d: int) -> np.ndarray:
    x = RNG.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_layout_is_pytorch_parameters_order():
    arch = MLP(5, 6, 3, bias=True)
    assert arch.shapes() == ((6, 5), (6, 1), (6, 6), (6, 1), (1, 6), (1, 1))
    assert arch.n_params == 6 * 5 + 6 * 6 + 6 + (3 - 1) * 6 + 1  # p of the bias-free net plus (L − 1)·N + 1
    assert MLP(20, 20, 3, bias=True).n_params == 861 and MLP(20, 20, 3).n_params == 820
    theta = jnp.arange(arch.n_params, dtype=jnp.float64)
    params = unflatten(arch, theta)
    assert [p.shape for p in params] == list(arch.shapes())
    np.testing.assert_array_equal(params[1][:, 0], np.arange(30, 36))  # b_1 right after vec(W_1)
    np.testing.assert_array_equal(flatten(params), theta)


@pytest.mark.parametrize("depth, scale, duplicate", [(1, "ntk", False), (2, "none", False), (3, "ntk", True),
                                                     (4, "none", False)])
def test_biased_outputs_and_per_example_gradients_match_numpy_backprop(depth, scale, duplicate):
    arch = MLP(5, 6, depth, duplicate, scale, bias=True)
    theta = mlp_init(arch, jax.random.key(depth), "standard", "float64")
    x = _x(7, 5)
    x[2] = 0.0  # the origin: f(0) is the biases' work alone
    c = math.sqrt(6) if scale == "ntk" else 1.0
    x_in = np.concatenate([x, x], axis=1) / math.sqrt(2) if duplicate else x
    f_ref, g_ref = ref.forward_backward(np.asarray(theta), x_in, 6, depth, c, bias=True)
    np.testing.assert_allclose(mlp_apply(arch, theta, jnp.asarray(x)), f_ref, rtol=1e-12, atol=1e-14)
    assert abs(f_ref[2]) > 1e-3
    grads = mlp_grads(arch, theta, jnp.asarray(x))
    assert grads.shape == (7, arch.n_params)
    np.testing.assert_allclose(grads, g_ref, rtol=1e-12, atol=1e-14)


def test_biased_training_matches_numpy_gd_and_decays_the_biases():
    arch = MLP(4, 8, 3, False, "ntk", bias=True)
    theta0 = mlp_init(arch, jax.random.key(5), "standard", "float64")
    x, y = _x(30, 4), RNG.standard_normal(30)
    rows = Rows(jnp.asarray(x), jnp.ones(30), jnp.asarray(y), jnp.asarray(30))
    how = Training(20, "gd", "mean", "init", "width", history=False)
    got = train(arch, how, theta0, theta0, rows, jnp.asarray(0.5), jnp.asarray(0.01), KEY)
    th = np.asarray(theta0)
    expected = ref.gd(th, th, x, np.ones(30), y, 30, 0.5, 0.01, 20, 8, 3, math.sqrt(8), 8, "mean", bias=True)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert np.abs(expected - th).max() > 1e-3
    # With no data the loss is the regulariser ½λ‖θ‖² alone (anchor 0): every entry, biases included, shrinks
    # by (1 − ηλ) per step.
    empty = Rows(jnp.asarray(x), jnp.zeros(30), jnp.zeros(30), jnp.asarray(0))
    decayed = train(arch, Training(10, "gd", "sum", "zero", "one", history=False), theta0, theta0, empty,
                    jnp.asarray(0.5), jnp.asarray(0.1), KEY)
    np.testing.assert_allclose(decayed, th * 0.95**10, rtol=1e-12)


def test_standard_init_with_bias_is_pytorch_default():
    arch = MLP(7, 64, 3, scale="none", bias=True)
    params = unflatten(arch, mlp_init(arch, jax.random.key(1), "standard"))
    for (w, b), (rows, fan_in) in zip(zip(params[0::2], params[1::2]), arch.weight_shapes()):
        bound = 1 / math.sqrt(fan_in)
        assert w.shape == (rows, fan_in) and b.shape == (rows, 1)
        assert float(jnp.max(jnp.abs(w))) <= bound and float(jnp.max(jnp.abs(b))) <= bound
        assert np.all(np.asarray(b) != 0)
    assert float(jnp.max(jnp.abs(params[1]))) > 0.8 / math.sqrt(7)  # U(±1/√fan_in), not the bias column's ±1
    assert float(jnp.max(jnp.abs(params[3]))) > 0.8 / 8


def test_symmetric_init_with_bias_is_refused():
    message = MLP(4, 8, 2, bias=True).check("symmetric", "policy 'x'")
    assert message == ("policy 'x': field 'bias' = true needs init = 'standard' (the symmetric initialisation has "
                       "no bias terms)")
    assert MLP(4, 8, 2, bias=True).check("standard", "policy 'x'") is None
    env = nb.make_env("linear", d=4, k=3)
    with pytest.raises(ConfigError, match=r"field 'bias' = true needs init = 'standard'"):
        nb.make_policy("neural-ucb", env, horizon=50, bias=True)
    with pytest.raises(ConfigError, match=r"field 'bias' = true needs init = 'standard'"):
        nb.make_policy("neurallog-ucb-2", env, horizon=50, bias=True, init="symmetric")
    with pytest.raises(ConfigError, match="field 'bias' applies to mode = 'experiment' only"):  # its default: true
        resolve_policy({"name": "neurallog-ucb-2", "mode": "theory", "bias": False})


@pytest.mark.parametrize("name", ["neural-ucb", "neural-ts", "neural-phe", "neural-es", "neural-greedy",
                                  "neural-squarecb"])
def test_neural_policies_run_with_bias(name):
    env = nb.make_env("linear", d=4, k=3)
    options = dict(init="standard", bias=True, width=6, depth=2, steps=3)
    policy, params = nb.make_policy(name, env, horizon=20, **options)
    state = policy.init(jax.tree.map(lambda a: a.astype(jnp.float32), params), KEY)
    assert state.theta.shape[-1] == MLP(4, 6, 2, bias=True).n_params
    res = nb.simulate(env, policy, params, 20, range(1), chunk_size=20)
    assert np.isfinite(res.cum_regret).all()


def test_neurallog_with_bias_simulates():
    env = nb.make_env("latent", d=20, k=5, latent="h1", pool=100)
    policy, params = nb.make_policy("neurallog-ucb-2", env, horizon=100, bias=True)
    assert policy.init(params, KEY).theta.shape == (MLP(20, 20, 2, bias=True).n_params,)
    res = nb.simulate(env, policy, params, 100, range(2), chunk_size=100)
    assert np.isfinite(res.cum_regret).all() and res.cum_regret.shape[-1] == 100


def test_bias_fits_an_offset_a_bias_free_network_cannot():
    # Target 1 on inputs at and near the origin. A bias-free ReLU network is positively homogeneous: f(0) = 0
    # and |f(x)| ≤ C‖x‖, so it misses the origin's target by 1 whatever its training; with biases f ≈ 1.
    x = np.concatenate([np.zeros((1, 4)), 0.05 * _x(15, 4)])
    rows = Rows(jnp.asarray(x, jnp.float32), jnp.ones(16, jnp.float32), jnp.ones(16, jnp.float32), jnp.asarray(16))
    how = Training(300, "gd", "mean", "zero", "one", history=False)
    fitted = {}
    for bias in (False, True):
        arch = MLP(4, 16, 2, False, "none", bias)
        theta0 = mlp_init(arch, jax.random.key(2), "standard")
        theta = train(arch, how, theta0, theta0, rows, jnp.float32(1e-4), jnp.float32(0.1), KEY)
        fitted[bias] = np.asarray(mlp_apply(arch, theta, rows.x))
    assert fitted[False][0] == 0.0 and np.abs(fitted[False] - 1).max() >= 1.0
    assert np.abs(fitted[True] - 1).max() < 0.05
