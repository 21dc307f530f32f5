"""Link (mean) functions of generalized linear models.

Each :class:`Link` has the mean μ, its derivative μ̇, and a log-partition b with ḃ = μ, so that the
negative log-likelihood of a response y at linear predictor v is b(v) − y·v (up to terms free of θ):
Kveton et al. (2020), §2 eqs. (1)–(2); Sun, Wang & Xu (2025), eq. (4.2).

* ``logistic``: μ = 1/(1+e^{−v}), b = log(1+e^v) (softplus); rewards in [0, 1].
* ``identity``: μ = v, b = v²/2 (Gaussian/ridge); rewards in ℝ.
* ``probit``: μ = Φ(v), b = vΦ(v) + φ(v). Probit is not a canonical link, so this b is the antiderivative
  of Φ: the loss is the quasi-likelihood whose stationarity condition Σ (μ(xᵀθ) − y) x = 0 is the GLM
  score equation used by Filippi et al. (2010). Rewards in [0, 1].
* ``poisson``: μ = e^v, b = e^v; rewards in [0, ∞).

``mu_dot_max`` is sup μ̇ (None when unbounded); ``self_concordance`` is the M of |μ̈| ≤ M μ̇
(Sun, Wang & Xu 2025, Assumption 5.2; None when the link has no such constant).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class Link(NamedTuple):
    """A GLM link: elementwise functions of the linear predictor v = xᵀθ and facts about them."""

    name: str
    mean: Callable[[jax.Array], jax.Array]
    dmean: Callable[[jax.Array], jax.Array]
    log_partition: Callable[[jax.Array], jax.Array]
    reward_range: tuple[float, float]
    mu_dot_max: float | None
    self_concordance: float | None


def _phi(v):
    return _INV_SQRT_2PI * jnp.exp(-0.5 * v * v)


def _sigmoid_dmean(v):
    mu = jax.nn.sigmoid(v)
    return mu * (1.0 - mu)


LINKS: dict[str, Link] = {
    link.name: link
    for link in (
        Link("logistic", jax.nn.sigmoid, _sigmoid_dmean, jax.nn.softplus, (0.0, 1.0), 0.25, 1.0),
        Link("identity", lambda v: v, jnp.ones_like, lambda v: 0.5 * v * v, (-math.inf, math.inf), 1.0, 0.0),
        Link("probit", ndtr, _phi, lambda v: v * ndtr(v) + _phi(v), (0.0, 1.0), _INV_SQRT_2PI, None),
        Link("poisson", jnp.exp, jnp.exp, jnp.exp, (0.0, math.inf), None, 1.0),
    )
}
