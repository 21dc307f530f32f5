"""Kveton et al. (2020)'s neural policies (``deep-fpl``, ``deep-fl``, ``rep-glm-fpl``) and their network
against float64 NumPy references (hand-written backpropagation, Adam and a logistic-regression Newton fit),
their exploration phases, a statistical check, and their configuration errors (the contract suite covers
the rest)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_precision import _float64_operations  # tests/test_precision.py

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, EnvFacts, Feedback, ProblemSpec, to_dtype
from nlbandit.models.shallow import ShallowNet, embedding, glorot_bound, logistic_loss, logits, shallow_init
from nlbandit.policies.deep import exploration_rounds
from nlbandit.policies.registry import check_policy_env, resolve_policy

RNG_SEED = 20251124
RNG = np.random.default_rng(RNG_SEED)  # restarted before each test (conftest.py)


# ---- a float64 NumPy reference of the network ----------------------------------------------------------

def _phi(z, activation):
    return np.maximum(z, 0.0) if activation == "relu" else np.tanh(z)


def _dphi(z, activation):
    return (z > 0).astype(float) if activation == "relu" else 1.0 - np.tanh(z) ** 2


def _np_net(net: ShallowNet) -> dict[str, np.ndarray]:
    return {name: np.asarray(leaf, np.float64) for name, leaf in net._asdict().items()}


def _np_logits(w, x, activation):
    return _phi(x @ w["w1"] + w["b1"], activation) @ w["w2"] + w["b2"]


def _np_loss_and_grad(w, x, y, c, activation):
    """The mean logistic loss Σ c (softplus(g) − y g)/Σ c and its gradient, by hand-written backprop."""
    z = x @ w["w1"] + w["b1"]
    h = _phi(z, activation)
    g = h @ w["w2"] + w["b2"]
    loss = np.sum(c * (np.logaddexp(0.0, g) - y * g)) / c.sum()
    delta = c * (1.0 / (1.0 + np.exp(-g)) - y) / c.sum()  # ∂loss/∂g
    dz = np.outer(delta, w["w2"]) * _dphi(z, activation)
    return loss, {"w1": x.T @ dz, "b1": dz.sum(0), "w2": h.T @ delta, "b2": delta.sum()}


def _np_logistic_fit(x, y, lam):
    """argmin Σ [log(1 + e^{xᵀθ}) − y xᵀθ] + λ/2 ‖θ‖² by plain Newton in float64, to machine precision."""
    theta = np.zeros(x.shape[1])
    for _ in range(100):
        mu = 1.0 / (1.0 + np.exp(-(x @ theta)))
        grad = x.T @ (mu - y) + lam * theta
        hess = (x * (mu * (1 - mu))[:, None]).T @ x + lam * np.eye(x.shape[1])
        step = np.linalg.solve(hess, grad)
        theta -= step
        if np.linalg.norm(step) < 1e-14 * (1 + np.linalg.norm(theta)):
            break
    return theta


def _random_net(d, hidden, key):
    """A float64 network with non-zero biases (the initialisation's are zero)."""
    net = shallow_init(jax.random.key(key), d, hidden, "float64")
    return net._replace(b1=jnp.asarray(RNG.normal(0, 0.5, hidden)), b2=jnp.asarray(RNG.normal()))


# ---- (1) the network ---------------------------------------------------------------------------------

def test_init_is_keras_default_glorot_uniform_with_zero_biases():
    d, hidden = 30, 50
    net = shallow_init(jax.random.key(0), d, hidden)
    assert net.w1.shape == (d, hidden) and net.w2.shape == (hidden,) and net.b2.shape == ()
    assert all(leaf.dtype == jnp.float32 for leaf in net)
    assert not np.any(net.b1) and float(net.b2) == 0.0
    for w, (fan_in, fan_out) in ((net.w1, (d, hidden)), (net.w2, (hidden, 1))):
        r = np.sqrt(6.0 / (fan_in + fan_out))
        assert glorot_bound(fan_in, fan_out) == pytest.approx(r)
        w = np.asarray(w)
        assert np.abs(w).max() <= r and np.abs(w).max() > 0.9 * r  # U(−r, r) fills its interval
        assert abs(w.var() - r * r / 3) < 0.15 * r * r / 3  # the variance of U(−r, r)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_forward_pass_embedding_and_loss_gradient_match_numpy_backprop(activation):
    d, hidden, n = 5, 7, 9
    net = _random_net(d, hidden, 1)
    w = _np_net(net)
    x = RNG.standard_normal((n, d))
    y = RNG.normal(0.5, 1.0, n)  # perturbed targets leave [0, 1]
    c = (np.arange(n) < 6).astype(float)  # three empty slots of a window
    np.testing.assert_allclose(logits(net, jnp.asarray(x), activation), _np_logits(w, x, activation), rtol=1e-12)
    psi = np.asarray(embedding(net, jnp.asarray(x), activation))
    np.testing.assert_allclose(psi, np.c_[_phi(x @ w["w1"] + w["b1"], activation), np.ones(n)], rtol=1e-12)
    np.testing.assert_allclose(psi @ np.r_[w["w2"], w["b2"]], _np_logits(w, x, activation), rtol=1e-12)
    loss_ref, grad_ref = _np_loss_and_grad(w, x, y, c, activation)
    loss, grad = jax.value_and_grad(logistic_loss)(net, jnp.asarray(x), jnp.asarray(y), jnp.asarray(c), activation)
    assert float(loss) == pytest.approx(loss_ref, rel=1e-12)
    for name, ref in grad_ref.items():
        np.testing.assert_allclose(getattr(grad, name), ref, rtol=1e-10, atol=1e-14, err_msg=name)
    # and the hand-written gradient against central finite differences of the loss, along a random direction
    v = {name: RNG.standard_normal(np.shape(a)) for name, a in w.items()}
    eps = 1e-6
    plus = _np_loss_and_grad({k: w[k] + eps * v[k] for k in w}, x, y, c, activation)[0]
    minus = _np_loss_and_grad({k: w[k] - eps * v[k] for k in w}, x, y, c, activation)[0]
    directional = sum(np.sum(grad_ref[k] * v[k]) for k in w)
    assert (plus - minus) / (2 * eps) == pytest.approx(directional, rel=1e-6)


# ---- (2), (3) DeepFPL and DeepFL, round by round -------------------------------------------------------

D, K = 3, 5


def _drive(name, rounds, horizon=100, **options):
    """Run a policy round by round through its jitted act/update on random contexts and Bernoulli(½)
    rewards (the same for every call); yield (t, state before, contexts, arm, info, reward, update key,
    state after, params)."""
    rng = np.random.default_rng(7)
    policy, params = nb.make_policy(name, ProblemSpec(D, K, horizon), **options)
    p32 = to_dtype(params, policy.meta.dtype)
    state = policy.init(p32, jax.random.key(1))
    act, update = jax.jit(policy.act), jax.jit(policy.update)
    mask = jnp.ones(K, bool)
    for t in range(1, rounds + 1):
        contexts = jnp.asarray(rng.standard_normal((K, D)), jnp.float32)
        arm, info = act(p32, state, jax.random.key(100 + t), contexts, mask, jnp.int32(t))
        reward = float(rng.random() < 0.5)
        key = jax.random.key(200 + t)
        new = update(p32, state, key, contexts, arm, Feedback(jnp.float32(reward)), jnp.int32(t))
        yield t, state, contexts, int(arm), info, reward, key, new, p32
        state = new


def test_deep_fpl_rounds_match_numpy_adam_on_the_perturbed_window():
    # A window of 4 (wrapped after round 4), tanh (no kinks), a = 1: every round's decision, perturbed
    # targets and single Adam step (Kingma & Ba 2015, Alg. 1, bias-corrected, ε added to √v̂) by hand.
    batch, lr, b1, b2, eps = 4, 1e-3, 0.9, 0.999, 1e-7
    w = m = v = None
    xs, ys = [], []
    for t, state, contexts, arm, info, reward, key, new, params in _drive("deep-fpl", 9, hidden=8, activation="tanh",
                                                                          batch=batch):
        if w is None:  # the reference starts from the policy's initial weights
            w = _np_net(state.net)
            m, v = {k: np.zeros_like(a) for k, a in w.items()}, {k: np.zeros_like(a) for k, a in w.items()}
        ctx = np.asarray(contexts, np.float64)
        if t == 1:  # no data: a uniformly random arm, its probability exact
            assert float(info.probability) == pytest.approx(1 / K) and np.isnan(float(info.score))
        else:
            g = _np_logits(w, ctx, "tanh")
            assert arm == int(np.argmax(g)) and np.sort(g)[-1] - np.sort(g)[-2] > 1e-4  # no near-tie
            assert float(info.score) == pytest.approx(g[arm], abs=1e-5)
            assert np.isnan(float(info.probability))  # trained on random targets: no closed form
        xs.append(ctx[arm])
        ys.append(reward)
        # example i sits in slot i mod 4; slot j's target is y + a ξ_j, ξ = the update key's N(0, 1) draws
        window_x, window_y, filled = np.zeros((batch, D)), np.zeros(batch), np.zeros(batch)
        for i in range(max(0, len(xs) - batch), len(xs)):
            window_x[i % batch], window_y[i % batch], filled[i % batch] = xs[i], ys[i], 1.0
        xi = np.asarray(normal(key, (batch,), "float32"), np.float64)
        _, grad = _np_loss_and_grad(w, window_x, window_y + float(params.a) * xi, filled, "tanh")
        for k in w:
            m[k] = b1 * m[k] + (1 - b1) * grad[k]
            v[k] = b2 * v[k] + (1 - b2) * grad[k] ** 2
            w[k] = w[k] - lr * (m[k] / (1 - b1**t)) / (np.sqrt(v[k] / (1 - b2**t)) + eps)
        np.testing.assert_array_equal(new.window.x, window_x.astype(np.float32))
        for k, ref in w.items():  # steps of at most lr = 1e-3: 2e-7 is 2e-4 of a step
            np.testing.assert_allclose(getattr(new.net, k), ref, rtol=0, atol=2e-7, err_msg=f"round {t}, {k}")
        assert int(new.opt[0].count) == t  # one Adam step per round, its moments kept across rounds


def test_deep_fl_is_deterministic_and_equals_deep_fpl_with_a_zero():
    update = jax.jit(nb.make_policy("deep-fl", ProblemSpec(D, K, 100), hidden=8)[0].update)
    for t, state, contexts, arm, info, reward, key, new, params in _drive("deep-fl", 6, hidden=8):
        other = update(params, state, jax.random.key(999), contexts, arm, Feedback(jnp.float32(reward)), jnp.int32(t))
        for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(other), strict=True):  # the update ignores its key
            np.testing.assert_array_equal(a, b)
        if t > 1:
            assert float(info.probability) == 1.0  # exact: 1/|tied| (no ties here)
    env = nb.make_env("logistic", d=D, k=K, theta_norm=2.0, contexts="fresh")
    runs = {}
    for name, options in (("deep-fl", {}), ("deep-fpl", {"a": 0.0})):
        policy, params = nb.make_policy(name, ProblemSpec(D, K, 60), hidden=8, **options)
        final = []
        runs[name] = nb.simulate(env, policy, params, 60, [0, 1], on_chunk=final.append), final[-1].policy_state
    (fl, fl_state), (fpl, fpl_state) = runs["deep-fl"], runs["deep-fpl"]
    np.testing.assert_array_equal(fl.arms, fpl.arms)
    np.testing.assert_array_equal(fl.cum_reward, fpl.cum_reward)
    for a, b in zip(fl_state, fpl_state):  # two compiled programs: equal up to float32 rounding
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
    assert len(set(fl.arms[0].tolist())) > 1  # it does not play a single arm throughout


