"""MOR-UCB (Zhao, Zhou, He & Gu 2023, Algorithm 2) on heteroscedastic bandits: layer assignment (spec 000 §6.1
item 5), confidence-set coverage (§6.5 item 15), layer routing (item 19), and every decision against a float64
NumPy reference of the upper bounds; bad input."""

import math
import re
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.policies.hetero import confidence_radii, layer_index, n_layers, regret_bound, weighted_radius


def test_layer_assignment_table():
    """Spec §6.1 item 5: σ̄ = 0.01, R = 1 gives L = 7 and the table below (σ_t above R clamped); R ≤ σ̄: L = 1;
    the documented clamps for NaN and negative bounds."""
    assert n_layers(1.0, 0.01) == 7 and n_layers(1.0, 1.0) == 1 and n_layers(0.5, 1.0) == 1
    table = {0.005: 0, 0.01: 0, 0.019: 0, 0.02: 1, 0.5: 5, 1.0: 6, 3.0: 6, -1.0: 0, math.nan: 6}
    got = {s: int(layer_index(jnp.asarray(s), 0.01, 1.0, 7)) for s in table}
    assert got == table
    # every layer l holds exactly the levels in [2^l σ̄, 2^{l+1} σ̄) (higher layer at a power of two)
    for level in np.geomspace(0.01, 0.999, 200):
        lay = int(layer_index(jnp.asarray(level), 0.01, 1.0, 7))
        assert 2.0**lay * 0.01 <= level * (1 + 1e-12) and (level < 2.0 ** (lay + 1) * 0.01 or lay == 6)


def play(env, policy, params, horizon, seed=0):
    """Drive ``policy`` round by round; return per-round (contexts, arm, reward, σ_t, state after update)."""
    keys = nb.core.keys.seed_keys(seed)
    env_state = env.reset(keys.env_reset)
    state = policy.init(params, keys.policy_init)
    act, update = jax.jit(policy.act), jax.jit(policy.update)
    log = []
    for t in range(1, horizon + 1):
        tt = jnp.asarray(t)
        ctx, mask = env.observe(env_state, nb.core.round.round_key(keys.env_observe, t), tt)
        arm, _ = act(params, state, nb.core.round.round_key(keys.policy_act, t), ctx, mask, tt)
        fb = env.pull(env_state, nb.core.round.round_key(keys.env_pull, t), tt, ctx, arm)
        state = update(params, state, nb.core.round.round_key(keys.policy_update, t), ctx, arm, fb, tt)
        log.append((np.asarray(ctx), int(arm), float(fb.reward), float(fb.variance_bound), state))
    return env_state, log


def theorem_radii(t: int, lam: float, d: int, layers: int, sigma_bar: float, big_r: float, delta: float) -> np.ndarray:
    """β_{t,l} of Theorem 6.2 for l = 0..L−1, written out from the paper for the identity link (κ = K = 1, A = 1):
    16·2^l σ̄ √(d log((2dλ + t)/(2dλ)) · log(4t²L/δ)) + 4R log(4t²L/δ) + 2√2."""
    log_term = math.log(4 * t * t * layers / delta)
    return np.array([16 * 2**lay * sigma_bar * math.sqrt(d * math.log((2 * d * lam + t) / (2 * d * lam)) * log_term)
                     + 4 * big_r * log_term + 2 * math.sqrt(2) for lay in range(layers)])


