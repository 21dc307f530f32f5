"""Disjoint (block one-hot) arm features without their zeros.

The disjoint encoding of a K-class data set (Bae & Lee 2025 App. J, spec 001 §4.3; Sun, Wang & Xu 2025
§7.3, spec 003 §4.8) shows arm a the sample x ∈ ℝ^{d₀} in block a of a d₀K vector and zeros elsewhere
(:func:`nlbandit.data.encode.disjoint`). A model that reads its input through a first linear layer W₁ —
the MLP of :mod:`nlbandit.models.mlp`, and the linear model as its depth-1 case — sees only block a's
columns: W₁x⁽ᵃ⁾ = W₁[:, a]·x, with W₁[:, a] ∈ ℝ^{N×d₀}. So, with nothing of size d₀K per arm:

* an arm's output costs N·d₀ instead of N·d₀K (:func:`apply`), and its gradient features g = ∇_θ f are
  zero outside block a of W₁: the pair (G₁ ∈ ℝ^{N×d₀}, g_rest) of :func:`grads` holds g whole, and a
  diagonal design's widths ‖g‖_{D⁻¹} and its update D + w·g⊙g touch only block a (:func:`widths`,
  :func:`accumulate`);
* a history keeps (x, a): d₀ + 1 numbers per observation instead of d₀K;
* full-batch training groups the history by block once per call (:func:`layout`: tiles of B rows, each
  holding one block's observations, zero-padded), so that a gradient step is ⌈n/B⌉ + K tile products of
  N·d₀·B each instead of ⌈n/B⌉ of N·d₀K·B (:func:`train`: close to K times fewer multiply-adds once
  n ≫ K·B; ``benchmarks/disjoint.py`` times whole policies).

Every result equals the dense computation up to the order of floating-point sums (tests/test_disjoint.py).
With biases (``MLP.bias``) the first layer is W₁[:, a]·x + b₁: b₁ is shared by every arm and, θ keeping W₁ as
its first array (:mod:`nlbandit.models.mlp`), lies in g_rest with the deeper layers' parameters.
Input duplication ([x; x]/√2: two blocks per arm) is not supported; :func:`problem` says why a
configuration cannot use the compact form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.types import Env
from nlbandit.models.history import HISTORY_BLOCK
from nlbandit.models import mlp_train
from nlbandit.models.mlp import MLP, affine, flatten, layers, mlp_apply, mlp_grads, output_scale, unflatten
from nlbandit.models.mlp_train import Training, data_gradients
from nlbandit.models.ridge import diagonal_widths

FEATURES = ("dense", "disjoint")
"""How a policy reads the arms' features: as given, or in the compact disjoint form of this module."""


