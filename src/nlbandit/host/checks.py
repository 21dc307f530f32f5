"""The agent's per-round checks of its inputs and state, compiled by numba: each is one pass over the array
without temporaries (their NumPy spellings cost two to four ufunc calls and an error-state switch each)."""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True)
def all_finite(a) -> bool:
    """Whether every element of the floating array ``a`` (any shape) is finite."""
    for v in a.flat:
        if not math.isfinite(v):
            return False
    return True


@njit(cache=True)
def within(a, limit: float) -> bool:
    """Whether every element of ``a`` has magnitude at most ``limit`` (False for NaN)."""
    for v in a.flat:
        if not abs(v) <= limit:
            return False
    return True


@njit(cache=True)
def equal(a, b) -> bool:
    """Whether the arrays ``a`` and ``b`` of the same shape are equal element by element."""
    for u, v in zip(a.flat, b.flat):
        if u != v:
            return False
    return True
