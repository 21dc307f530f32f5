"""Theory-suggested parameters: closed-form constants from the analyses, each written once.

The public functions validate their arguments and return plain Python floats, for reports, claims and
tests. The formulas that a policy also evaluates inside its compiled code with traced hyperparameters
(:func:`ucb_glm_width`, :func:`glm_ucb_width`, :func:`kveton_c1`) are written with ``jax.numpy``, which
accepts Python floats and traced arrays alike, so the policy and the public function share one
definition. Logs are natural logs throughout.

**Randomized GLM exploration** (Kveton, Zaheer, Szepesvári, Li, Ghavamzadeh & Boutilier 2020,
Theorems 1–2 with Lemmas 2, 3, 5, 6, 7; spec 002 §2.6). With D(n, d) = d log(n/d) + 2 log n:

    c1    = σ μ̇_min⁻¹ √D(n, d)
    a_TSL = c1 √μ̇_max                                   a_FPL = c1 μ̇_max
    c2_TSL = c1 √(2 μ̇_min⁻¹ μ̇_max log(Kn))              c2_FPL = c1 μ̇_min⁻¹ μ̇_max √(2 log(Kn))
    C_TSL = max{σ² μ̇_min⁻² D, 1}                        C_FPL = max{4σ² μ̇_min⁻² D, 8 a_FPL² μ̇_min⁻² log n, 1}

where C is the λ_min(G_τ) the initial exploration must reach. Pulling each of d basis arms
⌈C/λ_min(M)⌉ times, M = Σ_i v_i v_iᵀ, guarantees G_τ ⪰ ⌈C/λ_min(M)⌉ M ⪰ C I, so τ = d ⌈C/λ_min(M)⌉
(§4.5, spec 002 §2.5).

**UCB baselines** (spec 002 §3; the constants are reconstructed from the original papers):

* UCB-GLM (Li, Lu & Zhou 2017): α = (σ/κ) √((d/2) log(1 + 2n/d) + log(1/δ)), bonus on the linear
  predictor;
* GLM-UCB (Filippi, Cappé, Garivier & Szepesvári 2010): ρ(t) = (2 k_μ κ R_max / c_μ) √(2d log t)
  √(log(2dn/δ)) with κ = √(3 + 2 log(1 + 2c_m²/λ₀)), bonus on the mean.

**Ensemble sampling** (Sun, Wang & Xu 2025, Theorems 5.5 and 5.11; spec 003 §2.3, §2.4, §2.7):
λ = 1 ∨ d ∨ log(1/δ) and m ≥ (8/p²)(K log T + log 1/δ), with p = p_N = 1 − Φ(1) for GLM-ES and
p = p'_N = 1/(4e√π) for Neural-ES.

**Doubling trick** (Sun, Wang & Xu 2025 §6 and App. E, after Besson & Kaufmann 2018 Thm 4;
spec 003 §2.6): epochs end at T_i = ⌊T₀ bⁱ⌋, each a full restart whose T-dependent parameters come
from the *planned* length τ₀ = T₀, τ_i = T_i − T_{i−1} (the paper's erratum resolved as in spec 003
§8.2). A base regret c T^γ (log T)^δ becomes at most l(γ, δ, T₀, b) times itself (Lemma E.1):

    l(γ, δ, T₀, b) = (log(T₀(b−1) + 1) / log(T₀(b−1)))^δ · b^γ (b−1)^γ / (b^γ − 1),

whose T₀ → ∞ limit √(b(b−1))/(√b − 1) (γ = 1/2) is minimised at b* = (3 + √5)/2 with value 3.330.
"""

from __future__ import annotations

import math
from numbers import Integral, Real
from typing import NamedTuple

import jax.numpy as jnp

#: p_N = 1 − Φ(1): a standard normal exceeds 1 (anti-concentration of GLM-ES, Lemma B.6).
P_N = 0.5 * math.erfc(1.0 / math.sqrt(2.0))

#: p'_N = 1/(4e√π): the anti-concentration constant of Neural-ES (Theorem 5.11).
P_N_NEURAL = 1.0 / (4.0 * math.e * math.sqrt(math.pi))

