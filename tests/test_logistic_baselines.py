"""Logistic-UCB-1 and ada-OFU-ECOLog (``nlbandit.policies.logistic``) against independent references.

* Decisions: each policy is stepped by hand (jitted ``act``/``update``) for T rounds on one fixed arm set
  (random directions with distinct norms in [0.85, 1], so no two arms score alike), with Bernoulli rewards
  1{U_t < μ(x_tᵀθ*)} from a fixed NumPy uniform stream; every round the float64 NumPy reference
  (``tests/reference_logistic.py``: Logistic-UCB-1 refitted from scratch, ECOLog's steps solved exactly
  through their KKT conditions) scores the same arms on the same history and breaks ties with the same
  random word, and the decisions must agree.
* ECOLog's pieces: feasibility of the projected iterates, the eigh whitening against ``scipy.linalg.sqrtm``,
  the online step against SciPy's constrained minimiser.
* A small statistical check against uniform play.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as lin_ref  # tests/reference.py: the tie-breaking rule, decision comparison
import reference_logistic as ref  # tests/reference_logistic.py
import scipy.linalg
from scipy.optimize import NonlinearConstraint, minimize

import nlbandit as nb
from nlbandit.core.keys import seed_keys
from nlbandit.core.params import params_record
from nlbandit.policies.logistic import (
    ada_ofu_ecolog,
    ecolog_step,
    logistic_ucb_1,
    project_ellipsoid,
    sqrt_factors,
    whitening,
)

D, K, T = 4, 10, 40
SPEC = nb.ProblemSpec(D, K, T)

_rng = np.random.default_rng(20250317)
ARMS = _rng.standard_normal((K, D))
ARMS *= _rng.uniform(0.85, 1.0, (K, 1)) / np.linalg.norm(ARMS, axis=1, keepdims=True)  # distinct norms ≤ 1
THETA_STAR = _rng.standard_normal(D)
THETA_STAR *= 2.0 / np.linalg.norm(THETA_STAR)
UNIFORMS = _rng.uniform(size=T)

INIT_KEY = jax.random.key(201)
ACT_KEYS = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(202), jnp.arange(1, T + 1))
UPDATE_KEYS = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(203), jnp.arange(1, T + 1))
TIE_WORDS = np.asarray(jax.vmap(lambda k: jax.random.bits(k, (), jnp.uint32))(ACT_KEYS))

UCB1_PARAMS = {"s": 2.5, "delta": 0.05, "kappa": 0.0, "lam_scale": 1.0, "lam": 1.0, "alpha": 1.0}
ECO_PARAMS = {"lam": 1.0, "s": 2.5, "delta": 0.05, "alpha": 1.0}


def _params(values: dict[str, float]):
    """The family constructors' policies read their params as a record (``params.lam``)."""
    return params_record("CaseParams", tuple(values))(**{k: jnp.asarray(v, jnp.float64) for k, v in values.items()})


class UCB1Ref:
    """Reference Logistic-UCB-1: every round refits from scratch on the whole history."""

    def __init__(self, width: str, params: dict[str, float], lazy: tuple[int, int] | None = None):
        self.width, self.p, self.lazy = width, params, lazy
        self.X, self.y = np.zeros((0, D)), np.zeros(0)

    def fit_n(self, n: int) -> int:
        """Observations in the last refit (the policy refits in round j when j < after or (j−1) % every == 0)."""
        if self.lazy is None or n == 0:
            return n
        every, after = self.lazy
        return max(j for j in range(1, n + 1) if j < after or (j - 1) % every == 0)

    def scores(self, t: int) -> np.ndarray:
        p = self.p
        return ref.ucb1_scores(ARMS, self.X, self.y, width=self.width, s=p["s"], delta=p["delta"],
                               kappa=p["kappa"], lam_scale=p["lam_scale"], alpha=p["alpha"],
                               fit_n=self.fit_n(len(self.y)))

    def observe(self, x: np.ndarray, r: float) -> None:
        self.X, self.y = np.vstack([self.X, x]), np.append(self.y, r)