def test_deep_fpl_state_does_not_grow_with_the_horizon():
    shapes = []
    for horizon in (100, 100_000):
        policy, params = nb.make_policy("deep-fpl", ProblemSpec(D, K, horizon))
        shapes.append(jax.tree.map(lambda a: (a.shape, a.dtype),
                                   jax.eval_shape(policy.init, to_dtype(params, "float32"), jax.random.key(0))))
        assert policy.meta.max_horizon is None
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("name", ["deep-fpl", "deep-fl", "rep-glm-fpl"])
def test_arithmetic_is_float32_throughout(name):
    policy, params = nb.make_policy(name, ProblemSpec(D, K, 100))
    p32, key = to_dtype(params, "float32"), jax.random.key(0)
    contexts, mask = jnp.ones((K, D), jnp.float32), jnp.ones(K, bool)
    state = policy.init(p32, key)
    for t in (1, 100):  # repGLM-FPL: the exploration phase and the switch, then GLM-FPL
        programs = [jax.make_jaxpr(policy.init)(p32, key),
                    jax.make_jaxpr(policy.act)(p32, state, key, contexts, mask, jnp.int32(t)),
                    jax.make_jaxpr(policy.update)(p32, state, key, contexts, jnp.int32(0), Feedback(jnp.float32(1.0)),
                                                  jnp.int32(t))]
        for program in programs:
            assert not list(_float64_operations(program.jaxpr)), str(program)


