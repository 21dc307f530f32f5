"""Standard normal draws for the host rounds' probability estimates (:mod:`nlbandit.host.propensity`), compiled.

A round's estimate reads a few hundred normals (d × 32 antithetic pairs); NumPy's generator takes ~7 ns for each
on this project's CPU (docs/performance.md), as long as the rest of a GLM-FPL round's estimate. Here they come
from the ziggurat method (Marsaglia & Tsang 2000, *J. Stat. Softw.* 5(8), in Doornik's 2005 formulation: 128
layers of equal area, the base layer's overhang and the tail beyond R sampled exactly by Marsaglia's 1964 tail
method), driven by a SplitMix64 stream (Steele, Lea & Flood 2014, the generator of Java's SplittableRandom): the
stream of round t starts from a hash of (seed, stream, t), so the draws of a round are the same whenever they are
asked for, after a restart included, and no generator state is kept between rounds. A draw's layer and abscissa
come from disjoint bits of one 64-bit word (the low 7 and the high 53).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LAYERS = 128
_R = 3.442619855899
"""Where the tail begins: the right end of the base layer's rectangle."""
_AREA = 9.91256303526217e-3
"""The area of each layer (and of the base layer with its tail) under exp(−x²/2)."""
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_UNIT = 1.0 / 9007199254740992.0  # 2⁻⁵³


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x, ratio, f): the layers' right ends x_0 > x_1 = R > … > x_127 > x_128 = 0 (x_0 = area / f(R), the base
    layer's pseudo-width, its tail included), x_{i+1} / x_i (below it a point of layer i is under the curve for
    sure), and f(x_i) = exp(−x_i²/2)."""
    x = np.zeros(_LAYERS + 1)
    f = math.exp(-0.5 * _R * _R)
    x[0], x[1] = _AREA / f, _R
    for i in range(2, _LAYERS):
        x[i] = math.sqrt(-2.0 * math.log(_AREA / x[i - 1] + f))
        f = math.exp(-0.5 * x[i] * x[i])
    return x, x[1:] / x[:-1], np.exp(-0.5 * x * x)


_X, _RATIO, _F = _tables()


@njit(cache=True)
def _mix(z):
    """SplitMix64's output function of a 64-bit word."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def _uniform(word) -> float:
    """A uniform on (0, 1] from the top 53 bits of ``word``."""
    return ((word >> np.uint64(11)) + np.uint64(1)) * _UNIT


@njit(cache=True)
def standard_normals(seed: int, stream: int, t: int, rows: int, columns: int):
    """A (rows, columns) array of independent standard normals, a function of (``seed``, ``stream``, ``t``)
    alone (non-negative integers below 2⁶³; module docstring)."""
    state = _mix(_mix(_mix(np.uint64(seed) + _GOLDEN) ^ np.uint64(stream)) ^ np.uint64(t))
    out = np.empty(rows * columns)
    for n in range(out.size):
        while True:
            state += _GOLDEN
            word = _mix(state)
            layer = np.int64(word & np.uint64(_LAYERS - 1))
            u = 2.0 * ((word >> np.uint64(11)) * _UNIT) - 1.0  # uniform on [−1, 1)
            if abs(u) < _RATIO[layer]:  # inside the layer's part under the curve (~99% of draws)
                out[n] = u * _X[layer]
                break
            if layer == 0:  # the tail beyond R: R + E/R, E ~ Exp(1), accepted with probability exp(−E²/(2R²))
                while True:
                    state += _GOLDEN
                    e = -math.log(_uniform(_mix(state))) / _R
                    state += _GOLDEN
                    if -2.0 * math.log(_uniform(_mix(state))) >= e * e:
                        break
                out[n] = _R + e if u > 0 else -(_R + e)
                break
            z = u * _X[layer]  # the layer's overhang: accept below the curve
            state += _GOLDEN
            if _F[layer] + _uniform(_mix(state)) * (_F[layer + 1] - _F[layer]) < math.exp(-0.5 * z * z):
                out[n] = z
                break
    return out.reshape(rows, columns)


__all__ = ["standard_normals"]
