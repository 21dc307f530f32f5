"""One round of the bandit protocol, defined once: its key schedule, its dtype casts, and observe → act →
pull → update.

Every consumer composes these functions: the engine (:mod:`nlbandit.core.simulate`), phase timing
(:mod:`nlbandit.core.phases`), logged-data replay (:mod:`nlbandit.core.replay`), the online agent
(:mod:`nlbandit.agent`) and instance export (:mod:`nlbandit.instances`); tuning and revalidation reach them
through the loops. So a seed's round ``t`` draws the same random numbers, and the policy sees the same
values, whichever of them plays it.

The key schedule (:mod:`nlbandit.core.keys` for the streams of a seed): round ``t``'s environment draws
its arms from ``fold_in(env_observe, t)`` and its reward from ``fold_in(env_pull, t)``; the policy acts
with ``fold_in(policy_act, t)`` and learns with ``fold_in(policy_update, t)``; its state starts from
``init(policy_init)`` and, for a policy that prepares on the arm set, ``prepare`` with
``fold_in(policy_init, 1)`` and round 1's arms. The casts: the policy sees the contexts and the feedback in
its own dtype (:attr:`~nlbandit.core.types.PolicyMeta.dtype`); the environment's pull and the regret use the
contexts as the environment made them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.keys import SeedKeys
from nlbandit.core.types import Env, Feedback, Policy, to_dtype


def round_key(stream: jax.Array, t: Any) -> jax.Array:
    """The key of round ``t`` in a stream: ``fold_in(stream, t)``, so the draws of round ``t`` do not depend on
    how the horizon is cut into chunks (resumed runs are bit-identical to uninterrupted ones), and the host
    rounds' draw blocks (:mod:`nlbandit.host.draws`) and the agent's redraws derive theirs from it."""
    return jax.random.fold_in(stream, t)


class Outcome(NamedTuple):
    """What one simulated round produced: its pseudo-regret, the realised reward, the chosen arm and the
    policy's ``info``."""

    regret: jax.Array
    reward: jax.Array
    arm: jax.Array
    info: Any


def start(policy: Policy, params: Any, stream: jax.Array, arms: jax.Array, mask: jax.Array) -> Any:
    """The policy's state before round 1: ``init`` from ``stream`` (a seed's ``policy_init``), then
    :func:`prepare` on round 1's arms (``arms``, ``mask``)."""
    return prepare(policy, params, policy.init(params, stream), stream, arms, mask)


def prepare(policy: Policy, params: Any, state: Any, stream: jax.Array, arms: jax.Array, mask: jax.Array) -> Any:
    """``state`` prepared on round 1's arms (the arm set of every round when the environment's arms are
    fixed) with round 1's key of ``stream`` (a seed's ``policy_init``), for a policy that prepares; ``state``
    itself for the others."""
    if policy.prepare is None:
        return state
    return policy.prepare(params, state, round_key(stream, 1), to_dtype(arms, policy.meta.dtype), mask)


def pass_order(keys: SeedKeys, passes: int, n: int) -> jax.Array:
    """(passes, n): the order in which logged-data replay reads its ``n`` events in each pass, a permutation
    drawn from ``fold_in(env_observe, p)`` for pass ``p`` (the replay's counterpart of :func:`observe`)."""
    return jax.vmap(lambda p: jax.random.permutation(round_key(keys.env_observe, p), n))(jnp.arange(passes))


def observe(env: Env, env_state: Any, keys: SeedKeys, t: Any) -> tuple[jax.Array, jax.Array]:
    """The arms on offer in round ``t`` (contexts as the environment made them, and the mask)."""
    return env.observe(env_state, round_key(keys.env_observe, t), t)


def act(policy: Policy, params: Any, state: Any, stream: jax.Array, contexts: jax.Array, mask: jax.Array, t: Any,
        draw: Any = None) -> tuple[jax.Array, Any]:
    """The policy's choice in round ``t`` (``arm, info``) from ``stream`` (a seed's ``policy_act``): the key of
    round ``t``, or of ``draw`` where the loop numbers its draws otherwise (replay draws one per logged event
    read, accepted or not); the contexts cast to the policy's dtype."""
    key = round_key(stream, t if draw is None else draw)
    return policy.act(params, state, key, to_dtype(contexts, policy.meta.dtype), mask, t)


def pull(env: Env, env_state: Any, keys: SeedKeys, t: Any, contexts: jax.Array, arm: jax.Array) -> Feedback:
    """The environment's feedback on ``arm`` in round ``t`` (in the environment's dtype)."""
    return env.pull(env_state, round_key(keys.env_pull, t), t, contexts, arm)


def update(policy: Policy, params: Any, state: Any, stream: jax.Array, contexts: jax.Array, arm: jax.Array,
           feedback: Feedback, t: Any) -> Any:
    """The policy's state after learning ``feedback`` on ``arm`` in round ``t``, from ``stream`` (a seed's
    ``policy_update``); contexts and feedback cast to the policy's dtype."""
    return policy.update(params, state, round_key(stream, t), to_dtype(contexts, policy.meta.dtype), arm,
                         to_dtype(feedback, policy.meta.dtype), t)


def play(env: Env, policy: Policy, params: Any, keys: SeedKeys, env_state: Any, state: Any,
         t: Any) -> tuple[Any, Outcome]:
    """Round ``t`` of one seed: observe → act → pull → update; the state after it and its :class:`Outcome`
    (the regret: the best available arm's mean minus the chosen one's)."""
    contexts, mask = observe(env, env_state, keys, t)
    means = env.mean(env_state, contexts)
    arm, info = act(policy, params, state, keys.policy_act, contexts, mask, t)
    feedback = pull(env, env_state, keys, t, contexts, arm)
    state = update(policy, params, state, keys.policy_update, contexts, arm, feedback, t)
    regret = jnp.max(jnp.where(mask, means, -jnp.inf)) - means[arm]
    return state, Outcome(regret, feedback.reward, arm, info)