# ---- (4) repGLM-FPL ----------------------------------------------------------------------------------

def test_rep_glm_fpl_explores_uniformly_then_exploits():
    horizon, fraction, seeds = 1000, 0.9, [0, 1, 2, 3]
    explore = exploration_rounds(fraction, horizon)
    assert explore == 900
    env = nb.make_env("logistic", d=D, k=K, theta_norm=3.0, contexts="fresh")
    policy, params = nb.make_policy("rep-glm-fpl", ProblemSpec(D, K, horizon), explore_fraction=fraction, hidden=16)
    res = nb.simulate(env, policy, params, horizon, seeds)
    counts = np.bincount(res.arms[:, :explore].ravel(), minlength=K)
    expected = len(seeds) * explore / K
    assert np.sum((counts - expected) ** 2 / expected) < 18.47  # χ², 4 degrees of freedom, p = 0.001
    # per-round regret: the exploitation phase's is far below the exploration phase's (uniform play)
    per_round = np.diff(res.cum_regret, axis=1, prepend=0.0)
    assert res.rounds.tolist() == list(range(1, horizon + 1))
    assert per_round[:, explore:].mean() < 0.5 * per_round[:, :explore].mean()


def test_rep_glm_fpl_switch_embeds_the_history_and_fits_the_logistic_mle():
    # a = 0: after the switch θ is the ridge-logistic MLE of the embedded history (λ = 1): fitted to convergence
    # at the switch, then refitted every round by at most 3 warm-started Newton steps (the default). Measured
    # relative error ≤ 1.2e-7 in every round (float32); with 2 steps one round in ten stays at 2e-5.
    horizon, fraction, extra, hidden = 100, 0.3, 10, 8
    explore = exploration_rounds(fraction, horizon)
    xs, ys = [], []
    net_at_switch = None
    for t, state, contexts, arm, info, reward, key, new, params in _drive(
            "rep-glm-fpl", explore + extra, horizon, explore_fraction=fraction, hidden=hidden, a=0.0):
        xs.append(np.asarray(contexts[arm], np.float64))
        ys.append(reward)
        assert (float(info.probability) == pytest.approx(1 / K)) if t <= explore else float(info.probability) == 1.0
        if t < explore:
            assert not np.any(new.theta)
        if t == explore:
            net_at_switch = new.model.net
        if t >= explore:
            w = _np_net(net_at_switch)
            for a, b in zip(new.model.net, net_at_switch):  # frozen after the switch
                np.testing.assert_array_equal(a, b)
            psi_ref = np.c_[np.maximum(np.asarray(xs) @ w["w1"] + w["b1"], 0.0), np.ones(t)]  # [ReLU(W₁ᵀx + b₁); 1]
            psi = np.asarray(new.rows.x[:t], np.float64)
            np.testing.assert_allclose(psi, psi_ref, rtol=1e-5, atol=1e-6)
            assert not np.any(new.rows.x[t:]) and int(new.rows.count) == t
            theta_ref = _np_logistic_fit(psi, np.asarray(ys), 1.0)
            error = np.linalg.norm(np.asarray(new.theta, np.float64) - theta_ref) / (1 + np.linalg.norm(theta_ref))
            assert error < 1e-6, (t, error)
            if t > explore:  # the decision: argmax ψ(x)ᵀθ of the previous round's estimate
                scores = np.asarray(embedding(state.model.net, contexts, "relu") @ state.theta)
                assert arm == int(np.argmax(scores))


