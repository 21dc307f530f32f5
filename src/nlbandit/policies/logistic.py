"""Logistic-bandit baselines of Faury et al.: ``logistic-ucb-1`` (2020) and ``ada-ofu-ecolog`` (2022).

Both are linear in the raw features x ∈ ℝ^d, with the logistic mean μ(v) = 1/(1+e^{−v}), the log-loss
ℓ(v, r) = −r log μ(v) − (1−r) log(1−μ(v)) = log(1+e^v) − r v, and a UCB score on the probability scale,
argmax_x μ(xᵀθ) + (radius)·‖x‖_{M⁻¹} (spec 001 §2.7.3–§2.7.4). Every argmax breaks ties at random
(:func:`~nlbandit.policies.exploration.argmax_random_ties`). The state is float64.

* :func:`logistic_ucb_1` refits the regularised maximum-likelihood estimate on the whole history every
  round: on a fixed-size history buffer of ``spec.horizon`` rows (cost per round grows like t), or, on a
  fixed arm set, on per-arm pull counts and reward sums (``backend="arms"``: the same estimate at a cost
  per round independent of t).
* :func:`ada_ofu_ecolog` makes one online step per round (projected gradient descent in whitened
  coordinates, one ``eigh`` per round, no history), so its cost per round does not depend on t.

Reference code: ``louisfaury/logistic_bandit`` (``logbexp``), read for its practical choices, none of
it copied; its choices and bugs are listed in ``shared/specs/reference_code.md`` §3.5–§3.6 and noted
below where this module follows or departs from them.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammainc

from nlbandit.core.hyper import SIGNATURE, ConfigError, Hyper, forwards, signature_defaults
from nlbandit.core.types import Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models.glm import glm_hessian, newton_solve
from nlbandit.models.history import HISTORY_BLOCK, Rows, add_row, empty_rows, history_capacity
from nlbandit.models.links import LINKS
from nlbandit.models.ridge import cholesky_widths, gram_update, mahalanobis_widths
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info, choose
from nlbandit.policies.logistic_gd import EXPERIMENT_HYPERS, EXPERIMENT_ONLY, check_features, logistic_gd

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


_LOGISTIC = LINKS["logistic"]
L_MU = 0.25
"""L_μ = sup μ̇ of the logistic link (Faury et al. 2020's L)."""


def log_loss(v: jax.Array, r: jax.Array) -> jax.Array:
    """ℓ(v, r) = log(1 + e^v) − r v, the logistic negative log-likelihood of reward r at v = xᵀθ."""
    return _LOGISTIC.log_partition(v) - r * v


def kappa_of(params) -> jax.Array:
    """κ: ``params.kappa`` when positive, else 1/μ̇(S), the worst case over ‖θ‖ ≤ S and ‖x‖ ≤ 1
    (the reference code's 1/μ̇(S·arm_norm_ub) with arm_norm_ub = 1)."""
    return jnp.where(params.kappa > 0.0, params.kappa, 1.0 / _LOGISTIC.dmean(params.s))


# --------------------------------------------------------------------------------------------------------
# Logistic-UCB-1 (Faury, Abeille, Calauzènes & Fercoq, ICML 2020)
# --------------------------------------------------------------------------------------------------------


class LogUCB1State(NamedTuple):
    """Logistic-UCB-1 state.

    Attributes:
      rows: the data (:class:`~nlbandit.models.history.Rows`): the played features and rewards in order
        (a history buffer), or per arm of the fixed arm set its features, pull count and reward sum.
      theta: (d,) the regularised MLE θ̂ that ``act`` scores with.
      gram: (d, d) Σ_s x_s x_sᵀ, without regulariser (V_t adds its own, which changes with t).
      logdet_h: log det H_t(θ̂), H_t(θ) = λ_t I + Σ μ̇(x_sᵀθ) x_s x_sᵀ (``width="reference"`` only).
    """

    rows: Rows
    theta: jax.Array
    gram: jax.Array
    logdet_h: jax.Array


def ucb1_lambda(params, n: jax.Array, d: int, schedule: str) -> jax.Array:
    """λ after n observations: ``lam_scale``·d·log(2 + n) (``schedule="log"``, the reference code's
    λ_t = d log(2 + t)), or the constant ``lam`` (``schedule="constant"``)."""
    if schedule == "log":
        return params.lam_scale * d * jnp.log(2.0 + n)
    return params.lam


def ucb1_theory_radius(params, lam: jax.Array, n: jax.Array, d: int) -> jax.Array:
    """ρ_t = L_μ (2 + 4S) √κ γ_t(δ) of Logistic-UCB-1's bonus ε_{t,1}(x) = ρ_t ‖x‖_{V_t⁻¹} (Faury et al.
    2020, Algorithm 1, as in spec 001 §2.7.3), with

    γ_t(δ) = √λ_t (S + ½) + (2/√λ_t) [log(1/δ) + d log 2 + (d/2) log(1 + L_μ n/(d λ_t))],

    n the number of observations in V_t.
    """
    s, delta = params.s, params.delta
    info = jnp.log(1.0 / delta) + d * jnp.log(2.0) + 0.5 * d * jnp.log1p(L_MU * n / (d * lam))
    gamma = jnp.sqrt(lam) * (s + 0.5) + 2.0 / jnp.sqrt(lam) * info
    return L_MU * (2.0 + 4.0 * s) * jnp.sqrt(kappa_of(params)) * gamma


def ucb1_reference_radius(params, lam: jax.Array, logdet_h: jax.Array, d: int) -> jax.Array:
    """The reference code's "slight refinement" of the radius (``logbexp`` LogisticUCB1; reference_code.md
    §3.5 item 2):

    ρ_t = ¼ √κ min(√(1+2S) γ, γ + γ²/√λ_t) + √λ_t S,   γ = min(γ₁, γ₂),
    γ₁ = √λ_t/2 + (2/√λ_t) I_t,   γ₂ = 1 + I_t,
    I_t = log(1/δ) + ½ log det H_t − (d/2) log λ_t + log(F_d(2λ_t)/F_d(λ_t)),

    with F_d the χ²_d distribution function, F_d(x) = P(d/2, x/2) (regularised lower incomplete gamma).
    """
    s, delta = params.s, params.delta
    chi2_ratio = jnp.log(gammainc(0.5 * d, lam)) - jnp.log(gammainc(0.5 * d, 0.5 * lam))
    info = jnp.log(1.0 / delta) + 0.5 * logdet_h - 0.5 * d * jnp.log(lam) + chi2_ratio
    gamma = jnp.minimum(jnp.sqrt(lam) / 2.0 + 2.0 / jnp.sqrt(lam) * info, 1.0 + info)
    lead = jnp.minimum(jnp.sqrt(1.0 + 2.0 * s) * gamma, gamma + gamma**2 / jnp.sqrt(lam))
    return 0.25 * jnp.sqrt(kappa_of(params)) * lead + jnp.sqrt(lam) * s


def logistic_ucb_1(spec: ProblemSpec, width: str = "theory", schedule: str = "log", newton_steps: int = 5,
                   lazy_every: int = 1, lazy_after: int = 200, backend: str = "history") -> Policy:
    """Logistic-UCB-1 (Faury, Abeille, Calauzènes & Fercoq 2020, Algorithm 1; spec 001 §2.7.3).

    In round t, with n = t − 1 observations (x_s, r_s):

    * λ_t = ``lam_scale``·d·log(2 + n) (``schedule="log"``, the reference code's λ_t = d log(2 + t); the
      paper's λ_t ≍ d log(t/δ)) or λ_t = ``lam`` (``schedule="constant"``);
    * θ̂_t = argmin_θ Σ_s ℓ(x_sᵀθ, r_s) + (λ_t/2)‖θ‖²: ``newton_steps`` damped Newton steps
      (:func:`~nlbandit.models.glm.newton_solve`: Cholesky solves, step halving, early stop once converged)
      on the full history, warm-started at the previous θ̂ (θ̂ = 0 before the first observation);
    * score μ(xᵀθ̂_t) + ρ_t ‖x‖_{V_t⁻¹}:

      - ``width="theory"``: ρ_t = L_μ (2 + 4S) √κ γ_t(δ), V_t = Σ_s x_s x_sᵀ + κλ_t I
        (:func:`ucb1_theory_radius`);
      - ``width="reference"``: the reference code's refined ρ_t (:func:`ucb1_reference_radius`, which
        needs log det H_t(θ̂), one extra O(t d²) Hessian per refit) with its design matrix
        V_t = Σ_s x_s x_sᵀ + d·I (λ₀ = d, never changed);
      - ``width="constant"``: ρ_t = ``alpha``, V_t as for ``"theory"``.

    Params (traced float64 scalars): ``s`` (S, bound on ‖θ*‖), ``delta`` (δ, failure probability),
    ``kappa`` (κ; ≤ 0 derives κ = 1/μ̇(S), valid for ‖x‖ ≤ 1), ``lam_scale`` (factor of the log schedule),
    ``lam`` (λ of the constant schedule), ``alpha`` (the constant width). Static: ``width``, ``schedule``,
    ``newton_steps`` (Newton iterations per refit), ``lazy_every``/``lazy_after`` (refit only in rounds t
    with (t − 1) mod ``lazy_every`` = 0 once t ≥ ``lazy_after``; the default ``lazy_every=1`` refits every
    round); ``backend``: ``"history"`` (any arm sets) or ``"arms"`` (a fixed arm set, per-arm sufficient
    statistics: Σ_s ℓ(x_sᵀθ, r_s) = Σ_k [N_k log(1 + e^{x_kᵀθ}) − R_k x_kᵀθ], so the fit is the same).

    Per-round cost: O(newton_steps · t d²) for the refit with ``backend="history"`` (the history sums run
    over the filled blocks of 128 rows) or O(newton_steps · K d²) with ``"arms"``, plus O(d³ + Kd²) for
    the widths (a Cholesky factor of V_t, rebuilt every round since λ_t changes).

    Deviations, from the paper (P) and from the reference code ``logbexp`` (R):

    * (P, as R and the seed paper) the projection θ_t⁽¹⁾ = argmin_{‖θ‖≤S} ‖g_t(θ) − g_t(θ̂_t)‖_{H_t⁻¹(θ)}
      (a non-convex problem) is skipped: θ̂_t itself is scored.
    * (R) the reference refits lazily (every ``lazy_update_fr`` rounds once t ≥ 200); here the default
      refits every round; the reference's cadence is available as ``lazy_every=5`` (or 10).
    * (R) the reference starts from a random θ̂ ~ N(0, I); here θ̂ = 0 (as the ``nick-jhlee`` fork).
    * (R) the reference's Newton steps are undamped with no convergence test; here they are damped
      (step halving, which only guards against divergence) and stop early once converged: the same
      limit, reached in at most ``newton_steps`` iterations (measured: 5 suffice to 1e-9 in the tests).
    * (R) round 1 uses λ = d·log 2 (the schedule at n = 0); the reference uses λ = d until the first
      refit. For ``width="reference"`` log det H_t is taken at the final θ̂ (the reference takes the
      Hessian at the last Newton iterate's starting point; equal at convergence).
    * (R, ``width="theory"``) the reference's radius and V₀ = d·I are not the paper's; ``"theory"`` uses
      the spec's formula, ``"reference"`` reproduces the reference code.
    """
    if width not in ("theory", "reference", "constant"):
        raise ValueError(f"unknown width {width!r}")
    if schedule not in ("log", "constant"):
        raise ValueError(f"unknown schedule {schedule!r}")
    if backend not in ("history", "arms"):
        raise ValueError(f"unknown backend {backend!r}")
    d = spec.d
    history = backend == "history"
    capacity = history_capacity(spec.horizon) if history else spec.k

    def init(params, key):
        lam0 = ucb1_lambda(params, jnp.zeros(()), d, schedule)
        return LogUCB1State(empty_rows(capacity, d), jnp.zeros((d,)), jnp.zeros((d, d)),
                            d * jnp.log(jnp.asarray(lam0, jnp.float64)))

    def act(params, state, key, contexts, mask, t):
        n = jnp.asarray(t, jnp.float64) - 1.0
        lam = ucb1_lambda(params, n, d, schedule)
        eye = jnp.eye(d)
        if width == "reference":
            rho = ucb1_reference_radius(params, lam, state.logdet_h, d)
            v = state.gram + d * eye
        else:
            rho = ucb1_theory_radius(params, lam, n, d) if width == "theory" else params.alpha
            v = state.gram + kappa_of(params) * lam * eye
        bonus = rho * cholesky_widths(v, contexts)
        scores = _LOGISTIC.mean(contexts @ state.theta) + bonus
        arm, p = choose(key, scores, mask)
        return arm, act_info(scores[arm], bonus[arm], p)

    def refit(params, state, t):
        lam = ucb1_lambda(params, jnp.asarray(t, jnp.float64), d, schedule)
        rows = state.rows
        active = (rows.count, HISTORY_BLOCK) if history else None
        theta = newton_solve(_LOGISTIC, rows.x, rows.n, rows.y, lam, state.theta, max_iter=newton_steps,
                             active=active).theta
        logdet_h = state.logdet_h
        if width == "reference":
            logdet_h = jnp.linalg.slogdet(glm_hessian(_LOGISTIC, theta, rows.x, rows.n, lam, active))[1]
        return state._replace(theta=theta, logdet_h=logdet_h)

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm].astype(jnp.float64)
        state = state._replace(rows=add_row(state.rows, x, arm, feedback.reward, per_arm=not history),
                               gram=state.gram + jnp.outer(x, x))
        if lazy_every == 1:
            return refit(params, state, t)
        now = (t < lazy_after) | ((t - 1) % lazy_every == 0)
        return jax.lax.cond(now, lambda s: refit(params, s, t), lambda s: s, state)

    def prepare(params, state, key, arms, mask):
        return state if history else state._replace(rows=state.rows._replace(x=arms.astype(jnp.float64)))

    meta = PolicyMeta("logistic-ucb-1", Requirements(fixed_arms=not history, reward_range=(0.0, 1.0)),
                      max_horizon=spec.horizon if history else None)
    return Policy(init, act, update, meta, prepare)


