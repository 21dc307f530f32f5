"""Compiled mirrors of :mod:`nlbandit.models.links` and :func:`nlbandit.models.glm.newton_solve` for the
per-arm layout (rows x_i, weights w_i, response sums s_i, all in memory): the same objective, Cholesky step,
step halving and stopping rule, so the same iterations as the jitted solver up to rounding; and the pieces
of the GLM policies' rounds around it (the optimistic index, GLM-TSL's Laplace sample, a pull's counts).

They are numba functions (compiled on first use, cached on disk), because the NumPy spelling of one Newton
iteration is two dozen calls of ~1 µs each on (50, 20) arrays — more than the arithmetic by tens. A link is
passed as its code in :data:`LINK_CODES`.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
from numba import njit

from nlbandit.host.exploration import greedy_choice
from nlbandit.host.propensity import choice_probability

from nlbandit.models import glm as jitted_glm

LINK_CODES: dict[str, int] = {"identity": 0, "logistic": 1, "probit": 2, "poisson": 3}
"""The links of :data:`nlbandit.models.links.LINKS` by name → the code the compiled functions take."""

_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_F_NOISE = 64 * float(np.finfo(np.float64).eps)
_DEFAULTS = inspect.signature(jitted_glm.newton_solve).parameters
NEWTON_OPTIONS = tuple(_DEFAULTS[name].default for name in ("max_iter", "step_tol", "grad_tol", "max_halvings"))
"""The jitted solver's defaults (max_iter, step_tol, grad_tol, max_halvings), passed to :func:`newton_solve`."""
_ENSEMBLE = inspect.signature(jitted_glm.ensemble_newton_solve).parameters
ENSEMBLE_OPTIONS = (*(_ENSEMBLE[name].default for name in ("iterations", "tol", "max_iter")),
                    _DEFAULTS["grad_tol"].default, _DEFAULTS["max_halvings"].default)
"""The jitted ensemble solver's defaults (iterations, tol, max_iter) and its Newton fallback's (grad_tol,
max_halvings), passed to :func:`ensemble_newton_solve`."""


@njit(cache=True)
def mean(code: int, v: float) -> float:
    """The link's mean μ(v): v, the sigmoid, Φ(v) or eᵛ."""
    if code == 0:
        return v
    if code == 1:
        return 1.0 / (1.0 + math.exp(-v))
    if code == 2:
        return 0.5 * math.erfc(-v * _SQRT_HALF)
    return math.exp(v)


@njit(cache=True)
def dmean(code: int, v: float) -> float:
    """The derivative μ̇(v)."""
    if code == 0:
        return 1.0
    if code == 1:
        mu = 1.0 / (1.0 + math.exp(-v))
        return mu * (1.0 - mu)
    if code == 2:
        return _INV_SQRT_2PI * math.exp(-0.5 * v * v)
    return math.exp(v)


@njit(cache=True)
def log_partition(code: int, v: float) -> float:
    """The log-partition b(v) (ḃ = μ): v²/2, softplus, vΦ(v) + φ(v) or eᵛ."""
    if code == 0:
        return 0.5 * v * v
    if code == 1:
        return max(v, 0.0) + math.log1p(math.exp(-abs(v)))
    if code == 2:
        return v * 0.5 * math.erfc(-v * _SQRT_HALF) + _INV_SQRT_2PI * math.exp(-0.5 * v * v)
    return math.exp(v)


@njit(cache=True)
def objective(code: int, x, w, s, lam: float, theta) -> float:
    """F(θ) = Σ_i [w_i b(x_iᵀθ) − s_i x_iᵀθ] + (λ/2)‖θ‖²."""
    f = 0.0
    for i in range(x.shape[0]):
        v = 0.0
        for j in range(x.shape[1]):
            v += x[i, j] * theta[j]
        f += w[i] * log_partition(code, v) - s[i] * v
    return f + 0.5 * lam * (theta @ theta)


@njit(cache=True)
def _cholesky(h) -> None:
    """Overwrite the lower triangle of the symmetric positive definite ``h`` with its Cholesky factor L
    (h = L Lᵀ; only the lower triangle is read)."""
    d = h.shape[0]
    for j in range(d):
        acc = h[j, j]
        for k in range(j):
            acc -= h[j, k] * h[j, k]
        h[j, j] = math.sqrt(acc)
        for i in range(j + 1, d):
            acc = h[i, j]
            for k in range(j):
                acc -= h[i, k] * h[j, k]
            h[i, j] = acc / h[j, j]


