"""Off-policy estimators (nlbandit.replay.estimators): unbiased on simulated logged data whose value is known,
bootstrap intervals that cover it, and refusals of malformed input."""

from __future__ import annotations

import numpy as np
import pytest

from nlbandit.replay.estimators import Unsupported, estimate

K, D = 5, 4
THETA = np.random.default_rng(0).normal(size=(K, D))


def logged(n: int, seed: int):
    """n events: contexts x ~ N(0, I), Bernoulli rewards with mean sigmoid(θ_aᵀx), a softmax logging policy
    over a tilted score (known propensities), a deterministic target policy (argmax of another score); also
    the target's true value on these contexts, Σ_i μ(x_i, π(x_i)) / n, and a deliberately wrong reward model."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, D))
    mu = 1 / (1 + np.exp(-x @ THETA.T))  # (n, K)
    logits = 0.7 * x @ THETA.T[:, ::-1]
    pi0 = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi0 /= pi0.sum(axis=1, keepdims=True)
    actions = np.array([rng.choice(K, p=row) for row in pi0])
    rewards = (rng.uniform(size=n) < mu[np.arange(n), actions]).astype(float)
    greedy = np.argmax(x @ (THETA.T + 0.5), axis=1)
    target = np.eye(K)[greedy]
    truth = mu[np.arange(n), greedy].mean()
    q_wrong = np.clip(mu + 0.2, 0, 1)
    return actions, rewards, pi0[np.arange(n), actions], target, q_wrong, truth


@pytest.mark.parametrize("name", ["ips", "dr"])
def test_ips_and_dr_are_unbiased(name):
    # 300 logged data sets of 400 events: the mean error over them is within 4 standard errors of 0.
    errors = []
    for seed in range(300):
        a, r, p, target, q, truth = logged(400, seed)
        errors.append(estimate(name, a, r, p, target, q, resamples=1).value - truth)
    errors = np.asarray(errors)
    assert abs(errors.mean()) < 4 * errors.std(ddof=1) / np.sqrt(errors.size)


def test_snips_is_consistent_and_intervals_cover_the_value():
    a, r, p, target, q, truth = logged(20000, 1)
    e = estimate("snips", a, r, p, target)
    assert abs(e.value - truth) < 3 * (e.hi - e.lo) / (2 * 1.96)  # within 3 bootstrap standard errors
    covered = 0
    for seed in range(100):  # 95% intervals: coverage within the binomial range of 100 trials
        a, r, p, target, q, truth = logged(500, 1000 + seed)
        e = estimate("dr", a, r, p, target, q, resamples=300, seed=seed)
        covered += e.lo <= truth <= e.hi
    assert 85 <= covered <= 100


def test_dr_with_the_true_model_has_smaller_spread_than_ips():
    ips, dr = [], []
    for seed in range(100):
        a, r, p, target, q, truth = logged(300, 5000 + seed)
        x_free = q - 0.2  # the model without its error is close to the truth: DR's correction term shrinks
        ips.append(estimate("ips", a, r, p, target, resamples=1).value - truth)
        dr.append(estimate("dr", a, r, p, target, np.clip(x_free, 0, 1), resamples=1).value - truth)
    assert np.std(dr) < np.std(ips)


@pytest.mark.parametrize("change, message", [
    (dict(name="ipw"), "estimator must be one of"),
    (dict(propensities=np.zeros(3)), r"propensities must lie in \(0, 1\]"),
    (dict(actions=np.array([0, 1, 5])), "actions must be integers in 0..2"),
    (dict(rewards=np.array([0.0, np.nan, 1.0])), "rewards must be finite"),
    (dict(target=np.full((3, 3), 0.5)), "probability vector"),
    (dict(rewards=np.ones(2)), r"rewards must have shape \(3,\)"),
    (dict(name="dr"), "needs q_hat"),
])
def test_bad_input_is_refused_with_the_argument_named(change, message):
    args = dict(name="ips", actions=np.array([0, 1, 2]), rewards=np.ones(3), propensities=np.full(3, 0.5),
                target=np.eye(3))
    args.update(change)
    with pytest.raises(ValueError, match=message):
        estimate(args.pop("name"), **args)


def test_a_deterministic_log_is_refused_to_ips_and_snips_and_dr_leans_on_its_model():
    """A greedy logger (probability 1, the other arms 0) and a uniform target: IPS would read ~1/K of the target's
    value and SNIPS the greedy arms' value (both far from the truth, biased with no interval saying so), so both
    are refused naming the events and the mass; DR with the true means as its model is exact on the unseen arms.
    A target that plays the logged arm wherever it was logged with probability 1 is estimated as before."""
    rng = np.random.default_rng(0)
    n, k = 4000, 4
    mu = rng.uniform(0.1, 0.9, (n, k))
    arms = np.argmax(mu, axis=1)
    rewards = (rng.random(n) < mu[np.arange(n), arms]).astype(float)
    uniform, ones = np.full((n, k), 1.0 / k), np.ones(n)
    for name in ("ips", "snips"):
        with pytest.raises(Unsupported, match=rf"{name}: on 4000 of the 4000 events the logged arm had probability "
                                              r"1 .*\(0\.75 on average\).*use 'dr'"):
            estimate(name, arms, rewards, ones, uniform)
    dr = estimate("dr", arms, rewards, ones, uniform, mu, resamples=200)
    truth = mu.mean()
    assert abs(dr.value - truth) < 0.005 and dr.lo <= truth <= dr.hi, (dr, truth)
    half = np.where(np.arange(n) % 2 == 0, 1.0, 0.5)  # events logged with probability 1/2 may differ from it
    target = np.eye(k)[arms] * (half == 1.0)[:, None] + uniform * (half < 1.0)[:, None]
    e = estimate("ips", arms, rewards, half, target, resamples=1)
    w = target[np.arange(n), arms] / half
    assert e.value == pytest.approx(np.mean(w * rewards), rel=1e-12)


@pytest.mark.parametrize("n", [1, 60, 5000])  # 5000: the resamples drawn in two blocks of 838 and 162
def test_estimates_share_one_draw_and_match_a_direct_reference(n):
    # All three estimators from one call, on the same resamples, equal each one's own call and a direct float64
    # reference: the point estimates by their formulas, the intervals the quantiles of the formulas on resamples
    # drawn as documented (NumPy's generator seeded by `seed`, blocks of at most 2**22 indices).
    from nlbandit.replay.estimators import estimates

    a, r, p, target, q, _ = logged(n, 9)
    found = estimates(("dr", "ips", "snips"), a, r, p, target, q, resamples=1000, level=0.9, seed=4)
    assert list(found) == ["dr", "ips", "snips"]
    w = target[np.arange(n), a] / p
    terms = {"ips": lambda i: (w * r)[i].mean(axis=-1),
             "snips": lambda i: (w * r)[i].sum(axis=-1) / np.maximum(w[i].sum(axis=-1), 1e-300),  # 0 at Σw = 0
             "dr": lambda i: ((target * q).sum(axis=1) + w * (r - q[np.arange(n), a]))[i].mean(axis=-1)}
    rng, block = np.random.default_rng(4), 2**22 // n
    draws = np.concatenate([rng.integers(0, n, (min(block, 1000 - s), n)) for s in range(0, 1000, block)])
    for name, formula in terms.items():
        lo, hi = np.quantile(formula(draws), [0.05, 0.95])
        assert (found[name].value, found[name].lo, found[name].hi) == pytest.approx(
            (formula(np.arange(n)), lo, hi), rel=1e-12, abs=1e-15)
        assert estimate(name, a, r, p, target, q, resamples=1000, level=0.9, seed=4) == found[name]