# --------------------------------------------------------------------------------------------------------
# ada-OFU-ECOLog (Faury, Abeille, Jun & Calauzènes, AISTATS 2022)
# --------------------------------------------------------------------------------------------------------


class Whitening(NamedTuple):
    """Eigendecomposition W = Q diag(e) Qᵀ of a positive definite matrix (one ``eigh``).

    The whitened coordinates used by the online step are u = diag(√e) Qᵀ θ = Qᵀ W^{1/2} θ: the
    symmetric whitening z = W^{1/2} θ of the reference code rotated by Qᵀ. Gradient steps and Euclidean
    projections commute with rotations, so the iterates are the reference's, rotated.
    """

    evecs: jax.Array
    evals: jax.Array


def whitening(w: jax.Array) -> Whitening:
    """One ``jnp.linalg.eigh`` of the symmetric positive definite ``w``."""
    evals, evecs = jnp.linalg.eigh(w)
    return Whitening(evecs, evals)


def sqrt_factors(wh: Whitening) -> tuple[jax.Array, jax.Array]:
    """(W^{1/2}, W^{−1/2}), the symmetric square roots Q diag(e^{±1/2}) Qᵀ (no Schur-based ``sqrtm``)."""
    root = jnp.sqrt(wh.evals)
    return (wh.evecs * root) @ wh.evecs.T, (wh.evecs / root) @ wh.evecs.T


