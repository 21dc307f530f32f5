"""Training the MLP of :mod:`nlbandit.models.mlp` on a bandit's data: the regularised squared loss, fixed-
budget full-batch gradient descent (or Adam, or minibatch SGD, via optax), on a masked history buffer or on
per-arm statistics.

The loss of spec 003 §1.4 (Neural-ES; Zhou et al. 2020 eq. 3.3 up to the width factor):

    L(θ) = ½ Σ_l (f(x_l; θ) − y_l)² + ½ λ c ‖θ − θ_a‖²,

with the anchor θ_a = θ₀ (``anchor = "init"``: the NTK papers) or 0 (``"zero"``: λ‖θ‖² of Bae & Lee's
experiments), c = N (``reg_scale = "width"``, spec 003) or 1 (``"one"``: weight decay λ as in the public
reference code). ``reduction = "mean"`` minimises L/n (the reference code's mean squared error; the same
minimiser), ``"sum"`` L itself.

Both layouts of :class:`~nlbandit.models.history.Rows` use one formula. Up to a constant,
½ Σ_l (f(x_l) − y_l)² = Σ_i [½ n_i f(x_i)² − s_i f(x_i)] over rows (x_i, n_i, s_i): one row per
observation (n_i = 1, s_i = y_i; the sum runs over the filled blocks only, so a step costs O(t)), or one
row per arm of a fixed arm set (n_k pulls, s_k the sum of its responses: a step costs O(K·network)
whatever t is — the exact "fixed-arm fast path" of spec 003 §2.4). An ensemble (responses (C, m)) trains
its m members as one vmapped computation.

Minibatch SGD (``optimizer = "sgd"``, history only) samples B observations uniformly with replacement at every
step (the public NeuralUCB code's per-sample SGD is B = 1) and weighs each by n/B, so that its gradient is
an unbiased estimate of the full-batch one: (n/B) Σ_batch data terms + the regulariser, divided by n for
``mean``.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from nlbandit.models.history import HISTORY_BLOCK, Rows, blockwise_sum
from nlbandit.models.mlp import MLP, mlp_apply

OPTIMIZERS = ("gd", "sgd", "adam")
REDUCTIONS = ("mean", "sum")
ANCHORS = ("init", "zero")
REG_SCALES = ("width", "one")


class Training(NamedTuple):
    """How a network is trained (static: it shapes the compiled program).

    Attributes:
      steps: J, gradient steps per training call.
      optimizer: ``gd`` (full-batch gradient descent, the papers'), ``sgd`` (minibatch SGD, optax; module
        docstring) or ``adam`` (optax, full batch; its moments start afresh at every call).
      reduction: ``mean`` or ``sum`` (module docstring).
      anchor: ``init`` (θ₀) or ``zero``.
      reg_scale: ``width`` (λN) or ``one`` (λ).
      from_init: start every call from θ₀ (the theory) instead of the current θ (warm start).
      history: the rows are a history buffer (sum over its filled blocks) rather than per-arm statistics.
      batch_size: B, observations per SGD step.
    """

    steps: int = 100
    optimizer: str = "gd"
    reduction: str = "mean"
    anchor: str = "init"
    reg_scale: str = "width"
    from_init: bool = False
    history: bool = True
    batch_size: int = 1


def loss_gradient(arch: MLP, how: Training, theta: jax.Array, theta0: jax.Array, x: jax.Array, n: jax.Array,
                  s: jax.Array, count: jax.Array, lam: jax.Array) -> jax.Array:
    """∇L(θ) (module docstring) for one network on rows (x (C, d), n (C,), s (C,)) holding ``count``
    observations."""

    def data_term(xb, nb, sb):
        def loss(th):
            f = mlp_apply(arch, th, xb)
            return jnp.sum(0.5 * nb * f * f - sb * f)

        return jax.grad(loss)(theta)

    active = (count, HISTORY_BLOCK) if how.history else None
    grad = blockwise_sum(data_term, x, n.astype(theta.dtype), s.astype(theta.dtype), active)
    anchor = theta0 if how.anchor == "init" else jnp.zeros_like(theta0)
    scale = arch.width if how.reg_scale == "width" else 1.0
    grad = grad + lam * scale * (theta - anchor)
    return grad / jnp.maximum(count, 1).astype(theta.dtype) if how.reduction == "mean" else grad


def minibatch_gradient(arch: MLP, how: Training, theta: jax.Array, theta0: jax.Array, rows: Rows, lam: jax.Array,
                       key: jax.Array) -> jax.Array:
    """An unbiased estimate of ∇L(θ) on a history buffer from ``how.batch_size`` observations drawn uniformly
    with replacement among the first ``rows.count`` (module docstring)."""
    count = jnp.maximum(rows.count, 1)
    pick = jax.random.randint(key, (how.batch_size,), 0, count)
    weight = jnp.full((how.batch_size,), count / how.batch_size, theta.dtype)
    return loss_gradient(arch, how._replace(history=False), theta, theta0, rows.x[pick], weight,
                         weight * rows.y[pick], rows.count, lam)


def train(arch: MLP, how: Training, theta: jax.Array, theta0: jax.Array, rows: Rows, lam: jax.Array,
          lr: jax.Array, key: jax.Array) -> jax.Array:
    """θ after ``how.steps`` optimiser steps on L (module docstring), from ``theta`` (warm start) or θ₀;
    ``key`` draws SGD's minibatches (unused by the full-batch optimisers).

    ``theta`` (p,) with scalar responses ``rows.y`` (C,), or an ensemble (m, p) with responses (C, m):
    member j trains on column j (one vmapped computation, its own minibatches).
    """
    if theta.ndim == 2:
        return jax.vmap(lambda th, y, k: train(arch, how, th, theta0, rows._replace(y=y), lam, lr, k),
                        in_axes=(0, 1, 0))(theta, rows.y, jax.random.split(key, theta.shape[0]))
    start = theta0 if how.from_init else theta

    def grad(i, th):
        if how.optimizer == "sgd":
            return minibatch_gradient(arch, how, th, theta0, rows, lam, jax.random.fold_in(key, i))
        return loss_gradient(arch, how, th, theta0, rows.x, rows.n, rows.y, rows.count, lam)

    if how.optimizer == "gd":
        return jax.lax.fori_loop(0, how.steps, lambda i, th: th - lr * grad(i, th), start)
    opt = optax.sgd(lr) if how.optimizer == "sgd" else optax.adam(lr)

    def step(i, carry):
        th, opt_state = carry
        updates, opt_state = opt.update(grad(i, th), opt_state, th)
        return optax.apply_updates(th, updates), opt_state

    return jax.lax.fori_loop(0, how.steps, step, (start, opt.init(start)))[0]
