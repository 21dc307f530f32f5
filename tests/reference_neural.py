"""Independent float64 NumPy reference of the neural bandits' network and training.

Written from the formulas of spec 003 §1.3–1.4 with hand-written backpropagation, not from
``nlbandit``'s code: f(x; θ) = c · W_L φ(… φ(W_1 x)), φ = ReLU, no biases, c = √N or 1; θ is the
concatenation of vec(W_1), …, vec(W_L) in row-major order; the loss is
½ Σ_l (f(x_l) − y_l)² + ½ λ s ‖θ − θ_a‖² (s = N or 1), divided by n for the mean reduction.

With ``bias`` every layer is PyTorch's ``nn.Linear``: f(x; θ) = c · (W_L φ(… φ(W_1 x + b_1) …) + b_L), and θ
concatenates the layers' parameters in the order of PyTorch's ``parameters()``: vec(W_1), b_1, …, vec(W_L), b_L.
"""

from __future__ import annotations

import numpy as np


def shapes(d_in: int, width: int, depth: int) -> list[tuple[int, int]]:
    """(rows, columns) of W_1, …, W_L."""
    if depth == 1:
        return [(1, d_in)]
    return [(width, d_in)] + [(width, width)] * (depth - 2) + [(1, width)]


def weights(theta: np.ndarray, d_in: int, width: int, depth: int,
            bias: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """(W_l, b_l) of each layer held in the flat θ (b_l = 0 without ``bias``)."""
    out, start = [], 0
    for r, c in shapes(d_in, width, depth):
        w = theta[start:start + r * c].reshape(r, c)
        start += r * c
        b = theta[start:start + r] if bias else np.zeros(r)
        start += r if bias else 0
        out.append((w, b))
    assert start == theta.size
    return out


def forward_backward(theta: np.ndarray, x: np.ndarray, width: int, depth: int, scale: float, bias: bool = False):
    """(f (n,), per-example gradients (n, p)) for inputs ``x`` (n, d_in), by backpropagation."""
    layers = weights(theta, x.shape[1], width, depth, bias)
    acts = [x]  # inputs of each layer
    pre = []
    for w, b in layers[:-1]:
        z = acts[-1] @ w.T + b
        pre.append(z)
        acts.append(np.maximum(z, 0.0))
    w, b = layers[-1]
    f = scale * (acts[-1] @ w.T + b)[:, 0]
    n = x.shape[0]
    delta = scale * np.ones((n, 1))  # ∂f/∂(output of the last layer)
    grads = [None] * len(layers)
    for i in range(len(layers) - 1, -1, -1):
        grads[i] = np.einsum("nr,nc->nrc", delta, acts[i]).reshape(n, -1)  # ∂f/∂W_i per example
        if bias:  # ∂f/∂b_i = delta, after W_i's entries
            grads[i] = np.concatenate([grads[i], delta], axis=1)
        if i > 0:
            delta = (delta @ layers[i][0]) * (pre[i - 1] > 0)
    return f, np.concatenate(grads, axis=1)


def loss_gradient(theta, theta_anchor, x, n, s, count, lam, width, depth, scale, reg_scale, reduction, bias=False):
    """∇ of Σ_i [½ n_i f_i² − s_i f_i] + ½ λ·reg_scale·‖θ − θ_a‖² (÷ count for ``mean``)."""
    f, g = forward_backward(theta, x, width, depth, scale, bias)
    grad = g.T @ (n * f - s) + lam * reg_scale * (theta - theta_anchor)
    return grad / max(count, 1) if reduction == "mean" else grad


def gd(theta, theta_anchor, x, n, s, count, lam, lr, steps, width, depth, scale, reg_scale, reduction, bias=False):
    """``steps`` full-batch gradient steps of ``lr``."""
    for _ in range(steps):
        theta = theta - lr * loss_gradient(theta, theta_anchor, x, n, s, count, lam, width, depth, scale,
                                           reg_scale, reduction, bias)
    return theta