def project_ellipsoid(y: jax.Array, evals: jax.Array, s: jax.Array, iters: int = 30) -> jax.Array:
    """Euclidean projection of ``y`` onto E = {u : Σ_i u_i²/e_i ≤ S²} (the ball ‖θ‖ ≤ S in whitened
    coordinates).

    KKT: p_i(ν) = y_i e_i/(e_i + ν) with ν ≥ 0 the root of the secular equation
    φ(ν) = Σ_i y_i² e_i/(e_i + ν)² = S² (ν = 0 when y ∈ E). ν is found by ``iters`` Newton steps from 0 on
    ψ(ν) = φ(ν)^{−1/2} − 1/S, which is concave and increasing on ν ≥ 0 (Moré & Sorensen 1983), so the
    iterates increase monotonically to the root without overshooting; a fixed count keeps it jittable.
    The result is finally scaled by min(1, S/‖p‖_E) so it is feasible even if the root was not reached.
    """
    c = y * y * evals
    outside = jnp.sum(c / evals**2) > s * s
    tiny = jnp.finfo(y.dtype).tiny

    def newton(_, nu):
        r = evals + nu
        phi = jnp.maximum(jnp.sum(c / r**2), tiny)
        dpsi = jnp.maximum(jnp.sum(c / r**3) * phi**-1.5, tiny)
        return jnp.maximum(nu - (phi**-0.5 - 1.0 / s) / dpsi, 0.0)

    nu = jax.lax.fori_loop(0, iters, newton, jnp.zeros((), y.dtype))
    p = y * (evals / (evals + jnp.where(outside, nu, 0.0)))
    norm = jnp.sqrt(jnp.sum(p * p / evals))
    return p * jnp.minimum(1.0, s / jnp.maximum(norm, tiny))