# ---- (5) a statistical check -------------------------------------------------------------------------

def _ring_env(d: int = 4, k: int = 10) -> Env:
    """Bernoulli rewards with mean σ(8 (xᵀθ*)² − 2), x and θ* uniform on the unit sphere, fresh arms every
    round: an even function of xᵀθ*, which no GLM in x can represent."""

    def reset(key):
        theta = jax.random.normal(key, (d,))
        return theta / jnp.linalg.norm(theta)

    def observe(state, key, t):
        x = jax.random.normal(key, (k, d))
        return x / jnp.linalg.norm(x, axis=1, keepdims=True), jnp.ones(k, bool)

    def mean(state, contexts):
        v = contexts @ state
        return jax.nn.sigmoid(8.0 * v * v - 2.0)

    def pull(state, key, t, contexts, arm):
        return Feedback(jax.random.bernoulli(key, mean(state, contexts)[arm]).astype(jnp.float64))

    return Env("ring", ProblemSpec(d, k, 0), reset, observe, pull, mean, EnvFacts(reward_range=(0.0, 1.0)))


@pytest.mark.slow
def test_deep_fpl_beats_uniform_play_on_a_nonlinear_bernoulli_bandit():
    # Measured (seeds 0–7, T = 1500; mean ± standard error): uniform 726 ± 4, DeepFPL 205 ± 5, at most 0.32 of
    # uniform's regret on any seed. Margin: below half of uniform's regret on each of seeds 0–3.
    env, horizon, seeds = _ring_env(), 1500, [0, 1, 2, 3]
    regret = {}
    for name in ("uniform", "deep-fpl"):
        policy, params = nb.make_policy(name, ProblemSpec(4, 10, horizon))
        regret[name] = nb.simulate(env, policy, params, horizon, seeds).final_regret
    assert np.all(regret["deep-fpl"] < 0.5 * regret["uniform"]), regret