@njit(cache=True)
def _lower(a):
    """The lower triangle of the square ``a`` with zeros above, a new array (numba's ``np.tril`` costs ~1 µs
    more at d = 20)."""
    d = a.shape[0]
    out = np.zeros((d, d))
    for i in range(d):
        for j in range(i + 1):
            out[i, j] = a[i, j]
    return out


@njit(cache=True)
def cholesky(a):
    """The lower Cholesky factor L (zeros above the diagonal) of the symmetric positive definite ``a``, a new
    array: the loops of :func:`_cholesky` (at d = 20 a quarter of ``np.linalg.cholesky``'s 4.7 µs call)."""
    h = a.copy()
    _cholesky(h)
    return _lower(h)


@njit(cache=True)
def _solve_lower(chol, g, out) -> None:
    """out = L⁻¹ g, L the lower triangle of ``chol``."""
    for i in range(g.shape[0]):
        acc = g[i]
        for k in range(i):
            acc -= chol[i, k] * out[k]
        out[i] = acc / chol[i, i]


@njit(cache=True)
def _solve_upper(chol, g, out) -> None:
    """out = L⁻ᵀ g, L the lower triangle of ``chol`` (``out`` may be ``g``)."""
    for i in range(g.shape[0] - 1, -1, -1):
        acc = g[i]
        for k in range(i + 1, g.shape[0]):
            acc -= chol[k, i] * out[k]
        out[i] = acc / chol[i, i]


@njit(cache=True)
def _weighted_gram(x, xt, c, lam: float, weighted_xt):
    """Σ_i c_i x_i x_iᵀ + λI (``xt`` = xᵀ contiguous, ``weighted_xt`` (d, n) scratch)."""
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            weighted_xt[j, i] = c[i] * xt[j, i]
    h = weighted_xt @ x
    for j in range(x.shape[1]):
        h[j, j] += lam
    return h


@njit(cache=True)
def newton_iterate(code: int, x, w, s, lam: float, theta0, max_iter: int, step_tol: float, grad_tol: float,
                   max_halvings: int):
    """:func:`nlbandit.models.glm.newton_solve`: damped Newton from ``theta0`` with step halving, stopping on a
    small full step or a small gradient, or after ``max_iter`` (≥ 1) iterations. Returns (θ, a new array; whether
    it stopped on the step or the gradient: ``converged``). The identity link's F is quadratic:
    :func:`quadratic_newton` with its Hessian, independent of θ, factored once."""
    n, d = x.shape
    xt = np.ascontiguousarray(x.T)
    weighted_xt, residual, curvature, step = np.empty((d, n)), np.empty(n), np.empty(n), np.empty(d)
    if code == 0:
        h = _weighted_gram(x, xt, w, lam, weighted_xt)
        _cholesky(h)
        return quadratic_newton(h, x, w, s, lam, theta0, max_iter, step_tol, grad_tol)
    theta = theta0.copy()
    f0 = objective(code, x, w, s, lam, theta)
    done = False
    for _ in range(max_iter):
        v = x @ theta
        for i in range(n):
            residual[i] = w[i] * mean(code, v[i]) - s[i]
            curvature[i] = w[i] * dmean(code, v[i])
        g = xt @ residual + lam * theta
        h = _weighted_gram(x, xt, curvature, lam, weighted_xt)
        _cholesky(h)
        _solve_lower(h, g, step)
        _solve_upper(h, step, step)
        f_noise = _F_NOISE * (1.0 + abs(f0))
        t = 1.0
        new = theta - step
        f = objective(code, x, w, s, lam, new)
        halvings = 0
        while f > f0 + f_noise and halvings < max_halvings:
            t *= 0.5
            new = theta - t * step
            f = objective(code, x, w, s, lam, new)
            halvings += 1
        done = (t == 1.0 and math.sqrt(step @ step) <= step_tol * (1.0 + math.sqrt(new @ new))) or (
            math.sqrt(g @ g) <= grad_tol)
        theta, f0 = new, f
        if done:
            break
    return theta, done


