"""The linear policies decide exactly as the NumPy reference (``tests/reference.py``), given the same draws.

Each policy is stepped by hand (jitted ``act``/``update``) for T rounds on one fixed arm set (K arms with
Gaussian features, so no two arms ever score exactly alike except when θ = 0), with rewards xᵀθ* + noise
from NumPy. In every round the reference refits from scratch on the same history and receives the same
random draws as the policy, reproduced from the round's key exactly as the policy draws them: Lin-TS's
z, Lin-ES's model index j, per-round perturbations and prior, and the tie-breaking words of
``argmax_random_ties`` (exact ties do occur: every arm scores 0 while θ̂ = 0).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
import reference as ref  # tests/reference.py (pytest puts tests/ on sys.path)

D, K, T = 5, 10, 300
LAM = 0.5  # λ ≠ 1, so the −d log λ term of the OFUL radius matters
M = 10  # Lin-ES ensemble size

_rng = np.random.default_rng(20240611)
ARMS = _rng.standard_normal((K, D)) / np.sqrt(D)
THETA_STAR = _rng.standard_normal(D) / np.sqrt(D)
NOISE = 0.5 * _rng.standard_normal(T)

INIT_KEY = jax.random.key(101)
ACT_KEYS = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(102), jnp.arange(1, T + 1))
UPDATE_KEYS = jax.vmap(jax.random.fold_in, in_axes=(None, 0))(jax.random.key(103), jnp.arange(1, T + 1))


def _tie_words(keys: jax.Array) -> np.ndarray:
    """(T,) tie-breaking words, drawn as ``argmax_random_ties`` draws them from each key."""
    return np.asarray(jax.vmap(lambda k: jax.random.bits(k, (), jnp.uint32))(keys))


def _split(keys: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Both halves of ``jax.random.split`` of every key: (first subkeys, second subkeys)."""
    pairs = jax.vmap(jax.random.split)(keys)
    return pairs[:, 0], pairs[:, 1]


# ``choose(t, X, y, draws) -> arm``: the reference decision in round t (1-based) from the history
# X (t−1, d), y (t−1,) and the policy's reproduced random draws (see ``_draws``).
Chooser = Callable[[int, np.ndarray, np.ndarray, dict[str, np.ndarray]], int]


class Case(NamedTuple):
    """One policy configuration and its reference decision rule."""

    name: str
    hypers: dict[str, Any]
    choose: Chooser


def _draws(case: Case, params: dict[str, jax.Array]) -> dict[str, np.ndarray]:
    """The policy's random draws for all T rounds, reproduced from its keys.

    ``u``: tie-break words (T,) (from the act key itself for greedy/LinUCB, from the second half of
    its split for Lin-TS, the second of two words drawn from the act key for Lin-ES). Lin-TS: ``z`` (T, d).
    Lin-ES: ``j`` (T,) (the first word modulo m), ``Z`` (T, m) perturbations from the update keys,
    ``prior`` (d, m) from the init key.
    """
    if case.name in ("greedy", "lin-ucb"):
        return {"u": _tie_words(ACT_KEYS)}
    first, second = _split(ACT_KEYS)
    if case.name == "lin-ts":
        return {"u": _tie_words(second),
                "z": np.asarray(jax.vmap(lambda k: jax.random.normal(k, (D,), jnp.float32).astype(jnp.float64))(first))}
    sigma_r, prior_scale, lam = (float(params[n]) for n in ("sigma_r", "prior_scale", "lam"))
    words = np.asarray(jax.vmap(lambda k: jax.random.bits(k, (2,), jnp.uint32))(ACT_KEYS))
    return {
        "u": words[:, 1],
        "j": words[:, 0] % M,
        "Z": sigma_r * np.asarray(jax.vmap(lambda k: jax.random.normal(k, (M,), jnp.float32).astype(jnp.float64))(UPDATE_KEYS)),
        "prior": np.sqrt(lam) * prior_scale * np.asarray(jax.random.normal(INIT_KEY, (D, M), jnp.float32).astype(jnp.float64)),
    }


def _lines_choice(t, X, y, dr):
    """Reference Lin-ES decision of round t."""
    return ref.lines_choice(ARMS, X, y, dr["Z"][: t - 1], dr["prior"], LAM, int(dr["j"][t - 1]), dr["u"][t - 1])