#: b* = (3 + √5)/2, the doubling base of Theorem 6.1 (= ``optimal_base(0.5)``).
OPTIMAL_BASE = (3.0 + math.sqrt(5.0)) / 2.0


def _integer(name: str, value, minimum: int) -> int:
    """``value`` as an int, or ValueError unless it is an integer ≥ ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _real(name: str, value, above: float | None = None, below: float | None = None,
          at_least: float | None = None) -> float:
    """``value`` as a float, or ValueError unless it is a finite real number in the stated range
    (``below`` only together with ``above``: the open interval)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    if below is not None and not above < value < below:
        raise ValueError(f"{name} must be in ({above:g}, {below:g}), got {value!r}")
    if above is not None and not value > above:
        raise ValueError(f"{name} must be > {above:g}, got {value!r}")
    if at_least is not None and not value >= at_least:
        raise ValueError(f"{name} must be >= {at_least:g}, got {value!r}")
    return float(value)


def _confidence(delta, n: int) -> float:
    """The confidence level δ ∈ (0, 1), defaulting to 1/n (spec 002 §3 [R])."""
    return 1.0 / n if delta is None else _real("delta", delta, above=0.0, below=1.0)


# ---------------------------------------------------------------------------------------------------
# GLM-TSL / GLM-FPL and the UCB baselines (Kveton et al. 2020; spec 002)
# ---------------------------------------------------------------------------------------------------


def ucb_glm_width(sigma, kappa, n, d, delta):
    """α = (σ/κ) √((d/2) log(1 + 2n/d) + log(1/δ)), unvalidated (floats or traced arrays)."""
    return sigma / kappa * jnp.sqrt(0.5 * d * jnp.log1p(2.0 * n / d) + jnp.log(1.0 / delta))


def glm_ucb_width(t, n, d, k_mu, c_mu, c_m, lambda0, r_max, delta):
    """ρ(t) = (2 k_μ κ R_max / c_μ) √(2d log t) √(log(2dn/δ)), κ = √(3 + 2 log(1 + 2c_m²/λ₀)), unvalidated."""
    kappa = jnp.sqrt(3.0 + 2.0 * jnp.log1p(2.0 * c_m**2 / lambda0))
    return 2.0 * k_mu * kappa * r_max / c_mu * jnp.sqrt(2.0 * d * jnp.log(t)) * jnp.sqrt(jnp.log(2.0 * d * n / delta))


def kveton_c1(sigma, mu_dot_min, n, d):
    """c1 = σ μ̇_min⁻¹ √D(n, d), D(n, d) = d log(n/d) + 2 log n (Lemma 5), unvalidated."""
    return sigma / mu_dot_min * jnp.sqrt(d * jnp.log(n / d) + 2.0 * jnp.log(n))


def ucb_glm_alpha(sigma: float, kappa: float, n: int, d: int, delta: float | None = None) -> float:
    """UCB-GLM's theory width α = (σ/κ) √((d/2) log(1 + 2n/d) + log(1/δ)) (Li, Lu & Zhou 2017, Thm 1;
    spec 002 §3.2). κ = inf μ̇ near θ* (μ̇_min), δ = 1/n by default."""
    sigma = _real("sigma", sigma, above=0.0)
    kappa = _real("kappa", kappa, above=0.0)
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    return float(ucb_glm_width(sigma, kappa, n, d, _confidence(delta, n)))