@njit(cache=True)
def quadratic_newton(h, x, w, s, lam: float, theta0, max_iter: int, step_tol: float, grad_tol: float):
    """:func:`newton_iterate` for the identity link, given ``h`` holding the Cholesky factor L of its Hessian
    G = Σ_i w_i x_i x_iᵀ + λI (independent of θ): F is quadratic, so every full step decreases it and the step
    halving's objective evaluations are skipped (the jitted solver accepts every full step there too); the same
    steps and stopping rule otherwise. Returns (θ, converged)."""
    n, d = x.shape
    residual, step = np.empty(n), np.empty(d)
    theta = theta0.copy()
    done = False
    for _ in range(max_iter):
        v = x @ theta
        for i in range(n):
            residual[i] = w[i] * v[i] - s[i]
        g = residual @ x + lam * theta
        _solve_lower(h, g, step)
        _solve_upper(h, step, step)
        new = theta - step
        done = math.sqrt(step @ step) <= step_tol * (1.0 + math.sqrt(new @ new)) or math.sqrt(g @ g) <= grad_tol
        theta = new
        if done:
            break
    return theta, done


@njit(cache=True)
def quadratic_argmins(h, x, s):
    """The identity link's argmins G⁻¹Xᵀs_j, one per column of ``s`` (C, m), as rows (m, d), ``h`` holding the
    Cholesky factor L of G = Σ_i w_i x_i x_iᵀ + λI: where the jitted solvers iterate (:func:`quadratic_newton`,
    the ensemble's chord steps), their first full step from any start lands here and the next ones move by
    rounding only (their stopping rules then hold), so a learning step solves once instead."""
    b = s.T @ x
    theta, step = np.empty_like(b), np.empty(x.shape[1])
    for j in range(b.shape[0]):
        _solve_lower(h, b[j], step)
        _solve_upper(h, step, theta[j])
    return theta


@njit(cache=True)
def cholesky_add(chol, v):
    """L' with L'L'ᵀ = L Lᵀ + v vᵀ, L the lower triangle of ``chol`` (a new array, zero above the diagonal): the
    rank-one update of a Cholesky factor in O(d²) (Golub & Van Loan, Matrix Computations §6.5.4), e.g. a Gram
    matrix's factor after one more pull of an arm."""
    d = chol.shape[0]
    out, u = _lower(chol), v.copy()
    for k in range(d):
        r = math.sqrt(out[k, k] * out[k, k] + u[k] * u[k])
        inverse = 1.0 / out[k, k]
        c, sn = r * inverse, u[k] * inverse
        inverse_c = out[k, k] / r
        out[k, k] = r
        for i in range(k + 1, d):
            out[i, k] = (out[i, k] + sn * u[i]) * inverse_c
            u[i] = c * u[i] - sn * out[i, k]
    return out


@njit(cache=True)
def newton_solve(code: int, x, w, s, lam: float, theta0, max_iter: int, step_tol: float, grad_tol: float,
                 max_halvings: int):
    """θ of :func:`newton_iterate` (pass :data:`NEWTON_OPTIONS`)."""
    return newton_iterate(code, x, w, s, lam, theta0, max_iter, step_tol, grad_tol, max_halvings)[0]


@njit(cache=True)
def _all_within_rounding(theta, last, eps: float) -> bool:
    """Whether every member's last step is within rounding of zero, 1024 ε (1 + ‖θ_j‖)."""
    for j in range(theta.shape[0]):
        if not last[j] <= 1024 * eps * (1.0 + math.sqrt(theta[j] @ theta[j])):
            return False
    return True


@njit(cache=True)
def ensemble_newton_solve(code: int, x, w, s, lam: float, thetas, iterations: int, tol: float, max_iter: int,
                          grad_tol: float, max_halvings: int):
    """:func:`nlbandit.models.glm.ensemble_newton_solve` (pass :data:`ENSEMBLE_OPTIONS`): the m argmins of the
    members sharing rows (x, w) with response sums ``s`` (C, m), by ``iterations`` chord steps with the
    Hessian at the mean of the warm starts ``thetas`` (m, d) (fewer once every member's last step is within
    rounding of zero, as after the identity link's first two: the next ones change θ by rounding only), then,
    for each member that fails the contraction test, single Newton iterations (from the chord iterate if its last
    step shrank, else from its warm start) until one converges or ``max_iter`` have run. Returns (m, d)."""
    m = thetas.shape[0]
    return _ensemble_newton(code, x, w, s, lam, thetas, hessian_cholesky(code, x, w, lam, thetas.sum(axis=0) / m),
                            iterations, tol, max_iter, grad_tol, max_halvings)