# ---- (6) configuration errors ------------------------------------------------------------------------

@pytest.mark.parametrize("name, field, value", [
    ("deep-fpl", "hidden", 0), ("deep-fl", "hidden", -3), ("rep-glm-fpl", "hidden", 0),
    ("deep-fpl", "activation", "sigmoid"), ("deep-fpl", "batch", 0), ("deep-fpl", "lr", 0.0), ("deep-fpl", "a", -1.0),
    ("rep-glm-fpl", "explore_fraction", 0.0), ("rep-glm-fpl", "explore_fraction", 1.0),
    ("rep-glm-fpl", "explore_fraction", 1.5), ("rep-glm-fpl", "explore_fraction", -0.1),
    ("rep-glm-fpl", "newton_steps", 0), ("rep-glm-fpl", "lam", 0.0),
])
def test_bad_hyperparameters_name_the_field(name, field, value):
    with pytest.raises(ConfigError, match=f"field '{field}'"):
        resolve_policy({"name": name, field: value})
    with pytest.raises(ConfigError, match=f"field '{field}'"):
        nb.make_policy(name, ProblemSpec(D, K, 100), **{field: value})


def test_deep_fl_has_no_perturbation_parameter():
    with pytest.raises(ConfigError, match="unknown field 'a'"):
        resolve_policy({"name": "deep-fl", "a": 1.0})


def test_exploration_phase_must_leave_rounds_to_glm_fpl():
    env = nb.make_env("logistic", d=D, k=K, contexts="fresh")
    assert exploration_rounds(0.07, 100) == 7  # not ⌈7.000000000000001⌉
    assert exploration_rounds(0.05, 10_000) == 500 and exploration_rounds(0.01, 50) == 1
    config = resolve_policy({"name": "rep-glm-fpl", "explore_fraction": 0.99})
    with pytest.raises(ConfigError, match=r"field 'explore_fraction' = 0.99: the exploration phase lasts ⌈m·T⌉ = 50 "
                                          r"rounds, as long as the horizon T = 50"):
        check_policy_env(config, env, 50)
    check_policy_env(config, env, 101)  # ⌈99.99⌉ = 100 rounds, one left


@pytest.mark.parametrize("name", ["deep-fpl", "deep-fl", "rep-glm-fpl"])
def test_rewards_outside_the_unit_interval_are_refused(name):
    config = resolve_policy({"name": name})
    with pytest.raises(ConfigError, match=f"policy '{name}' models rewards in \\[0, 1\\]"):
        check_policy_env(config, nb.make_env("linear", d=D, k=K, contexts="fresh"), 100)
    check_policy_env(config, nb.make_env("logistic", d=D, k=K), 100)  # fixed arm sets are fine too
