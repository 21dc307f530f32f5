"""The random numbers of a policy's rounds, drawn from the simulator's round keys a block at a time."""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.round import round_key

BLOCK = 256
"""Rounds whose draws one jitted call computes."""
_KEPT = 4
"""Blocks kept (rewards of older rounds may still arrive; a block evicted is recomputed if needed)."""


@functools.lru_cache(maxsize=64)
def _block_program(draws: Callable) -> Callable:
    """``draws`` (one round key → a tuple of arrays) for each round of block ``index``, as one jitted program."""

    def block(stream, index):
        ts = index * BLOCK + jnp.arange(BLOCK, dtype=jnp.int32)
        return jax.vmap(lambda t: draws(round_key(stream, t)))(ts)

    return jax.jit(block)


class DrawBlocks:
    """``blocks(t)``: the tuple ``draws(round_key(stream, t))`` as NumPy values, computed for the ``BLOCK``
    rounds around ``t`` by one jitted call and kept for later rounds of that block.

    Args:
      draws: a function of one round key returning a tuple of arrays (module-level, so its compiled
        program is shared by every agent).
      stream: the key stream the round keys derive from (e.g. ``seed_keys(seed).policy_act``).
    """

    def __init__(self, draws: Callable, stream: jax.Array):
        self._program, self._stream = _block_program(draws), stream
        self._blocks: dict[int, list[tuple]] = {}

    def __call__(self, t: int) -> tuple:
        index, row = divmod(t, BLOCK)
        block = self._blocks.get(index)
        if block is None:
            if len(self._blocks) >= _KEPT:
                del self._blocks[next(iter(self._blocks))]
            arrays = [np.asarray(a) for a in self._program(self._stream, np.int32(index))]
            block = self._blocks[index] = list(zip(*arrays))  # each round's tuple built once per block
        return block[row]
