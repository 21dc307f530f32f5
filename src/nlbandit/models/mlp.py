"""The neural bandits' network: a ReLU MLP on a flat parameter vector, with its NTK features.

f(x; θ) = c · W_L φ(W_{L−1} φ(… φ(W_1 x))), φ = ReLU, every hidden layer of width N (Zhou et al. 2020
eq. 2.1; Sun, Wang & Xu 2025 §1.3 of spec 003), with c = √N (``scale = "ntk"``, the papers') or c = 1
(``scale = "none"``, the public reference code's). θ = [vec(W_1); …; vec(W_L)] ∈ ℝ^p (row-major vec)
is one flat vector, so that the regulariser ‖θ − θ₀‖², the gradient features g(x; θ) = ∇_θ f(x; θ) ∈ ℝ^p
and the design matrices over them need no pytree bookkeeping; p = N·d + N²·(L − 2) + N (d' of spec 003
§1.3: 820 for d = N = 20, L = 3). Depth L = 1 is the linear model c·wᵀx (c·(wᵀx + b) with ``bias``).

With ``bias`` every layer is affine, as PyTorch's ``nn.Linear`` (Bae & Lee's experiments; spec 001,
amendment of 2026-11-25 item 4): f(x; θ) = c · (W_L φ(… φ(W_1 x + b_1) …) + b_L), and θ =
[vec(W_1); b_1; vec(W_2); b_2; …; vec(W_L); b_L], the order of PyTorch's ``parameters()``. Each b_l is held
as a column (an N_l × 1 array, :meth:`MLP.shapes`), and p grows by (L − 1)·N + 1 (861 for d = N = 20, L = 3).
W_1 stays θ's first array, so a disjoint encoding reads its columns as without biases
(:mod:`nlbandit.models.disjoint`). A bias-free ReLU network is positively homogeneous (f(ax) = a f(x) for
a ≥ 0), so it cannot fit an offset: f(0) = 0.

Initialisations (:func:`mlp_init`):

* ``symmetric`` (Zhou et al. 2020 §3; spec 003 §1.3): W_l = [[W, 0], [0, W]] with W ~ N(0, 4/N) entrywise
  for l < L, and W_L = (w, −w) with w ~ N(0, 2/N); with input duplication x' = [x; x]/√2
  (``duplicate``) the two halves of every layer see the same input and cancel, so f(x; θ₀) = 0 for
  every x. N and the input dimension must be even (duplication makes the latter so).
* ``standard``: PyTorch's default for ``nn.Linear``, W ~ U(−1/√fan_in, 1/√fan_in) entrywise, and with
  ``bias`` b ~ U(−1/√fan_in, 1/√fan_in) too, fan_in = the layer's input features (the public
  NeuralUCB/NeuralTS code; spec ``reference_code.md`` §2; spec 001 §8 item 12).

The symmetric initialisation has no bias terms: ``bias`` takes ``standard`` only (:meth:`MLP.check`).

Float32 throughout by default (ARCHITECTURE.md: neural models are float32 even with x64 on).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

INITS = ("symmetric", "standard")
SCALES = ("ntk", "none")


class MLP(NamedTuple):
    """A network's static architecture (hashable: a policy closes over it).

    Attributes:
      d: the raw input dimension (before duplication).
      width: N, the width of every hidden layer.
      depth: L, the number of weight matrices (L − 1 hidden layers).
      duplicate: feed x' = [x; x]/√2 (input dimension 2d) instead of x.
      scale: ``ntk`` (output times √N) or ``none``.
      bias: every layer adds a bias vector b_l (module docstring).
    """

    d: int
    width: int
    depth: int
    duplicate: bool = False
    scale: str = "ntk"
    bias: bool = False

    @property
    def d_in(self) -> int:
        """The network's input dimension: 2d with duplication, else d."""
        return 2 * self.d if self.duplicate else self.d

    def weight_shapes(self) -> tuple[tuple[int, int], ...]:
        """(rows, columns) of W_1, …, W_L: (fan_out, fan_in) of each layer."""
        if self.depth == 1:
            return ((1, self.d_in),)
        return ((self.width, self.d_in),) + ((self.width, self.width),) * (self.depth - 2) + ((1, self.width),)

    def shapes(self) -> tuple[tuple[int, int], ...]:
        """(rows, columns) of θ's parameter arrays in order: W_1, …, W_L, or with ``bias`` W_1, b_1, …, W_L,
        b_L (b_l a column, (rows of W_l, 1))."""
        if not self.bias:
            return self.weight_shapes()
        return tuple(shape for rows, cols in self.weight_shapes() for shape in ((rows, cols), (rows, 1)))

    @property
    def n_params(self) -> int:
        """p, the length of θ."""
        return sum(r * c for r, c in self.shapes())

    def check(self, init: str, where: str) -> str | None:
        """A one-line reason why this architecture cannot be built with ``init``, or None."""
        if self.d < 1 or self.width < 1 or self.depth < 1:
            return f"{where}: d, width and depth must be >= 1, got d={self.d}, width={self.width}, depth={self.depth}"
        if init == "symmetric" and self.bias:
            return (f"{where}: field 'bias' = true needs init = 'standard' (the symmetric initialisation has no "
                    "bias terms)")
        if init == "symmetric" and (self.d_in % 2 or (self.depth > 1 and self.width % 2)):
            return (f"{where}: the symmetric initialisation needs an even width and an even input dimension, got "
                    f"width {self.width} and input dimension {self.d_in}"
                    + ("; set duplicate = true (input [x; x]/√2, which also makes f(x; θ₀) = 0)" if self.d_in % 2
                       else "") + ", or use init = 'standard'")
        return None