@njit(cache=True)
def _ensemble_newton(code: int, x, w, s, lam: float, thetas, h, iterations: int, tol: float, max_iter: int,
                     grad_tol: float, max_halvings: int):
    """:func:`ensemble_newton_solve` given ``h``, holding the Cholesky factor of the chord steps' Hessian."""
    m, d = thetas.shape
    theta = thetas.copy()
    before, last = np.full(m, np.inf), np.full(m, np.inf)
    residual, step = np.empty((x.shape[0], m)), np.empty(d)
    eps = np.finfo(np.float64).eps
    for iteration in range(iterations):
        if iteration >= 2 and _all_within_rounding(theta, last, eps):
            break  # (the identity link converges in one step: further steps change θ by rounding only)
        v = x @ theta.T
        for i in range(x.shape[0]):
            for j in range(m):
                residual[i, j] = w[i] * mean(code, v[i, j]) - s[i, j]
        g = residual.T @ x + lam * theta
        for j in range(m):
            _solve_lower(h, g[j], step)
            _solve_upper(h, step, step)
            theta[j] -= step
            before[j], last[j] = last[j], math.sqrt(step @ step)
    for j in range(m):
        scale = 1.0 + math.sqrt(theta[j] @ theta[j])
        if last[j] * last[j] <= tol * scale * (before[j] - last[j]) or last[j] <= 1024 * eps * scale:
            continue
        member = np.ascontiguousarray(s[:, j])
        current = theta[j].copy() if last[j] < before[j] else thetas[j].copy()
        for _ in range(max_iter):
            current, converged = newton_iterate(code, x, w, member, lam, current, 1, tol, grad_tol, max_halvings)
            if converged:
                break
        theta[j] = current
    return theta


@njit(cache=True)
def _add_ensemble_pull(n, y, arm: int, reward: float, sigma_r: float, noise):
    """New per-arm pull counts and member sums (n, y (C, m)) with one pull of ``arm`` paying ``reward``, member j's
    sum perturbed by σ_R times ``noise[j]`` (:func:`add_pull` for an ensemble)."""
    n, y = n.copy(), y.copy()
    n[arm] += 1.0
    for j in range(y.shape[1]):
        y[arm, j] += reward + sigma_r * noise[j]
    return n, y


@njit(cache=True)
def ensemble_refit_after_pull(code: int, chol, x, n, y, arm: int, reward: float, sigma_r: float, noise, lam: float,
                              thetas, warming: bool, iterations: int, tol: float, max_iter: int, grad_tol: float,
                              max_halvings: int):
    """GLM-ES's learning step in one call: one pull of ``arm`` paying ``reward``, each member's sum perturbed by
    σ_R times its entry of ``noise`` (m,), and the members refitted from ``thetas`` (:func:`ensemble_newton_solve`;
    the identity link: solved at once, :func:`quadratic_argmins`, with the Gram factor ``chol`` of the state before
    the pull updated by :func:`cholesky_add`, its Hessian at any θ), unless ``warming`` (the warm-up goes on after
    this pull: ``thetas`` kept, :func:`nlbandit.policies.glm.glm_es`). Returns (n, y, θ (m, d), L: the identity
    link's updated factor, else an empty array)."""
    n, y = _add_ensemble_pull(n, y, arm, reward, sigma_r, noise)
    if code == 0:
        h = cholesky_add(chol, x[arm])
        return n, y, thetas.copy() if warming else quadratic_argmins(h, x, y), h
    if warming:
        return n, y, thetas.copy(), np.empty((0, 0))
    theta = ensemble_newton_solve(code, x, n, y, lam, thetas, iterations, tol, max_iter, grad_tol, max_halvings)
    return n, y, theta, np.empty((0, 0))


@njit(cache=True)
def _matrix_power(a, n: int):
    """aⁿ (n ≥ 1) by repeated squaring: ⌈log₂ n⌉ squarings and a product per further one bit of n."""
    out, base = np.eye(a.shape[0]), a.copy()
    while True:
        if n & 1:
            out = out @ base
        n >>= 1
        if n == 0:
            return out
        base = base @ base


