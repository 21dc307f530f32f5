"""Encodings of a :class:`~nlbandit.data.table.Dataset` into bandit contexts.

* Bae & Lee (spec 001 §4.3): every numeric column min–max scaled to [−1, 1] over the data set
  (:func:`minmax_columns`; a constant column becomes 0), every categorical column as integer codes
  (:func:`category_codes`) whose levels an environment maps to values drawn in [−1, 1] once per run;
* Sun, Wang & Xu (spec 003 §4.8): categorical columns ordinal-encoded, every row L2-normalised
  (:func:`ordinal_l2`);
* both: K arms from one sample by the disjoint encoding x⁽ᵏ⁾ = (0, …, x, …, 0) ∈ ℝ^{dK}, x in block k
  (:func:`disjoint`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.data.table import MISSING, Dataset


def minmax(values: np.ndarray) -> np.ndarray:
    """2(v − min)/(max − min) − 1 of a numeric column, in [−1, 1]; 0 for a constant column."""
    lo, hi = float(values.min()), float(values.max())
    if hi == lo:
        return np.zeros_like(values, dtype=np.float64)
    return 2.0 * (values - lo) / (hi - lo) - 1.0


def minmax_columns(data: Dataset) -> np.ndarray:
    """(n, d_numeric): the numeric columns, each min–max scaled to [−1, 1] (spec 001 §4.3 [REC])."""
    cols = [minmax(c) for c, cat in zip(data.columns, data.categorical) if not cat]
    return np.stack(cols, axis=1) if cols else np.zeros((data.n, 0))


def category_codes(data: Dataset) -> tuple[np.ndarray, tuple[int, ...]]:
    """((n, d_categorical) int32 codes, the number of levels of each column): level i of a column is the
    i-th of its sorted category texts."""
    codes, levels = [], []
    for c, cat in zip(data.columns, data.categorical):
        if cat:
            names, code = np.unique(c.astype(str), return_inverse=True)
            codes.append(code.astype(np.int32))
            levels.append(int(names.size))
    return (np.stack(codes, axis=1) if codes else np.zeros((data.n, 0), np.int32)), tuple(levels)


def ordinal_l2(data: Dataset) -> np.ndarray:
    """(n, d): numeric columns as they are, categorical ones as their level codes (a missing cell, '?' or
    empty, −1: the reference code's NaN → −1), every row scaled to unit L2 norm (a zero row stays 0) — spec 003
    §4.8's conversion, columns in the data set's order."""
    cols = []
    for c, cat in zip(data.columns, data.categorical):
        if cat:
            present = ~np.isin(c, MISSING)
            names = np.unique(c[present].astype(str))
            c = np.where(present, np.searchsorted(names, c.astype(str)), -1).astype(np.float64)
        cols.append(c)
    x = np.stack(cols, axis=1)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


def disjoint(x: jax.Array, k: int) -> jax.Array:
    """(k, k·d): arm j's context is x in block j and zeros elsewhere (the disjoint encoding)."""
    return jnp.kron(jnp.eye(k, dtype=x.dtype), x[None, :])


def pool_image(data: Dataset, factor: int) -> np.ndarray:
    """(n, (h/f)·(w/f)): an image data set's pixels averaged over f × f blocks (28 × 28 → 14 × 14 at f = 2,
    spec 001 §4.3 [ERRATA] mnist); a side that f does not divide loses its last h mod f rows (columns)."""
    h, w = data.image
    x = np.stack(data.columns, axis=1).reshape(data.n, h, w)
    hh, ww = h // factor, w // factor
    x = x[:, :hh * factor, :ww * factor].reshape(data.n, hh, factor, ww, factor)
    return x.mean(axis=(2, 4)).reshape(data.n, hh * ww)


def bandit_table(data: Dataset, encoding: str, downsample: int = 1) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """A data set's rows as bandit features, before the disjoint encoding: ``(numeric (n, d_num) float64,
    codes (n, d_cat) int32, levels)``.

    * ``encoding = "minmax"`` (Bae & Lee, spec 001 §4.3): an image first averaged over ``downsample`` ×
      ``downsample`` blocks (:func:`pool_image`), every numeric column min–max scaled to [−1, 1], the
      categorical columns as level codes (an environment draws each level's value in [−1, 1] per run);
    * ``encoding = "ordinal-l2"`` (Sun, Wang & Xu, spec 003 §4.8): :func:`ordinal_l2`, no codes left.
    """
    if encoding == "ordinal-l2":
        return ordinal_l2(data), np.zeros((data.n, 0), np.int32), ()
    if data.image is not None and downsample > 1:
        pixels = pool_image(data, downsample)
        numeric = np.stack([minmax(c) for c in pixels.T], axis=1)
    else:
        numeric = minmax_columns(data)
    codes, levels = category_codes(data)
    return numeric, codes, levels