def problem(env: Env, where: str) -> str | None:
    """A one-line reason why ``env``'s arms are not disjoint-encoded (arm a's features zero outside block a
    of K = ``env.spec.k`` blocks), judged on the first round of one instance; None when they are, or when
    ``env`` has no rounds to judge by (known by its sizes only, :attr:`~nlbandit.core.types.Env.simulable`)."""
    d, k = env.spec.d, env.spec.k
    if d % k:
        return (f"{where}: field 'features' = 'disjoint' needs d = d₀·K; env '{env.name}' has d = {d}, K = {k} "
                "(use features = 'dense')")
    if not env.simulable:
        return None
    key = jax.random.PRNGKey(0)
    contexts, _ = env.observe(env.reset(key), key, jnp.asarray(1, jnp.int32))
    x = np.asarray(contexts).reshape(k, k, d // k)
    off = np.abs(x).sum(axis=2) * (1 - np.eye(k))
    if off.any():
        arm, block = np.argwhere(off)[0]
        return (f"{where}: field 'features' = 'disjoint' needs each arm's features to be zero outside its own "
                f"block (the disjoint encoding of the 'classification' env); env '{env.name}' shows arm {arm} "
                f"with non-zeros in block {block} (use features = 'dense')")
    return None


def compact(contexts: jax.Array, k: int) -> jax.Array:
    """The samples (K, d₀) behind disjoint-encoded ``contexts`` (K, d₀K): block a of arm a."""
    d0 = contexts.shape[-1] // k
    arms = jnp.arange(k)
    return contexts.reshape(k, k, d0)[arms, arms]


def _first(arch: MLP, k: int, theta: jax.Array) -> tuple[jax.Array, list[jax.Array]]:
    """(W₁ as (N₁, K, d₀), θ's other parameter arrays: b₁ with biases, then the deeper layers') of the flat
    ``theta``."""
    params = unflatten(arch, theta)
    rows, cols = arch.shapes()[0]
    return params[0].reshape(rows, k, cols // k), params[1:]


def _tail(arch: MLP, rest: list[jax.Array], h: jax.Array) -> jax.Array:
    """The network's output from the first layer's product ``h`` = W₁x (..., N₁) and θ's parameter arrays
    after W₁ (``rest``: b₁ with biases, then the deeper layers'), as :func:`nlbandit.models.mlp.mlp_apply`
    computes it."""
    if arch.bias:
        h, rest = h + rest[0][:, 0], rest[1:]
    for w, b in layers(arch, rest):
        h = affine(jax.nn.relu(h), w, b)
    return h[..., 0] * output_scale(arch)


def apply(arch: MLP, k: int, theta: jax.Array, x: jax.Array, blocks: jax.Array) -> jax.Array:
    """f (n,) of compact rows ``x`` (n, d₀) shown in blocks ``blocks`` (n,)."""
    w1, rest = _first(arch, k, theta)
    return _tail(arch, rest, jnp.einsum("rnd,nd->nr", w1[:, blocks], x.astype(theta.dtype)))


def grads(arch: MLP, k: int, theta: jax.Array, x: jax.Array, blocks: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Gradient features of compact rows ``x`` (n, d₀) in blocks ``blocks`` (n,): (G₁ (n, N₁, d₀), the
    gradient with respect to W₁'s block of each row, zero elsewhere; g_rest (n, p − N₁d₀K), the other
    parameters': b₁ with biases, then the deeper layers')."""
    w1, rest = _first(arch, k, theta)
    shapes = arch.shapes()[1:]

    def output(w1_block, rest_flat, row):
        ws, start = [], 0
        for r, c in shapes:
            ws.append(rest_flat[start:start + r * c].reshape(r, c))
            start += r * c
        return _tail(arch, ws, w1_block @ row)

    rest_flat = flatten(rest) if rest else jnp.zeros((0,), theta.dtype)
    return jax.vmap(jax.grad(output, argnums=(0, 1)), in_axes=(0, None, 0))(
        jnp.moveaxis(w1[:, blocks], 1, 0), rest_flat, x.astype(theta.dtype))


def _split_vector(arch: MLP, k: int, vec: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A per-parameter vector (p,) as (its W₁ part (N₁, K, d₀), the rest)."""
    rows, cols = arch.shapes()[0]
    return vec[:rows * cols].reshape(rows, k, cols // k), vec[rows * cols:]


def widths(arch: MLP, k: int, diagonal: jax.Array, g1: jax.Array, g_rest: jax.Array,
           blocks: jax.Array) -> jax.Array:
    """‖g‖_{D⁻¹} (n,) of the compact gradients (``g1``, ``g_rest``) of rows in ``blocks`` for the diagonal
    D = diag(``diagonal``) (p,): :func:`nlbandit.models.ridge.diagonal_widths` of the dense g."""
    d1, d_rest = _split_vector(arch, k, diagonal)
    first = jnp.sum(g1 * g1 / jnp.moveaxis(d1[:, blocks], 1, 0), axis=(1, 2))
    return jnp.sqrt(first + jnp.sum(g_rest * g_rest / d_rest, axis=-1))


def accumulate(arch: MLP, k: int, vec: jax.Array, g1: jax.Array, g_rest: jax.Array, block: jax.Array,
               weight) -> jax.Array:
    """``vec`` + weight·g⊙g (p,) for one row's compact gradient (``g1`` (N₁, d₀), ``g_rest``) in
    ``block``."""
    v1, v_rest = _split_vector(arch, k, vec)
    v1 = v1.at[:, block].add(weight * g1 * g1)
    return jnp.concatenate([v1.reshape(-1), v_rest + weight * g_rest * g_rest])


class Layout(NamedTuple):
    """A history regrouped by block (:func:`layout`).

    Attributes:
      x: (P, d₀) rows, each tile of B consecutive rows holding one block's observations, zero rows after them.
      n: (P,) 1 for an observation, 0 for padding.
      s: (P,) its response.
      tile_block: (P/B,) the block of each tile.
      tiles: the number of tiles in use (the used ones come first).
    """

    x: jax.Array
    n: jax.Array
    s: jax.Array
    tile_block: jax.Array
    tiles: jax.Array


def layout(x: jax.Array, blocks: jax.Array, y: jax.Array, count: jax.Array, k: int,
           tile: int = HISTORY_BLOCK) -> Layout:
    """The first ``count`` rows of a history (``x`` (C, d₀), ``blocks`` (C,), ``y`` (C,)) grouped by block
    into tiles of ``tile`` rows (order within a block kept), padded to P = (⌈C/B⌉ + K)·B rows, enough for
    any split of the rows among the blocks."""
    capacity = x.shape[0]
    size = (-(-capacity // tile) + k) * tile
    key = jnp.where(jnp.arange(capacity) < count, blocks, k)  # unused rows last
    order = jnp.argsort(key, stable=True)
    sorted_key = key[order]
    per_block = jnp.bincount(key, length=k + 1)[:k]
    tiles_per = (per_block + tile - 1) // tile
    tile_end = jnp.cumsum(tiles_per)
    block = jnp.minimum(sorted_key, k - 1)
    rank = jnp.arange(capacity) - (jnp.cumsum(per_block) - per_block)[block]
    dest = jnp.where(sorted_key < k, (tile_end - tiles_per)[block] * tile + rank, size)  # size: dropped
    n = jnp.zeros((size,), y.dtype).at[dest].set(1.0, mode="drop")
    return Layout(jnp.zeros((size, x.shape[1]), x.dtype).at[dest].set(x[order], mode="drop"), n,
                  jnp.zeros((size,), y.dtype).at[dest].set(y[order], mode="drop"),
                  jnp.minimum(jnp.searchsorted(tile_end, jnp.arange(size // tile), side="right"), k - 1),
                  tile_end[-1])


def loss_gradient(arch: MLP, k: int, how: Training, params: list[jax.Array], anchors: list[jax.Array],
                  lay: Layout, count: jax.Array, lam: jax.Array, tile: int = HISTORY_BLOCK) -> list[jax.Array]:
    """∇L of :mod:`nlbandit.models.mlp_train` by parameter array of θ, on a history regrouped by :func:`layout`:
    tile by tile, each with its block's columns of W₁ (:func:`nlbandit.models.mlp_train.data_gradients`)."""
    rows, cols = arch.shapes()[0]
    dtype = params[0].dtype
    w1 = params[0].reshape(rows, k, cols // k)

    def add(j, acc):
        b = lay.tile_block[j]
        part = [jax.lax.dynamic_slice_in_dim(a, j * tile, tile) for a in (lay.x, lay.n, lay.s)]
        g = data_gradients(arch, [jax.lax.dynamic_index_in_dim(w1, b, 1, False)] + params[1:], part[0],
                           part[1].astype(dtype), part[2].astype(dtype), how.loss)
        first = jax.lax.dynamic_index_in_dim(acc[0], b, 1, False) + g[0]
        return [jax.lax.dynamic_update_index_in_dim(acc[0], first, b, 1)] + [a + h for a, h in zip(acc[1:], g[1:])]

    grads = jax.lax.fori_loop(0, lay.tiles, add, [jnp.zeros_like(w1)] + [jnp.zeros_like(w) for w in params[1:]])
    grads[0] = grads[0].reshape(rows, cols)
    scale = lam * (arch.width if how.reg_scale == "width" else 1.0)
    grads = [g + scale * (w - a) for g, w, a in zip(grads, params, anchors)]
    if how.reduction == "mean":
        grads = [g / jnp.maximum(count, 1).astype(dtype) for g in grads]
    return grads


def train(arch: MLP, k: int, how: Training, theta: jax.Array, theta0: jax.Array, x: jax.Array, blocks: jax.Array,
          y: jax.Array, count: jax.Array, lam: jax.Array, lr: jax.Array) -> jax.Array:
    """θ after ``how.steps`` full-batch gradient steps (``how.optimizer`` must be ``gd``) on the loss of
    :func:`nlbandit.models.mlp_train.train` over a compact history (``x`` (C, d₀), ``blocks``, ``y``, the
    first ``count`` rows filled): the same result as training the dense network on the dense history."""
    lay = layout(x, blocks, y, count, k)
    anchors = unflatten(arch, theta0 if how.anchor == "init" else jnp.zeros_like(theta0))
    start = unflatten(arch, theta0 if how.from_init else theta)

    def step(i, ws):
        return [w - lr * g for w, g in zip(ws, loss_gradient(arch, k, how, ws, anchors, lay, count, lam))]

    return flatten(jax.lax.fori_loop(0, how.steps, step, start))


class Network(NamedTuple):
    """A network's per-arm computations on ``dense`` or ``disjoint`` features (:func:`network`), so that a
    policy is written once for both.

    Attributes:
      row: (contexts, arm) -> the played arm's row of the history (d or d₀ numbers).
      outputs: (θ, contexts) -> f (K,) of every arm.
      arm_widths: (diagonal, θ, contexts) -> ‖g(x_a; θ)‖_{D⁻¹} (K,) of every arm.
      played: (θ, contexts, arm) -> the played arm's gradient features (dense (p,), or compact).
      add: (vec, g, arm, weight) -> vec + weight·g⊙g for ``played``'s g.
      output: (θ, row, arm) -> f of a history row.
      train: (θ, θ₀, rows, blocks, λ, lr, key) -> θ trained on the history ``rows`` (``blocks``: each row's
        block, unused by ``dense``).
    """

    row: Callable
    outputs: Callable
    arm_widths: Callable
    played: Callable
    add: Callable
    output: Callable
    train: Callable


def network(arch: MLP, k: int, how: Training, features: str) -> Network:
    """:class:`Network` of ``arch`` (trained as ``how`` says) on ``features`` of K = ``k`` arms: the plain
    :mod:`nlbandit.models.mlp` functions (``dense``), or this module's compact ones (``disjoint``; ``arch.d``
    is d₀K)."""
    if features == "dense":
        def played(theta, contexts, arm):
            return mlp_grads(arch, theta, contexts[arm][None])[0]

        return Network(lambda contexts, arm: contexts[arm],
                       lambda theta, contexts: mlp_apply(arch, theta, contexts),
                       lambda diag, theta, contexts: diagonal_widths(diag, mlp_grads(arch, theta, contexts)),
                       played,
                       lambda vec, g, arm, weight: vec + weight * g * g,
                       lambda theta, row, arm: mlp_apply(arch, theta, row),
                       lambda theta, theta0, rows, blocks, lam, lr, key: mlp_train.train(arch, how, theta, theta0,
                                                                                          rows, lam, lr, key))
    arms = jnp.arange(k)

    def arm_widths(diag, theta, contexts):
        return widths(arch, k, diag, *grads(arch, k, theta, compact(contexts, k), arms), arms)

    def played_compact(theta, contexts, arm):
        g1, g_rest = grads(arch, k, theta, compact(contexts, k)[arm][None], arm[None])
        return g1[0], g_rest[0]

    return Network(lambda contexts, arm: compact(contexts, k)[arm],
                   lambda theta, contexts: apply(arch, k, theta, compact(contexts, k), arms),
                   arm_widths,
                   played_compact,
                   lambda vec, g, arm, weight: accumulate(arch, k, vec, *g, arm, weight),
                   lambda theta, row, arm: apply(arch, k, theta, row[None], arm[None])[0],
                   lambda theta, theta0, rows, blocks, lam, lr, key: train(arch, k, how, theta, theta0, rows.x, blocks,
                                                                            rows.y, rows.count, lam, lr))