def glm_ucb_rho(t: float, *, n: int, d: int, k_mu: float, c_mu: float, c_m: float, lambda0: float,
                r_max: float = 1.0, delta: float | None = None) -> float:
    """GLM-UCB's theory width ρ(t) = (2 k_μ κ R_max / c_μ) √(2d log t) √(log(2dn/δ)),
    κ = √(3 + 2 log(1 + 2c_m²/λ₀)) (Filippi et al. 2010, Thm 1; spec 002 §3.1).

    k_μ: Lipschitz constant of μ (μ̇_max); c_μ: lower bound on μ̇ (μ̇_min); c_m = max_i ‖x_i‖₂; λ₀: λ_min
    of the initial design (the ridge λ when regularising); R_max: reward bound; δ = 1/n by default.
    ``t = n`` gives the fixed, conservative width of spec 002 §3.1.
    """
    t = _real("t", t, at_least=1.0)
    n, d = _integer("n", n, 1), _integer("d", d, 1)
    k_mu, c_mu = _real("k_mu", k_mu, above=0.0), _real("c_mu", c_mu, above=0.0)
    c_m, lambda0 = _real("c_m", c_m, above=0.0), _real("lambda0", lambda0, above=0.0)
    r_max = _real("r_max", r_max, above=0.0)
    return float(glm_ucb_width(t, n, d, k_mu, c_mu, c_m, lambda0, r_max, _confidence(delta, n)))


class KvetonTheory(NamedTuple):
    """The theory-suggested constants of spec 002 §2.6 (see the module docstring for the formulas)."""

    D: float  # D(n, d) = d log(n/d) + 2 log n
    c1: float
    a_tsl: float  # GLM-TSL posterior scale a
    a_fpl: float  # GLM-FPL perturbation scale a
    c2_tsl: float
    c2_fpl: float
    C_tsl: float  # required λ_min(G_τ) after the initial exploration
    C_fpl: float
    ucb_glm_alpha: float  # :func:`ucb_glm_alpha` with κ = μ̇_min
    glm_ucb_rho: float  # :func:`glm_ucb_rho` at t = n with k_μ = μ̇_max, c_μ = μ̇_min, R_max = 1


def kveton_theory(sigma: float, mu_dot_min: float, mu_dot_max: float, n: int, k: int, d: int,
                  delta: float | None = None, c_m: float | None = None, lambda0: float = 1.0) -> KvetonTheory:
    """Theory parameters of GLM-TSL and GLM-FPL (Kveton et al. 2020, Theorems 1–2, Lemmas 2, 3, 5–7;
    spec 002 §2.6, acceptance check §6.1.9) and of the two UCB baselines (spec 002 §3).

    σ: sub-Gaussian scale of the reward noise (0.5 for Bernoulli); μ̇_min ≤ μ̇_max: bounds on μ̇; n:
    horizon; K: number of arms; d: dimension (n ≥ d). ``delta`` (default 1/n), ``c_m`` (default √d,
    the largest norm in [−1, 1]^d, spec 002 §4.1) and ``lambda0`` enter only the UCB widths.
    """
    sigma = _real("sigma", sigma, above=0.0)
    mu_dot_min = _real("mu_dot_min", mu_dot_min, above=0.0)
    mu_dot_max = _real("mu_dot_max", mu_dot_max, above=0.0)
    if mu_dot_max < mu_dot_min:
        raise ValueError(f"mu_dot_max must be >= mu_dot_min, got {mu_dot_max!r} < {mu_dot_min!r}")
    d = _integer("d", d, 1)
    n, k = _integer("n", n, d), _integer("k", k, 1)
    big_d = d * math.log(n / d) + 2.0 * math.log(n)
    c1 = float(kveton_c1(sigma, mu_dot_min, n, d))
    a_fpl = c1 * mu_dot_max
    log_kn = math.log(k * n)
    return KvetonTheory(
        D=big_d,
        c1=c1,
        a_tsl=c1 * math.sqrt(mu_dot_max),
        a_fpl=a_fpl,
        c2_tsl=c1 * math.sqrt(2.0 * mu_dot_max / mu_dot_min * log_kn),
        c2_fpl=c1 * mu_dot_max / mu_dot_min * math.sqrt(2.0 * log_kn),
        C_tsl=max(sigma**2 / mu_dot_min**2 * big_d, 1.0),
        C_fpl=max(4.0 * sigma**2 / mu_dot_min**2 * big_d, 8.0 * a_fpl**2 / mu_dot_min**2 * math.log(n), 1.0),
        ucb_glm_alpha=ucb_glm_alpha(sigma, mu_dot_min, n, d, delta),
        glm_ucb_rho=glm_ucb_rho(n, n=n, d=d, k_mu=mu_dot_max, c_mu=mu_dot_min,
                                c_m=math.sqrt(d) if c_m is None else c_m, lambda0=lambda0, delta=delta),
    )


