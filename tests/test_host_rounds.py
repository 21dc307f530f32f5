"""The agent's host rounds (nlbandit.host): the simulator's decisions over thousands of rounds, the jitted
policy's state to rounding, and each host piece (NumPy or numba-compiled) against the jitted function it
mirrors."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.agent import Agent
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import round_key
from nlbandit.host import checks, exploration as host_exploration
from nlbandit.host.draws import BLOCK, DrawBlocks
from nlbandit.host.normals import standard_normals
from nlbandit.host import glm as host_glm
from nlbandit.host.ridge import gram_update as host_gram_update
from nlbandit.host.rounds import host_rounds
from nlbandit.policies.linear_host import ensemble_words
from nlbandit.models.glm import glm_hessian, newton_solve
from nlbandit.models.links import LINKS
from nlbandit.models.ridge import gram_update, mahalanobis_widths
from nlbandit.policies import exploration

D, K, T = 6, 10, 2000


def _play(agent: Agent, env, seed: int, rounds: int, masks: np.ndarray | None = None) -> list[int]:
    """Drive ``agent`` on ``env``'s instance of ``seed`` with the simulator's draws (rewards at once); with
    ``masks``, these replace the environment's availability."""
    keys = seed_keys(jnp.uint32(seed))
    state = env.reset(keys.env_reset)
    observe = jax.jit(lambda t: env.observe(state, round_key(keys.env_observe, t), t))
    pull = jax.jit(lambda t, contexts, arm: env.pull(state, round_key(keys.env_pull, t), t, contexts, arm).reward)
    arms = []
    for t in range(1, rounds + 1):
        contexts, mask = observe(t)
        mask = np.asarray(mask) if masks is None else masks[t - 1]
        decision = agent.decide(np.asarray(contexts), None if mask.all() else mask)  # None: the unmasked path
        arms.append(decision.arm)
        agent.reward(decision.event_id, float(pull(t, contexts, decision.arm)))
    return arms


_SLOW = pytest.mark.slow  # the default suite keeps one case per exploration rule and estimator
CASES = [pytest.param("uniform", "linear", {}, marks=_SLOW), pytest.param("greedy", "linear", {}, marks=_SLOW),
         ("eps-greedy", "linear", {"epsilon": 0.2}), ("lin-ucb", "linear", {}), ("lin-ts", "linear", {"v": 0.3}),
         pytest.param("lin-ucb", "linear", {"width": "constant", "alpha": 0.3}, marks=_SLOW),
         ("lin-es", "linear", {"m": 8}), ("glm-ucb", "logistic", {}),
         pytest.param("glm-ucb", "linear", {"link": "identity", "warmup": "round-robin", "warmup_rounds": 15},
                      marks=_SLOW),
         ("ucb-glm", "logistic", {"lam": 0.5}), ("glm-tsl", "logistic", {}), ("glm-fpl", "logistic", {"a": 0.3}),
         ("glm-es", "logistic", {"solver": "ensemble-newton", "m": 6, "warmup_rounds": 30}),
         ("glm-es", "linear", {"link": "identity", "m": 6, "warmup_rounds": 30})]


def test_every_declared_host_round_is_checked_against_the_simulator():
    """A family that declares a host round (``HOST_ROUNDS`` beside it) gets it checked here: its name must be a
    case of the decision test below."""
    assert set(host_rounds()) == {c.values[0] if hasattr(c, "values") else c[0] for c in CASES}


@pytest.mark.parametrize("name, env_name, hyper", CASES)
def test_numpy_round_makes_the_simulators_decisions(name, env_name, hyper):
    """Over 2,000 rounds the host round chooses every arm the simulator chooses with the same seed."""
    env = nb.make_env(env_name, d=D, k=K)
    host = Agent(name, d=D, k=K, horizon=T, seed=5, estimate_draws=0, **hyper)  # its practice defaults too
    policy, params = nb.make_policy(name, env, horizon=T, **{k: v for k, v in host.config.items() if k != "name"})
    simulated = nb.simulate(env, policy, params, T, [5]).arms[0].tolist()
    assert host.numpy_round
    assert _play(host, env, 5, T) == simulated