class ECORef:
    """Reference ECOLog (:class:`reference_logistic.ECOLogRef`) behind the same interface."""

    def __init__(self, width: str, params: dict[str, float]):
        self.model = ref.ECOLogRef(D, params["lam"], params["s"], params["delta"], width, params["alpha"])

    def scores(self, t: int) -> np.ndarray:
        return self.model.scores(ARMS, t)

    def observe(self, x: np.ndarray, r: float) -> None:
        self.model.update(x, r)


class Case(NamedTuple):
    make: Callable[..., nb.Policy]
    static: dict[str, Any]
    params: dict[str, float]
    reference: Callable[[], Any]


def _ucb1(width: str, lazy: tuple[int, int] | None = None, backend: str = "history", **overrides) -> Case:
    params = {**UCB1_PARAMS, **overrides}
    static = {"width": width, "backend": backend} | ({} if lazy is None else {"lazy_every": lazy[0],
                                                                              "lazy_after": lazy[1]})
    return Case(logistic_ucb_1, static, params, lambda: UCB1Ref(width, params, lazy))


def _eco(width: str, **overrides) -> Case:
    params = {**ECO_PARAMS, **overrides}
    return Case(ada_ofu_ecolog, {"width": width}, params, lambda: ECORef(width, params))


CASES = {
    "ucb1-theory": _ucb1("theory"),
    "ucb1-reference": _ucb1("reference"),
    "ucb1-constant": _ucb1("constant", alpha=5.0),
    "ucb1-lazy": _ucb1("constant", lazy=(3, 10), alpha=5.0),
    "ucb1-arms": _ucb1("reference", backend="arms"),  # per-arm statistics: the same fit as the full history
    "ecolog-ada": _eco("ada"),
    "ecolog-ada-small-s": _eco("ada", s=0.6),  # S < ‖θ*‖: the projection is active
    "ecolog-lee": _eco("lee", lam=2.5),
    "ecolog-constant": _eco("constant", alpha=0.3),
}


class Run(NamedTuple):
    arms: np.ndarray
    ref_arms: np.ndarray
    states: list[Any]  # the policy state after every round
    reference: Any


@functools.cache
def run_case(case_id: str) -> Run:
    case = CASES[case_id]
    policy = case.make(SPEC, **case.static)
    params = _params(case.params)
    act, update = jax.jit(policy.act), jax.jit(policy.update)
    contexts, mask = jnp.asarray(ARMS), jnp.ones((K,), bool)
    state = policy.init(params, INIT_KEY)
    if policy.prepare is not None:
        state = policy.prepare(params, state, jax.random.key(0), contexts, mask)
    reference = case.reference()
    arms, ref_arms, states = np.zeros(T, np.int64), np.zeros(T, np.int64), []
    for t in range(1, T + 1):
        arm = int(act(params, state, ACT_KEYS[t - 1], contexts, mask, jnp.asarray(t))[0])
        ref_arms[t - 1] = lin_ref.argmax_ties(reference.scores(t), int(TIE_WORDS[t - 1]))
        arms[t - 1] = arm
        x = ARMS[arm]
        r = float(UNIFORMS[t - 1] < ref.expit(x @ THETA_STAR))
        state = update(params, state, UPDATE_KEYS[t - 1], contexts, arm, nb.Feedback(jnp.asarray(r)), jnp.asarray(t))
        states.append(jax.device_get(state))
        reference.observe(x, r)
    return Run(arms, ref_arms, states, reference)


@pytest.mark.parametrize("case_id", list(CASES))
def test_decisions_match_reference(case_id):
    run = run_case(case_id)
    lin_ref.assert_same_decisions(run.arms, run.ref_arms, case_id)
    assert np.unique(run.arms).size >= 3  # informative only if the path is not one arm throughout