@njit(cache=True)
def quadratic_gd(h, x, s, thetas, rate: float, steps: int):
    """The identity link's ``steps`` gradient steps θ ← θ − r(Gθ − Xᵀs_j) (``rate`` r) from each member's warm
    start (rows of ``thetas`` (m, d); response sums ``s`` (C, m)) in closed form, ``h`` holding the Cholesky factor
    L of G = Σ_i w_i x_i x_iᵀ + λI: the step is an affine map with fixed point θ* = G⁻¹Xᵀs_j
    (:func:`quadratic_argmins`), so after n of them θ = θ* + Aⁿ(θ_j − θ*) with A = I − rG — n steps by
    ⌈log₂ n⌉ products of d × d matrices (:func:`_matrix_power`) instead of n products of the m members with the
    (C, d) rows. Returns (m, d)."""
    lower = _lower(h)
    a = -rate * (lower @ lower.T)
    for i in range(a.shape[0]):
        a[i, i] += 1.0
    best = quadratic_argmins(h, x, s)
    return best + (thetas - best) @ _matrix_power(a, steps).T


@njit(cache=True)
def ensemble_gd_after_pull(chol, x, n, y, arm: int, reward: float, sigma_r: float, noise, lr: float, mean: bool,
                           thetas, steps: int):
    """GLM-ES's learning step with its gradient-descent solver and the identity link, in one call: one pull of
    ``arm`` paying ``reward``, each member's sum perturbed by σ_R times its entry of ``noise`` (m,), the Gram
    factor ``chol`` updated by :func:`cholesky_add`, and every member's ``steps`` steps of ``lr`` (divided by
    the number of pulls, at least 1, with ``mean``: :func:`nlbandit.models.glm.gd_solve`'s mean reduction) from
    ``thetas`` (:func:`quadratic_gd`). Returns (n, y, θ (m, d), L)."""
    n, y = _add_ensemble_pull(n, y, arm, reward, sigma_r, noise)
    h = cholesky_add(chol, x[arm])
    rate = lr / max(n.sum(), 1.0) if mean else lr
    return n, y, quadratic_gd(h, x, y, thetas, rate, steps), h


@njit(cache=True)
def add_pull(n, y, arm: int, reward: float):
    """New per-arm pull counts and reward sums (n, y) with one pull of ``arm`` paying ``reward``."""
    n, y = n.copy(), y.copy()
    n[arm] += 1.0
    y[arm] += reward
    return n, y


@njit(cache=True)
def hessian_cholesky(code: int, x, w, lam: float, center):
    """L, in the lower triangle, with L Lᵀ = H(θ̄) = Σ_i w_i μ̇(x_iᵀθ̄) x_i x_iᵀ + λI at ``center`` θ̄."""
    v = x @ center
    curvature = np.empty(x.shape[0])
    for i in range(x.shape[0]):
        curvature[i] = w[i] * dmean(code, v[i])
    h = _weighted_gram(x, np.ascontiguousarray(x.T), curvature, lam, np.empty((x.shape[1], x.shape[0])))
    _cholesky(h)
    return h


@njit(cache=True)
def thompson_step(h, xi):
    """L⁻ᵀ ξ with L Lᵀ = H(θ̄), ``h`` holding L (:func:`hessian_cholesky`): a draw of N(0, H⁻¹) from ξ ~ N(0, I)
    (GLM-TSL's sample minus its centre, before the scale a)."""
    step = np.empty(h.shape[0])
    _solve_upper(h, xi, step)
    return step


@njit(cache=True)
def refit_after_pull(code: int, chol, x, n, y, arm: int, reward: float, scale: float, xi, lam: float, theta0,
                     factor: bool, max_iter: int, step_tol: float, grad_tol: float, max_halvings: int):
    """One reward of a per-arm GLM policy in one compiled call: the pull added (:func:`add_pull`) and the Newton
    MLE of the reward sums refitted from ``theta0`` (:func:`newton_solve`; the identity link: solved at once,
    :func:`quadratic_argmins`, with ``chol``, the factor of the Gram matrix before the pull, updated by
    :func:`cholesky_add`), the sums perturbed by ``scale`` √N_k ξ_k where ``xi`` (K,) is given (GLM-FPL; GLM-TSL
    passes None). Returns (n, y, θ, L): L the factor of the Hessian at θ (:func:`hessian_cholesky`; the identity
    link's updated Gram factor), or, other links without ``factor``, an empty array."""
    n, y = add_pull(n, y, arm, reward)
    targets = y if xi is None else y + scale * (np.sqrt(n) * xi)
    if code == 0:
        h = cholesky_add(chol, x[arm])
        theta = quadratic_argmins(h, x, targets.reshape(-1, 1))[0]
    else:
        theta = newton_solve(code, x, n, targets, lam, theta0, max_iter, step_tol, grad_tol, max_halvings)
        h = hessian_cholesky(code, x, n, lam, theta) if factor else np.empty((0, 0))
    return n, y, theta, h