class InitialExploration(NamedTuple):
    """The theory's initial exploration: ``pulls_per_arm`` pulls of each of the d basis arms, ``tau`` in all."""

    pulls_per_arm: int
    tau: int


def initial_exploration_length(c: float, lambda_min_m: float, d: int) -> InitialExploration:
    """Pulls ⌈C/λ_min(M)⌉ per basis arm and τ = d ⌈C/λ_min(M)⌉, so that λ_min(G_τ) ≥ C
    (Kveton et al. 2020 §4.5; spec 002 §2.5). M = Σ_i v_i v_iᵀ over the basis arms v_1..v_d, C from
    :func:`kveton_theory` (``C_tsl`` or ``C_fpl``)."""
    c = _real("c", c, above=0.0)
    lambda_min_m = _real("lambda_min_m", lambda_min_m, above=0.0)
    d = _integer("d", d, 1)
    pulls = math.ceil(c / lambda_min_m)
    return InitialExploration(pulls, d * pulls)


# ---------------------------------------------------------------------------------------------------
# Ensemble sampling (Sun, Wang & Xu 2025; spec 003)
# ---------------------------------------------------------------------------------------------------


def _min_models(p: float, k: int, horizon: float, delta: float) -> int:
    """The smallest integer m ≥ (8/p²)(K log T + log 1/δ)."""
    k = _integer("k", k, 1)
    horizon = _real("horizon", horizon, at_least=1.0)
    delta = _real("delta", delta, above=0.0, below=1.0)
    return math.ceil(8.0 / p**2 * (k * math.log(horizon) + math.log(1.0 / delta)))


def glm_es_min_models(k: int, horizon: float, delta: float) -> int:
    """GLM-ES ensemble size m = ⌈(8/p_N²)(K log T + log 1/δ)⌉, 8/p_N² ≈ 317.8 (Theorem 5.5, Lemma A.6;
    spec 003 §2.3). About 1.473·10⁵ for K = 50, T = 10⁴, δ = 0.05."""
    return _min_models(P_N, k, horizon, delta)


def neural_es_min_models(k: int, horizon: float, delta: float) -> int:
    """Neural-ES ensemble size m = ⌈(8/p'_N²)(K log T + log 1/δ)⌉, 8/p'_N² ≈ 2971 (Theorem 5.11;
    spec 003 §2.4)."""
    return _min_models(P_N_NEURAL, k, horizon, delta)


def glm_es_lambda(d: int, delta: float) -> float:
    """GLM-ES ridge λ = 1 ∨ d ∨ log(1/δ) (Theorem 5.5; spec 003 §2.3; the proof in App. A.3 uses a
    different form, spec 003 §8.1)."""
    d = _integer("d", d, 1)
    delta = _real("delta", delta, above=0.0, below=1.0)
    return max(1.0, float(d), math.log(1.0 / delta))


# ---------------------------------------------------------------------------------------------------
# Doubling trick (Sun, Wang & Xu 2025 §6, App. E; spec 003 §2.6)
# ---------------------------------------------------------------------------------------------------


class Epoch(NamedTuple):
    """One doubling-trick epoch: rounds ``start``..``end`` (1-based, inclusive) and its planned length."""

    start: int
    end: int
    planned: int


