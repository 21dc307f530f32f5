"""NumPy mirrors of :mod:`nlbandit.models.links` and :func:`nlbandit.models.glm.newton_solve` on rows
(x_i, w_i, s_i) held in memory at once (the per-arm layout): the same objective, Cholesky step, step halving
and stopping rule, so the same iterations as the jitted solver up to rounding."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np
from scipy.linalg import lapack
from scipy.special import expit, ndtr

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Link(NamedTuple):
    """A link's mean μ, derivative μ̇ and log-partition b (:class:`nlbandit.models.links.Link`), in NumPy."""

    mean: Callable[[np.ndarray], np.ndarray]
    dmean: Callable[[np.ndarray], np.ndarray]
    log_partition: Callable[[np.ndarray], np.ndarray]


def _phi(v):
    return _INV_SQRT_2PI * np.exp(-0.5 * v * v)


def _sigmoid_dmean(v):
    mu = expit(v)
    return mu * (1.0 - mu)


LINKS: dict[str, Link] = {
    "logistic": Link(expit, _sigmoid_dmean, lambda v: np.logaddexp(v, 0.0)),
    "identity": Link(lambda v: v, np.ones_like, lambda v: 0.5 * v * v),
    "probit": Link(ndtr, _phi, lambda v: v * ndtr(v) + _phi(v)),
    "poisson": Link(np.exp, np.exp, np.exp),
}
"""The links of :data:`nlbandit.models.links.LINKS`, by name."""


def _objective(link: Link, v, theta, w, s, lam) -> float:
    """F(θ) = Σ_i [w_i b(v_i) − s_i v_i] + (λ/2)‖θ‖², given the linear predictors v = xθ."""
    return float((w * link.log_partition(v) - s * v).sum() + 0.5 * lam * (theta @ theta))


def newton_solve(link: Link, x, w, s, lam, theta0, max_iter: int = 30, step_tol: float = 1e-6,
                 grad_tol: float = 1e-8, max_halvings: int = 30) -> np.ndarray:
    """:func:`nlbandit.models.glm.newton_solve` (its defaults): damped Newton from ``theta0`` with step
    halving, stopping on a small full step or a small gradient, or after ``max_iter`` iterations.
    The linear predictors of the accepted point are carried to the next iteration."""
    diagonal = slice(None, None, x.shape[1] + 1)
    f_noise_scale = 64 * np.finfo(np.float64).eps
    theta, v = theta0, x @ theta0
    f0 = _objective(link, v, theta, w, s, lam)
    for _ in range(max_iter):
        g = x.T @ (w * link.mean(v) - s) + lam * theta
        h = (x.T * (w * link.dmean(v))) @ x
        h.flat[diagonal] += lam
        step = lapack.dpotrs(lapack.dpotrf(h, lower=1)[0], g, lower=1)[0]
        f_noise = f_noise_scale * (1.0 + abs(f0))
        t, new = 1.0, theta - step
        v = x @ new
        f, halvings = _objective(link, v, new, w, s, lam), 0
        while f > f0 + f_noise and halvings < max_halvings:
            t *= 0.5
            new = theta - t * step
            v = x @ new
            f, halvings = _objective(link, v, new, w, s, lam), halvings + 1
        done = (t == 1.0 and math.sqrt(step @ step) <= step_tol * (1.0 + math.sqrt(new @ new))) or (
            math.sqrt(g @ g) <= grad_tol)
        theta, f0 = new, f
        if done:
            break
    return theta