@pytest.mark.parametrize("name, hyper", [
    ("uniform", {}), ("eps-greedy", {"epsilon": 0.3}), ("lin-ucb", {}), ("lin-ts", {"estimate_draws": 300}),
    ("lin-es", {"m": 4}), ("glm-ucb", {"link": "identity", "warmup": "round-robin", "warmup_rounds": 5}),
    ("glm-tsl", {"link": "identity", "warmup": "round-robin", "warmup_rounds": 5, "estimate_draws": 50}),
    ("glm-fpl", {"link": "identity", "warmup": "round-robin", "warmup_rounds": 5, "estimate_draws": 50}),
    ("glm-es", {"solver": "ensemble-newton", "link": "identity", "warmup": "round-robin", "warmup_rounds": 5}),
    ("glm-es", {"link": "identity", "warmup": "round-robin", "warmup_rounds": 5})])
def test_numpy_round_with_masks_decides_as_the_jitted_round(name, hyper):
    """Random availability masks: the host round reports the jitted round's arms, probabilities (those it
    estimates from its Gaussian score law, within 5 standard errors of the redraws' plus 0.02), scores and
    bonuses, and ends in its state to 1e-9 (relative)."""
    env = nb.make_env("linear", d=D, k=K)
    rounds = 300
    masks = np.random.default_rng(0).random((rounds, K)) < 0.4
    masks[:, 0] = True
    host, jitted = (Agent(name, d=D, k=K, horizon=rounds, seed=2, numpy_round=flag, **hyper) for flag in (True, False))
    assert host.numpy_round and not jitted.numpy_round
    assert _play(host, env, 2, rounds, masks) == _play(jitted, env, 2, rounds, masks)
    keys = seed_keys(jnp.uint32(2))
    state = env.reset(keys.env_reset)
    x = np.stack([np.asarray(env.observe(state, round_key(keys.env_observe, t), t)[0]) for t in range(1, 9)])
    for a, b in zip(host.decide_batch(x, masks[:8]), jitted.decide_batch(x, masks[:8])):
        assert (a.event_id, a.arm) == (b.event_id, b.arm)
        np.testing.assert_allclose([a.score, a.bonus], [b.score, b.bonus], rtol=1e-9)
        if "conditional Gaussian draws" in a.method:  # the host's estimate from the score law: agrees in law
            assert "redraws" in b.method
            se = np.hypot(*(float(re.search(r"se ([0-9.e+-]+)", d.method).group(1)) for d in (a, b)))
            assert abs(a.probability - b.probability) <= 5 * se + 0.02, (a, b)
        else:
            assert a.method == b.method
            np.testing.assert_allclose(a.probability, b.probability, rtol=1e-9)
    for a, b in zip(jax.tree.leaves(host.state), jax.tree.leaves(jitted.state), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_policies_without_a_numpy_round_run_the_jitted_round():
    assert not Agent("lin-phe", d=D, k=K, horizon=T).numpy_round
    assert not Agent("glm-tsl", d=D, k=K, horizon=T, scale="theory").numpy_round
    assert not Agent("glm-phe", d=D, k=K, horizon=T).numpy_round
    assert not Agent("glm-fpl", d=D, k=K, horizon=T, solver="gd").numpy_round
    assert not Agent("glm-ucb", d=D, k=K, horizon=T, backend="history").numpy_round
    assert not Agent("glm-ucb", d=D, k=K, horizon=T, width="theory").numpy_round
    assert not Agent("ucb-glm", d=D, k=K, horizon=T, solver="gd").numpy_round
    assert not Agent("glm-es", d=D, k=K, horizon=T).numpy_round  # (gradient descent, logistic link)
    assert Agent("glm-ucb", d=D, k=K, horizon=T, warmup="round-robin", warmup_rounds=3).numpy_round


def test_saved_host_agent_continues_bit_for_bit(tmp_path):
    env = nb.make_env("linear", d=D, k=K)
    agent = Agent("lin-es", d=D, k=K, horizon=T, seed=4, m=5)
    _play(agent, env, 4, 30)
    loaded = Agent.load(agent.save(tmp_path / "agent.npz"))
    assert loaded.numpy_round
    for a, b in zip(jax.tree.leaves(agent.state), jax.tree.leaves(loaded.state), strict=True):
        assert np.array_equal(a, b) and a.dtype == b.dtype
    x = np.random.default_rng(3).normal(size=(K, D))
    for a in (agent, loaded):
        for _ in range(20):
            a.reward(a.decide(x).event_id, 0.5)
    for a, b in zip(jax.tree.leaves(agent.state), jax.tree.leaves(loaded.state), strict=True):
        assert np.array_equal(a, b)


def test_state_property_is_a_copy():
    agent = Agent("lin-ucb", d=D, k=K, horizon=T)
    agent.state.v_inv[:] = 0.0
    assert np.array_equal(agent.state.v_inv, np.eye(D))


def _scores_with_ties(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores where several arms share the best value (some off by less than the tie tolerance), and a mask."""
    scores = rng.normal(size=k).round(1)
    best = rng.choice(k, size=rng.integers(1, 4), replace=False)
    scores[best] = 2.0 + rng.uniform(0, 1e-13, size=best.size)
    mask = rng.random(k) < 0.8 if rng.random() < 2 / 3 else np.ones(k, bool)
    mask[best[0]] = True
    return scores, mask


def test_greedy_choice_equals_the_jitted_rule():
    """Random words, ties of 1 to 3 arms, random masks (a third all True); and the word that gives the single
    best arm priority 0, for which the jitted argmax returns arm 0."""
    rng = np.random.default_rng(0)
    jitted = jax.jit(exploration.greedy_choice)
    for i in range(300):
        scores, mask = _scores_with_ties(rng, 12)
        word = np.uint32(rng.integers(0, 2**32))
        if i % 50 == 0:  # mix32(0) = 0: this word zeroes the priority of the single best arm
            scores[:], mask[:] = np.arange(12.0), True
            word = np.uint32((11 * 0x9E3779B9) & 0xFFFFFFFF)
        arm, p = jitted(jnp.uint32(word), jnp.asarray(scores), jnp.asarray(mask))
        host_mask = None if mask.all() else mask  # None: the unmasked path
        assert host_exploration.greedy_choice(word, scores, host_mask) == (int(arm), float(p))
        if i % 50 == 0:
            assert int(arm) == 0


def test_ensemble_probability_equals_the_jitted_rule():
    rng = np.random.default_rng(1)
    for i in range(60):
        members = rng.normal(size=(7, 9)).round(1)
        mask = rng.random(9) < 0.7
        mask[0] = True
        if i % 3 == 0:
            mask[:] = True
        arm, m_used = int(rng.integers(0, 9)), int(rng.integers(1, 8))
        expected = exploration.ensemble_probability(jnp.asarray(members), arm, jnp.asarray(mask), jnp.float64(m_used))
        host_mask = None if mask.all() else mask  # None: the unmasked path
        assert host_exploration.ensemble_probability(members, arm, host_mask, m_used) == pytest.approx(
            float(expected), abs=1e-15)
        assert host_exploration.member_draw(np.uint32(4_000_000_001), m_used) == int(
            exploration.member_draw(jnp.uint32(4_000_000_001), jnp.float64(m_used)))


@pytest.mark.parametrize("link", ["logistic", "identity", "probit", "poisson"])
def test_compiled_links_equal_the_jitted_links(link):
    """On |v| ≤ 12 (μ down to 1e-33), relative 1e-13; probit's b(v) = vΦ(v) + φ(v) cancels for v ≪ 0 in
    both implementations, so b is compared to 1e-13 of its terms' size |vμ(v)|."""
    v = np.linspace(-12.0, 12.0, 481)
    code, jitted = host_glm.LINK_CODES[link], LINKS[link]
    terms = np.abs(v * np.asarray(jitted.mean(jnp.asarray(v))))
    for host_fn, jitted_fn, atol in ((host_glm.mean, jitted.mean, 0.0), (host_glm.dmean, jitted.dmean, 0.0),
                                     (host_glm.log_partition, jitted.log_partition, 1e-13 * terms)):
        host, expected = np.array([host_fn(code, float(u)) for u in v]), np.asarray(jitted_fn(jnp.asarray(v)))
        worst = np.abs(host - expected) - (atol + 1e-13 * np.abs(expected))
        assert worst.max() <= 0.0, f"{host_fn.__name__}: off at v = {v[worst.argmax()]}"


@pytest.mark.parametrize("link", ["logistic", "identity", "probit", "poisson"])
def test_newton_solve_equals_the_jitted_solver(link):
    """Per-arm rows with pull counts and response sums in the link's range, cold and warm starts, after one
    more pull of an arm (add_pull, inputs kept); and GLM-TSL's draw L⁻ᵀξ at the solution."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(15, 5)) / 2
    n = rng.integers(0, 40, size=15).astype(float)
    means = np.asarray(LINKS[link].mean(jnp.asarray(x @ rng.normal(size=5))))
    s = n * means + np.sqrt(n) * 0.1 * rng.normal(size=15) * (link == "identity")
    code = host_glm.LINK_CODES[link]
    for theta0 in (np.zeros(5), rng.normal(size=5) * 0.3):
        expected = newton_solve(LINKS[link], x, n, s, 0.5, theta0).theta
        np.testing.assert_allclose(host_glm.newton_solve(code, x, n, s, 0.5, theta0, *host_glm.NEWTON_OPTIONS),
                                   expected, rtol=1e-9, atol=1e-12)
        n2, s2 = host_glm.add_pull(n, s, 4, 0.75)
        assert (n2[4], s2[4], n[4], s[4]) == (n[4] + 1.0, s[4] + 0.75, n2[4] - 1.0, s2[4] - 0.75)  # inputs kept
        np.testing.assert_array_equal(np.delete(n2, 4), np.delete(n, 4))
        expected = newton_solve(LINKS[link], x, n2, s2, 0.5, theta0).theta
        theta = host_glm.newton_solve(code, x, n2, s2, 0.5, theta0, *host_glm.NEWTON_OPTIONS)
        np.testing.assert_allclose(theta, expected, rtol=1e-9, atol=1e-12)
    xi = rng.normal(size=5)
    chol = np.linalg.cholesky(np.asarray(glm_hessian(LINKS[link], jnp.asarray(theta), x, n2, 0.5)))
    h = host_glm.hessian_cholesky(code, x, n2, 0.5, theta)
    np.testing.assert_allclose(host_glm.thompson_step(h, xi), np.linalg.solve(chol.T, xi), rtol=1e-10, atol=1e-13)
    contexts = rng.normal(size=(3, 5))
    np.testing.assert_allclose(contexts @ host_glm.thompson_factor(h), np.linalg.solve(chol, contexts.T).T,
                               rtol=1e-10, atol=1e-13)


def test_cholesky_add_and_quadratic_newton_equal_a_fresh_factor_and_solve():
    """The identity link's Gram factor kept by rank-one updates (one per pull, 2,000 pulls) against NumPy's
    Cholesky factor of the Gram matrix rebuilt, and the quadratic Newton and the direct argmins (an ensemble's
    columns of sums) with it against the ridge solutions solved directly (float64 references)."""
    rng = np.random.default_rng(7)
    x, n = rng.normal(size=(12, 5)), rng.integers(0, 5, size=12).astype(float)
    h = host_glm.hessian_cholesky(0, x, n, 0.5, np.zeros(5))
    for arm in rng.integers(0, 12, size=2000):
        n[arm] += 1.0
        h = host_glm.cholesky_add(h, x[arm])
    gram = x.T @ (n[:, None] * x) + 0.5 * np.eye(5)
    np.testing.assert_allclose(h, np.linalg.cholesky(gram), rtol=1e-12, atol=1e-12)
    s = n * (x @ rng.normal(size=5)) + rng.normal(size=12)
    theta, converged = host_glm.quadratic_newton(h, x, n, s, 0.5, rng.normal(size=5), *host_glm.NEWTON_OPTIONS[:3])
    assert converged
    np.testing.assert_allclose(theta, np.linalg.solve(gram, x.T @ s), rtol=1e-10, atol=1e-12)
    sums = s[:, None] + rng.normal(size=(12, 4))
    np.testing.assert_allclose(host_glm.quadratic_argmins(h, x, sums), np.linalg.solve(gram, x.T @ sums).T,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction, lr", [("mean", 0.01), ("sum", 2e-4)])
def test_quadratic_gd_equals_the_steps_taken_one_by_one(reduction, lr):
    """GLM-ES's gradient steps with the identity link in closed form against the 100 steps taken one by one in
    float64 NumPy from the members' warm starts (mean reduction: the step divided by the pulls; the sum's step
    small enough to contract), and the learning step's counts, sums and Gram factor against their direct
    computation."""
    rng = np.random.default_rng(11)
    x, n = rng.normal(size=(12, 5)), rng.integers(1, 30, size=12).astype(float)
    y, thetas, noise = rng.normal(size=(12, 3)) * n[:, None], rng.normal(size=(3, 5)), rng.normal(size=3)
    chol = host_glm.hessian_cholesky(0, x, n, 0.7, np.zeros(5))
    n2, y2, theta, h = host_glm.ensemble_gd_after_pull(chol, x, n, y, 4, 0.3, 0.5, noise, lr, reduction == "mean",
                                                       thetas, 100)
    expected_n, expected_y = n.copy(), y.copy()
    expected_n[4] += 1
    expected_y[4] += 0.3 + 0.5 * noise
    np.testing.assert_array_equal(n2, expected_n)
    np.testing.assert_allclose(y2, expected_y, rtol=1e-15)
    gram = x.T @ (expected_n[:, None] * x) + 0.7 * np.eye(5)
    np.testing.assert_allclose(h, np.linalg.cholesky(gram), rtol=1e-12, atol=1e-12)
    rate = lr / expected_n.sum() if reduction == "mean" else lr
    assert np.abs(np.linalg.eigvalsh(np.eye(5) - rate * gram)).max() < 1  # (the steps contract)
    stepped = thetas.T.copy()
    for _ in range(100):
        stepped -= rate * (gram @ stepped - x.T @ expected_y)
    np.testing.assert_allclose(theta, stepped.T, rtol=1e-10, atol=1e-12)
    assert not np.allclose(theta, np.linalg.solve(gram, x.T @ expected_y).T, rtol=1e-3)  # (short of the argmin)


@pytest.mark.parametrize("link", ["logistic", "identity", "poisson"])
def test_ensemble_newton_solve_equals_the_jitted_solver(link):
    """GLM-ES's ensemble refit: members warm-started near their argmins (the chord steps pass), and far from them
    (every member fails the contraction test and takes the Newton fallback: from its chord iterate with the
    logistic link, from its warm start for 3 of 4 with Poisson's, whose chord steps diverge); the host solver
    returns the jitted one's argmins."""
    from nlbandit.models.glm import ensemble_newton_solve

    rng = np.random.default_rng(5)
    x = rng.normal(size=(15, 5)) / 2
    n = rng.integers(1, 40, size=15).astype(float)
    means = np.asarray(LINKS[link].mean(jnp.asarray(x @ rng.normal(size=5))))
    s = n[:, None] * means[:, None] + np.sqrt(n)[:, None] * 0.3 * rng.normal(size=(15, 4))
    if link != "identity":
        s = np.maximum(s, 0.0) if link == "poisson" else np.clip(s, 0.0, n[:, None])
    code = host_glm.LINK_CODES[link]
    near = np.stack([newton_solve(LINKS[link], x, n, s[:, j], 0.5, np.zeros(5)).theta for j in range(4)])
    for thetas in (near + 1e-3 * rng.normal(size=(4, 5)), rng.normal(size=(4, 5)) * 1.5):
        expected = np.asarray(ensemble_newton_solve(LINKS[link], x, n, s, 0.5, jnp.asarray(thetas)))
        found = host_glm.ensemble_newton_solve(code, x, n, s, 0.5, thetas, *host_glm.ENSEMBLE_OPTIONS)
        np.testing.assert_allclose(found, expected, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(found, near, rtol=1e-5, atol=1e-6)  # both are the argmins


@pytest.mark.parametrize("link", ["logistic", "identity"])
@pytest.mark.parametrize("mean_scale", [True, False])
def test_optimistic_scores_and_gram_update_equal_the_jitted_formulas(link, mean_scale):
    rng = np.random.default_rng(3)
    contexts, theta = rng.normal(size=(12, 5)), rng.normal(size=5)
    a = rng.normal(size=(5, 5))
    inverse = np.linalg.inv(a @ a.T + np.eye(5))
    scores, bonus = host_glm.optimistic_scores(host_glm.LINK_CODES[link], mean_scale, contexts, theta, inverse, 0.7)
    expected_bonus = 0.7 * np.asarray(mahalanobis_widths(jnp.asarray(inverse), jnp.asarray(contexts)))
    linear = np.asarray(LINKS[link].mean(jnp.asarray(contexts @ theta))) if mean_scale else contexts @ theta
    np.testing.assert_allclose(bonus, expected_bonus, rtol=1e-12)
    np.testing.assert_allclose(scores, linear + expected_bonus, rtol=1e-12)
    out, dlogdet = host_gram_update(inverse, contexts[0])
    expected, expected_dlogdet = gram_update(jnp.asarray(inverse), jnp.asarray(contexts[0]))
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)
    assert dlogdet == pytest.approx(float(expected_dlogdet), rel=1e-13)


def test_draw_blocks_are_the_round_keys_draws():
    stream = seed_keys(jnp.uint32(3)).policy_act
    blocks = DrawBlocks(ensemble_words, stream)
    for t in (1, 2, BLOCK - 1, BLOCK, 5 * BLOCK + 7, 9 * BLOCK, 3, 2 * BLOCK + 1):  # evicts, then recomputes
        np.testing.assert_array_equal(blocks(t)[0], ensemble_words(round_key(stream, t))[0])


def test_choice_probability_matches_a_brute_force_frequency():
    """The antithetic estimate (nlbandit.host.propensity) against 400,000 plain draws of the same score law,
    with and without a mask, for a likely and an unlikely arm: within 5 of its standard errors plus 0.002;
    its standard error is at most the binomial one of as many plain draws."""
    from nlbandit.host.propensity import choice_probability

    rng = np.random.default_rng(3)
    mean, factor = rng.normal(size=6) * 0.3, rng.normal(size=(6, 4))
    scores = np.eye(6)  # a law of the scores: the identity's contexts
    mask = np.array([True, True, False, True, True, True])
    plain = mean[:, None] + 0.5 * factor @ rng.standard_normal((4, 400_000))
    for m in (None, mask):
        winners = np.where(m[:, None], plain, -np.inf).argmax(0) if m is not None else plain.argmax(0)
        counts = np.bincount(winners, minlength=6)
        won = np.flatnonzero(counts)
        for arm in (int(counts.argmax()), int(won[counts[won].argmin()])):  # the likeliest and the least likely
            p, se = choice_probability(scores, mean, factor, 0.5, m, arm, rng.standard_normal((4, 2000)))
            truth = np.mean(winners == arm)
            assert abs(p - truth) <= 5 * se + 0.002, (m, arm, p, truth)
            assert se <= np.sqrt(max(truth * (1 - truth), 1e-9) / 4000) * 1.2 + 1e-3


def test_choice_probability_splits_duplicated_arms_evenly():
    """Two arms with the same row of the score law tie under every draw: each gets half of their joint win
    probability (the decision's tie rule), which plain draws give as the frequency of the first of them."""
    from nlbandit.host.propensity import choice_probability

    rng = np.random.default_rng(4)
    mean, factor = rng.normal(size=5) * 0.3, rng.normal(size=(5, 3))
    mean, factor = np.append(mean, mean[2]), np.vstack([factor, factor[2]])
    scores = np.eye(6)  # a law of the scores: the identity's contexts
    plain = mean[:, None] + 0.5 * factor @ rng.standard_normal((3, 400_000))
    group = np.mean(plain.argmax(0) == 2)  # argmax takes the first of the tied pair
    for arm in (2, 5):
        p, se = choice_probability(scores, mean, factor, 0.5, None, arm, rng.standard_normal((3, 2000)))
        assert abs(p - group / 2) <= 5 * se + 0.002, (arm, p, group)


def test_choice_probability_edge_cases():
    """An arm whose score has no noise (a zero row of the law: nothing to integrate along) against plain draws;
    the only available arm has probability 1; an unavailable arm 0."""
    from nlbandit.host.propensity import choice_probability

    rng = np.random.default_rng(6)
    mean, factor = rng.normal(size=5) * 0.3, rng.normal(size=(5, 3))
    factor[1] = 0.0
    mean[1] = np.sort(mean)[-2]  # the second-best mean: wins on some draws, not all
    scores = np.eye(5)  # a law of the scores: the identity's contexts
    plain = mean[:, None] + 0.5 * factor @ rng.standard_normal((3, 400_000))
    truth = np.mean(plain.argmax(0) == 1)
    assert 0.05 < truth < 0.95
    p, se = choice_probability(scores, mean, factor, 0.5, None, 1, rng.standard_normal((3, 2000)))
    assert abs(p - truth) <= 5 * se + 0.002, (p, truth)
    only = np.zeros(5, bool)
    only[3] = True
    assert choice_probability(scores, mean, factor, 0.5, only, 3, rng.standard_normal((3, 8))) == (1.0, 0.0)
    assert choice_probability(scores, mean, factor, 0.5, only, 2, rng.standard_normal((3, 8))) == (0.0, 0.0)


def test_checks_equal_numpy_on_every_position_and_layout():
    """The agent's compiled input and state checks (branch-free loops) against NumPy's: one bad element at every
    position of a (7, 5) array, C- and F-ordered and strided, a 0-d array, float32."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5))
    for layout in (lambda a: a, np.asfortranarray, lambda a: np.repeat(a, 2, axis=1)[:, ::2]):
        base = layout(x.copy())
        assert checks.all_finite(base) and checks.within(base, 10.0) and checks.equal(base, x)
        for i, j in np.ndindex(*x.shape):
            for bad in (np.inf, -np.inf, np.nan, 11.0):
                a = layout(x.copy())
                a[i, j] = bad
                assert checks.all_finite(a) == bool(np.isfinite(a).all())
                assert checks.within(a, 10.0) == bool((np.abs(a) <= 10.0).all())
                assert checks.equal(a, x) == bool((a == x).all())
    assert checks.all_finite(np.asarray(1.0)) and not checks.all_finite(np.asarray(np.nan))
    assert not checks.within(x.astype(np.float32), 0.5)


def test_standard_normals_are_standard_normal_and_a_function_of_their_key():
    """The host estimates' ziggurat normals: 4 million draws (four seeds) against N(0, 1) by Kolmogorov–Smirnov
    and by the frequencies beyond 1, 2, R = 3.4426 (the tail method's threshold) and 4, each within 5 standard
    errors of its binomial count (a wrong layer table or overhang test moves these by far more); the draws of
    a round are a function of (seed, stream, t) alone."""
    from scipy import stats

    z = np.concatenate([standard_normals(seed, 6, 1, 1000, 1000).ravel() for seed in range(4)])
    assert stats.kstest(z, "norm").pvalue > 1e-3
    for a in (1.0, 2.0, 3.442619855899, 4.0):
        p = 2 * stats.norm.sf(a)
        assert abs(np.mean(np.abs(z) > a) - p) <= 5 * np.sqrt(p * (1 - p) / z.size), a
    assert abs(z.mean()) <= 5 / np.sqrt(z.size) and abs(z.var() - 1) <= 5 * np.sqrt(2 / z.size)
    np.testing.assert_array_equal(standard_normals(7, 6, 12, 20, 32), standard_normals(7, 6, 12, 20, 32))
    draws = [standard_normals(*key, 20, 32) for key in ((7, 6, 12), (7, 6, 13), (8, 6, 12), (7, 5, 12))]
    assert all(not np.array_equal(draws[0], other) for other in draws[1:])