def doubling_schedule(t0: int, b: float, horizon: int) -> list[Epoch]:
    """Epochs of the doubling trick with boundaries T_i = ⌊T₀ bⁱ⌋ (spec 003 §2.6).

    Epoch 0 covers rounds 1..T₀, epoch i ≥ 1 rounds T_{i−1}+1..min(T_i, horizon); the planned lengths
    are τ₀ = T₀ and τ_i = T_i − T_{i−1}, also for the last epoch when the horizon cuts it short. Requires
    T₀(b − 1) ≥ 1, which makes every τ_i ≥ 1.
    """
    t0 = _integer("t0", t0, 1)
    b = _real("b", b, above=1.0)
    horizon = _integer("horizon", horizon, 1)
    if t0 * (b - 1.0) < 1.0:
        raise ValueError(f"t0*(b-1) must be >= 1 so that every epoch is non-empty, got {t0}*({b!r}-1)")
    epochs, prev, i = [], 0, 0
    while prev < horizon:
        # The factor 1 + 1e-12 keeps products that are integers in exact arithmetic (100·1.1² = 121)
        # from flooring to one less after rounding.
        boundary = t0 if i == 0 else math.floor(t0 * b**i * (1.0 + 1e-12))
        epochs.append(Epoch(prev + 1, min(boundary, horizon), boundary - prev))
        prev, i = boundary, i + 1
    return epochs


def epoch_models(planned: int) -> int:
    """Ensemble size of a doubling-trick epoch, m_i = max(1, ⌈2 ln τ_i⌉) of its planned length
    (Sun, Wang & Xu 2025 §7.2; rounding: spec 003 §7 U8)."""
    return max(1, math.ceil(2.0 * math.log(_integer("planned", planned, 1))))


def epoch_sigma_r(planned: int) -> float:
    """Perturbation std of a doubling-trick epoch, σ_R,i = 0.02 ln τ_i of its planned length
    (Sun, Wang & Xu 2025 §7.2; spec 003 §2.6)."""
    return 0.02 * math.log(_integer("planned", planned, 1))


def anytime_constant(t0: float, b: float, gamma: float = 0.5, delta: float = 1.5) -> float:
    """l(γ, δ, T₀, b) = (log(T₀(b−1)+1)/log(T₀(b−1)))^δ · b^γ(b−1)^γ/(b^γ − 1), the factor by which
    the doubling trick inflates a base regret c T^γ (log T)^δ (Lemma E.1, after Besson & Kaufmann 2018
    Thm 4; spec 003 §2.6).

    ``delta`` is the exponent of log T (3/2 for GLM-ES), not a confidence level. Requires 0 < γ < 1,
    δ ≥ 0, b > 1, and T₀(b−1) > 1 when δ > 0. ``t0 = math.inf`` gives the limit
    b^γ(b−1)^γ/(b^γ − 1). l(100, b*) = 3.336.
    """
    if not (isinstance(t0, Real) and t0 == math.inf):
        t0 = _real("t0", t0, above=0.0)
    b = _real("b", b, above=1.0)
    gamma = _real("gamma", gamma, above=0.0, below=1.0)
    delta = _real("delta", delta, at_least=0.0)
    factor = b**gamma * (b - 1.0) ** gamma / (b**gamma - 1.0)
    if delta == 0.0 or t0 == math.inf:
        return factor
    x = t0 * (b - 1.0)
    if x <= 1.0:
        raise ValueError(f"t0*(b-1) must be > 1 when delta > 0 (Lemma E.1), got {t0!r}*({b!r}-1) = {x!r}")
    return (math.log(x + 1.0) / math.log(x)) ** delta * factor


def optimal_base(gamma: float = 0.5) -> float:
    """The base b > 1 minimising the T₀ → ∞ factor b^γ(b−1)^γ/(b^γ − 1) of :func:`anytime_constant`
    (Sun, Wang & Xu 2025 §6: b* = (3 + √5)/2 ≈ 2.618 for γ = 1/2).

    The minimiser is the root of d/db log of the factor, 1/b + 1/(b−1) − b^(γ−1)/(b^γ − 1), which is
    negative as b → 1 and positive for large b; it is found by bisection in u = log(b − 1).
    """
    gamma = _real("gamma", gamma, above=0.0, below=1.0)

    def slope(u: float) -> float:
        b_minus_1 = math.exp(u)
        log_b = math.log1p(b_minus_1)
        # b^(γ−1)/(b^γ − 1) through expm1, accurate as b → 1
        return 1.0 / (1.0 + b_minus_1) + 1.0 / b_minus_1 - math.exp((gamma - 1.0) * log_b) / math.expm1(gamma * log_b)

    lo, hi = -30.0, 1.0
    if slope(lo) >= 0.0:  # the minimiser tends to 1 as γ → 1
        raise ValueError(f"gamma too close to 1: the optimal base is below 1 + 1e-13, got {gamma!r}")
    while slope(hi) <= 0.0:  # the minimiser grows like 2^(1/γ) as γ → 0
        lo, hi = hi, 2.0 * hi
        if hi > 700.0:
            raise ValueError(f"gamma too small: the optimal base exceeds the float range, got {gamma!r}")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if slope(mid) < 0.0 else (lo, mid)
    return 1.0 + math.exp(0.5 * (lo + hi))