class StepResult(NamedTuple):
    """An online step's solution in whitened coordinates, and the gradient iterations it took."""

    u: jax.Array
    iterations: jax.Array


def whitened_step(u_center: jax.Array, a: jax.Array, evals: jax.Array, reward: jax.Array, s: jax.Array,
                  label_free: bool = False, max_steps: int = 100, tol: float = 1e-12,
                  proj_iters: int = 30) -> StepResult:
    """Projected gradient descent for min_{u ∈ E} f(u) = ℓ(aᵀu, r) + ½‖u − u_c‖² (``label_free``: the loss
    ℓ(·, 0) + ℓ(·, 1), gradient (2μ − 1) a), from u_c.

    f is 1-strongly convex and (1 + c‖a‖²)-smooth, with c = sup ℓ'' = ¼ (c = ½ for the label-free loss,
    whose second derivative is 2μ̇), so the step 2/(μ + L) = 2/(2 + c‖a‖²) contracts the distance to the
    solution by c‖a‖²/(2 + c‖a‖²) per iteration (≤ 0.2 when ‖a‖ ≤ 1). It stops when an iteration moves u
    by at most ``tol``·(1 + ‖u‖), or after ``max_steps`` iterations.
    """
    q = a @ a
    step = 2.0 / (2.0 + (0.5 if label_free else 0.25) * q)

    def grad(u):
        mu = _LOGISTIC.mean(a @ u)
        return u - u_center + ((2.0 * mu - 1.0) if label_free else (mu - reward)) * a

    def cond(carry):
        _, it, done = carry
        return (it < max_steps) & ~done

    def body(carry):
        u, it, _ = carry
        new = project_ellipsoid(u - step * grad(u), evals, s, proj_iters)
        done = jnp.linalg.norm(new - u) <= tol * (1.0 + jnp.linalg.norm(new))
        return new, it + 1, done

    u, it, _ = jax.lax.while_loop(cond, body, (u_center, jnp.zeros((), jnp.int32), jnp.zeros((), bool)))
    return StepResult(u, it)


