"""Precision per policy (issue 12 §2): a policy declares its float type (``PolicyMeta.dtype``); the engine hands a
float32 policy its params, contexts and feedback in float32, and its state and arithmetic stay float32 with
64-bit JAX on, while the environment's means and the regret stay float64. (The registered policies are all
float64 — the contract suite checks that their state is — until the neural family arrives.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import nlbandit as nb
from nlbandit.core.keys import normal
from nlbandit.core.types import Feedback, Policy, PolicyMeta, ProblemSpec
from nlbandit.policies.exploration import act_info, choose, epsilon_greedy

D, K, T = 4, 6, 60
SPEC = ProblemSpec(D, K, T)


def diagonal_sampling(spec: ProblemSpec) -> Policy:
    """A float32 policy: Thompson-style sampling from per-coordinate ridge statistics (ε-greedy after the
    sample, so that both of the shared choice rules run in float32)."""
    f32 = jnp.float32

    def init(params, key):
        return {"precision": jnp.full(spec.d, params["lam"], f32), "b": jnp.zeros(spec.d, f32)}

    def act(params, state, key, contexts, mask, t):
        k_sample, k_choose = jax.random.split(key)
        mean = state["b"] / state["precision"]
        theta = mean + params["v"] * normal(k_sample, (spec.d,), "float32") / jnp.sqrt(state["precision"])
        scores = contexts @ theta
        arm, probability = epsilon_greedy(k_choose, scores, mask, params["epsilon"])
        _, p_greedy = choose(k_choose, scores, mask)
        return arm, act_info(scores[arm], scores[arm] - contexts[arm] @ mean, probability * p_greedy / p_greedy)

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm]
        return {"precision": state["precision"] + x * x, "b": state["b"] + feedback.reward * x}

    return Policy(init, act, update, PolicyMeta("diagonal-sampling", dtype="float32", spec=spec))


PARAMS = {"lam": jnp.float64(1.0), "v": jnp.float64(0.5), "epsilon": jnp.float64(0.05)}


def test_float32_policy_state_stays_float32_and_regret_is_float64():
    env = nb.make_env("linear", d=D, k=K)
    states = []
    res = nb.simulate(env, diagonal_sampling(SPEC), PARAMS, T, range(3), chunk_size=T // 2,
                      on_chunk=lambda p: states.append(p.policy_state))
    assert [leaf.dtype for leaf in states[-1]] == [np.float32, np.float32]
    assert res.cum_regret.dtype == np.float64 and np.isfinite(res.cum_regret).all()
    assert (np.diff(res.cum_regret, axis=-1) >= 0).all()  # pseudo-regret from float64 means: never negative


def test_the_engine_hands_a_float32_policy_float32_inputs():
    seen = {}
    inner = diagonal_sampling(SPEC)

    def act(params, state, key, contexts, mask, t):
        seen["act"] = [contexts.dtype, *(v.dtype for v in params.values())]
        return inner.act(params, state, key, contexts, mask, t)

    def update(params, state, key, contexts, arm, feedback, t):
        seen["update"] = [contexts.dtype, feedback.reward.dtype]
        return inner.update(params, state, key, contexts, arm, feedback, t)

    nb.simulate(nb.make_env("linear", d=D, k=K), inner._replace(act=act, update=update), PARAMS, 5, range(2))
    assert seen == {"act": [jnp.float32] * 4, "update": [jnp.float32] * 2}


def test_float32_policy_arithmetic_has_no_float64_operation():
    policy = diagonal_sampling(SPEC)
    params = {k: jnp.float32(v) for k, v in PARAMS.items()}
    key = jax.random.key(0)
    contexts, mask = jnp.ones((K, D), jnp.float32), jnp.ones(K, bool)
    state = policy.init(params, key)
    t = jnp.int32(1)
    programs = [
        jax.make_jaxpr(policy.init)(params, key),
        jax.make_jaxpr(policy.act)(params, state, key, contexts, mask, t),
        jax.make_jaxpr(policy.update)(params, state, key, contexts, jnp.int32(0), Feedback(jnp.float32(1.0)), t),
    ]
    for program in programs:
        assert not list(_float64_operations(program.jaxpr)), str(program)


def _float64_operations(jaxpr):
    """The primitives in ``jaxpr`` (and the programs nested in it) that produce a float64 value (a float64
    literal handed to a library routine, such as ``jax.random.uniform``'s default bounds, is no arithmetic)."""
    for eqn in jaxpr.eqns:
        if any(getattr(v.aval, "dtype", None) == jnp.float64 for v in eqn.outvars):
            yield eqn.primitive.name
        for value in eqn.params.values():
            for sub in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _float64_operations(inner)