# ---------------------------------------------------------------------------------------------------
# FTRL for online GLM regression and MOR-UCB (Zhao, Zhou, He & Gu 2023; spec 000)
# ---------------------------------------------------------------------------------------------------


def link_curvature(link: str, a: float = 1.0, b: float = 1.0) -> tuple[float, float]:
    """(κ, K) of Assumption 3.1, 0 < κ ≤ φ'(z) ≤ K, for features ‖x‖ ≤ A and parameters ‖μ‖ ≤ B.

    Spec 000 §1.1: κ = min φ' over |z| ≤ AB (the paper writes [−B, B], which agrees for A = 1), and K
    is the global sup of φ' where it is finite (MOR-UCB's analysis evaluates φ outside [−AB, AB]),
    otherwise the sup over |z| ≤ AB. identity: (1, 1); logistic: (σ'(AB), 1/4); probit: (φ(AB),
    1/√(2π)); poisson (φ = eᶻ): (e^{−AB}, e^{AB}).
    """
    z = _real("a", a, above=0.0) * _real("b", b, above=0.0)
    if link == "identity":
        return 1.0, 1.0
    if link == "logistic":
        s = 1.0 / (1.0 + math.exp(-z))
        return s * (1.0 - s), 0.25
    if link == "probit":
        return math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi), 1.0 / math.sqrt(2.0 * math.pi)
    if link == "poisson":
        return math.exp(-z), math.exp(z)
    raise ValueError(f"link must be one of identity, logistic, probit, poisson, got {link!r}")


def ftrl_lambda(link: str, a: float = 1.0, b: float = 1.0) -> float:
    """The theory regularizer λ = 4A²K²/κ of FTRL (Theorems 4.1 and 4.4) and MOR-UCB (Theorem 6.2, A = 1).

    The regularizer is λ‖μ‖², so the ridge in the Hessian is 2λ: λ = 4 for the identity link with unit
    features is an effective ridge of 8 (spec 000 §2.1).
    """
    kappa, k_max = link_curvature(link, a, b)
    return 4.0 * a * a * k_max * k_max / kappa


def ftrl_basis_regret(d: int, horizon: int, sigma2: float, lam: float, b: float = 1.0) -> float:
    """Exact E[R_stoc(T)] of identity-link FTRL on the lower-bound instance of Theorem 5.1 (spec 000 §4.3,
    §5): x_t = e_{(t−1) mod d}, μ*_i ~ U[−B/√d, B/√d], noise N(0, σ²)::

        E[R_stoc(T)] = ½ Σ_i Σ_{m=0}^{n_i−1} (m σ² + 4λ² E[μ*_i²]) / (2λ + m)²,   E[μ*_i²] = B²/(3d),

    with n_i the visits of coordinate i (⌈(T−i+1)/d⌉ round robin). Each visit's prediction error is
    the ridge estimate's bias 2λμ*_i/(2λ+m) plus its noise, whence the per-visit loss (spec 000 §5).
    """
    d = _integer("d", d, 1)
    horizon = _integer("horizon", horizon, 1)
    sigma2 = _real("sigma2", sigma2, at_least=0.0)
    lam = _real("lam", lam, above=0.0)
    mu2 = _real("b", b, at_least=0.0) ** 2 / (3.0 * d)
    total = 0.0
    for i in range(d):
        visits = (horizon - i + d - 1) // d
        total += sum((m * sigma2 + 4.0 * lam * lam * mu2) / (2.0 * lam + m) ** 2 for m in range(visits))
    return 0.5 * total