def ecolog_step(theta_center: jax.Array, w: jax.Array, x: jax.Array, reward: jax.Array, s: jax.Array,
                label_free: bool = False, max_steps: int = 100, tol: float = 1e-12,
                proj_iters: int = 30) -> jax.Array:
    """argmin_{‖θ‖≤S} ℓ(xᵀθ, r) + ½‖θ − θ_c‖²_W (or with the label-free loss), by
    :func:`whitened_step` in the whitened coordinates of one ``eigh`` of W."""
    wh = whitening(w)
    root = jnp.sqrt(wh.evals)
    u = whitened_step(root * (wh.evecs.T @ theta_center), (wh.evecs.T @ x) / root, wh.evals, reward, s,
                      label_free, max_steps, tol, proj_iters).u
    return wh.evecs @ (u / root)


class ECOLogState(NamedTuple):
    """ada-OFU-ECOLog state (no history: every field has a size fixed by d).

    Attributes:
      theta: (d,) the online estimate θ_t.
      w: (d, d) W_{t−1} = λI + Σ_{s<t} μ̇(x_sᵀθ_{s+1}) x_s x_sᵀ.
      w_inv: (d, d) its inverse (Sherman–Morrison).
      gap_sum: Σ_{s<t} ℓ_s(θ̄_s) − ℓ_s(θ_{s+1}), with ℓ_s(θ) = ℓ(x_sᵀθ, r_s).
      disc_sum: Σ_{s<t} ½‖θ_{s+1} − θ̄_s‖²_{W_{s−1}}.
      violations: rounds in which the reference code's sensitivity check μ̇(xᵀθ̄)/μ̇(xᵀθ_{t+1}) ≤ 2 failed.
      gd_iterations: gradient iterations of the last round (online step, label-free step), for diagnostics.
    """

    theta: jax.Array
    w: jax.Array
    w_inv: jax.Array
    gap_sum: jax.Array
    disc_sum: jax.Array
    violations: jax.Array
    gd_iterations: jax.Array


