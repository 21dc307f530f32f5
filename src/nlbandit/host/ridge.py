"""Host mirror of :mod:`nlbandit.models.ridge` (float64 Sherman–Morrison ridge state, same pytree; the rank-one
update compiled by numba)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from nlbandit.models.ridge import Ridge


@njit(cache=True)
def gram_update(v_inv, x):
    """Sherman–Morrison: (V + xxᵀ)⁻¹ from V⁻¹ (symmetric), and log(1 + xᵀV⁻¹x)."""
    vx = v_inv @ x
    q = x @ vx
    scale = 1.0 / (1.0 + q)
    out = np.empty_like(v_inv)
    for i in range(vx.shape[0]):
        for j in range(vx.shape[0]):
            out[i, j] = v_inv[i, j] - vx[i] * vx[j] * scale
    return out, math.log1p(q)


def ridge_update(state: Ridge, x: np.ndarray, y) -> Ridge:
    """Add one observation: features ``x`` (d,), response ``y`` (scalar, or (m,) for a matrix ``b``)."""
    v_inv, dlogdet = gram_update(state.v_inv, x)
    b = state.b + (x * y if state.b.ndim == 1 else y[:, None] * x)
    return Ridge(v_inv, b, state.logdet + dlogdet)