def inputs(arch: MLP, x: jax.Array) -> jax.Array:
    """The network's input for raw features ``x`` (..., d): [x; x]/√2 with duplication, else x."""
    return jnp.concatenate([x, x], axis=-1) / math.sqrt(2.0) if arch.duplicate else x


def unflatten(arch: MLP, theta: jax.Array) -> list[jax.Array]:
    """The parameter arrays held in the flat ``theta`` (p,), in order and shaped as :meth:`MLP.shapes` says:
    the weight matrices W_1, …, W_L, with ``bias`` each followed by its bias column b_l."""
    out, start = [], 0
    for rows, cols in arch.shapes():
        out.append(theta[start:start + rows * cols].reshape(rows, cols))
        start += rows * cols
    return out


def flatten(params: list[jax.Array]) -> jax.Array:
    """The flat θ (p,) holding the parameter arrays ``params`` (the inverse of :func:`unflatten`)."""
    return jnp.concatenate([w.reshape(-1) for w in params])


def layers(arch: MLP, params: list[jax.Array]) -> list[tuple[jax.Array, jax.Array | None]]:
    """(W_l, b_l) of each layer l = 1, …, L from θ's parameter arrays ``params`` (:func:`unflatten`); b_l is
    None without ``bias``."""
    return list(zip(params[0::2], params[1::2])) if arch.bias else [(w, None) for w in params]


def affine(h: jax.Array, w: jax.Array, b: jax.Array | None) -> jax.Array:
    """One layer's pre-activations h Wᵀ + bᵀ for rows ``h`` (..., fan_in) (h Wᵀ when ``b`` is None)."""
    z = h @ w.T
    return z if b is None else z + b[:, 0]


def output_scale(arch: MLP) -> float:
    """c, the factor on the last layer's output: √N (``ntk``) or 1."""
    return math.sqrt(arch.width) if arch.scale == "ntk" else 1.0


def mlp_apply(arch: MLP, theta: jax.Array, x: jax.Array) -> jax.Array:
    """f(x; θ) for raw features ``x`` (..., d): the network's outputs, shape (...)."""
    h = inputs(arch, x).astype(theta.dtype)
    pairs = layers(arch, unflatten(arch, theta))
    for w, b in pairs[:-1]:
        h = jax.nn.relu(affine(h, w, b))
    out = affine(h, *pairs[-1])[..., 0]
    return out * output_scale(arch)


def mlp_grads(arch: MLP, theta: jax.Array, x: jax.Array) -> jax.Array:
    """Per-example gradient features g(x_k; θ) = ∇_θ f(x_k; θ) for every row of ``x`` (K, d): (K, p), one
    vectorised call."""
    return jax.vmap(jax.grad(lambda th, xk: mlp_apply(arch, th, xk)), in_axes=(None, 0))(theta, x)


def mlp_init(arch: MLP, key: jax.Array, init: str = "symmetric", dtype: str = "float32") -> jax.Array:
    """θ₀ (p,) drawn from ``key`` with the ``symmetric`` or ``standard`` initialisation (module docstring).
    The architecture must pass :meth:`MLP.check` (validated at the boundary, not here)."""
    params = []
    shapes = arch.weight_shapes()
    for i, (key_l, (rows, cols)) in enumerate(zip(jax.random.split(key, len(shapes)), shapes)):
        if init == "standard":  # with bias, [W_l, b_l] drawn as one (rows, cols + 1) matrix
            bound = 1.0 / math.sqrt(cols)
            drawn = jax.random.uniform(key_l, (rows, cols + 1 if arch.bias else cols), dtype, -bound, bound)
            params.extend([drawn[:, :cols], drawn[:, cols:]] if arch.bias else [drawn])
        elif i < len(shapes) - 1:  # [[W, 0], [0, W]], W ~ N(0, 4/N)
            half = jax.random.normal(key_l, (rows // 2, cols // 2), dtype) * math.sqrt(4.0 / arch.width)
            zero = jnp.zeros_like(half)
            params.append(jnp.block([[half, zero], [zero, half]]))
        else:  # (w, −w), w ~ N(0, 2/N) (2/d_in for the linear model L = 1: the last layer's fan-in)
            w = jax.random.normal(key_l, (1, cols // 2), dtype) * math.sqrt(2.0 / cols)
            params.append(jnp.concatenate([w, -w], axis=1))
    return flatten(params)