def ecolog_radius_sq(params, state: ECOLogState, t: jax.Array, width: str) -> jax.Array:
    """η_t, the squared radius (clipped at 0) of the bonus √η_t ‖x‖_{W_{t−1}⁻¹} in round t.

    ``width="ada"`` (Faury's code, with the squared norm): η_t = 2λS² + (1+S)² γ_t + 2(1+S)·gap_sum −
    disc_sum, γ_t = √λ/2 + (2/√λ) log(2√(1 + t/(4λ))/δ). ``width="lee"`` (the ``nick-jhlee`` fork):
    ν = ½ + 2 log(2√(1 + t/(4λ))/δ), u = (2+S)ν/4 + S²/(2+S), η_t = 4S² + 2(2+S)(u + gap_sum) + 4 log(1+t).
    """
    lam, s, delta = params.lam, params.s, params.delta
    t = jnp.asarray(t, jnp.float64)
    log_term = jnp.log(2.0 * jnp.sqrt(1.0 + t / (4.0 * lam)) / delta)
    if width == "ada":
        gamma = jnp.sqrt(lam) / 2.0 + 2.0 / jnp.sqrt(lam) * log_term
        eta = 2.0 * lam * s**2 + (1.0 + s) ** 2 * gamma + 2.0 * (1.0 + s) * state.gap_sum - state.disc_sum
    else:
        nu = 0.5 + 2.0 * log_term
        u = (2.0 + s) * nu / 4.0 + s**2 / (2.0 + s)
        eta = 4.0 * s**2 + 2.0 * (2.0 + s) * (u + state.gap_sum) + 4.0 * jnp.log1p(t)
    return jnp.maximum(eta, 0.0)