def test_coverage_routing_and_decisions_against_numpy():
    """In the "mixed" case (σ_t = 1 w.p. 0.1, else 0.01; d = 5, 20 fresh arms, R = 1, σ̄ = 0.01, theory β):
    every non-empty layer's ellipsoid ‖θ̂_l − θ*‖_{Σ_l} ≤ β_{t,l} holds at every round (Lemma B.1); about 10%
    of the rounds (±3%) go to layer L−1 and the rest to layer 0; each chosen arm maximises the upper bound
    min_l θ̂_lᵀa + β_{t,l}‖a‖_{Σ_l⁻¹} of a float64 NumPy refit of every layer (ridge 2λ, λ = 4), β written out
    from Theorem 6.2 (:func:`theorem_radii`, which the policy's radii equal); the regret is below the (B.3) bound
    at T = 600, itself written out from the paper (spec §6.5 item 18)."""
    horizon, d = 600, 5
    env = nb.make_env("heteroscedastic", d=d, k=20, schedule="burst", sigma_low=0.01, sigma_high=1.0, burst_prob=0.1)
    policy, params = nb.make_policy("mor-ucb", nb.ProblemSpec(d, 20, horizon), sigma_bar=0.01)
    env_state, log = play(env, policy, params, horizon)
    theta = np.asarray(env_state.theta)
    layers = 7
    data = {lay: ([], []) for lay in range(layers)}
    worst = 0.0
    for t, (ctx, arm, reward, sigma, state) in enumerate(log, start=1):
        beta = theorem_radii(t, 4.0, d, layers, 0.01, 1.0, 0.05)
        np.testing.assert_allclose(confidence_radii(t, 4.0, d=d, layers=layers, sigma_bar=0.01, noise_bound=1.0,
                                                    delta=0.05, link="identity"), beta, rtol=1e-12)
        # the decision of round t from the data before it
        ucb = np.full((layers, len(ctx)), np.inf)
        for lay, (xs, ys) in data.items():
            x = np.array(xs).reshape(-1, d)
            gram = 8.0 * np.eye(d) + x.T @ x
            est = np.linalg.solve(gram, x.T @ np.array(ys)) if xs else np.zeros(d)
            ucb[lay] = ctx @ est + beta[lay] * np.sqrt(np.einsum("kd,de,ke->k", ctx, np.linalg.inv(gram), ctx))
        upper = ucb.min(axis=0)
        assert upper[arm] >= upper.max() - 1e-9 * max(1.0, abs(upper.max()))
        lay = 6 if sigma > 0.5 else 0
        data[lay][0].append(ctx[arm])
        data[lay][1].append(reward)
        # coverage of the layers after the update, with β of the next round
        beta_next = theorem_radii(t + 1, 4.0, d, layers, 0.01, 1.0, 0.05)
        for lay in np.flatnonzero(np.asarray(state.n)):
            err = np.asarray(state.theta[lay]) - theta
            norm = math.sqrt(err @ np.linalg.inv(np.asarray(state.h_inv[lay])) @ err)
            worst = max(worst, norm / beta_next[lay])
    assert 0 < worst <= 1.0
    counts = np.asarray(log[-1][4].n)
    assert counts.sum() == horizon and counts[1:6].sum() == 0
    assert abs(counts[6] / horizon - 0.1) <= 0.03
    # item 18, oracle sanity: the regret is below the data-dependent bound (B.3),
    # 4K Σ_l β_{T,l} √|Ψ_{T+1,l}| · √(d κ⁻¹ log((2dλ + Tκ)/(2dλ))), κ = K = 1
    means = [ctx @ theta for ctx, *_ in log]
    regret = sum(m.max() - m[arm] for m, (_, arm, *_) in zip(means, log))
    bound = regret_bound(horizon, counts, 4.0, d=d, sigma_bar=0.01, noise_bound=1.0, delta=0.05, link="identity")
    written = 4 * (theorem_radii(horizon, 4.0, d, layers, 0.01, 1.0, 0.05) @ np.sqrt(counts)) * math.sqrt(
        d * math.log((2 * d * 4.0 + horizon) / (2 * d * 4.0)))
    assert bound == pytest.approx(written, rel=1e-12)
    assert 0 < regret < bound


def low_noise_regret(name: str, floor: str) -> dict[float, float]:
    """Mean regret of ``name`` with β × 0.1 and its noise floor ``floor`` at 0.01 and at R = 1, in the low-noise
    case (σ_t ≡ 0.01, d = 5, 20 fresh arms), 3 seeds, T = 1000."""
    env = nb.make_env("heteroscedastic", d=5, k=20, schedule="constant", sigma_low=0.01)
    spec = nb.ProblemSpec(5, 20, 1000)
    regret = {}
    for value in (0.01, 1.0):
        policy, params = nb.make_policy(name, spec, beta_scale=0.1, **{floor: value})
        regret[value] = nb.simulate(env, policy, params, 1000, range(3)).final_regret.mean()
    return regret


