"""Bae & Lee's neural logistic policies in experiment mode (spec 001 §3) against a float64 NumPy reference,
their κ- and ν-invariances (spec 001 §7.1), the post-training weights of the W-type design, and errors."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference_neural as ref  # tests/reference_neural.py

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.core.keys import normal
from nlbandit.core.types import Feedback, to_dtype
from nlbandit.models.mlp import MLP, mlp_apply
from nlbandit.policies.neurallog import R
from nlbandit.policies.registry import check_policy_env, resolve_policy

D, K, T = 6, 4, 400
NAMES = ("ncbf-ucb", "neurallog-ucb-1", "neurallog-ucb-2", "neurallog-ts-1", "neurallog-ts-2")


def _factor(name, nu, lam, kappa, s, dtilde):
    """σ(x)/‖g‖_{D⁻¹} of spec 001 §3.2's table, written out."""
    b = (1 + s + s * s) * (math.sqrt(dtilde) + lam**-0.5) + 1
    return nu * {"ncbf-ucb": kappa * math.sqrt(dtilde) + s * math.sqrt(kappa * lam) + 1,
                 "neurallog-ucb-1": R * math.sqrt(kappa) * b, "neurallog-ucb-2": b,
                 "neurallog-ts-1": math.sqrt(kappa) * b, "neurallog-ts-2": b}[name]


@pytest.mark.parametrize("name", NAMES)
def test_scores_match_a_numpy_reference_after_some_rounds(name):
    nu, lam, kappa, s = 0.3, 0.5, 4.0, 1.5
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, K, T), nu=nu, lam=lam, kappa=kappa, s=s, width=8,
                                    train_every=1000)  # no training: θ stays θ₀
    params = to_dtype(params, policy.dtype)  # as the engine hands them over
    state = policy.init(params, jax.random.key(0))
    rng = np.random.default_rng(1)
    theta0 = np.asarray(state.theta, np.float64)
    design = np.full(theta0.size, lam if name.endswith("2") else kappa * lam)
    squares = np.zeros(theta0.size)
    for t in range(1, 6):
        x = rng.uniform(-1, 1, (K, D)).astype(np.float32)
        arm = int(rng.integers(K))
        state = policy.update(params, state, jax.random.key(t), jnp.asarray(x), arm, Feedback(jnp.float32(1.0)), t)
        f, g = ref.forward_backward(theta0, x[arm:arm + 1].astype(np.float64), 8, 2, 1.0)
        weight = 1 / (1 + np.exp(-f[0])) / (1 + np.exp(f[0])) if name.endswith("2") else 1.0
        design += weight * g[0] ** 2
        squares += g[0] ** 2
    x = rng.uniform(-1, 1, (K, D)).astype(np.float32)
    arm, info = policy.act(params, state, jax.random.key(9), jnp.asarray(x), jnp.ones(K, bool), 6)
    f, g = ref.forward_backward(theta0, x.astype(np.float64), 8, 2, 1.0)
    dtilde = np.sum(np.log1p((1 / kappa if name == "ncbf-ucb" else R) * squares))
    sigma = _factor(name, nu, lam, kappa, s, dtilde) * np.sqrt(np.sum(g * g / design, axis=1))
    np.testing.assert_allclose(state.design, design, rtol=2e-5)
    if "ts" in name:  # a Gaussian sample around f with std σ: its standardised draw is the round's N(0, 1) one
        z = np.asarray(normal(jax.random.split(jax.random.key(9))[0], (K,), "float32"))
        np.testing.assert_allclose(float(info.score) - float(info.bonus), f[int(arm)], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(float(info.bonus), sigma[int(arm)] * z[int(arm)], rtol=2e-5)
    else:
        scores = 1 / (1 + np.exp(-f)) + sigma
        assert int(arm) == int(np.argmax(scores))
        np.testing.assert_allclose(float(info.bonus), sigma[int(arm)], rtol=2e-5)
        np.testing.assert_allclose(float(info.score), scores[int(arm)], rtol=2e-5)


def _arms(name, **options):
    env = nb.make_env("latent", d=D, k=K, latent="h4", pool=200)
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, K, 150), width=8, train_every=50, **options)
    return np.asarray(nb.simulate(env, policy, params, 150, range(3), chunk_size=150).arms)


def test_kappa_enters_exactly_the_policies_whose_bonus_has_it():
    # spec 001 §3.2: UCB-2 and TS-2 never read κ; NCBF-UCB, UCB-1 and TS-1 do.
    for name in ("neurallog-ucb-2", "neurallog-ts-2"):
        np.testing.assert_array_equal(_arms(name, kappa=2.0, nu=1.0), _arms(name, kappa=50.0, nu=1.0))
    for name in ("ncbf-ucb", "neurallog-ucb-1"):
        assert np.any(_arms(name, kappa=2.0, nu=1.0) != _arms(name, kappa=50.0, nu=1.0))


def test_with_nu_zero_the_ucb_policies_are_one_greedy_policy():
    # spec 001 §7.1: ν = 0 leaves the network's mean only, the same for every UCB policy (bit-identical).
    first = _arms("ncbf-ucb", nu=0.0)
    for name in ("neurallog-ucb-1", "neurallog-ucb-2"):
        np.testing.assert_array_equal(_arms(name, nu=0.0), first)


def test_the_w_design_weighs_each_gradient_with_the_network_after_training():
    policy, params = nb.make_policy("neurallog-ucb-2", nb.ProblemSpec(D, K, T), width=8, train_every=1, lr=0.5)
    params = to_dtype(params, policy.dtype)
    arch = MLP(D, 8, 2, False, "none")  # the policy's network: width 8, the paper's L = 2 without √m
    state = policy.init(params, jax.random.key(3))
    x = jnp.asarray(np.random.default_rng(4).uniform(-1, 1, (K, D)), jnp.float32)
    after = policy.update(params, state, jax.random.key(5), x, 2, Feedback(jnp.float32(1.0)), 1)  # t = 1: trains
    assert np.abs(np.asarray(after.theta - state.theta)).max() > 1e-3
    g = np.asarray(jax.grad(lambda th: mlp_apply(arch, th, x[2]))(state.theta))  # at the θ that chose x
    f_new = float(mlp_apply(arch, after.theta, x[2]))
    weight = 1 / (1 + math.exp(-f_new)) / (1 + math.exp(f_new))
    np.testing.assert_allclose(after.design, params.lam + weight * g * g, rtol=1e-5)
    np.testing.assert_allclose(after.squares, g * g, rtol=1e-5)


@pytest.mark.parametrize("name, options, env_options, message", [
    ("neurallog-ucb-1", dict(kappa=0.5), {}, "field 'kappa'"),
    ("ncbf-ucb", dict(s=0.0), {}, "field 's'"),
    ("neurallog-ucb-2", {}, dict(d=5), "even"),
    ("neurallog-ts-1", {}, dict(name="linear"), "reward"),  # Gaussian rewards: not a Bernoulli likelihood's
])
def test_bad_configurations_are_refused(name, options, env_options, message):
    env = nb.make_env(env_options.pop("name", "latent"), **{"d": D, "k": K, **env_options})
    with pytest.raises(ConfigError, match=message):
        check_policy_env(resolve_policy({"name": name, **options}), env, T)
