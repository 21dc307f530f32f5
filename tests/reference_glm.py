"""Independent float64 NumPy references for the GLM policies (logistic link).

Written from the papers' formulas, not from ``nlbandit``'s code: every estimate is refitted from
scratch on the full history with SciPy's L-BFGS-B polished by plain Newton steps, rather than
warm-started. Random draws are passed in explicitly, so a test can feed the policy's own draws.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit


def logistic_mle(X: np.ndarray, targets: np.ndarray, lam: float) -> np.ndarray:
    """argmin_θ Σ_l [log(1 + e^{x_lᵀθ}) − y_l x_lᵀθ] + (λ/2)‖θ‖² for rows ``X`` (n, d), targets (n,)."""
    d = X.shape[1]

    def f(theta):
        v = X @ theta
        return np.sum(np.logaddexp(0.0, v) - targets * v) + 0.5 * lam * theta @ theta

    def g(theta):
        return X.T @ (expit(X @ theta) - targets) + lam * theta

    theta = minimize(f, np.zeros(d), jac=g, method="L-BFGS-B", options={"gtol": 1e-10, "maxiter": 10_000}).x
    for _ in range(5):  # Newton polish to full float64 accuracy
        theta = theta - np.linalg.solve(logistic_hessian(X, theta, lam), g(theta))
    return theta


def logistic_hessian(X: np.ndarray, theta: np.ndarray, lam: float) -> np.ndarray:
    """λI + Σ_l μ̇(x_lᵀθ) x_l x_lᵀ."""
    mu = expit(X @ theta)
    return (X * (mu * (1 - mu))[:, None]).T @ X + lam * np.eye(X.shape[1])


def widths(arms: np.ndarray, X: np.ndarray, lam: float) -> np.ndarray:
    """‖x‖_{G⁻¹} for every arm, G = λI + XᵀX."""
    g_inv = np.linalg.inv(lam * np.eye(arms.shape[1]) + X.T @ X)
    return np.sqrt(np.einsum("kd,de,ke->k", arms, g_inv, arms))


def glm_ucb_choice(arms, X, y, lam, rho) -> int:
    """Filippi et al. (2010): argmax μ(xᵀθ̂) + ρ‖x‖_{G⁻¹}."""
    return int(np.argmax(expit(arms @ logistic_mle(X, y, lam)) + rho * widths(arms, X, lam)))


def ucb_glm_choice(arms, X, y, lam, alpha) -> int:
    """Li et al. (2017): argmax xᵀθ̂ + α‖x‖_{V⁻¹}."""
    return int(np.argmax(arms @ logistic_mle(X, y, lam) + alpha * widths(arms, X, lam)))


def glm_tsl_choice(arms, X, y, lam, a, xi) -> int:
    """Kveton et al. (2020) eqs. (4)–(5): θ̃ = θ̄ + a L⁻ᵀ ξ with H(θ̄) = L Lᵀ."""
    center = logistic_mle(X, y, lam)
    chol = np.linalg.cholesky(logistic_hessian(X, center, lam))
    return int(np.argmax(arms @ (center + a * np.linalg.solve(chol.T, xi))))


def glm_fpl_choice(arms, X, y, lam, a, noise) -> int:
    """Kveton et al. (2020) eq. (6) on the history with the per-observation perturbations ``a·noise``."""
    return int(np.argmax(arms @ logistic_mle(X, y + a * noise, lam)))
