"""Initial exploration: the arms a policy pulls before it starts using rewards.

A warm-up is a *plan* computed once from the fixed arm set (in ``Policy.prepare``), never from rewards
(Kveton et al. 2020, Algorithm 1: "choose I_t using only past features"):

* ``none``: no warm-up.
* ``round-robin``: ``rounds`` pulls cycling over the arms in index order.
* ``basis``: ``pulls`` pulls of each of d linearly independent arms, chosen by greedy max-residual
  selection (Kveton et al. 2020 §4.5/§5.1: all algorithms start with the d basis arms, once each;
  spec 002 §2.5). The theory's ⌈C/λ_min(M)⌉ pulls per arm come from
  :func:`nlbandit.theory.initial_exploration_length`.
* ``g-optimal``: the G-optimal design ζ on the arms and the rounding of Sun, Wang & Xu (2025)
  Algorithms 2–3 for ``rounds`` = τ pulls (the real length Σ N_i can exceed τ; spec 003 §2.3.3), in a
  random order (spec 003 §2.3 [REC]: shuffled).

The plan lives in a fixed-size buffer whose size is a static upper bound of the plan length; round t
(1-based) of the warm-up pulls ``plan[t − 1]`` while t ≤ ``length``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.models.design import basis_arms, g_optimal_design, round_design, warmup_length_bounds

WARMUPS = ("none", "round-robin", "basis", "g-optimal")


class Warmup(NamedTuple):
    """A warm-up plan: ``plan`` (L,) arm indices, of which the first ``length`` are pulled in order."""

    plan: jax.Array
    length: jax.Array


def warmup_capacity(kind: str, d: int, k: int, rounds: int, pulls: int, rounding_a: float = 0.5) -> int:
    """Static upper bound on the plan length (the buffer size), at least 1."""
    if kind == "round-robin":
        return max(rounds, 1)
    if kind == "basis":
        return max(min(d, k) * pulls, 1)
    if kind == "g-optimal":
        return max(warmup_length_bounds(rounds, d, k, rounding_a)[1], 1)
    return 1


def warmup_min_length(kind: str, d: int, k: int, rounds: int, pulls: int, rounding_a: float = 0.5) -> int:
    """Static lower bound on the plan length (to reject warm-ups longer than the horizon)."""
    if kind == "g-optimal":
        return warmup_length_bounds(rounds, d, k, rounding_a)[0]
    return 0 if kind == "none" else warmup_capacity(kind, d, k, rounds, pulls)


def empty_warmup(capacity: int) -> Warmup:
    """The plan before ``prepare`` (and of ``kind="none"``): nothing to pull."""
    return Warmup(jnp.zeros((capacity,), jnp.int32), jnp.zeros((), jnp.int32))


def plan_warmup(kind: str, arms: jax.Array, key: jax.Array, capacity: int, rounds: int, pulls: int,
                design: str = "multiplicative", rounding_a: float = 0.5) -> Warmup:
    """The warm-up plan of ``kind`` (module docstring) on the arm set ``arms`` (K, d)."""
    k, d = arms.shape
    if kind == "none":
        return empty_warmup(capacity)
    if kind == "round-robin":
        return Warmup(jnp.arange(capacity, dtype=jnp.int32) % k, jnp.asarray(rounds, jnp.int32))
    if kind == "basis":
        basis = basis_arms(arms, min(d, k))
        return Warmup(jnp.tile(basis, pulls)[:capacity].astype(jnp.int32), jnp.asarray(capacity, jnp.int32))
    counts = round_design(g_optimal_design(arms, method=design).weights, rounds, d, a=rounding_a)
    plan = jnp.repeat(jnp.arange(k, dtype=jnp.int32), counts, total_repeat_length=capacity)
    length = jnp.sum(counts).astype(jnp.int32)
    # Shuffle the first `length` entries: sort by random keys, with the unused tail kept last.
    order = jnp.argsort(jnp.where(jnp.arange(capacity) < length, jax.random.uniform(key, (capacity,)), 2.0))
    return Warmup(plan[order], length)


def warmup_arm(warmup: Warmup, t: jax.Array, chosen: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(arm, planned): the arm of round ``t`` (1-based), the plan's while the warm-up lasts (``planned``
    True), else ``chosen``. A planned arm that is not on offer this round (``mask``) is replaced by
    ``chosen``."""
    arm = warmup.plan[jnp.minimum(t - 1, warmup.plan.shape[0] - 1)]
    planned = (t <= warmup.length) & mask[arm]
    return jnp.where(planned, arm, chosen).astype(jnp.int32), planned
