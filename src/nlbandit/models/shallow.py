"""A one-hidden-layer network with biases, laid out as Keras builds it: the reward model of DeepFPL.

Kveton, Zaheer, Szepesvári, Li, Ghavamzadeh & Boutilier (2020), §5.2 (spec 002 §2.7):

    g_w(x) = w₂ᵀ φ(W₁ᵀx + b₁) + b₂,    f_w(x) = σ(g_w(x)),

one fully connected hidden layer of H units (the paper's H = 50) with φ = ReLU or tanh, and a sigmoid
output unit. Keras's ``Dense`` layout is kept: W₁ is (d, H), so the hidden layer of a row x is x W₁ + b₁.
The initialisation is Keras's default (spec 002 §7.13): Glorot-uniform kernels, W ~ U(−r, r) entrywise
with r = √(6 / (fan_in + fan_out)) (Glorot & Bengio 2010, eq. 16), and zero biases.

:func:`embedding` is the network with its head chopped off, [φ(W₁ᵀx + b₁); 1] ∈ ℝ^{H+1}: the features of
repGLM-FPL (spec 002 §2.7). :func:`logistic_loss` is the training loss of spec 002 §7.11, the logistic
GLM negative log-likelihood on the logit, which takes real (perturbed) targets.

The weights are a small pytree (:class:`ShallowNet`) rather than a flat vector: optax's Adam works on it
directly, and nothing here needs per-example gradient features (contrast :mod:`nlbandit.models.mlp`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh}
"""The hidden layer's φ by name (Kveton et al. 2020 §5.2 try both)."""


class ShallowNet(NamedTuple):
    """The weights w = (W₁, b₁, w₂, b₂).

    Attributes:
      w1: (d, H) the hidden layer's kernel.
      b1: (H,) its bias.
      w2: (H,) the output unit's kernel.
      b2: () its bias.
    """

    w1: jax.Array
    b1: jax.Array
    w2: jax.Array
    b2: jax.Array


def glorot_bound(fan_in: int, fan_out: int) -> float:
    """r = √(6 / (fan_in + fan_out)), the half-width of the Glorot-uniform draw (Glorot & Bengio 2010,
    eq. 16; Keras's ``glorot_uniform``)."""
    return math.sqrt(6.0 / (fan_in + fan_out))


def shallow_init(key: jax.Array, d: int, hidden: int, dtype: str = "float32") -> ShallowNet:
    """Keras's default initialisation of the network on ℝ^d with ``hidden`` units: Glorot-uniform W₁
    (fan d → H) and w₂ (fan H → 1), zero biases."""
    k1, k2 = jax.random.split(key)
    r1, r2 = glorot_bound(d, hidden), glorot_bound(hidden, 1)
    return ShallowNet(jax.random.uniform(k1, (d, hidden), dtype, -r1, r1), jnp.zeros((hidden,), dtype),
                      jax.random.uniform(k2, (hidden,), dtype, -r2, r2), jnp.zeros((), dtype))


def hidden_layer(net: ShallowNet, x: jax.Array, activation: str) -> jax.Array:
    """φ(W₁ᵀx + b₁) for every row of ``x`` (..., d): shape (..., H)."""
    return ACTIVATIONS[activation](x.astype(net.w1.dtype) @ net.w1 + net.b1)


def logits(net: ShallowNet, x: jax.Array, activation: str) -> jax.Array:
    """g_w(x) = w₂ᵀφ(W₁ᵀx + b₁) + b₂ for every row of ``x`` (..., d): shape (...). The network's output
    is σ(g_w(x)); arms are ranked by g_w, which σ does not reorder."""
    return hidden_layer(net, x, activation) @ net.w2 + net.b2


def embedding(net: ShallowNet, x: jax.Array, activation: str) -> jax.Array:
    """ψ(x) = [φ(W₁ᵀx + b₁); 1] for every row of ``x`` (..., d): the hidden layer and a constant feature
    (spec 002 §2.7, repGLM-FPL; the 1 stands for the output bias b₂), shape (..., H + 1)."""
    h = hidden_layer(net, x, activation)
    return jnp.concatenate([h, jnp.ones(h.shape[:-1] + (1,), h.dtype)], axis=-1)


def logistic_loss(net: ShallowNet, x: jax.Array, y: jax.Array, weights: jax.Array, activation: str) -> jax.Array:
    """ℓ(w) = Σ_j c_j [softplus(g_w(x_j)) − y_j g_w(x_j)] / Σ_j c_j over rows ``x`` (n, d) with targets
    ``y`` (n,) and weights ``weights`` (n,) (1 for the examples of the minibatch, 0 for empty slots; at least
    one must be positive).

    Spec 002 §7.11: the logistic GLM negative log-likelihood on the logit, defined for real targets (the
    perturbed ỹ_j of DeepFPL); its derivative in g_w(x_j) is c_j (σ(g_w(x_j)) − y_j) / Σ c, the perturbed
    gradient of GLM-FPL (Kveton et al. 2020, eq. (1) with rewards Y + Z). For y ∈ [0, 1] it equals Keras's
    ``binary_crossentropy`` on σ(g) without that loss's clipping of σ(g) to [10⁻⁷, 1 − 10⁻⁷].
    """
    g = logits(net, x, activation)
    weights = weights.astype(g.dtype)
    return jnp.sum(weights * (jax.nn.softplus(g) - y.astype(g.dtype) * g)) / jnp.sum(weights)
