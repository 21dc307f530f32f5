"""Independent float64 NumPy/SciPy references for the logistic-bandit baselines (Faury et al. 2020, 2022).

Written from the formulas of spec 001 §2.7.3–§2.7.4 (and reference_code.md §3.5–§3.6), not from
``nlbandit.policies.logistic``:

* Logistic-UCB-1 refits the regularised MLE from scratch every round (damped Newton from θ = 0 to
  ‖∇‖ ≤ 1e-12) and builds every matrix from the history with ``np.linalg``;
* ECOLog's online steps are solved exactly through their KKT conditions with nested ``scipy.optimize.brentq``
  root finds (no gradient descent, no whitening), and W⁻¹ is a fresh ``np.linalg.inv`` each round.

ℓ(v, r) = log(1 + e^v) − r v; μ = sigmoid; μ̇ = μ(1 − μ).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit
from scipy.stats import chi2


def dmu(v):
    """μ̇(v) = μ(v)(1 − μ(v))."""
    m = expit(v)
    return m * (1.0 - m)


def log_loss(v, r):
    """ℓ(v, r) = log(1 + e^v) − r v."""
    return np.logaddexp(0.0, v) - r * v


def logistic_mle(X: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """argmin_θ Σ ℓ(x_iᵀθ, y_i) + (λ/2)‖θ‖², by Newton with backtracking from θ = 0 to ‖∇‖ ≤ 1e-12."""
    d = X.shape[1]
    theta = np.zeros(d)

    def objective(th):
        return float(np.sum(log_loss(X @ th, y)) + 0.5 * lam * th @ th)

    for _ in range(100):
        grad = X.T @ (expit(X @ theta) - y) + lam * theta
        if np.linalg.norm(grad) <= 1e-12:
            break
        hess = X.T @ (dmu(X @ theta)[:, None] * X) + lam * np.eye(d)
        step = np.linalg.solve(hess, grad)
        size, f0 = 1.0, objective(theta)
        while objective(theta - size * step) > f0 + 1e-14 * (1.0 + abs(f0)) and size > 1e-10:
            size *= 0.5
        theta = theta - size * step
    return theta


def widths(A: np.ndarray, M: np.ndarray) -> np.ndarray:
    """‖a‖_{M⁻¹} for every row a of ``A``, with a linear solve."""
    return np.sqrt(np.einsum("kd,dk->k", A, np.linalg.solve(M, A.T)))


def ucb1_scores(arms: np.ndarray, X: np.ndarray, y: np.ndarray, *, width: str, s: float, delta: float,
                kappa: float, lam_scale: float = 1.0, alpha: float = 1.0, fit_n: int | None = None) -> np.ndarray:
    """Logistic-UCB-1 scores μ(xᵀθ̂) + ρ ‖x‖_{V⁻¹} in the round after the n = len(y) observations.

    λ(m) = lam_scale·d·log(2 + m). θ̂ is the MLE on the first ``fit_n`` (default n) observations with λ(fit_n)
    (lazy refits). ``width``: "theory" (ρ = ¼(2+4S)√κ γ, V = XᵀX + κλ(n)I), "reference" (logbexp's ρ,
    V = XᵀX + d I, H = Hessian at θ̂ with λ(fit_n)), "constant" (ρ = alpha, V as theory).
    """
    n, d = len(y), arms.shape[1]
    fit_n = n if fit_n is None else fit_n
    lam_fit = lam_scale * d * np.log(2.0 + fit_n)
    theta = logistic_mle(X[:fit_n], y[:fit_n], lam_fit)
    lam = lam_scale * d * np.log(2.0 + n)
    kappa = kappa if kappa > 0 else 1.0 / dmu(s)
    if width == "reference":
        H = X[:fit_n].T @ (dmu(X[:fit_n] @ theta)[:, None] * X[:fit_n]) + lam_fit * np.eye(d)
        logdet = np.linalg.slogdet(H)[1]
        info = (np.log(1 / delta) + 0.5 * logdet - 0.5 * d * np.log(lam)
                + np.log(chi2(d).cdf(2 * lam) / chi2(d).cdf(lam)))
        gamma = min(np.sqrt(lam) / 2 + 2 / np.sqrt(lam) * info, 1 + info)
        rho = 0.25 * np.sqrt(kappa) * min(np.sqrt(1 + 2 * s) * gamma, gamma + gamma**2 / np.sqrt(lam)) + np.sqrt(lam) * s
        V = X.T @ X + d * np.eye(d)
    else:
        if width == "theory":
            gamma = np.sqrt(lam) * (s + 0.5) + 2 / np.sqrt(lam) * (
                np.log(1 / delta) + d * np.log(2) + 0.5 * d * np.log(1 + 0.25 * n / (d * lam)))
            rho = 0.25 * (2 + 4 * s) * np.sqrt(kappa) * gamma
        else:
            rho = alpha
        V = X.T @ X + kappa * lam * np.eye(d)
    return expit(arms @ theta) + rho * widths(arms, V)


def ecolog_step_exact(theta_c: np.ndarray, W: np.ndarray, x: np.ndarray, r: float, s: float,
                      label_free: bool = False) -> np.ndarray:
    """argmin_{‖θ‖≤S} ℓ(xᵀθ, r) + ½(θ − θ_c)ᵀW(θ − θ_c) (``label_free``: loss ℓ(·,0) + ℓ(·,1)).

    KKT: (W + νI)θ = Wθ_c − g(xᵀθ) x with g = μ − r (or 2μ − 1), ν ≥ 0, ν(‖θ‖ − S) = 0. For fixed ν the
    scalar v = xᵀθ solves v − xᵀb₀ + g(v) xᵀb₁ = 0 (b₀ = (W+νI)⁻¹Wθ_c, b₁ = (W+νI)⁻¹x; increasing in v);
    ‖θ(ν)‖ is non-increasing in ν, so ν is a root of ‖θ(ν)‖ = S when θ(0) is infeasible.
    """
    d = len(x)

    def g(v):
        return 2.0 * expit(v) - 1.0 if label_free else expit(v) - r

    def theta_of(nu):
        A = W + nu * np.eye(d)
        b0, b1 = np.linalg.solve(A, W @ theta_c), np.linalg.solve(A, x)
        p, q = x @ b0, x @ b1
        v = brentq(lambda v: v - p + g(v) * q, p - abs(q) - 1.0, p + abs(q) + 1.0, xtol=1e-15, rtol=1e-15,
                   maxiter=500)
        return b0 - g(v) * b1

    th = theta_of(0.0)
    if np.linalg.norm(th) <= s:
        return th
    hi = 1.0
    while np.linalg.norm(theta_of(hi)) > s:
        hi *= 2.0
    nu = brentq(lambda nu: np.linalg.norm(theta_of(nu)) - s, 0.0, hi, xtol=1e-15, rtol=1e-15, maxiter=500)
    return theta_of(nu)


class ECOLogRef:
    """ada-OFU-ECOLog run forward in NumPy (``width`` "ada", "lee" or "constant"; θ̄ centred on θ_t)."""

    def __init__(self, d: int, lam: float, s: float, delta: float, width: str = "ada", alpha: float = 1.0):
        self.lam, self.s, self.delta, self.width, self.alpha = lam, s, delta, width, alpha
        self.theta = np.zeros(d)
        self.W = lam * np.eye(d)
        self.gap = 0.0
        self.disc = 0.0

    def radius(self, t: int) -> float:
        lam, s, delta = self.lam, self.s, self.delta
        log_term = np.log(2 * np.sqrt(1 + t / (4 * lam)) / delta)
        if self.width == "constant":
            return self.alpha
        if self.width == "ada":
            gamma = np.sqrt(lam) / 2 + 2 / np.sqrt(lam) * log_term
            eta = 2 * lam * s**2 + (1 + s) ** 2 * gamma + 2 * (1 + s) * self.gap - self.disc
        else:
            nu = 0.5 + 2 * log_term
            u = (2 + s) * nu / 4 + s**2 / (2 + s)
            eta = 4 * s**2 + 2 * (2 + s) * (u + self.gap) + 4 * np.log(1 + t)
        return np.sqrt(max(eta, 0.0))

    def scores(self, arms: np.ndarray, t: int) -> np.ndarray:
        """Round-t scores μ(xᵀθ_t) + √η_t ‖x‖_{W⁻¹}, W⁻¹ by ``np.linalg.inv``."""
        w_inv = np.linalg.inv(self.W)
        return expit(arms @ self.theta) + self.radius(t) * np.sqrt(np.einsum("kd,de,ke->k", arms, w_inv, arms))

    def update(self, x: np.ndarray, r: float) -> None:
        new = ecolog_step_exact(self.theta, self.W, x, r, self.s)
        bar = ecolog_step_exact(self.theta, self.W, x, r, self.s, label_free=True)
        self.gap += log_loss(x @ bar, r) - log_loss(x @ new, r)
        self.disc += 0.5 * (new - bar) @ self.W @ (new - bar)
        self.W = self.W + dmu(x @ new) * np.outer(x, x)
        self.theta = new
