"""Disjoint arm features without their zeros (nlbandit.models.disjoint): every compact computation equals the
dense one on the block one-hot vectors (float64, tight), and policies with ``features = "disjoint"`` make the
decisions they make with ``"dense"`` (spec 001 §4.3; issue 15 item 5)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.data.encode import disjoint as encode
from nlbandit.envs.classification import classification
from nlbandit.models import disjoint
from nlbandit.models.history import Rows
from nlbandit.models.mlp import MLP, mlp_apply, mlp_grads, mlp_init
from nlbandit.models.mlp_train import Training, train
from nlbandit.models.ridge import diagonal_widths
from nlbandit.policies.registry import check_policy_env, resolve_policy

K, D0 = 4, 5
RNG_SEED = 3
RNG = np.random.default_rng(RNG_SEED)  # restarted before each test (conftest.py)


def _dense(x, blocks):
    """The disjoint-encoded rows (n, D0·K) of compact rows x (n, D0) in ``blocks``."""
    return np.stack([np.asarray(encode(jnp.asarray(r), K))[b] for r, b in zip(x, blocks)])


@pytest.mark.parametrize("depth, bias", [(1, False), (2, False), (3, False), (1, True), (3, True)])
def test_outputs_gradients_widths_and_designs_equal_the_dense_ones(depth, bias):
    arch = MLP(D0 * K, 6, depth, False, "none", bias)
    theta = mlp_init(arch, jax.random.key(depth), "standard", "float64")
    x, blocks = RNG.normal(size=(7, D0)), RNG.integers(0, K, 7)
    dense = _dense(x, blocks)
    np.testing.assert_allclose(disjoint.apply(arch, K, theta, jnp.asarray(x), jnp.asarray(blocks)),
                               mlp_apply(arch, theta, jnp.asarray(dense)), rtol=1e-12, atol=1e-12)
    g1, g_rest = disjoint.grads(arch, K, theta, jnp.asarray(x), jnp.asarray(blocks))
    g = np.asarray(mlp_grads(arch, theta, jnp.asarray(dense)))
    rows = arch.shapes()[0][0]
    first = g[:, :rows * D0 * K].reshape(7, rows, K, D0)
    for i, b in enumerate(blocks):
        np.testing.assert_allclose(first[i, :, b], g1[i], rtol=1e-12, atol=1e-12)
        assert not np.delete(first[i], b, axis=1).any()  # zero outside the row's block
    np.testing.assert_allclose(g[:, rows * D0 * K:], g_rest, rtol=1e-12, atol=1e-12)
    diag = RNG.uniform(0.5, 2.0, arch.n_params)
    np.testing.assert_allclose(disjoint.widths(arch, K, jnp.asarray(diag), g1, g_rest, jnp.asarray(blocks)),
                               diagonal_widths(jnp.asarray(diag), jnp.asarray(g)), rtol=1e-12)
    np.testing.assert_allclose(disjoint.accumulate(arch, K, jnp.asarray(diag), g1[3], g_rest[3], blocks[3], 0.7),
                               diag + 0.7 * g[3] * g[3], rtol=1e-12)


def test_compact_recovers_the_sample_of_every_arm():
    x = jnp.asarray(RNG.normal(size=D0))
    np.testing.assert_array_equal(disjoint.compact(encode(x, K), K), np.tile(x, (K, 1)))


@pytest.mark.parametrize("count", [0, 1, 37, 300])
def test_layout_puts_each_observation_once_in_a_tile_of_its_block(count):
    capacity, tile = 384, 32
    x, blocks = RNG.normal(size=(capacity, D0)), RNG.integers(0, K, capacity)
    blocks[:count // 2] = 2  # one heavy block
    y = RNG.normal(size=capacity)
    lay = disjoint.layout(jnp.asarray(x), jnp.asarray(blocks), jnp.asarray(y), jnp.asarray(count), K, tile)
    n, tiles = np.asarray(lay.n), int(lay.tiles)
    assert n.sum() == count and not n[tiles * tile:].any()
    assert tiles == sum(-(-int((blocks[:count] == b).sum()) // tile) for b in range(K))
    seen = []
    for j in range(tiles):
        used = n[j * tile:(j + 1) * tile] > 0
        b = int(lay.tile_block[j])
        for row, s in zip(np.asarray(lay.x)[j * tile:(j + 1) * tile][used], np.asarray(lay.s)[j * tile:][:tile][used]):
            i = int(np.flatnonzero((x == row).all(axis=1))[0])
            assert blocks[i] == b and y[i] == s
            seen.append(i)
    assert sorted(seen) == list(range(count))
    if count:  # order within a block is kept
        assert all(a < b for a, b in zip(seen, seen[1:]) if blocks[a] == blocks[b])


@pytest.mark.parametrize("loss, reduction, anchor, bias", [("logistic", "mean", "zero", False),
                                                           ("squared", "sum", "init", False),
                                                           ("logistic", "mean", "zero", True)])
def test_training_on_the_compact_history_equals_dense_training(loss, reduction, anchor, bias):
    arch = MLP(D0 * K, 6, 2, False, "none", bias)
    how = Training(20, "gd", reduction, anchor, "one", loss=loss)
    theta0 = mlp_init(arch, jax.random.key(1), "standard", "float64")
    capacity, count = 256, 150
    x, blocks = RNG.normal(size=(capacity, D0)), RNG.integers(0, K, capacity)
    y = RNG.integers(0, 2, capacity).astype(float) * (np.arange(capacity) < count)
    n = (np.arange(capacity) < count).astype(float)
    dense_rows = Rows(jnp.asarray(_dense(x, blocks) * n[:, None]), jnp.asarray(n), jnp.asarray(y), jnp.asarray(count))
    expected = train(arch, how, theta0 + 0.01, theta0, dense_rows, jnp.asarray(0.3), jnp.asarray(0.05),
                     jax.random.key(0))
    got = disjoint.train(arch, K, how, theta0 + 0.01, theta0, jnp.asarray(x), jnp.asarray(blocks), jnp.asarray(y),
                         jnp.asarray(count), jnp.asarray(0.3), jnp.asarray(0.05))
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def _env():
    labels = RNG.integers(0, K, 300)
    numeric = RNG.uniform(-1, 1, (300, D0)) + 0.8 * np.eye(K, D0)[labels]  # learnable classes
    return classification(numeric, np.zeros((300, 0), np.int32), (), labels, K, 200)


@pytest.mark.parametrize("bias", [False, True])
def test_neurallog_decides_the_same_with_disjoint_features(bias):
    env, runs = _env(), {}
    for features in ("dense", "disjoint"):  # UCB-2: the W-type design, weighted after each training
        policy, params = nb.make_policy("neurallog-ucb-2", nb.ProblemSpec(D0 * K, K, 120), width=8, train_every=40,
                                        lr=0.1, features=features, bias=bias)
        runs[features] = nb.simulate(env, policy, params, 120, range(2), chunk_size=120)
    np.testing.assert_array_equal(runs["dense"].arms, runs["disjoint"].arms)


def test_disjoint_features_are_refused_where_the_arms_are_not_disjoint():
    with pytest.raises(ConfigError, match="field 'features' = 'disjoint' needs each arm's features to be zero"):
        check_policy_env(resolve_policy({"name": "neurallog-ucb-2", "features": "disjoint"}),
                         nb.make_env("latent", d=8, k=4), 100)
    with pytest.raises(ConfigError, match="needs d = d₀·K"):
        check_policy_env(resolve_policy({"name": "neurallog-ucb-2", "features": "disjoint"}),
                         nb.make_env("latent", d=10, k=4), 100)
    check_policy_env(resolve_policy({"name": "neurallog-ucb-2", "features": "disjoint"}), _env(), 100)
    with pytest.raises(ConfigError, match="field 'features' applies to mode = 'experiment' only"):
        resolve_policy({"name": "neurallog-ucb-2", "features": "disjoint", "mode": "theory"})


@pytest.mark.parametrize("name, matrix", [("logistic-ucb-1", "full"), ("ada-ofu-ecolog", "diagonal")])
def test_linear_baselines_decide_the_same_with_block_diagonal_matrices(name, matrix):
    env, runs = _env(), {}
    for features in ("dense", "disjoint"):
        kappa = {"kappa": 10.0} if name == "logistic-ucb-1" else {}
        policy, params = nb.make_policy(name, nb.ProblemSpec(D0 * K, K, 120), mode="experiment", matrix=matrix,
                                        train_every=40, lr=0.1, features=features, **kappa)
        runs[features] = nb.simulate(env, policy, params, 120, range(2), chunk_size=120)
    np.testing.assert_array_equal(runs["dense"].arms, runs["disjoint"].arms)
    with pytest.raises(ConfigError, match="needs each arm's features to be zero"):
        check_policy_env(resolve_policy({"name": name, "mode": "experiment", "features": "disjoint"}),
                         nb.make_env("latent", d=8, k=4), 100)
