"""Logged-data replay (Li, Chu, Langford & Wang 2011, Algorithm 1): a policy evaluated offline on events a
logging policy chose, compiled and vectorised over seeds like :func:`~nlbandit.core.simulate.simulate`.

A logged data set (:class:`Logged`) holds N events, each with the K arm contexts that were on offer, the
arm the logging policy played and the reward it received. A run streams the events in a random order (a
fresh permutation of all N per pass, from the seed) and shows each event's arms to the policy:

* when the policy picks the logged arm, the event is **accepted**: the policy observes its reward, the
  round counter t advances and the policy updates (as a bandit round t);
* otherwise the event is skipped: nothing is updated, not even the counter (Li et al.'s rejection rule;
  spec 001 §4.5).

The run stops at ``horizon`` accepted events, or when ``passes`` passes over the data are spent (a pass
re-shuffles the events; the sample of spec 001 §4.5 is cycled this way, as its [REC] allows), whichever
comes first. When the logging policy chose uniformly among the K arms, independently of everything else,
the accepted events are distributed as rounds of the policy against the true environment (Li et al.'s
Theorem 1), so the cumulative reward per accepted event estimates the policy's online reward.

Every event costs an ``act``, and an accepted one an ``update``; with a uniform logging policy over K arms
about K events are read per accepted one. Seeds (and grid points) run one after the other inside one
compiled program (``lax.map``), not side by side: each run accepts its own events, so a vectorised batch
would have to compute every lane's update (and a neural policy's training) at every event.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.keys import seed_keys
from nlbandit.core.round import act, pass_order, start, update
from nlbandit.core.params import as_params
from nlbandit.core.types import Feedback, Policy, to_dtype

NUMERICS = 1
"""Version of the numbers the replay engine computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


class Logged(NamedTuple):
    """A logged bandit data set: ``contexts`` (N, K, d) the arms on offer at each event, ``logged`` (N,) the
    arm the logging policy played (an index into the event's K), ``reward`` (N,) what it received."""

    contexts: jax.Array
    logged: jax.Array
    reward: jax.Array


@dataclass
class ReplayResult:
    """Result of :func:`replay`. Batch shape ``B`` is ``(S,)`` or ``(G, S)`` for a grid.

    Attributes:
      accepted: B, the number of accepted events (``horizon`` unless the passes ran out).
      cum_reward: B + (horizon,), the cumulative reward after each accepted event (the last value carried
        forward past ``accepted``).
      events: B + (horizon,), the events read up to and including each accepted one.
      arms: B + (horizon,), the arm of each accepted event.
      compile_s, run_s: seconds spent compiling and running.
    """

    accepted: np.ndarray
    cum_reward: np.ndarray
    events: np.ndarray
    arms: np.ndarray
    compile_s: float
    run_s: float