def ada_ofu_ecolog(spec: ProblemSpec, width: str = "ada", bar_center: str = "previous", gd_steps: int = 100,
                   proj_iters: int = 30) -> Policy:
    """ada-OFU-ECOLog (Faury, Abeille, Jun & Calauzènes 2022; spec 001 §2.7.4): per-round cost
    O(d³ + Kd²), independent of t.

    Round t scores μ(xᵀθ_t) + √η_t ‖x‖_{W_{t−1}⁻¹} (:func:`ecolog_radius_sq`; ``width="constant"``:
    √η_t = ``alpha``). After observing (x_t, r_t), with one ``eigh`` of W_{t−1} (:class:`Whitening`):

    * θ_{t+1} = argmin_{‖θ‖≤S} ℓ(x_tᵀθ, r_t) + ½‖θ − θ_t‖²_{W_{t−1}} and
      θ̄_t = argmin_{‖θ‖≤S} ℓ(x_tᵀθ, 0) + ℓ(x_tᵀθ, 1) + ½‖θ − θ_t‖²_{W_{t−1}} (label-free, so θ̄_t does not
      depend on r_t), both by :func:`whitened_step` (projected gradient descent, at most ``gd_steps``
      iterations, projection by :func:`project_ellipsoid` with ``proj_iters`` Newton steps);
    * gap_sum += ℓ_t(θ̄_t) − ℓ_t(θ_{t+1}), disc_sum += ½‖θ_{t+1} − θ̄_t‖²_{W_{t−1}};
    * W_t = W_{t−1} + μ̇(x_tᵀθ_{t+1}) x_t x_tᵀ (the weight at the *updated* estimate), W⁻¹ by
      Sherman–Morrison; W_0 = λI, θ_1 = 0.

    Params (traced float64 scalars): ``lam`` (λ, W_0 = λI; reference 1), ``s`` (S, the constraint radius
    and bound on ‖θ*‖), ``delta`` (δ), ``alpha`` (the constant width). Static: ``width`` ∈ {"ada",
    "lee", "constant"}, ``bar_center`` ∈ {"previous", "updated"} (centre of θ̄'s step: θ_t, or the
    reference code's θ_{t+1}), ``gd_steps``, ``proj_iters``.

    Deviations, from the paper (P) and from the reference code ``logbexp`` (R):

    * (R) the radius term −½‖θ_{s+1} − θ̄_s‖_{W} of the reference is a norm; here it is the squared norm
      ½‖·‖²_W of the paper's derivation (reference_code.md §3.6 5(a)).
    * (R) the reference centres θ̄'s step on the already updated θ_{t+1}, which depends on r_t; here it is
      centred on θ_t as in the paper (``bar_center="updated"`` reproduces the reference).
    * (R) the reference takes the step size 1/(2(¼ + 2/(2+S))) and ⌈(5/4 + S/8) log(2(2+S)S²t)⌉ gradient
      iterations (4× for θ̄), i.e. precision 1/t; here the step is 2/(2 + c‖x‖²_{W⁻¹}) with c = ¼ (½ for
      θ̄), the optimal fixed step for this 1-strongly convex problem, and the iterations stop at a 1e-12
      relative move (at most ``gd_steps``; ``state.gd_iterations`` records the last round's counts).
    * (R) the reference projects with ``sqrtm`` and a bounded 1-D search over ν ∈ [0, 1000] and treats
      points within 1e-3 of the squared radius as inside; here the projection is exact (secular equation,
      no bound on ν) and every iterate satisfies ‖θ‖ ≤ S up to rounding.
    * (R) the reference raises ``ValueError`` when μ̇(xᵀθ̄)/μ̇(xᵀθ_{t+1}) > 2; here such rounds are counted
      in ``state.violations`` (no Python-side check in jitted code).
    * (P) the optimistic score is μ(xᵀθ_t) + √η_t ‖x‖_{W⁻¹} on the probability scale, as the reference
      code and spec 001 §2.7.4 (not the parameter-space optimism max_{θ ∈ C_t} μ(xᵀθ) of the paper).
    * (R) η_t is clipped at 0 (the data-adaptive sum can be negative); the reference would take √ of a
      negative number.
    * ``width="lee"``: the ``nick-jhlee`` fork's radius (reference_code.md §3.6 5(d)); that fork also
      uses λ = S (set ``lam``), drops the sensitivity check and centres θ̄ as the reference.
    """
    if width not in ("ada", "lee", "constant"):
        raise ValueError(f"unknown width {width!r}")
    if bar_center not in ("previous", "updated"):
        raise ValueError(f"unknown bar_center {bar_center!r}")
    d = spec.d

    def init(params, key):
        eye = jnp.eye(d)
        zero = jnp.zeros(())
        return ECOLogState(jnp.zeros((d,)), params.lam * eye, eye / params.lam, zero, zero,
                           jnp.zeros((), jnp.int32), jnp.zeros((2,), jnp.int32))

    def act(params, state, key, contexts, mask, t):
        radius = params.alpha if width == "constant" else jnp.sqrt(ecolog_radius_sq(params, state, t, width))
        bonus = radius * mahalanobis_widths(state.w_inv, contexts)
        scores = _LOGISTIC.mean(contexts @ state.theta) + bonus
        arm, p = choose(key, scores, mask)
        return arm, act_info(scores[arm], bonus[arm], p)

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm].astype(jnp.float64)
        r = feedback.reward
        s = params.s
        wh = whitening(state.w)
        root = jnp.sqrt(wh.evals)
        a = (wh.evecs.T @ x) / root
        u_t = root * (wh.evecs.T @ state.theta)
        new = whitened_step(u_t, a, wh.evals, r, s, False, gd_steps, 1e-12, proj_iters)
        bar = whitened_step(u_t if bar_center == "previous" else new.u, a, wh.evals, r, s, True, gd_steps, 1e-12,
                            proj_iters)
        theta_new = wh.evecs @ (new.u / root)
        theta_bar = wh.evecs @ (bar.u / root)
        v_new, v_bar = x @ theta_new, x @ theta_bar
        gap = log_loss(v_bar, r) - log_loss(v_new, r)
        disc = 0.5 * jnp.sum((new.u - bar.u) ** 2)
        weight = _LOGISTIC.dmean(v_new)
        violated = _LOGISTIC.dmean(v_bar) > 2.0 * weight
        return ECOLogState(
            theta_new,
            state.w + weight * jnp.outer(x, x),
            gram_update(state.w_inv, jnp.sqrt(weight) * x)[0],
            state.gap_sum + gap,
            state.disc_sum + disc,
            state.violations + violated.astype(jnp.int32),
            jnp.stack([new.iterations, bar.iterations]),
        )

    return Policy(init, act, update, PolicyMeta("ada-ofu-ecolog", Requirements(reward_range=(0.0, 1.0))))


def _modes(make, name: str, weighted: bool):
    """``make`` (the authors' algorithm) behind the ``mode`` switch, with Bae & Lee's experiment mode
    (:func:`~nlbandit.policies.logistic_gd.logistic_gd`) beside it."""

    @forwards(make)
    def dispatch(spec, mode="original", matrix="full", score_scale="prob", steps=100, train_every=50,
                 features="dense", **options):
        if mode == "experiment":
            return logistic_gd(spec, weighted, name, kappa_of, matrix, score_scale, steps, train_every, features)
        return make(spec, **options)

    return dispatch


