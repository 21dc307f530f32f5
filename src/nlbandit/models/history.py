"""The observation history every estimator that refits on past data shares: one fixed-size buffer.

Growing histories are fixed-size buffers with a valid count, so everything jits (ARCHITECTURE.md). Two
layouts of weighted rows (x_i, w_i, s_i) serve every estimator:

* ``history``: one row per observation, in order, in a buffer of ``history_capacity(T)`` rows (T rounded
  up to whole blocks of :data:`HISTORY_BLOCK`); w_i = 1 for the rows filled so far, 0 beyond;
* ``arms`` (a fixed arm set): one row per arm, w_k = N_k pulls and s_k = the sum of its responses, so that
  any sum over the data costs O(K) whatever t is (Kveton et al. 2020 §3.3).

Sums over a history run block by block up to the filled count (:func:`blockwise_sum`), so their cost
grows with t rather than with the buffer's capacity, and the perturbed-history baselines draw one fresh
perturbation per stored observation the same way (:func:`history_noise`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from nlbandit.core.keys import normal

HISTORY_BLOCK = 128
"""Rows per block of a history buffer (its capacity is a multiple of this)."""


class Rows(NamedTuple):
    """Weighted rows of the data.

    Attributes:
      x: (C, d) the arm features (``arms``) or the observed features in order (``history``).
      n: (C,) pull counts (``arms``), or 1 for the filled history rows and 0 beyond.
      y: (C,) or (C, m) response sums per row, one column per perturbed copy (ensembles).
      count: number of observations so far.
    """

    x: jax.Array
    n: jax.Array
    y: jax.Array
    count: jax.Array


def history_capacity(horizon: int) -> int:
    """Rows of a history buffer for ``horizon`` observations: the horizon rounded up to whole blocks."""
    return -(-horizon // HISTORY_BLOCK) * HISTORY_BLOCK


def empty_rows(capacity: int, d: int, targets: int | None = None, dtype=None) -> Rows:
    """No data yet: ``capacity`` zero rows in ℝ^d with scalar responses, or ``targets`` columns of them, in
    ``dtype`` (default: JAX's default float)."""
    y_shape = (capacity,) if targets is None else (capacity, targets)
    return Rows(jnp.zeros((capacity, d), dtype), jnp.zeros((capacity,), dtype), jnp.zeros(y_shape, dtype),
                jnp.zeros((), jnp.int32))


def add_row(rows: Rows, x: jax.Array, arm: jax.Array, y: jax.Array, per_arm: bool) -> Rows:
    """Record one observation of arm ``arm`` with features ``x`` and response ``y`` (a scalar, or (m,)):
    add to the arm's count and sum (``per_arm``), or append a row."""
    if per_arm:
        return Rows(rows.x, rows.n.at[arm].add(1.0), rows.y.at[arm].add(y), rows.count + 1)
    slot = rows.count
    return Rows(rows.x.at[slot].set(x.astype(rows.x.dtype)), rows.n.at[slot].set(1.0), rows.y.at[slot].set(y),
                rows.count + 1)


def blockwise_sum(fn, x, w, s, active):
    """Σ_i of ``fn(x, w, s)`` over the rows: all at once when ``active`` is None, else over the first
    ⌈n/B⌉ blocks of B rows for ``active = (n, B)`` (a history buffer filled up to n), so the cost grows
    with n rather than with the buffer's capacity. The buffer length must be a multiple of B."""
    if active is None:
        return fn(x, w, s)
    n, block = active

    def add(i, acc):
        rows = [jax.lax.dynamic_slice_in_dim(a, i * block, block) for a in (x, w, s)]
        return jax.tree.map(jnp.add, acc, fn(*rows))

    zero = jax.tree.map(jnp.zeros_like, jax.eval_shape(fn, x[:block], w[:block], s[:block]))
    return jax.lax.fori_loop(0, (n + block - 1) // block, add, zero)


def history_noise(key: jax.Array, count: jax.Array, capacity: int, dtype: str = "float64") -> jax.Array:
    """(capacity,) with fresh N(0, 1) draws in the first ``count`` rows and zeros beyond, drawn block by
    block up to ``count`` (so the sampling cost grows with t): the perturbations that perturbed-history
    exploration re-draws for every stored observation in every round (Kveton et al. 2020a; spec 003 §2.5),
    in ``dtype``."""

    def fill(i, z):
        block = normal(jax.random.fold_in(key, i), (HISTORY_BLOCK,), dtype)
        live = i * HISTORY_BLOCK + jnp.arange(HISTORY_BLOCK) < count
        return jax.lax.dynamic_update_slice_in_dim(z, jnp.where(live, block, 0.0), i * HISTORY_BLOCK, 0)

    return jax.lax.fori_loop(0, (count + HISTORY_BLOCK - 1) // HISTORY_BLOCK, fill, jnp.zeros((capacity,), dtype))