@njit(cache=True)
def laplace_refit(code: int, chol, x, n, y, arm: int, reward: float, lam: float, center, scale: float, xi,
                  max_iter: int, step_tol: float, grad_tol: float, max_halvings: int):
    """GLM-TSL's learning step in one call: :func:`refit_after_pull` (no perturbation) and the sample
    θ̃ = θ̄ + a L⁻ᵀ ξ (:func:`thompson_step`) at the refitted centre. Returns (n, y, θ̄, θ̃, L)."""
    n, y, center, h = refit_after_pull(code, chol, x, n, y, arm, reward, 0.0, None, lam, center, True, max_iter,
                                       step_tol, grad_tol, max_halvings)
    return n, y, center, center + scale * thompson_step(h, xi), h


@njit(cache=True)
def _lower_inverse(chol):
    """L⁻¹ (lower triangular, zeros above), L the lower triangle of ``chol``."""
    d = chol.shape[0]
    inverse = np.zeros((d, d))
    for j in range(d):
        inverse[j, j] = 1.0 / chol[j, j]
        for i in range(j + 1, d):
            acc = 0.0
            for k in range(j, i):
                acc -= chol[i, k] * inverse[k, j]
            inverse[i, j] = acc / chol[i, i]
    return inverse


@njit(cache=True)
def thompson_factor(h):
    """M = L⁻ᵀ, ``h`` holding L (:func:`hessian_cholesky`): GLM-TSL's θ̃ = θ̄ + a M ξ, ξ ~ N(0, I), the law of its
    sample given the history (:mod:`nlbandit.host.propensity`)."""
    return np.ascontiguousarray(_lower_inverse(h).T)


@njit(cache=True)
def sampled_choice(word, contexts, theta, center, mask, centred: bool):
    """(arm, score, bonus) of GLM-TSL's and GLM-FPL's choice argmax_x xᵀθ̃ (``theta``) by the tie rule
    (:func:`nlbandit.host.exploration.greedy_choice`), the bonus the score's excess over xᵀθ̄ (``center``) with
    ``centred``, else NaN."""
    scores = contexts @ theta
    arm = greedy_choice(word, scores, mask)[0]
    return arm, scores[arm], scores[arm] - contexts[arm] @ center if centred else np.nan


@njit(cache=True)
def thompson_decision(word, contexts, b, inverse, scale: float, z, mask, normals):
    """Lin-TS's act in one call: (arm, score, bonus, p̂, se) of argmax_x xᵀθ̃, θ̃ = θ̂ + v L z with θ̂ = V⁻¹b
    and L Lᵀ = V⁻¹ (``inverse``, :func:`cholesky`; ``scale`` v), the bonus its excess over xᵀθ̂
    (:func:`sampled_choice`), and the probability of that choice under the law of θ̃ estimated from ``normals``
    (NaN without them)."""
    center, factor = b @ inverse, cholesky(inverse)
    arm, score, bonus = sampled_choice(word, contexts, center + scale * (factor @ z), center, mask, True)
    if normals is None:
        return arm, score, bonus, np.nan, np.nan
    p, se = choice_probability(contexts, center, factor, scale, mask, arm, normals)
    return arm, score, bonus, p, se


@njit(cache=True)
def laplace_decision(word, contexts, theta, center, h, scale: float, mask, normals):
    """GLM-TSL's act in one call: (arm, score, bonus, p̂, se) of argmax_x xᵀθ̃ for the sample θ̃ (``theta``)
    the update drew, θ̃ = θ̄ + a L⁻ᵀ ξ (``h`` holding L, :func:`hessian_cholesky`), and the probability of that
    choice under the sample's law (:func:`thompson_factor`) estimated from ``normals`` (NaN without them)."""
    arm, score, bonus = sampled_choice(word, contexts, theta, center, mask, True)
    if normals is None:
        return arm, score, bonus, np.nan, np.nan
    p, se = choice_probability(contexts, center, thompson_factor(h), scale, mask, arm, normals)
    return arm, score, bonus, p, se