@pytest.mark.parametrize("case_id", ["ucb1-theory", "ucb1-reference", "ucb1-arms"])
def test_ucb1_estimate_is_the_mle(case_id):
    """After T rounds θ̂ is the regularised MLE with λ = d log(2 + T) (5 warm-started Newton steps suffice)."""
    run = run_case(case_id)
    X, y = run.reference.X, run.reference.y
    expected = ref.logistic_mle(X, y, D * np.log(2.0 + T))
    np.testing.assert_allclose(run.states[-1].theta, expected, rtol=0, atol=1e-9)
    np.testing.assert_allclose(run.states[-1].gram, X.T @ X, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case_id", ["ecolog-ada", "ecolog-ada-small-s", "ecolog-lee"])
def test_ecolog_state_matches_reference(case_id):
    run = run_case(case_id)
    state, model = run.states[-1], run.reference.model
    np.testing.assert_allclose(state.theta, model.theta, rtol=0, atol=1e-9)
    np.testing.assert_allclose(state.w, model.W, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(state.w_inv, np.linalg.inv(model.W), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(state.gap_sum, model.gap, rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(state.disc_sum, model.disc, rtol=1e-8, atol=1e-9)


def test_ecolog_iterates_stay_in_the_ball():
    """‖θ_t‖ ≤ S(1 + 1e-9) after every update, and the constraint is active in some rounds (S < ‖θ*‖)."""
    run = run_case("ecolog-ada-small-s")
    s = CASES["ecolog-ada-small-s"].params["s"]
    norms = np.array([np.linalg.norm(st.theta) for st in run.states])
    assert np.all(norms <= s * (1 + 1e-9)), norms.max() / s - 1
    assert np.sum(norms > s * (1 - 1e-9)) >= 5


def _spd(rng: np.random.Generator, d: int, cond: float) -> np.ndarray:
    q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return (q * np.geomspace(1.0, cond, d)) @ q.T


@pytest.mark.parametrize("cond", [1.0, 50.0, 1e4])
def test_whitening_matches_sqrtm(cond):
    w = _spd(np.random.default_rng(int(cond)), 6, cond)
    root, inv_root = (np.asarray(m) for m in sqrt_factors(whitening(jnp.asarray(w))))
    expected = np.real(scipy.linalg.sqrtm(w))
    np.testing.assert_allclose(root, expected, rtol=0, atol=1e-8 * np.abs(expected).max())
    expected_inv = np.real(scipy.linalg.sqrtm(np.linalg.inv(w)))
    np.testing.assert_allclose(inv_root, expected_inv, rtol=0, atol=1e-8 * np.abs(expected_inv).max())
    np.testing.assert_allclose(root @ inv_root, np.eye(6), rtol=0, atol=1e-10)


def _scipy_step(theta_c, w, x, r, s, label_free):
    """SciPy's constrained minimiser (SLSQP) of the online-step objective over ‖θ‖ ≤ S."""
    def f(th):
        v = x @ th
        loss = ref.log_loss(v, 0.0) + ref.log_loss(v, 1.0) if label_free else ref.log_loss(v, r)
        return loss + 0.5 * (th - theta_c) @ w @ (th - theta_c)

    def grad(th):
        mu = ref.expit(x @ th)
        return ((2 * mu - 1) if label_free else (mu - r)) * x + w @ (th - theta_c)

    ball = NonlinearConstraint(lambda th: th @ th, -np.inf, s * s, jac=lambda th: 2 * th)
    start = theta_c * min(1.0, 0.5 * s / max(np.linalg.norm(theta_c), 1e-300))
    return minimize(f, start, jac=grad, constraints=[ball], method="SLSQP", options={"ftol": 1e-14, "maxiter": 500}).x


@pytest.mark.parametrize("seed", range(6))
def test_online_step_matches_scipy(seed):
    """The whitened projected-GD step equals SciPy's constrained minimum (and the exact KKT solution)."""
    rng = np.random.default_rng(seed)
    d = 5
    w = _spd(rng, d, [1.0, 20.0, 500.0][seed % 3]) * [1.0, 3.0][seed % 2]
    s = [0.5, 1.0, 3.0][seed % 3]
    theta_c = rng.standard_normal(d)
    theta_c *= rng.uniform(0.3, 1.0) * s / np.linalg.norm(theta_c)  # a feasible centre, as in the policy
    x = 2.0 * rng.standard_normal(d)  # large enough that some steps leave the ball
    r = float(seed % 2)
    for label_free in (False, True):
        got = np.asarray(ecolog_step(jnp.asarray(theta_c), jnp.asarray(w), jnp.asarray(x), jnp.asarray(r),
                                     jnp.asarray(s), label_free=label_free))
        assert np.linalg.norm(got) <= s * (1 + 1e-9)
        np.testing.assert_allclose(got, _scipy_step(theta_c, w, x, r, s, label_free), rtol=0, atol=1e-5)
        np.testing.assert_allclose(got, ref.ecolog_step_exact(theta_c, w, x, r, s, label_free), rtol=0, atol=1e-9)


def test_projection_is_exact_for_far_points():
    """Points far outside the ellipsoid (ν large) land on its boundary at the KKT point."""
    rng = np.random.default_rng(7)
    evals = np.geomspace(0.1, 1e3, 6)
    for scale in (1.5, 10.0, 1e3):
        y = rng.standard_normal(6)
        y *= scale / np.sqrt(np.sum(y * y / evals))  # ‖y‖_E = scale
        p = np.asarray(project_ellipsoid(jnp.asarray(y), jnp.asarray(evals), jnp.asarray(1.0)))
        assert abs(np.sqrt(np.sum(p * p / evals)) - 1.0) <= 1e-12
        nu = np.median(evals * (y / p - 1.0))  # p_i = y_i e_i / (e_i + ν)
        np.testing.assert_allclose(p, y * evals / (evals + nu), rtol=1e-10)


def test_ecolog_state_size_is_independent_of_the_horizon():
    """No history buffer: the per-round work is fixed by d."""
    policy = ada_ofu_ecolog(nb.ProblemSpec(D, K, 10**6))
    state = policy.init(_params(ECO_PARAMS), INIT_KEY)
    assert policy.meta.max_horizon is None
    assert all(np.size(leaf) <= D * D for leaf in jax.tree.leaves(state))


STAT_T, STAT_SEEDS = 1500, np.arange(5)


@functools.cache
def _uniform_regret() -> float:
    """Uniform play's expected regret on the statistical-check instances: T · mean_seeds(max μ − mean μ)."""
    env = nb.make_env("logistic", d=5, k=10, theta_norm=3.0)
    gaps = []
    for seed in STAT_SEEDS:
        instance = env.reset(seed_keys(jnp.uint32(seed)).env_reset)
        means = np.asarray(env.mean(instance, instance.arms))
        gaps.append(means.max() - means.mean())
    return STAT_T * float(np.mean(gaps))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["logistic-ucb-1", "ada-ofu-ecolog"])
def test_regret_beats_uniform(name):
    """K = 10, d = 5, ‖θ*‖ = 3, T = 1500, 5 seeds: mean final pseudo-regret ≤ ½ × uniform play's.

    With the constant widths (α = 10 on V = Σxxᵀ + κλ_tI for Logistic-UCB-1, α = 1 for ECOLog): the
    theory radii (ρ_t ≈ 300 and √η_t ≈ 15 here) keep exploring for far longer than 1500 rounds (measured:
    0.91× and 0.80× uniform), as in the reference code's own runs.
    """
    env = nb.make_env("logistic", d=5, k=10, theta_norm=3.0)
    spec = nb.ProblemSpec(5, 10, STAT_T)
    if name == "logistic-ucb-1":
        policy, params = logistic_ucb_1(spec, width="constant"), {**UCB1_PARAMS, "s": 3.0, "alpha": 10.0}
    else:
        policy, params = ada_ofu_ecolog(spec, width="constant"), {**ECO_PARAMS, "s": 3.0, "alpha": 1.0}
    result = nb.simulate(env, policy, _params(params), STAT_T, STAT_SEEDS, chunk_size=STAT_T)
    assert result.final_regret.mean() <= 0.5 * _uniform_regret(), (result.final_regret, _uniform_regret())
