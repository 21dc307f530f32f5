"""Generalized linear bandit policies: ``glm-ucb``, ``ucb-glm``, ``glm-tsl``, ``glm-fpl``, ``glm-phe``, ``glm-es``.

Every policy here is one composition of the same parts:

* a **data layout** (:class:`Rows`) of weighted rows for :mod:`nlbandit.models.glm`: with
  ``backend="arms"`` one row per arm of the fixed arm set holding its pull count N_k and reward sum Y_k
  (Kveton et al. 2020 §3.3: a solver iteration costs O(Kd² + d³) whatever t is); with
  ``backend="history"`` one row per observation in a buffer of capacity T, whose solver sums run only
  over the filled blocks (cost O(t) per iteration: the naive layout of the reference code);
* a **solver**: warm-started damped Newton (``newton``, Kveton et al.'s IRLS) or the fixed-budget
  gradient descent of Sun, Wang & Xu's experiments (``gd``: ``gd_steps`` steps of ``lr`` on the
  mean-normalised loss);
* an **initial exploration** plan (:mod:`nlbandit.policies.warmup`);
* an **exploration rule**: an optimistic bonus, a Laplace sample, perturbed rewards, or an ensemble.

The estimate used to act in round t+1 is computed in ``update`` of round t (after Y_t is observed, with
the round's fresh randomness), so ``act`` is one argmax; during the warm-up the estimates are refitted
as well (GLM-ES with its ensemble solver: once, at the warm-up's last round), so the first post-warm-up
round acts on the fit to all warm-up data (spec 003 §2.3.1). The
regularised loss of :mod:`nlbandit.models.glm` (ridge λ, spec 002 §7.3) is used by every estimator;
λ → 0 recovers the papers' unregularised formulas.

Theory widths use δ = 1/n with n the horizon (spec 002 §7.5/§7.8); their constants σ (``sigma``),
μ̇_min (``mu_dot_min``) and the reward bound R (``reward_bound``) are parameters, and μ̇_max comes from
the link.
"""

from __future__ import annotations

import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from nlbandit import theory
from nlbandit.core.hyper import SIGNATURE, ConfigError, Hyper, forwards
from nlbandit.core.keys import normal
from nlbandit.core.types import Env, Policy, PolicyMeta, ProblemSpec, Requirements
from nlbandit.models.glm import ensemble_newton_solve, glm_hessian, gd_solve, newton_solve
from nlbandit.models.history import HISTORY_BLOCK, Rows, add_row, empty_rows, history_capacity, history_noise
from nlbandit.models.links import LINKS
from nlbandit.models.ridge import gram_update, mahalanobis_widths
from nlbandit.policies.entry import PolicyEntry, link_from_env
from nlbandit.policies.exploration import (act_info, choose, ensemble_probability, greedy_choice,
                                           member_and_tie_words, member_draw)
from nlbandit.policies.linear import M_USED, SIGMA_R, members_used
from nlbandit.policies.warmup import (WARMUPS, Warmup, empty_warmup, plan_warmup, warmup_arm, warmup_capacity,
                                      warmup_min_length)