@pytest.mark.slow
def test_variance_awareness_at_small_scale():
    """Spec §6.5 item 16 at 3 seeds, T = 1000, β × 0.1: in the low-noise case MOR-UCB (σ̄ = 0.01) has below
    0.5 × the regret of the single layer (σ̄ = R)."""
    regret = low_noise_regret("mor-ucb", "sigma_bar")
    assert regret[0.01] < 0.5 * regret[1.0]


def test_weighted_oful_decisions_against_numpy():
    """Weighted OFUL (Zhou, Gu & Szepesvári 2021) in the "mixed" case with σ_min = 0.01: each chosen arm
    maximises aᵀθ̂ + β_{t−1}‖a‖_{Z⁻¹} of a float64 NumPy weighted ridge fit (weights 1/max(σ_τ, σ_min)²,
    λ = 1) with the radius written out from its formula; with β × 0.1 it beats the unweighted version
    (σ_min = R: every weight 1) by over 3× in regret on the low-noise case (3 seeds, T = 1000)."""
    horizon, d, sigma_min = 300, 5, 0.01
    env = nb.make_env("heteroscedastic", d=d, k=20, schedule="burst", sigma_low=0.01, sigma_high=1.0, burst_prob=0.1)
    policy, params = nb.make_policy("weighted-oful", nb.ProblemSpec(d, 20, horizon), sigma_min=sigma_min)
    _, log = play(env, policy, params, horizon, seed=3)
    xs, ys, ws = [], [], []
    for t, (ctx, arm, reward, sigma, _) in enumerate(log, start=1):
        n = t - 1
        beta = (8 * math.sqrt(d * math.log(1 + max(n, 1) / (sigma_min**2 * d)) * math.log(4 * max(n, 1) ** 2 / 0.05))
                + 4 / sigma_min * math.log(4 * max(n, 1) ** 2 / 0.05) + 1.0)
        assert float(weighted_radius(n, 1.0, 1.0, d=d, sigma_min=sigma_min, noise_bound=1.0, delta=0.05)) == \
            pytest.approx(beta, rel=1e-12)
        x, w = np.array(xs).reshape(-1, d), np.array(ws)
        z = np.eye(d) + (x * w[:, None]).T @ x
        theta = np.linalg.solve(z, (x * w[:, None]).T @ np.array(ys)) if xs else np.zeros(d)
        score = ctx @ theta + beta * np.sqrt(np.einsum("kd,de,ke->k", ctx, np.linalg.inv(z), ctx))
        assert score[arm] >= score.max() - 1e-9 * abs(score.max())
        xs.append(ctx[arm]), ys.append(reward), ws.append(1 / max(sigma, sigma_min) ** 2)
    assert len(set(ws)) == 2
    regret = low_noise_regret("weighted-oful", "sigma_min")
    assert 3 * regret[0.01] < regret[1.0]