CASES = {
    "lin-ucb-oful": Case(
        "lin-ucb", dict(width="oful", lam=LAM, sigma=0.5, delta=0.05, s=1.0),
        lambda t, X, y, dr: ref.linucb_choice(ARMS, X, y, LAM, dr["u"][t - 1], sigma=0.5, delta=0.05, s=1.0),
    ),
    "lin-ucb-constant": Case(
        "lin-ucb", dict(width="constant", lam=LAM, alpha=0.5),
        lambda t, X, y, dr: ref.linucb_choice(ARMS, X, y, LAM, dr["u"][t - 1], alpha=0.5),
    ),
    "lin-ts": Case(
        "lin-ts", dict(lam=LAM, v=0.5),
        lambda t, X, y, dr: ref.lints_choice(ARMS, X, y, LAM, 0.5, dr["z"][t - 1], dr["u"][t - 1]),
    ),
    "greedy": Case("greedy", dict(lam=LAM), lambda t, X, y, dr: ref.greedy_choice(ARMS, X, y, LAM, dr["u"][t - 1])),
    "lin-es": Case("lin-es", dict(m=M, lam=LAM, sigma_r=0.5, prior_scale=1.0), _lines_choice),
    # Paper-literal Lin-ES without perturbations: every model is the greedy ridge estimate.
    "lin-es-unperturbed": Case(
        "lin-es", dict(m=M, lam=LAM, sigma_r=0.0, prior_scale=0.0),
        lambda t, X, y, dr: ref.greedy_choice(ARMS, X, y, LAM, dr["u"][t - 1]),
    ),
}


class Run(NamedTuple):
    """A policy's trajectory next to the reference's decisions."""

    arms: np.ndarray  # (T,) the policy's choices (they also drive the history)
    ref_arms: np.ndarray  # (T,) the reference's choices on the same history
    X: np.ndarray  # (T, d) played features
    y: np.ndarray  # (T,) rewards
    state: Any  # the policy state after T rounds
    draws: dict[str, np.ndarray]


@functools.cache
def run_case(case_id: str) -> Run:
    """Step the policy of ``CASES[case_id]`` for T rounds, computing the reference decision every round."""
    case = CASES[case_id]
    policy, params = nb.make_policy(case.name, nb.ProblemSpec(D, K, T), **case.hypers)
    draws = _draws(case, params)
    act, update = jax.jit(policy.act), jax.jit(policy.update)
    contexts, mask = jnp.asarray(ARMS), jnp.ones((K,), bool)
    state = policy.init(params, INIT_KEY)
    arms, ref_arms = np.zeros(T, np.int64), np.zeros(T, np.int64)
    X, y = np.zeros((T, D)), np.zeros(T)
    for t in range(1, T + 1):
        arm = int(act(params, state, ACT_KEYS[t - 1], contexts, mask, jnp.asarray(t))[0])
        ref_arms[t - 1] = case.choose(t, X[: t - 1], y[: t - 1], draws)
        arms[t - 1] = arm
        X[t - 1] = ARMS[arm]
        y[t - 1] = ARMS[arm] @ THETA_STAR + NOISE[t - 1]
        state = update(params, state, UPDATE_KEYS[t - 1], contexts, arm, nb.Feedback(jnp.asarray(y[t - 1])),
                       jnp.asarray(t))
    return Run(arms, ref_arms, X, y, jax.device_get(state), draws)


@pytest.mark.parametrize("case_id", list(CASES))
def test_decisions_match_reference(case_id):
    run = run_case(case_id)
    ref.assert_same_decisions(run.arms, run.ref_arms, case_id)
    # The comparison is informative only if the trajectory is not one arm throughout.
    assert np.unique(run.arms).size >= 3


def test_policies_differ():
    """The reference decisions discriminate between rules: the exploration rules give different paths."""
    paths = {case_id: tuple(run_case(case_id).ref_arms) for case_id in ("lin-ucb-oful", "lin-ucb-constant",
                                                                         "lin-ts", "greedy", "lin-es")}
    assert len(set(paths.values())) == len(paths)


def test_lin_es_models_match_closed_form():
    """Spec check: after T rounds θ^j = (λI + XᵀX)⁻¹ (prior_j + Xᵀ(Y + Z[:, j])) for every model j."""
    run = run_case("lin-es")
    ridge = run.state.ridge
    thetas = np.asarray(ridge.v_inv) @ np.asarray(ridge.b).T  # b holds one row per model
    gram = LAM * np.eye(D) + run.X.T @ run.X
    Z, prior = run.draws["Z"], run.draws["prior"]
    for j in range(M):
        expected = np.linalg.solve(gram, prior[:, j] + run.X.T @ (run.y + Z[:, j]))
        np.testing.assert_allclose(thetas[:, j], expected, rtol=1e-8, atol=0)
    assert int(run.state.draws) == M * T


def test_unperturbed_lin_es_models_are_greedy_ridge():
    """With σ_R = 0 and prior_scale = 0 every model equals the greedy ridge estimate on the same history."""
    run = run_case("lin-es-unperturbed")
    ridge = run.state.ridge
    thetas = np.asarray(ridge.v_inv) @ np.asarray(ridge.b).T  # b holds one row per model
    expected = ref.ridge_fit(run.X, run.y, LAM).theta
    for j in range(M):
        np.testing.assert_allclose(thetas[:, j], expected, rtol=1e-10, atol=0)