NUMERICS = 1
"""Version of the numbers its policies compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


_FALLBACK_CAP = inspect.signature(ensemble_newton_solve).parameters["max_iter"].default
"""The ensemble solver's cap on its Newton fallback's passes (its default); 0 while GLM-ES's warm-up lasts
(:func:`glm_es`)."""


class GLMState(NamedTuple):
    """State shared by the GLM policies (fields a policy does not use keep their initial value).

    Attributes:
      rows: the data (:class:`Rows`).
      theta: (d,) or (m, d) the estimate(s) that ``act`` scores with.
      center: (d,) the unperturbed MLE θ̄ (Laplace sampling).
      v_inv: (d, d) G⁻¹ = (λI + Σ x xᵀ)⁻¹, for the UCB widths.
      arm_norm: max_k ‖x_k‖ of the arm set (c_m of Filippi et al.'s width).
      warmup: the initial-exploration plan.
    """

    rows: Rows
    theta: jax.Array
    center: jax.Array
    v_inv: jax.Array
    arm_norm: jax.Array
    warmup: Warmup


class Setup(NamedTuple):
    """The static choices shared by every GLM policy (see :func:`glm_setup`)."""

    spec: ProblemSpec
    link: str
    backend: str
    solver: str
    gd_steps: int
    reduction: str
    warmup: str
    warmup_rounds: int
    basis_pulls: int
    design: str
    capacity: int
    rewards_outside_link: bool


def glm_setup(spec: ProblemSpec, link: str = "logistic", backend: str = "arms", solver: str = "newton",
              gd_steps: int = 100, reduction: str = "mean", warmup: str = "basis", warmup_rounds: int = 0,
              basis_pulls: int = 1, design: str = "multiplicative", rewards_outside_link: bool = False) -> Setup:
    """Bundle the static options; the history buffer holds ``spec.horizon`` rows (rounded up to blocks)."""
    capacity = spec.k if backend == "arms" else history_capacity(spec.horizon)
    return Setup(spec, link, backend, solver, gd_steps, reduction, warmup, warmup_rounds, basis_pulls, design,
                 capacity, rewards_outside_link)


def glm_requirements(setup: Setup) -> Requirements:
    """A fixed arm set for per-arm statistics or a design on the arms; rewards inside the link's range
    unless ``rewards_outside_link``."""
    return Requirements(fixed_arms=setup.backend == "arms" or setup.warmup in ("basis", "g-optimal"),
                        reward_range=None if setup.rewards_outside_link else LINKS[setup.link].reward_range)


def _init_state(setup: Setup, params, targets: int | None) -> GLMState:
    d = setup.spec.d
    theta = jnp.zeros((d,) if targets is None else (targets, d))
    rows = empty_rows(setup.capacity, d, targets)
    cap = warmup_capacity(setup.warmup, d, setup.spec.k, setup.warmup_rounds, setup.basis_pulls)
    return GLMState(rows, theta, jnp.zeros((d,)), jnp.eye(d) / params.lam, jnp.zeros(()), empty_warmup(cap))


def _prepare(setup: Setup):
    def prepare(params, state, key, arms, mask):
        arms = arms.astype(jnp.float64)
        rows = state.rows._replace(x=arms) if setup.backend == "arms" else state.rows
        plan = plan_warmup(setup.warmup, arms, key, state.warmup.plan.shape[0], setup.warmup_rounds,
                           setup.basis_pulls, setup.design)
        return state._replace(rows=rows, arm_norm=jnp.max(jnp.linalg.norm(arms, axis=1)), warmup=plan)

    return prepare


def _fit(setup: Setup, params, rows: Rows, targets: jax.Array, theta0: jax.Array) -> jax.Array:
    """The regularised MLE on ``rows`` with response sums ``targets`` (C,), warm-started at ``theta0``."""
    link = LINKS[setup.link]
    active = None if setup.backend == "arms" else (rows.count, HISTORY_BLOCK)
    if setup.solver == "newton":
        return newton_solve(link, rows.x, rows.n, targets, params.lam, theta0, active=active).theta
    return gd_solve(link, rows.x, rows.n, targets, params.lam, theta0, setup.gd_steps, params.lr,
                    setup.reduction, active=active)


def _policy(name: str, setup: Setup, score, refit, targets: int | None = None, gram: bool = False,
            exact: bool = False) -> Policy:
    """A GLM policy from ``score(params, state, key, contexts) -> (scores (K,), bonus (K,) or None)`` and
    ``refit(params, state, key) -> state`` (called after every observation). ``exact``: the argmax of the
    scores is the whole decision (no sampling), so its probability is 1/|tied arms|; planned warm-up pulls
    have probability 1."""

    def init(params, key):
        return _init_state(setup, params, targets)

    def act(params, state, key, contexts, mask, t):
        k_score, k_ties = split_act_key(key)
        scores, bonus = score(params, state, k_score, contexts)
        chosen, p = choose(k_ties, scores, mask)
        arm, planned = warmup_arm(state.warmup, t, chosen, mask)
        probability = jnp.where(planned, 1.0, p if exact else jnp.nan)
        return arm, act_info(scores[arm], jnp.nan if bonus is None else bonus[arm], probability)

    def update(params, state, key, contexts, arm, feedback, t):
        x = contexts[arm]
        k_noise, k_fit = split_update_key(key)
        y = feedback.reward if targets is None else perturbed_copies(params, k_noise, feedback.reward, targets)
        state = state._replace(rows=add_row(state.rows, x, arm, y, per_arm=setup.backend == "arms"))
        if gram:
            state = state._replace(v_inv=gram_update(state.v_inv, x.astype(jnp.float64))[0])
        return refit(params, state, k_fit)

    history = setup.backend == "history"
    meta = PolicyMeta(name, glm_requirements(setup), max_horizon=setup.spec.horizon if history else None)
    return Policy(init, act, update, meta, _prepare(setup))


def split_act_key(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A GLM policy's act key → (its scores' key, its tie key)."""
    k_score, k_ties = jax.random.split(key)
    return k_score, k_ties


def split_update_key(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """A GLM policy's update key → (the new reward's perturbations' key, the refit's key)."""
    k_noise, k_fit = jax.random.split(key)
    return k_noise, k_fit


def perturbed_copies(params, key: jax.Array, reward: jax.Array, m: int) -> jax.Array:
    """(m,) perturbed rewards Y + Z^j, Z^j ~ N(0, σ_R²): one fresh draw per model, kept for ever (spec 003 §2.5)."""
    return reward + params.sigma_r * normal(key, (m,))


def _refit_mle(setup: Setup):
    def refit(params, state, key):
        return state._replace(theta=_fit(setup, params, state.rows, state.rows.y, state.theta))

    return refit


def _theory_n(setup: Setup) -> float:
    """n, the horizon that enters the theory parameters (at least 2, so that log n > 0), as a float."""
    return float(max(setup.spec.horizon, 2))


@forwards(glm_setup)
def glm_ucb(spec: ProblemSpec, width: str = "constant", **options) -> Policy:
    """GLM-UCB (Filippi, Cappé, Garivier & Szepesvári 2010): argmax_x μ(xᵀθ̂) + ρ ‖x‖_{G⁻¹}, with θ̂ the
    regularised MLE and G = λI + Σ x xᵀ; the bonus is on the mean scale (spec 002 §3.1).

    ``width="theory"``: ρ = (2 k_μ κ R / c_μ) √(2 d log n) √(log(2dn/δ)), κ = √(3 + 2 log(1 + 2c_m²/λ)),
    k_μ = μ̇_max of the link, c_μ = ``mu_dot_min``, R = ``reward_bound``, c_m the largest arm norm,
    δ = 1/n, evaluated at t = n (a constant width; spec 002 §7.8). ``width="constant"``: ρ = ``alpha``
    (Kveton et al. 2020's informal design uses 0.5). Deviation: the projection of θ̂ onto the admissible
    set is skipped, as in every reference implementation (spec 002 §7.8).
    """
    setup = glm_setup(spec, **options)
    link = LINKS[setup.link]

    def rho(params, state):
        if width == "constant":
            return params.alpha
        n = _theory_n(setup)
        return theory.glm_ucb_width(n, n, spec.d, link.mu_dot_max, params.mu_dot_min, state.arm_norm,
                                    params.lam, params.reward_bound, 1.0 / n)

    def score(params, state, key, contexts):
        bonus = rho(params, state) * mahalanobis_widths(state.v_inv, contexts)
        return link.mean(contexts @ state.theta) + bonus, bonus

    return _policy("glm-ucb", setup, score, _refit_mle(setup), gram=True, exact=True)


@forwards(glm_setup)
def ucb_glm(spec: ProblemSpec, width: str = "constant", **options) -> Policy:
    """UCB-GLM (Li, Lu & Zhou 2017): argmax_x xᵀθ̂ + α ‖x‖_{V⁻¹}, the bonus on the linear-predictor scale
    (spec 002 §3.2), V = λI + Σ x xᵀ.

    ``width="theory"``: α = (σ/κ) √((d/2) log(1 + 2n/d) + log(1/δ)) with κ = ``mu_dot_min``, δ = 1/n.
    ``width="constant"``: α = ``alpha`` (informal design: 0.5). Deviation: Li et al.'s random initial
    phase is replaced by the warm-up shared by all methods (Kveton et al. 2020 §5.1).
    """
    setup = glm_setup(spec, **options)

    def alpha(params):
        if width == "constant":
            return params.alpha
        n = _theory_n(setup)
        return theory.ucb_glm_width(params.sigma, params.mu_dot_min, n, spec.d, 1.0 / n)

    def score(params, state, key, contexts):
        bonus = alpha(params) * mahalanobis_widths(state.v_inv, contexts)
        return contexts @ state.theta + bonus, bonus

    return _policy("ucb-glm", setup, score, _refit_mle(setup), gram=True, exact=True)


def _scale_a(setup: Setup, params, scale: str, fpl: bool) -> jax.Array:
    """The perturbation scale a: ``params.a``, or the theory value of spec 002 §2.6
    (TSL: c1 √μ̇_max; FPL: c1 μ̇_max)."""
    if scale == "constant":
        return params.a
    mu_dot_max = LINKS[setup.link].mu_dot_max
    c1 = theory.kveton_c1(params.sigma, params.mu_dot_min, _theory_n(setup), setup.spec.d)
    return c1 * (mu_dot_max if fpl else jnp.sqrt(mu_dot_max))


def _argmax_theta(params, state, key, contexts):
    return contexts @ state.theta, None


def _sampled_theta(params, state, key, contexts):
    """Scores of the sampled θ̃ and, as the bonus, their excess over the unperturbed MLE θ̄'s."""
    scores = contexts @ state.theta
    return scores, scores - contexts @ state.center


@forwards(glm_setup)
def glm_tsl(spec: ProblemSpec, scale: str = "constant", **options) -> Policy:
    """GLM-TSL (Kveton et al. 2020, eqs. (4)–(5)): θ̄ = MLE, H = λI + Σ μ̇(xᵀθ̄) x xᵀ, θ̃ ~ N(θ̄, a² H⁻¹),
    play argmax_x xᵀθ̃.

    The sample is θ̄ + a L⁻ᵀ ξ with H = L Lᵀ (Cholesky) and ξ ~ N(0, I_d) fresh every round (spec 002
    §2.2), drawn by the update; ``resample`` redraws it around the stored θ̄ (the online agent's estimate).
    ``scale="constant"``: a = ``a`` (informal design: 1); ``"theory"``: a = c1 √μ̇_max.

    A property of the method, not of this implementation: when the features are so large that the link
    saturates on every played arm (μ̇(xᵀθ̄) ≈ 0, e.g. features scaled by 10³), H ≈ λI, so the sample's
    score noise a‖x‖_{H⁻¹} ≈ a‖x‖/√λ swamps the estimate and GLM-TSL plays almost at random. Measured (logistic
    bandit, d = 5, K = 10, ‖θ*‖ = 2, T = 2,000, 5 seeds, defaults): regret 37.6 at scale 1 and 1058.6 at scale
    10³, against uniform play's 641.4 and 1229.4, while GLM-UCB (33.2 → 3.4) and GLM-FPL (32.2 → 52.0),
    whose exploration is on the mean and the rewards, still learn. The preconditioning: raise λ with the square
    of the feature scale (the same fit and sample as rescaling the features to unit scale): with λ = 10⁶ at
    scale 10³, GLM-TSL's regret is 5.6 (same protocol, 2026-11-26; ``tests/test_glm_policies.py`` checks both
    sides). The online agent bounds features at 10⁶ (:data:`~nlbandit.agent.MAX_MAGNITUDE`) but does not rescale
    them: standardise them, or set λ so.
    """
    setup = glm_setup(spec, **options)
    sample = _tsl_sample(setup, scale)

    def refit(params, state, key):
        return sample(params, state._replace(center=_fit(setup, params, state.rows, state.rows.y, state.center)), key)

    return _policy("glm-tsl", setup, _sampled_theta, refit)


def _tsl_sample(setup: Setup, scale: str):
    """GLM-TSL's draw θ̃ ~ N(θ̄, a² H⁻¹) around the stored MLE θ̄ (``center``): its update's last step, and
    its ``resample`` (:attr:`~nlbandit.policies.entry.PolicyEntry.resample`)."""
    link = LINKS[setup.link]

    def sample(params, state, key):
        h = glm_hessian(link, state.center, state.rows.x, state.rows.n, params.lam,
                        None if setup.backend == "arms" else (state.rows.count, HISTORY_BLOCK))
        chol = jnp.linalg.cholesky(h)
        step = jax.scipy.linalg.solve_triangular(chol.T, normal(key, (setup.spec.d,)), lower=False)
        return state._replace(theta=state.center + _scale_a(setup, params, scale, False) * step)

    return sample


@forwards(glm_setup)
def glm_fpl(spec: ProblemSpec, scale: str = "constant", name: str = "glm-fpl", **options) -> Policy:
    """GLM-FPL (Kveton et al. 2020, eq. (6)): θ̃ = argmin_θ L({(X_l, Y_l + Z_l)}; θ), Z_l ~ N(0, a²) drawn
    afresh for every past observation in every round; play argmax_x xᵀθ̃.

    With ``backend="arms"`` the t fresh noises are drawn exactly in O(K) as one aggregate per arm,
    Ỹ_k = Y_k + a √N_k ξ_k (equal in law, Kveton et al. §3.3); with ``backend="history"`` (``glm-phe``,
    the perturbed-history baseline of Sun, Wang & Xu's runtime comparison) each of the t stored rewards
    gets its own fresh draw, O(t) per round. The fit is warm-started at the previous round's θ̃
    (spec 002 §7.4). ``scale="constant"``: a = ``a`` (informal design: 0.5); ``"theory"``: a = c1 μ̇_max.
    The online agent's probability estimate redraws the perturbed fit (``resample`` = the refit, warm-started
    at the current θ̃: the same argmin with Newton; with ``solver="gd"`` the law only approximately).
    """
    setup = glm_setup(spec, **options)
    return _policy(name, setup, _argmax_theta, _fpl_refit(setup, scale))


def _fpl_refit(setup: Setup, scale: str):
    """GLM-FPL's update step, the fit to freshly perturbed rewards: also its ``resample``
    (:attr:`~nlbandit.policies.entry.PolicyEntry.resample`)."""

    def refit(params, state, key):
        rows = state.rows
        a = _scale_a(setup, params, scale, True)
        if setup.backend == "arms":
            noise = jnp.sqrt(rows.n) * normal(key, rows.n.shape)
        else:
            noise = history_noise(key, rows.count, setup.capacity)
        return state._replace(theta=_fit(setup, params, rows, rows.y + a * noise, state.theta))

    return refit


@forwards(glm_setup)
def glm_es(spec: ProblemSpec, m: int = 10, solver: str = "gd", warmup: str = "g-optimal", warmup_rounds: int = 500,
           **options) -> Policy:
    """GLM-ES, Sun, Wang & Xu (2025) Algorithm 1 with the GLM loss (eq. 4.3) and the warm-up of
    Algorithm 2 (spec 003 §2.3).

    m models share the data; model j fits the targets Y_l + Z_l^j, where every observation (warm-up ones
    included, U2) receives one draw Z_l^j ~ N(0, σ_R²) per model when it arrives and keeps it (incremental
    perturbations, spec 003 §2.5): with ``backend="arms"`` only the per-arm sums R_k^j = Σ (Y_l + Z_l^j)
    are kept (exact, spec 003 §2.3 fixed-arm fast path). After each observation all m models are
    refitted from their previous estimates (vmapped); each round one model j_t ~ Uniform{1..m} is drawn
    and argmax_x xᵀθ^{j_t} (= argmax μ(xᵀθ^{j_t})) is played. The draw is restricted to the first
    ``m_used`` models (param; all m by default, fewer in the early epochs of the anytime schedule);
    ``info.probability`` is the exact probability of the choice over that draw.

    Solvers (``solver``): Algorithm 1 asks for each member's argmin. ``"gd"`` (the default) is the
    paper's experimental solver, 100 gradient steps of 0.01 per member per round (spec 003 §2.3 U3), which
    warm-started lands near but not at the argmin; ``"ensemble-newton"`` reaches the argmin (to ~1e-6
    relative, with a per-member Newton fallback) with one Hessian at the ensemble mean shared by all
    members (:func:`~nlbandit.models.glm.ensemble_newton_solve`), an order of magnitude cheaper per round;
    ``"newton"`` runs damped Newton per member.

    With ``"ensemble-newton"`` the members are fitted once at the warm-up's last round, from their initial
    estimates, instead of after every warm-up pull: the warm-up plays its planned arms whatever the estimates are,
    and an argmin does not depend on the path to it, so the first round after the warm-up acts on the same fit, to
    the solver's tolerance. The chord steps still run (under ``vmap`` over seeds a skipped branch costs as much),
    the per-member Newton fallback does not: the fresh members lie far apart and most warm-up rounds took it,
    130–190 µs per seed-round against ~25 after the warm-up (Sun et al.'s Fig. 1b problem). Sun et al.'s Figs. 1b,
    2, 3 and 4a stored the same arms and curves at quick scale as with every warm-up round refitted, and the first
    and last seed of every run of the committed full-scale reports recomputed to their digests (2026-11-27).
    Where a planned arm is not on offer, the initial members choose its replacement. ``"gd"`` and ``"newton"``
    refit after every pull (``"gd"`` must: its estimate is its path).
    """
    setup = glm_setup(spec, solver=solver, warmup=warmup, warmup_rounds=warmup_rounds, **options)

    def refit(params, state, key):
        rows = state.rows
        if setup.solver == "ensemble-newton":
            active = None if setup.backend == "arms" else (rows.count, HISTORY_BLOCK)
            warming = rows.count < state.warmup.length
            theta = ensemble_newton_solve(LINKS[setup.link], rows.x, rows.n, rows.y, params.lam, state.theta,
                                          max_iter=jnp.where(warming, 0, _FALLBACK_CAP), active=active)
            return state._replace(theta=jnp.where(warming, state.theta, theta))
        fit = jax.vmap(lambda y, th: _fit(setup, params, rows, y, th), in_axes=(1, 0))
        return state._replace(theta=fit(rows.y, state.theta))

    def act(params, state, key, contexts, mask, t):
        words = member_and_tie_words(key)
        j = member_draw(words[0], params.m_used)
        scores = contexts @ state.theta[j]
        chosen, _ = greedy_choice(words[1], scores, mask)
        arm, planned = warmup_arm(state.warmup, t, chosen, mask)
        p = ensemble_probability(state.theta @ contexts.T, arm, mask, params.m_used)
        return arm, act_info(scores[arm], probability=jnp.where(planned, 1.0, p))

    return _policy("glm-es", setup, _argmax_theta, refit, targets=m)._replace(act=act)


def _glm_hypers(backends: tuple[str, ...] = ("arms", "history"),
                solvers: tuple[str, ...] = ("newton", "gd")) -> tuple[Hyper, ...]:
    """The options of :func:`glm_setup`, shared by every GLM policy (their defaults are the policy's constructor's,
    :func:`~nlbandit.core.hyper.forwards`)."""
    return (
        Hyper("link", SIGNATURE, "GLM link μ ('env': the environment's link)", kind=str, static=True,
              choices=tuple(LINKS) + ("env",)),
        Hyper("lam", 1.0, "ridge λ of the regularised MLE and of G = λI + Σ xxᵀ (spec 002 §7.3)", low=0.0),
        Hyper("backend", SIGNATURE, "data layout: per-arm sufficient statistics (fixed arms), or the full "
              "history", kind=str, static=True, choices=backends),
        Hyper("solver", SIGNATURE, "MLE solver: warm-started damped Newton, fixed-budget gradient descent"
              + (", or Newton with one Hessian shared by the ensemble" if "ensemble-newton" in solvers else ""),
              kind=str, static=True, choices=solvers),
        Hyper("gd_steps", SIGNATURE, "gradient steps per round (solver = 'gd')", kind=int, static=True, low=1),
        Hyper("lr", 0.01, "gradient step size (solver = 'gd')", low=0.0, low_open=True),
        Hyper("reduction", SIGNATURE, "gd loss: mean-normalised (spec 003 U3) or the sum as printed", kind=str,
              static=True, choices=("mean", "sum")),
        Hyper("warmup", SIGNATURE, "initial exploration (nlbandit.policies.warmup)", kind=str, static=True,
              choices=WARMUPS),
        Hyper("warmup_rounds", SIGNATURE, "τ: round-robin length, or the G-optimal design's budget", kind=int,
              static=True, low=0),
        Hyper("basis_pulls", SIGNATURE, "pulls of each basis arm (warmup = 'basis')", kind=int, static=True, low=1),
        Hyper("design", SIGNATURE, "G-optimal design algorithm (warmup = 'g-optimal')", kind=str,
              static=True, choices=("multiplicative", "frank-wolfe")),
        Hyper("rewards_outside_link", SIGNATURE, "allow rewards outside the link's range (seed 003's logistic bandit "
              "with Gaussian noise; the ridge term keeps the loss bounded below)", kind=bool, static=True),
    )


_THEORY = (
    Hyper("sigma", 0.5, "sub-Gaussian noise level σ of the theory widths", low=0.0),
    Hyper("mu_dot_min", 0.25, "μ̇_min (c_μ, κ) of the theory widths (Kveton et al. 2020 §5.1: 0.25)", low=0.0,
          low_open=True),
)


def _check_glm(config: dict[str, Any], env: Env, horizon: int, where: str) -> None:
    """What only a GLM policy can judge: λ > 0, a link whose range holds the rewards (with the hint to
    set ``rewards_outside_link``), bounded μ̇ for theory widths, a warm-up that fits in the horizon."""
    if config["lam"] == 0:
        raise ConfigError(f"{where}: field 'lam' is 0: the design matrix λI + Σ xxᵀ is singular until the warm-up "
                          "has spanned ℝ^d, and the MLE does not exist on separable data; use a small λ > 0 "
                          "(e.g. 1e-6) for the unregularised limit")
    low, high = env.facts.reward_range
    link = LINKS[config["link"]]
    lo_link, hi_link = link.reward_range
    if (low < lo_link or high > hi_link) and not config["rewards_outside_link"]:
        raise ConfigError(f"{where}: environment '{env.name}' gives rewards in [{low:g}, {high:g}] but link "
                          f"'{link.name}' models rewards in [{lo_link:g}, {hi_link:g}]; set rewards_outside_link = "
                          "true to fit it anyway, or choose a link whose range contains the rewards")
    if "theory" in (config.get("width"), config.get("scale")) and link.mu_dot_max is None:
        raise ConfigError(f"{where}: theory widths need a link with bounded μ̇; '{link.name}' has none")
    length = warmup_min_length(config["warmup"], env.spec.d, env.spec.k, config["warmup_rounds"],
                               config["basis_pulls"])
    if length > horizon:
        raise ConfigError(f"{where}: field 'warmup_rounds': the '{config['warmup']}' warm-up lasts at least {length} "
                          f"rounds, longer than the horizon T = {horizon}")
    if config["warmup"] in ("round-robin", "g-optimal") and config["warmup_rounds"] == 0:
        raise ConfigError(f"{where}: field 'warmup_rounds' must be >= 1 with warmup = '{config['warmup']}'")


def _entry(name: str, make, own: tuple[Hyper, ...], doc: str, finalize=None, redraw=None,
           **choices: Any) -> PolicyEntry:
    """A GLM family entry; ``redraw(setup, scale)``: the update's random step, for the entry's ``resample``."""
    extra = {} if finalize is None else {"finalize": finalize}
    if redraw is not None:
        extra.update(draws_in_update=True,
                     resample=lambda spec, scale, **options: redraw(glm_setup(spec, **options), scale))
    return PolicyEntry(name, make, own + _glm_hypers(**choices), doc, check=_check_glm, adapt=link_from_env,
                       test_hypers=lambda spec: {"warmup_rounds": 2 * spec.d}, **extra)


_WIDTH = Hyper("width", SIGNATURE, "confidence width: the constant alpha, or the theory value", kind=str,
               static=True, choices=("constant", "theory"))
_SCALE = Hyper("scale", SIGNATURE, "perturbation scale: the constant a, or the theory value (spec 002 §2.6)",
               kind=str, static=True, choices=("constant", "theory"))


@forwards(glm_setup)
def glm_phe(spec: ProblemSpec, scale: str = "constant", backend: str = "history", **options) -> Policy:
    """GLM-PHE: :func:`glm_fpl` on the full history, every past reward re-perturbed each round (the O(t)
    perturbed-history baseline of Sun, Wang & Xu 2025's runtime comparison)."""
    return glm_fpl(spec, scale, name="glm-phe", backend=backend, **options)


ENTRIES = (
    _entry("glm-ucb", glm_ucb,
           (_WIDTH, Hyper("alpha", 0.5, "constant width ρ (informal design: 0.5)", low=0.0),
            Hyper("reward_bound", 1.0, "reward bound R_max of the theory width", low=0.0)) + _THEORY,
           "GLM-UCB (Filippi et al. 2010): μ(xᵀθ̂) + ρ‖x‖_{G⁻¹}"),
    _entry("ucb-glm", ucb_glm,
           (_WIDTH, Hyper("alpha", 0.5, "constant width α (informal design: 0.5)", low=0.0)) + _THEORY,
           "UCB-GLM (Li et al. 2017): xᵀθ̂ + α‖x‖_{V⁻¹}"),
    _entry("glm-tsl", glm_tsl,
           (_SCALE, Hyper("a", 1.0, "Laplace sample scale a (informal design: 1)", low=0.0)) + _THEORY,
           "GLM-TSL (Kveton et al. 2020): θ̃ ~ N(θ̄, a²H⁻¹)", redraw=_tsl_sample),
    _entry("glm-fpl", glm_fpl,
           (_SCALE, Hyper("a", 0.5, "perturbation std a (informal design: 0.5)", low=0.0)) + _THEORY,
           "GLM-FPL (Kveton et al. 2020): MLE on rewards + fresh N(0, a²), aggregated per arm", redraw=_fpl_refit),
    _entry("glm-phe", glm_phe,
           (_SCALE, Hyper("a", 0.5, "perturbation std a", low=0.0)) + _THEORY,
           "GLM-FPL on the full history: every past reward re-perturbed each round (O(t) per round)",
           redraw=_fpl_refit, backends=("history",)),
    _entry("glm-es", glm_es,
           (Hyper("m", SIGNATURE, "ensemble size m", kind=int, static=True, low=1), SIGMA_R, M_USED),
           "GLM ensemble sampling (Sun, Wang & Xu 2025): G-optimal warm-up, m models, incremental "
           "perturbations", members_used, solvers=("gd", "ensemble-newton", "newton")),
)