@njit(cache=True)
def perturbed_fit_decision(word, contexts, theta, chol, x, y, lam: float, scale: float, mask, normals):
    """GLM-FPL's act in one call (identity link): (arm, score, NaN, p̂, se) of argmax_x xᵀθ̃ for the perturbed
    fit θ̃ (``theta``), and the probability of that choice under the fit's law (:func:`perturbed_fit_law`)
    estimated from ``normals`` (NaN without them)."""
    arm, score, bonus = sampled_choice(word, contexts, theta, theta, mask, False)
    if normals is None:
        return arm, score, bonus, np.nan, np.nan
    center, factor = perturbed_fit_law(chol, x, y, lam)
    p, se = choice_probability(contexts, center, factor, scale, mask, arm, normals)
    return arm, score, bonus, p, se


@njit(cache=True)
def perturbed_fit_law(chol, x, y, lam: float):
    """(centre, factor) of the identity-link perturbed fit (GLM-FPL's law given the history): the fit
    θ̃ = G⁻¹Xᵀ(y + a√N ξ), G = XᵀNX + λI = L Lᵀ (``chol`` holding L, :func:`hessian_cholesky` with the identity
    link), is θ̃ = G⁻¹Xᵀy + a·factor·ζ with ζ ~ N(0, I_d), the factor a rank-d square root of
    Cov = G⁻¹XᵀNXG⁻¹ = G⁻¹ − λG⁻², by Cholesky with a 1e-12 relative jitter (Cov is singular while some direction
    has no pull)."""
    d = x.shape[1]
    half = _lower_inverse(chol)  # W = L⁻¹, so G⁻¹ = WᵀW; both symmetric products by loops over one triangle
    inverse, cov = np.empty((d, d)), np.zeros((d, d))
    for i in range(d):
        for j in range(i + 1):
            acc = 0.0
            for k in range(i, d):  # (W lower: W_ki W_kj vanishes for k < i)
                acc += half[k, i] * half[k, j]
            inverse[i, j] = inverse[j, i] = acc
    top = 0.0
    for i in range(d):
        for j in range(i + 1):
            acc = 0.0
            for k in range(d):
                acc += inverse[i, k] * inverse[j, k]
            cov[i, j] = inverse[i, j] - lam * acc
        top = max(top, cov[i, i])
    jitter = 1e-12 * max(top, 1e-300)
    for i in range(d):
        cov[i, i] += jitter
    _cholesky(cov)  # (reads and writes the lower triangle; the upper stays 0)
    return inverse @ (x.T @ y), cov


@njit(cache=True)
def optimistic_scores(code: int, mean_scale: bool, contexts, theta, inverse, alpha: float):
    """(scores, bonuses) of the optimistic GLM index: bonus_x = α‖x‖_{M⁻¹} (``inverse`` = M⁻¹, symmetric;
    negative rounding clipped to 0) and score μ(xᵀθ) + bonus (``mean_scale``) or xᵀθ + bonus."""
    k, d = contexts.shape
    scores, bonus = np.empty(k), np.empty(k)
    spread = contexts @ inverse
    for a in range(k):
        v, q = 0.0, 0.0
        for j in range(d):
            v += contexts[a, j] * theta[j]
            q += spread[a, j] * contexts[a, j]
        bonus[a] = alpha * math.sqrt(max(q, 0.0))
        scores[a] = (mean(code, v) if mean_scale else v) + bonus[a]
    return scores, bonus


@njit(cache=True)
def optimistic_choice(word, code: int, mean_scale: bool, contexts, theta, inverse, alpha: float, mask):
    """(arm, score, bonus, probability) of the optimistic index (:func:`optimistic_scores`) by the tie rule
    (:func:`nlbandit.host.exploration.greedy_choice`), in one call: Lin-UCB's, GLM-UCB's and UCB-GLM's act."""
    scores, bonus = optimistic_scores(code, mean_scale, contexts, theta, inverse, alpha)
    arm, p = greedy_choice(word, scores, mask)
    return arm, scores[arm], bonus[arm], p