@pytest.mark.parametrize("kwargs, env_kwargs, expected", [
    ({"noise_bound": 0.5}, {}, "its noise bound R = 0.5 must bound the noise"),
    ({"link": "logistic"}, {}, "assumes the mean reward μ(xᵀθ*) with link 'logistic', but environment "
                               "'heteroscedastic' has link 'identity'"),
    ({"sigma_bar": 0.0}, {}, "field 'sigma_bar' must be a number > 0"),
    ({"beta_scale": -1.0}, {}, "field 'beta_scale' must be a number > 0"),
    ({}, {"sigma_low": 2.0}, "field 'sigma_low' = 2 must be <= sigma_high = 1"),
])
def test_bad_input(kwargs, env_kwargs, expected):
    from nlbandit.policies.registry import check_policy_env, resolve_policy

    with pytest.raises(ConfigError, match=re.escape(expected)):
        env = nb.make_env("heteroscedastic", d=3, k=4, **env_kwargs)
        check_policy_env(resolve_policy({"name": "mor-ucb", **kwargs}), env, 100)
    with pytest.raises(ConfigError, match="needs the noise level σ_t revealed"):
        check_policy_env(resolve_policy({"name": "mor-ucb"}), nb.make_env("linear", d=3, k=4), 100)
    with pytest.raises(ConfigError, match="field 'link' 'env' takes the link"):
        nb.make_policy("mor-ucb", nb.ProblemSpec(3, 4, 100), link="env")
    with pytest.raises(ConfigError, match="'weighted-oful' assumes the mean reward μ\\(xᵀθ\\*\\) with link 'identity'"):
        env = nb.make_env("heteroscedastic", d=3, k=4, link="logistic")
        check_policy_env(resolve_policy({"name": "weighted-oful"}), env, 100)
    with pytest.raises(ConfigError, match="field 'sigma_min' must be a number > 0"):
        resolve_policy({"name": "weighted-oful", "sigma_min": -1.0})


def test_named_env_cases_and_links_from_the_environment(tmp_path):
    """``[[env]]`` lists named cases (each may hold grids); ``link = "env"`` takes each case's link, and
    MOR-UCB's λ follows it (4K²/κ: 4 for the identity link, 1.2715 for the logistic)."""
    from nlbandit.experiments.plan import load_experiment

    exp = load_experiment("experiments/zhao2023/heteroscedastic.toml", "full")  # (the quick scale: claimed only)
    assert {dict(r.case)["case"] for r in exp.runs} == {"low", "mixed", "high", "decaying", "arm"}
    for r in exp.runs:
        assert r.policy.get("link", "identity") == r.env["link"] == dict(r.case)["link"]
        if r.policy["name"] == "mor-ucb":
            assert r.policy["lam"] == pytest.approx(4.0 if r.env["link"] == "identity" else 1.2715, abs=1e-4)
    text = """
    horizon = 10
    seeds = 1
    [[env]]
    case = "a"
    name = "linear"
    d = 2
    k = 2
    [[env]]
    name = "linear"
    d = 3
    k = 2
    [[policies]]
    label = "U"
    name = "uniform"
    """
    path = tmp_path / "e.toml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError, match=r"env\[1\]: field 'case' is required"):
        load_experiment(path)
    path.write_text(textwrap.dedent(text).replace('name = "linear"\nd = 3', 'case = "a"\nname = "linear"\nd = 3'))
    with pytest.raises(ConfigError, match="must have distinct names"):
        load_experiment(path)



def test_series_restricted_to_cases(tmp_path):
    """``only = {key = value}`` runs a series on the matching environment cases alone; an unknown key or a
    filter that matches nothing is an error naming the field."""
    from nlbandit.experiments.plan import load_experiment

    exp = load_experiment("experiments/zhao2023/heteroscedastic.toml", "full")  # (the quick scale: claimed only)
    oful = [dict(r.case) for r in exp.runs if r.label == "weighted OFUL"]
    assert len(oful) == 5 and {c["link"] for c in oful} == {"identity"}
    assert sum(r.label == "MOR-UCB" for r in exp.runs) == 10
    text = """
    horizon = 10
    seeds = 1
    [env]
    name = "linear"
    d = [2, 3]
    k = 2
    [[policies]]
    label = "U"
    name = "uniform"
    only = ONLY
    """
    path = tmp_path / "e.toml"
    for only, expected in [("{d = [3, 4]}", None), ("{k = 2}", "field 'only.k' is not a case key; the cases vary d"),
                           ("{d = 5}", r"field 'only' = \{'d': 5\} matches no environment case")]:
        path.write_text(textwrap.dedent(text).replace("ONLY", only))
        if expected is None:
            assert [dict(r.case) for r in load_experiment(path).runs] == [{"d": 3}]
        else:
            with pytest.raises(ConfigError, match=expected):
                load_experiment(path)
