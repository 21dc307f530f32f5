"""``logistic-ucb-1`` and ``ada-ofu-ecolog`` in Bae & Lee's experiment mode (spec 001 §3.2 rows 2–3, §3.3,
§3.4) against a float64 NumPy reference."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.core.types import Feedback

D, K, ROUNDS, EVERY, STEPS, LR, LAM, NU, KAPPA = 4, 5, 23, 5, 30, 0.5, 0.7, 0.3, 3.0


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _reference(weighted, xs, arms, rewards, contexts, diagonal):
    """θ after the rounds (GD on mean BCE + (λ/t)‖θ‖² at t = 5, 10, …) and the scores of ``contexts``."""
    theta, played, weights = np.zeros(D), [], []
    for t, (x, arm, r) in enumerate(zip(xs, arms, rewards), 1):
        played.append((x[arm], r))
        if t % EVERY == 0:
            px = np.array([p for p, _ in played])
            py = np.array([y for _, y in played])
            for _ in range(STEPS):
                theta = theta - LR * (px.T @ (_sigmoid(px @ theta) - py) + 2 * LAM * theta) / t
        weights.append(_sigmoid(x[arm] @ theta) * _sigmoid(-(x[arm] @ theta)) if weighted else 1.0)
    px = np.array([p for p, _ in played])
    w = np.array(weights)
    floor = LAM if weighted else KAPPA * LAM
    m = floor * np.eye(D) + (px * w[:, None]).T @ px
    gram = 0.25 * px.T @ px + np.eye(D)
    if diagonal:
        m, dtilde = np.diag(np.diag(m)), float(np.sum(np.log1p(0.25 * np.sum(px * px, axis=0))))
    else:
        dtilde = np.linalg.slogdet(gram)[1]
    widths = np.sqrt(np.einsum("kd,de,ke->k", contexts, np.linalg.inv(m), contexts))
    s = 1.0
    if weighted:
        factor = s * math.sqrt(LAM) + (1 + s) * math.sqrt(dtilde)
    else:
        factor = math.sqrt(KAPPA) * (1 + s) * (s * math.sqrt(LAM) + dtilde / math.sqrt(LAM))
    return theta, _sigmoid(contexts @ theta) + NU * factor * widths


@pytest.mark.parametrize("name", ["logistic-ucb-1", "ada-ofu-ecolog"])
@pytest.mark.parametrize("matrix", ["full", "diagonal"])
def test_scores_match_a_numpy_reference(name, matrix):
    weighted = name == "ada-ofu-ecolog"
    extra = {} if weighted else {"kappa": KAPPA}
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, K, 100), mode="experiment", matrix=matrix, nu=NU, lam=LAM,
                                    lr=LR, steps=STEPS, train_every=EVERY, **extra)
    rng = np.random.default_rng(3)
    state = policy.init(params, jax.random.key(0))
    xs, arms, rewards = [], [], []
    for t in range(1, ROUNDS + 1):
        x = rng.uniform(-1, 1, (K, D))
        arm, _ = policy.act(params, state, jax.random.key(t), jnp.asarray(x), jnp.ones(K, bool), t)
        r = float(rng.integers(0, 2))
        state = policy.update(params, state, jax.random.key(100 + t), jnp.asarray(x), arm, Feedback(jnp.float64(r)), t)
        xs.append(x), arms.append(int(arm)), rewards.append(r)
    contexts = rng.uniform(-1, 1, (K, D))
    theta, scores = _reference(weighted, xs, arms, rewards, contexts, matrix == "diagonal")
    np.testing.assert_allclose(np.asarray(state.theta), theta, rtol=1e-9, atol=1e-12)
    assert np.abs(theta).max() > 0.05  # training moved θ
    arm, info = policy.act(params, state, jax.random.key(0), jnp.asarray(contexts), jnp.ones(K, bool), ROUNDS + 1)
    assert int(arm) == int(np.argmax(scores))
    np.testing.assert_allclose(float(info.score), scores[int(arm)], rtol=1e-9)


@pytest.mark.parametrize("name, options, message", [
    ("ada-ofu-ecolog", {"mode": "experiment", "alpha": 2.0}, "'alpha' does not apply to mode = 'experiment'"),
    ("logistic-ucb-1", {"mode": "experiment", "newton_steps": 3}, "'newton_steps' does not apply"),
    ("logistic-ucb-1", {"nu": 2.0}, "'nu' does not apply to mode = 'original'"),
    ("ada-ofu-ecolog", {"mode": "experiment", "kappa": 3.0}, "kappa"),  # ECOLog never reads κ
    ("ada-ofu-ecolog", {"mode": "experiment", "matrix": "sparse"}, "matrix"),
])
def test_fields_of_the_other_mode_are_refused(name, options, message):
    with pytest.raises(ConfigError, match=message):
        nb.make_policy(name, nb.ProblemSpec(D, K, 100), **options)
