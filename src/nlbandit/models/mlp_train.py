"""Training the MLP of :mod:`nlbandit.models.mlp` on a bandit's data: the regularised squared or logistic
loss, fixed-budget full-batch gradient descent (or Adam, or minibatch SGD, via optax), on a masked history buffer or on
per-arm statistics.

The loss of spec 003 §1.4 (Neural-ES; Zhou et al. 2020 eq. 3.3 up to the width factor):

    L(θ) = ½ Σ_l (f(x_l; θ) − y_l)² + ½ λ c ‖θ − θ_a‖²,

with the anchor θ_a = θ₀ (``anchor = "init"``: the NTK papers) or 0 (``"zero"``: λ‖θ‖² of Bae & Lee's
experiments), c = N (``reg_scale = "width"``, spec 003) or 1 (``"one"``: weight decay λ as in the public
reference code); it covers all of θ, biases included, as PyTorch's weight decay does.
``reduction = "mean"`` minimises L/n (the reference code's mean squared error; the same minimiser), ``"sum"``
L itself. ``loss = "logistic"`` replaces the squared error by the binary
cross-entropy of the logit f, log(1 + e^f) − y f (Bae & Lee 2025, spec 001 §2.2 and §3.4), for responses
in [0, 1] (perturbed ones may leave it: the loss stays convex in f).

Both layouts of :class:`~nlbandit.models.history.Rows` use one formula. Up to a constant,
½ Σ_l (f(x_l) − y_l)² = Σ_i [½ n_i f(x_i)² − s_i f(x_i)] over rows (x_i, n_i, s_i), and
Σ_l [log(1 + e^{f(x_l)}) − y_l f(x_l)] = Σ_i [n_i log(1 + e^{f(x_i)}) − s_i f(x_i)]: one row per
observation (n_i = 1, s_i = y_i; the sum runs over the filled blocks only, so a step costs O(t)), or one
row per arm of a fixed arm set (n_k pulls, s_k the sum of its responses: a step costs O(K·network)
whatever t is — the exact "fixed-arm fast path" of spec 003 §2.4). An ensemble (responses (C, m)) trains
its m members as one vmapped computation.

Minibatch SGD (``optimizer = "sgd"``, history only) samples B observations uniformly with replacement at every
step (the public NeuralUCB code's per-sample SGD is B = 1) and weighs each by n/B, so that its gradient is
an unbiased estimate of the full-batch one: (n/B) Σ_batch data terms + the regulariser, divided by n for
``mean``.

Minibatch gradient descent (``optimizer = "minibatch"``, history only) is instead the loop a PyTorch user
writes: every step draws a fresh batch of B distinct observations (uniformly without replacement; all of them
while fewer than B were observed) and steps on *the batch's* loss as written, Σ_batch data terms + the
regulariser (divided by the batch's size for ``mean``). With ``sum`` its step is about B times the ``mean``
full-batch step: Bae & Lee's App. J.1 "batch size 50" read as a minibatch size (spec 001 Amendment item 2).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from nlbandit.models.history import HISTORY_BLOCK, Rows, blockwise_sum
from nlbandit.models.mlp import MLP, flatten, inputs, layers, output_scale, unflatten

OPTIMIZERS = ("gd", "sgd", "minibatch", "adam")
LOSSES = ("squared", "logistic")
REDUCTIONS = ("mean", "sum")
ANCHORS = ("init", "zero")
REG_SCALES = ("width", "one")


class Training(NamedTuple):
    """How a network is trained (static: it shapes the compiled program).

    Attributes:
      steps: J, gradient steps per training call.
      optimizer: ``gd`` (full-batch gradient descent, the papers'), ``sgd`` (minibatch SGD, optax; module
        docstring), ``minibatch`` (gradient descent on each batch's own loss; module docstring) or ``adam``
        (optax, full batch; its moments start afresh at every call).
      reduction: ``mean`` or ``sum`` (module docstring).
      anchor: ``init`` (θ₀) or ``zero``.
      reg_scale: ``width`` (λN) or ``one`` (λ).
      from_init: start every call from θ₀ (the theory) instead of the current θ (warm start).
      history: the rows are a history buffer (sum over its filled blocks) rather than per-arm statistics.
      batch_size: B, observations per ``sgd`` or ``minibatch`` step.
      loss: ``squared`` or ``logistic`` (module docstring).
    """

    steps: int = 100
    optimizer: str = "gd"
    reduction: str = "mean"
    anchor: str = "init"
    reg_scale: str = "width"
    from_init: bool = False
    history: bool = True
    batch_size: int = 1
    loss: str = "squared"


def training_bytes(arch: MLP, how: Training, rows: int, members: int = 1) -> int:
    """Bytes of the working arrays of a training step (a policy's declared transient): one block's activations
    and their gradients, 3·B·N·L float32 per network, B = :data:`~nlbandit.models.history.HISTORY_BLOCK`
    history rows, or the ``rows`` per-arm rows."""
    block = HISTORY_BLOCK if how.history else rows
    return 4 * 3 * block * arch.width * arch.depth * members


def data_gradients(arch: MLP, params: list[jax.Array], x: jax.Array, n: jax.Array, s: jax.Array,
                   loss: str = "squared") -> list[jax.Array]:
    """∇ of the data term Σ_i [½ n_i f(x_i)² − s_i f(x_i)] (``squared``) or Σ_i [n_i log(1 + e^{f(x_i)}) −
    s_i f(x_i)] (``logistic``) with respect to each of θ's parameter arrays ``params``
    (:func:`~nlbandit.models.mlp.unflatten`: W_1, …, W_L, with ``arch.bias`` each followed by b_l), for rows
    x (C, d).

    Backpropagation by hand in column layout (features × rows: Z_l = W_l H_{l−1} (+ b_l 1ᵀ), H_l = φ(Z_l),
    ∇W_l = Δ_l H_{l−1}ᵀ, ∇b_l = Δ_l 1, Δ_{l−1} = (W_lᵀ Δ_l) ⊙ 1[Z_{l−1} > 0], with Δ_L = c·(n ⊙ f − s)ᵀ
    or c·(n ⊙ μ(f) − s)ᵀ), so that, once vmapped over an ensemble and the seeds, every product is a plain or
    batched matrix product on contiguous operands: the members' first layers on shared rows become one
    product, and XLA inserts no transposes. W_lᵀ is materialised (an N × N copy) behind an optimisation
    barrier: XLA would otherwise fold the transpose into the product, a form its CPU kernel library does not
    take, and the step ran 1.3× slower (``benchmarks/neural.py`` times it). Equal to ``jax.grad`` of the
    loss (tests/test_neural.py).
    """
    pairs = layers(arch, params)
    h = inputs(arch, x).astype(params[0].dtype).T
    layer_inputs, pre = [h], []
    for w, b in pairs[:-1]:
        pre.append(w @ h if b is None else w @ h + b)
        h = jax.nn.relu(pre[-1])
        layer_inputs.append(h)
    w, b = pairs[-1]
    c = output_scale(arch)
    f = c * (w @ h if b is None else w @ h + b)[0]
    delta = (c * (n * (f if loss == "squared" else jax.nn.sigmoid(f)) - s))[None, :]
    grads = []  # built from the last array back
    for layer in reversed(range(len(pairs))):
        w, b = pairs[layer]
        if b is not None:
            grads.append(jnp.sum(delta, axis=1, keepdims=True))
        grads.append(delta @ layer_inputs[layer].T)
        if layer:
            delta = jnp.where(pre[layer - 1] > 0, jax.lax.optimization_barrier(w.T) @ delta, 0.0)
    return grads[::-1]


def _loss_gradients(arch: MLP, how: Training, params: list[jax.Array], anchors: list[jax.Array], x: jax.Array,
                    n: jax.Array, s: jax.Array, count: jax.Array, lam: jax.Array) -> list[jax.Array]:
    """∇L (module docstring) by parameter array of θ (:func:`~nlbandit.models.mlp.unflatten`), with
    ``anchors`` θ_a's."""
    dtype = params[0].dtype
    active = (count, HISTORY_BLOCK) if how.history else None
    grads = blockwise_sum(lambda xb, nb, sb: data_gradients(arch, params, xb, nb, sb, how.loss), x,
                          n.astype(dtype), s.astype(dtype), active)
    scale = lam * (arch.width if how.reg_scale == "width" else 1.0)
    grads = [g + scale * (w - a) for g, w, a in zip(grads, params, anchors)]
    if how.reduction == "mean":
        grads = [g / jnp.maximum(count, 1).astype(dtype) for g in grads]
    return grads


def _anchors(arch: MLP, how: Training, theta0: jax.Array) -> list[jax.Array]:
    """The parameter arrays of θ_a: θ₀'s (``init``) or zeros."""
    return unflatten(arch, theta0 if how.anchor == "init" else jnp.zeros_like(theta0))


def loss_gradient(arch: MLP, how: Training, theta: jax.Array, theta0: jax.Array, x: jax.Array, n: jax.Array,
                  s: jax.Array, count: jax.Array, lam: jax.Array) -> jax.Array:
    """∇L(θ) (module docstring), flat (p,), for one network on rows (x (C, d), n (C,), s (C,)) holding
    ``count`` observations."""
    return flatten(_loss_gradients(arch, how, unflatten(arch, theta), _anchors(arch, how, theta0), x, n, s, count,
                                   lam))


def _minibatch_gradients(arch: MLP, how: Training, params: list[jax.Array], anchors: list[jax.Array],
                         rows: Rows, lam: jax.Array, key: jax.Array) -> list[jax.Array]:
    """:func:`minibatch_gradient` by parameter array of θ."""
    count = jnp.maximum(rows.count, 1)
    pick = jax.random.randint(key, (how.batch_size,), 0, count)
    weight = jnp.full((how.batch_size,), count / how.batch_size, params[0].dtype)
    return _loss_gradients(arch, how._replace(history=False), params, anchors, rows.x[pick], weight,
                           weight * rows.y[pick], rows.count, lam)


def minibatch_gradient(arch: MLP, how: Training, theta: jax.Array, theta0: jax.Array, rows: Rows, lam: jax.Array,
                       key: jax.Array) -> jax.Array:
    """An unbiased estimate of ∇L(θ), flat (p,), on a history buffer from ``how.batch_size`` observations
    drawn uniformly with replacement among the first ``rows.count`` (module docstring)."""
    return flatten(_minibatch_gradients(arch, how, unflatten(arch, theta), _anchors(arch, how, theta0), rows, lam,
                                        key))


def _batch_gradients(arch: MLP, how: Training, params: list[jax.Array], anchors: list[jax.Array],
                     rows: Rows, lam: jax.Array, key: jax.Array) -> list[jax.Array]:
    """∇ of one minibatch's loss (``optimizer = "minibatch"``, module docstring) by parameter array: min(B, n)
    distinct observations among the first ``rows.count``, uniformly, each with weight 1."""
    capacity = rows.x.shape[0]
    batch = min(how.batch_size, capacity)
    filled = jnp.arange(capacity) < rows.count
    _, pick = jax.lax.top_k(jnp.where(filled, jax.random.uniform(key, (capacity,)), -1.0), batch)  # filled first
    size = jnp.minimum(rows.count, batch)
    n = (jnp.arange(batch) < size).astype(params[0].dtype)
    return _loss_gradients(arch, how._replace(history=False), params, anchors, rows.x[pick], n,
                           n * rows.y[pick], size, lam)


def train(arch: MLP, how: Training, theta: jax.Array, theta0: jax.Array, rows: Rows, lam: jax.Array,
          lr: jax.Array, key: jax.Array) -> jax.Array:
    """θ after ``how.steps`` optimiser steps on L (module docstring), from ``theta`` (warm start) or θ₀;
    ``key`` draws the minibatches of ``sgd`` and ``minibatch`` (unused by the full-batch optimisers).

    ``theta`` (p,) with scalar responses ``rows.y`` (C,), or an ensemble (m, p) with responses (C, m):
    member j trains on column j (one vmapped computation, its own minibatches). The steps run on θ's
    parameter arrays (every optimiser here acts entry by entry, so this is the same as on the flat θ).
    """
    if theta.ndim == 2:
        return jax.vmap(lambda th, y, k: train(arch, how, th, theta0, rows._replace(y=y), lam, lr, k),
                        in_axes=(0, 1, 0))(theta, rows.y, jax.random.split(key, theta.shape[0]))
    anchors = _anchors(arch, how, theta0)
    start = unflatten(arch, theta0 if how.from_init else theta)

    def grad(i, params):
        if how.optimizer == "sgd":
            return _minibatch_gradients(arch, how, params, anchors, rows, lam, jax.random.fold_in(key, i))
        if how.optimizer == "minibatch":
            return _batch_gradients(arch, how, params, anchors, rows, lam, jax.random.fold_in(key, i))
        return _loss_gradients(arch, how, params, anchors, rows.x, rows.n, rows.y, rows.count, lam)

    if how.optimizer in ("gd", "minibatch"):
        return flatten(jax.lax.fori_loop(
            0, how.steps, lambda i, ws: [w - lr * g for w, g in zip(ws, grad(i, ws))], start))
    opt = optax.sgd(lr) if how.optimizer == "sgd" else optax.adam(lr)

    def step(i, carry):
        params, opt_state = carry
        updates, opt_state = opt.update(grad(i, params), opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return flatten(jax.lax.fori_loop(0, how.steps, step, (start, opt.init(start)))[0])