def ftrl_mean_field_regret(d: int, horizon: int, sigma2: float, lam: float, mu_norm2: float = 1.0 / 3.0) -> float:
    """Mean-field approximation of E[R_stoc(T)] for identity-link FTRL with sphere features (spec 000 §6.3
    item 8, the spec author's own): with u = T/(2λd),

        ½ σ² d [log(1 + u) − u/(1 + u)] + λ E‖μ*‖² · u/(1 + u),

    where E‖μ*‖² = 1/3 for μ* ~ U[−1/√d, 1/√d]^d. It replaces x xᵀ by its mean I/d.
    """
    d = _integer("d", d, 1)
    horizon = _integer("horizon", horizon, 1)
    sigma2 = _real("sigma2", sigma2, at_least=0.0)
    lam = _real("lam", lam, above=0.0)
    u = horizon / (2.0 * lam * d)
    return 0.5 * sigma2 * d * (math.log1p(u) - u / (1.0 + u)) + lam * mu_norm2 * u / (1.0 + u)


def ftrl_regret_bound(d: int, horizon: int, sigma2: float, delta: float = 0.05, link: str = "identity",
                      a: float = 1.0, b: float = 1.0) -> float:
    """The high-probability bound of Theorem 4.1 on R_stoc(T) (sub-Gaussian noise, λ = 4A²K²/κ)::

        34/κ · σ² d log((4dK² + Tκ²)/(4dK²)) + 8K²A²B²/κ + 2(2/κ + 3κ/K²) σ² log(1/δ),

    which holds with probability at least 1 − 2δ. Identity link, A = B = 1:
    34σ²d log(1 + T/(4d)) + 8 + 10σ² log(1/δ).
    """
    d = _integer("d", d, 1)
    horizon = _integer("horizon", horizon, 1)
    sigma2 = _real("sigma2", sigma2, at_least=0.0)
    delta = _real("delta", delta, above=0.0, below=1.0)
    kappa, k_max = link_curvature(link, a, b)
    return (34.0 / kappa * sigma2 * d * math.log((4 * d * k_max**2 + horizon * kappa**2) / (4 * d * k_max**2))
            + 8.0 * k_max**2 * a * a * b * b / kappa
            + 2.0 * (2.0 / kappa + 3.0 * kappa / k_max**2) * sigma2 * math.log(1.0 / delta))


# ---------------------------------------------------------------------------------------------------
# Neural logistic bandits (Bae & Lee 2025; spec 001)
# ---------------------------------------------------------------------------------------------------


def bernstein_self_normalized_bound(log_det_ratio: float, t: int, delta: float, m: float = 1.0, n: float = 1.0,
                                    lam: float = 1.0) -> float:
    """Theorem 3.1's bound on ‖s_t‖_{H_t⁻¹}, s_t = Σ_{i≤t} x_i η_i, H_t = Σ_{i≤t} μ̇(x_iᵀθ*) x_i x_iᵀ + λI,
    holding for all t at once with probability ≥ 1 − δ when |η_t| ≤ M, E[η_t²|𝒢_t] ≤ μ̇(x_tᵀθ*) and
    ‖x_t‖ ≤ N (spec 001 §1.5)::

        8 √(log(det H_t / det λI) · log(4t²/δ)) + (4MN/√λ) · log(4t²/δ),

    with ``log_det_ratio`` = log(det H_t / det λI). No dimension appears: the proof applies Freedman's
    inequality to a scalar martingale."""
    log_det_ratio = _real("log_det_ratio", log_det_ratio, at_least=0.0)
    t = _integer("t", t, 1)
    delta = _real("delta", delta, above=0.0, below=1.0)
    m, n, lam = _real("m", m, above=0.0), _real("n", n, above=0.0), _real("lam", lam, above=0.0)
    ell = math.log(4.0 * t * t / delta)
    return 8.0 * math.sqrt(log_det_ratio * ell) + 4.0 * m * n / math.sqrt(lam) * ell