def _one_seed(data: Logged, policy: Policy, horizon: int, passes: int):
    """(params, seed) -> (accepted, cum_reward (T,), events (T,), arms (T,)) for one seed."""
    n, k = data.contexts.shape[0], data.contexts.shape[1]
    mask = jnp.ones((k,), bool)

    def run(params, seed):
        params = to_dtype(params, policy.meta.dtype)
        keys = seed_keys(seed)
        orders = pass_order(keys, passes, n)
        state = start(policy, params, keys.policy_init, data.contexts[orders[0, 0]], mask)
        zeros = jnp.zeros((horizon,))

        def more(carry):
            step, t = carry[1], carry[2]
            return (t < horizon) & (step < passes * n)

        def body(carry):
            state, step, t, total, cum, events, arms = carry
            event = orders[step // n, step % n]
            contexts = data.contexts[event]
            arm, _ = act(policy, params, state, keys.policy_act, contexts, mask, t + 1, draw=step)
            accept = arm == data.logged[event]
            reward = data.reward[event]
            state = jax.lax.cond(accept, lambda: update(policy, params, state, keys.policy_update, contexts, arm,
                                                        Feedback(reward), t + 1), lambda: state)
            total = total + jnp.where(accept, reward, 0.0)
            at = jnp.minimum(t, horizon - 1)
            cum = cum.at[at].set(jnp.where(accept, total, cum[at]))
            events = events.at[at].set(jnp.where(accept, step + 1, events[at]))
            arms = arms.at[at].set(jnp.where(accept, arm, arms[at]).astype(jnp.int32))
            return state, step + 1, t + accept.astype(jnp.int32), total, cum, events, arms

        carry = (state, jnp.int32(0), jnp.int32(0), jnp.float64(0.0), zeros, jnp.zeros((horizon,), jnp.int32),
                 jnp.zeros((horizon,), jnp.int32))
        _, _, t, total, cum, events, arms = jax.lax.while_loop(more, body, carry)
        filled = jnp.arange(horizon) < t  # carry the total forward past the last accepted event
        return t, jnp.where(filled, cum, total), jnp.where(filled, events, jnp.max(events)), arms

    return run


def replay(data: Logged, policy: Policy, params: Any, horizon: int, seeds, *, grid: bool = False,
           passes: int = 10) -> ReplayResult:
    """Replay ``policy`` on the logged ``data`` until ``horizon`` accepted events (module docstring), for every
    seed (and grid point: every leaf of ``params`` with a leading axis G) at once.

    Raises:
      ValueError: malformed data (shapes, a logged arm outside 0..K−1, non-finite values), a horizon or
        passes below 1, or a policy built for other sizes.
    """
    contexts = np.asarray(data.contexts)
    logged, reward = np.asarray(data.logged), np.asarray(data.reward)
    if contexts.ndim != 3 or logged.shape != contexts.shape[:1] or reward.shape != contexts.shape[:1]:
        raise ValueError(f"data: contexts must be (N, K, d) and logged, reward (N,), got {contexts.shape}, "
                         f"{logged.shape}, {reward.shape}")
    n, k, d = contexts.shape
    if not np.issubdtype(logged.dtype, np.integer) or logged.min() < 0 or logged.max() >= k:
        raise ValueError(f"data: logged arms must be integers in 0..{k - 1}")
    if not (np.all(np.isfinite(contexts)) and np.all(np.isfinite(reward))):
        raise ValueError("data: contexts and rewards must be finite")
    if not (isinstance(horizon, int) and horizon >= 1 and isinstance(passes, int) and passes >= 1):
        raise ValueError(f"horizon and passes must be integers >= 1, got {horizon!r}, {passes!r}")
    spec = policy.meta.spec
    if spec is not None and (spec.d, spec.k) != (d, k):
        raise ValueError(f"policy {policy.meta.name!r} was built for d = {spec.d}, K = {spec.k}; the data has d = {d}, "
                         f"K = {k}")
    params = as_params(policy.meta.params_type, params)
    device = Logged(jnp.asarray(contexts, jnp.float64), jnp.asarray(logged, jnp.int32),
                    jnp.asarray(reward, jnp.float64))
    one = _one_seed(device, policy, horizon, passes)
    seeds = jnp.asarray(list(seeds), jnp.uint32)
    s = seeds.size
    g = jax.tree.leaves(params)[0].shape[0] if grid and jax.tree.leaves(params) else 1
    # every (grid point, seed) pair, grid-major, as the rows of one sequential map
    pairs = (jax.tree.map(lambda a: jnp.repeat(a, s, axis=0), params) if grid else params, jnp.tile(seeds, g))
    run = jax.jit(lambda ps: jax.lax.map(lambda p: one(*p), ps) if grid else
                  jax.lax.map(lambda seed: one(ps[0], seed), ps[1]))
    t0 = time.perf_counter()
    compiled = run.lower(pairs).compile()
    t1 = time.perf_counter()
    out = jax.block_until_ready(compiled(pairs))
    t2 = time.perf_counter()
    shape = (g, s) if grid else (s,)
    accepted, cum, events, arms = (np.asarray(a).reshape(shape + a.shape[1:]) for a in out)
    return ReplayResult(accepted, cum, events, arms, t1 - t0, t2 - t1)