def _finalize(hypers: tuple[Hyper, ...]):
    """Refuse a field set away from its default in the mode that does not read it."""
    defaults = {h.name: h.default for h in hypers}
    shared = {"mode", "lam", "s", "kappa"}

    def finalize(values):
        mode = values["mode"]
        unused = [k for k in defaults if k not in shared and (k in EXPERIMENT_ONLY) != (mode == "experiment")]
        for name in unused:
            if values[name] != defaults[name]:
                raise ConfigError(f"field '{name}' does not apply to mode = '{mode}'; fields of that mode: "
                                  + ", ".join(sorted(k for k in defaults if k not in unused)))
        return values

    return finalize


def _entry(name: str, make, weighted: bool, hypers: tuple[Hyper, ...], doc: str) -> PolicyEntry:
    dispatch = _modes(make, name, weighted)
    hypers = signature_defaults(hypers + EXPERIMENT_HYPERS, dispatch, f"policy '{name}'")
    return PolicyEntry(name, dispatch, hypers, doc, finalize=_finalize(hypers), check=check_features)


_S = Hyper("s", 1.0, "S, the bound on ‖θ*‖", low=0.0, low_open=True)
_DELTA = Hyper("delta", 0.05, "failure probability δ", low=0.0, high=1.0, low_open=True, high_open=True)

ENTRIES = (
    _entry(
        "logistic-ucb-1",
        logistic_ucb_1,
        False,
        (
            Hyper("width", SIGNATURE, "radius: theory ρ_t, the reference code's refined radius, or the constant "
                  "alpha", kind=str, static=True, choices=("theory", "reference", "constant")),
            Hyper("schedule", SIGNATURE, "λ_t: lam_scale·d·log(2 + n) (reference code), or the constant lam", kind=str,
                  static=True, choices=("log", "constant")),
            Hyper("newton_steps", SIGNATURE, "warm-started damped Newton steps per refit", kind=int, static=True,
                  low=1),
            Hyper("lazy_every", SIGNATURE, "after lazy_after rounds refit only every this many rounds", kind=int,
                  static=True, low=1),
            Hyper("lazy_after", SIGNATURE, "round from which lazy refits start", kind=int, static=True, low=0),
            Hyper("backend", SIGNATURE, "data the MLE is fitted on: the full history, or per-arm counts and "
                  "reward sums (a fixed arm set; cost per round independent of t)", kind=str, static=True,
                  choices=("history", "arms")),
            _S, _DELTA,
            Hyper("kappa", 0.0, "κ (≤ 0: 1/μ̇(S), assuming ‖x‖ ≤ 1; Bae & Lee's experiments plug in 10)"),
            Hyper("lam_scale", 1.0, "factor of the log λ_t schedule", low=0.0, low_open=True),
            Hyper("lam", 1.0, "λ of the constant schedule", low=0.0, low_open=True),
            Hyper("alpha", 1.0, "constant radius (width = 'constant')", low=0.0),
        ),
        "Logistic-UCB-1 (Faury et al. 2020), full-history MLE, no projection (or Bae & Lee's experiment mode)",
    ),
    _entry(
        "ada-ofu-ecolog",
        ada_ofu_ecolog,
        True,
        (
            Hyper("width", SIGNATURE, "radius: data-adaptive η_t, the nick-jhlee fork's, or the constant alpha",
                  kind=str, static=True, choices=("ada", "lee", "constant")),
            Hyper("bar_center", SIGNATURE, "θ̄ step centred on θ_t (paper) or θ_{t+1} (reference code)", kind=str,
                  static=True, choices=("previous", "updated")),
            Hyper("gd_steps", SIGNATURE, "most projected-gradient iterations per online step", kind=int, static=True,
                  low=1),
            Hyper("proj_iters", SIGNATURE, "Newton steps of the projection's secular equation", kind=int, static=True,
                  low=1),
            Hyper("lam", 1.0, "λ, W₀ = λI", low=0.0, low_open=True),
            _S, _DELTA,
            Hyper("alpha", 1.0, "constant radius √η (width = 'constant')", low=0.0),
        ),
        "ada-OFU-ECOLog (Faury et al. 2022), online estimator, per-round cost independent of t (or experiment mode)",
    ),
)
