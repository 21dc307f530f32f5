"""Policy registry: kebab-case names used in experiment files, their hyperparameters, constructors.

Names are stable: ``uniform``, ``greedy``, ``eps-greedy``, ``lin-ucb``, ``lin-ts``, ``lin-phe``, ``lin-es``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, lookup, resolve_named
from nlbandit.core.types import Policy, ProblemSpec
from nlbandit.envs.registry import reward_range
from nlbandit.models.links import LINKS
from nlbandit.theory import ftrl_lambda
from nlbandit.models.ftrl import SOLVERS
from nlbandit.policies import baselines, glm, hetero, linear, logistic
from nlbandit.policies.anytime import SCHEDULES, WARMUP_SCOPES, anytime, epoch_table
from nlbandit.policies.warmup import WARMUPS, warmup_min_length

_LAM = Hyper("lam", 1.0, "ridge regularisation λ (V = λI + Σ xxᵀ)", low=0.0, low_open=True)
_SIGMA_R = Hyper("sigma_r", 0.1, "perturbation standard deviation σ_R (spec 003 erratum 5: a std)", low=0.0)
_PRIOR = Hyper("prior_scale", None, "prior perturbation scale (omitted: σ_R; 0: off, paper-literal)",
               low=0.0, optional=True)


def _prior_defaults_to_sigma_r(values: dict[str, Any]) -> dict[str, Any]:
    if values["prior_scale"] is None:
        values["prior_scale"] = values["sigma_r"]
    return values


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy.

    Attributes:
      name: registry name.
      make: ``make(spec, **static_hyperparameters) -> Policy``.
      hypers: declared hyperparameters (static ones go to ``make``, the rest into ``params``).
      doc: one line for ``nlbandit list``.
      finalize: fills values that default to other values (e.g. prior_scale = σ_R).
      check: ``check(policy_config, env_config, horizon, where)`` raises :class:`ConfigError` when the
        policy cannot run on that environment (cross-field validation at the boundary).
      boundary: hyperparameters used only by ``check`` (neither passed to ``make`` nor traced).
      adapt: ``adapt(policy_config, env_config) -> policy_config`` fills values that follow the
        environment (``link = "env"``), before ``check``.
    """

    name: str
    make: Callable[..., Policy]
    hypers: tuple[Hyper, ...]
    doc: str
    finalize: Callable[[dict[str, Any]], dict[str, Any]] = lambda values: values
    check: Callable[[dict[str, Any], dict[str, Any], int, str], None] | None = None
    boundary: tuple[str, ...] = ()
    adapt: Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]] | None = None

    def static_names(self) -> tuple[str, ...]:
        """Names of the shape- or code-path-changing hyperparameters (passed to ``make``)."""
        return tuple(h.name for h in self.hypers if h.static and h.name not in self.boundary)


def _glm_hypers(solver: str = "newton", warmup: str = "basis", warmup_rounds: int = 0,
                backends: tuple[str, ...] = ("arms", "history")) -> tuple[Hyper, ...]:
    """Options shared by the GLM policies (:func:`nlbandit.policies.glm.glm_setup`)."""
    return (
        Hyper("link", "logistic", "GLM link μ ('env': the environment's link)", kind=str, static=True,
              choices=tuple(LINKS) + ("env",)),
        Hyper("lam", 1.0, "ridge λ of the regularised MLE and of G = λI + Σ xxᵀ (spec 002 §7.3)", low=0.0),
        Hyper("backend", backends[0], "data layout: per-arm sufficient statistics (fixed arms), or the full "
              "history", kind=str, static=True, choices=backends),
        Hyper("solver", solver, "MLE solver: warm-started damped Newton, or fixed-budget gradient descent",
              kind=str, static=True, choices=("newton", "gd")),
        Hyper("gd_steps", 100, "gradient steps per round (solver = 'gd')", kind=int, static=True, low=1),
        Hyper("lr", 0.01, "gradient step size (solver = 'gd')", low=0.0, low_open=True),
        Hyper("reduction", "mean", "gd loss: mean-normalised (spec 003 U3) or the sum as printed", kind=str,
              static=True, choices=("mean", "sum")),
        Hyper("warmup", warmup, "initial exploration (nlbandit.policies.warmup)", kind=str, static=True,
              choices=WARMUPS),
        Hyper("warmup_rounds", warmup_rounds, "τ: round-robin length, or the G-optimal design's budget", kind=int,
              static=True, low=0),
        Hyper("basis_pulls", 1, "pulls of each basis arm (warmup = 'basis')", kind=int, static=True, low=1),
        Hyper("design", "multiplicative", "G-optimal design algorithm (warmup = 'g-optimal')", kind=str,
              static=True, choices=("multiplicative", "frank-wolfe")),
        Hyper("rewards_outside_link", False, "allow rewards outside the link's range (seed 003's logistic bandit "
              "with Gaussian noise; the ridge term keeps the loss bounded below)", kind=bool, static=True),
    )


_THEORY = (
    Hyper("sigma", 0.5, "sub-Gaussian noise level σ of the theory widths", low=0.0),
    Hyper("mu_dot_min", 0.25, "μ̇_min (c_μ, κ) of the theory widths (Kveton et al. 2020 §5.1: 0.25)", low=0.0,
          low_open=True),
)


def _check_glm(config: dict[str, Any], env: dict[str, Any], horizon: int, where: str) -> None:
    """Cross-checks of a GLM policy against its environment and horizon (issue: bad input)."""
    if config["lam"] == 0:
        raise ConfigError(f"{where}: field 'lam' is 0: the design matrix λI + Σ xxᵀ is singular until the warm-up "
                          "has spanned ℝ^d, and the MLE does not exist on separable data; use a small λ > 0 "
                          "(e.g. 1e-6) for the unregularised limit")
    low, high = reward_range(env)
    link = LINKS[config["link"]]
    lo_link, hi_link = link.reward_range
    if (low < lo_link or high > hi_link) and not config["rewards_outside_link"]:
        raise ConfigError(f"{where}: environment '{env['name']}' gives rewards in [{low:g}, {high:g}] but link "
                          f"'{link.name}' models rewards in [{lo_link:g}, {hi_link:g}]; set rewards_outside_link = "
                          "true to fit it anyway, or choose a link whose range contains the rewards")
    if "theory" in (config.get("width"), config.get("scale")) and link.mu_dot_max is None:
        raise ConfigError(f"{where}: theory widths need a link with bounded μ̇; '{link.name}' has none")
    fixed_needed = config["backend"] == "arms" or config["warmup"] in ("basis", "g-optimal")
    if fixed_needed and env.get("contexts", "fixed") != "fixed":
        raise ConfigError(f"{where}: backend '{config['backend']}' with warmup '{config['warmup']}' needs a fixed "
                          f"arm set, but the environment has contexts = {env.get('contexts')!r}; use backend = "
                          "'history' with warmup 'none' or 'round-robin'")
    length = warmup_min_length(config["warmup"], env["d"], env["k"], config["warmup_rounds"], config["basis_pulls"])
    if length > horizon:
        raise ConfigError(f"{where}: field 'warmup_rounds': the '{config['warmup']}' warm-up lasts at least {length} "
                          f"rounds, longer than the horizon T = {horizon}")
    if config["warmup"] in ("round-robin", "g-optimal") and config["warmup_rounds"] == 0:
        raise ConfigError(f"{where}: field 'warmup_rounds' must be >= 1 with warmup = '{config['warmup']}'")


def env_link(env: dict[str, Any]) -> str:
    """The link of an environment's mean reward: its ``link`` field, else identity for ``linear`` and
    logistic for ``logistic``."""
    return env.get("link") or {"linear": "identity"}.get(env["name"], "logistic")


def _link_from_env(config: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    return {**config, "link": env_link(env)} if config["link"] == "env" else config


def _glm_entry(name: str, make, own: tuple[Hyper, ...], doc: str, **defaults: Any) -> PolicyEntry:
    return PolicyEntry(name, make, own + _glm_hypers(**defaults), doc, check=_check_glm,
                       boundary=("rewards_outside_link",), adapt=_link_from_env)


_WIDTH = Hyper("width", "constant", "confidence width: the constant alpha, or the theory value", kind=str,
               static=True, choices=("constant", "theory"))
_SCALE = Hyper("scale", "constant", "perturbation scale: the constant a, or the theory value (spec 002 §2.6)",
               kind=str, static=True, choices=("constant", "theory"))

GLM_POLICIES = (
    _glm_entry("glm-ucb", glm.glm_ucb,
               (_WIDTH, Hyper("alpha", 0.5, "constant width ρ (informal design: 0.5)", low=0.0),
                Hyper("reward_bound", 1.0, "reward bound R_max of the theory width", low=0.0)) + _THEORY,
               "GLM-UCB (Filippi et al. 2010): μ(xᵀθ̂) + ρ‖x‖_{G⁻¹}"),
    _glm_entry("ucb-glm", glm.ucb_glm,
               (_WIDTH, Hyper("alpha", 0.5, "constant width α (informal design: 0.5)", low=0.0)) + _THEORY,
               "UCB-GLM (Li et al. 2017): xᵀθ̂ + α‖x‖_{V⁻¹}"),
    _glm_entry("glm-tsl", glm.glm_tsl,
               (_SCALE, Hyper("a", 1.0, "Laplace sample scale a (informal design: 1)", low=0.0)) + _THEORY,
               "GLM-TSL (Kveton et al. 2020): θ̃ ~ N(θ̄, a²H⁻¹)"),
    _glm_entry("glm-fpl", glm.glm_fpl,
               (_SCALE, Hyper("a", 0.5, "perturbation std a (informal design: 0.5)", low=0.0)) + _THEORY,
               "GLM-FPL (Kveton et al. 2020): MLE on rewards + fresh N(0, a²), aggregated per arm"),
    _glm_entry("glm-phe", lambda spec, **o: glm.glm_fpl(spec, name="glm-phe", **o),
               (_SCALE, Hyper("a", 0.5, "perturbation std a", low=0.0)) + _THEORY,
               "GLM-FPL on the full history: every past reward re-perturbed each round (O(t) per round)",
               backends=("history",)),
    _glm_entry("glm-es", glm.glm_es,
               (Hyper("m", 10, "ensemble size m", kind=int, static=True, low=1), _SIGMA_R),
               "GLM ensemble sampling (Sun, Wang & Xu 2025): G-optimal warm-up, m models, incremental "
               "perturbations", solver="gd", warmup="g-optimal", warmup_rounds=500),
)



def _check_logistic(config: dict[str, Any], env: dict[str, Any], horizon: int, where: str) -> None:
    """Faury et al.'s baselines model Bernoulli rewards: the environment's rewards must lie in [0, 1]."""
    low, high = reward_range(env)
    if low < 0.0 or high > 1.0:
        raise ConfigError(f"{where}: policy '{config['name']}' models rewards in [0, 1], but environment "
                          f"'{env['name']}' gives rewards in [{low:g}, {high:g}]")
    if config.get("backend") == "arms" and env.get("contexts", "fixed") != "fixed":
        raise ConfigError(f"{where}: backend 'arms' needs a fixed arm set, but the environment has contexts = "
                          f"{env.get('contexts')!r}; use backend = 'history'")


_S = Hyper("s", 1.0, "S, the bound on ‖θ*‖", low=0.0, low_open=True)
_DELTA = Hyper("delta", 0.05, "failure probability δ", low=0.0, high=1.0, low_open=True, high_open=True)

LOGISTIC_POLICIES = (
    PolicyEntry(
        "logistic-ucb-1",
        logistic.logistic_ucb_1,
        (
            Hyper("width", "theory", "radius: theory ρ_t, the reference code's refined radius, or the constant "
                  "alpha", kind=str, static=True, choices=("theory", "reference", "constant")),
            Hyper("schedule", "log", "λ_t: lam_scale·d·log(2 + n) (reference code), or the constant lam", kind=str,
                  static=True, choices=("log", "constant")),
            Hyper("newton_steps", 5, "warm-started damped Newton steps per refit", kind=int, static=True, low=1),
            Hyper("lazy_every", 1, "after lazy_after rounds refit only every this many rounds", kind=int,
                  static=True, low=1),
            Hyper("lazy_after", 200, "round from which lazy refits start", kind=int, static=True, low=0),
            Hyper("backend", "history", "data the MLE is fitted on: the full history, or per-arm counts and "
                  "reward sums (a fixed arm set; cost per round independent of t)", kind=str, static=True,
                  choices=("history", "arms")),
            _S, _DELTA,
            Hyper("kappa", 0.0, "κ (≤ 0: 1/μ̇(S), assuming ‖x‖ ≤ 1)"),
            Hyper("lam_scale", 1.0, "factor of the log λ_t schedule", low=0.0, low_open=True),
            Hyper("lam", 1.0, "λ of the constant schedule", low=0.0, low_open=True),
            Hyper("alpha", 1.0, "constant radius (width = 'constant')", low=0.0),
        ),
        "Logistic-UCB-1 (Faury et al. 2020), full-history MLE, no projection",
        check=_check_logistic,
    ),
    PolicyEntry(
        "ada-ofu-ecolog",
        logistic.ada_ofu_ecolog,
        (
            Hyper("width", "ada", "radius: data-adaptive η_t, the nick-jhlee fork's, or the constant alpha",
                  kind=str, static=True, choices=("ada", "lee", "constant")),
            Hyper("bar_center", "previous", "θ̄ step centred on θ_t (paper) or θ_{t+1} (reference code)", kind=str,
                  static=True, choices=("previous", "updated")),
            Hyper("gd_steps", 100, "most projected-gradient iterations per online step", kind=int, static=True,
                  low=1),
            Hyper("proj_iters", 30, "Newton steps of the projection's secular equation", kind=int, static=True,
                  low=1),
            Hyper("lam", 1.0, "λ, W₀ = λI", low=0.0, low_open=True),
            _S, _DELTA,
            Hyper("alpha", 1.0, "constant radius √η (width = 'constant')", low=0.0),
        ),
        "ada-OFU-ECOLog (Faury et al. 2022), online estimator, per-round cost independent of t",
        check=_check_logistic,
    ),
)


def _check_hetero(name: str, config: dict[str, Any], env: dict[str, Any], where: str) -> None:
    """A variance-aware policy needs the variance bounds of a heteroscedastic environment with its noise bound."""
    if env["name"] != "heteroscedastic":
        raise ConfigError(f"{where}: policy '{name}' needs the variance bounds σ_t of environment "
                          f"'heteroscedastic', got environment '{env['name']}'")
    if config["noise_bound"] < env["sigma_high"]:
        raise ConfigError(f"{where}: field 'noise_bound' R = {config['noise_bound']:g} must bound the noise: the "
                          f"environment's sigma_high is {env['sigma_high']:g}")


def _check_mor_ucb(config: dict[str, Any], env: dict[str, Any], horizon: int, where: str) -> None:
    """MOR-UCB: a heteroscedastic environment with the policy's link."""
    _check_hetero("mor-ucb", config, env, where)
    if config["link"] != env["link"]:
        raise ConfigError(f"{where}: field 'link' {config['link']!r} differs from the environment's link "
                          f"{env['link']!r}")


def _check_weighted_oful(config: dict[str, Any], env: dict[str, Any], horizon: int, where: str) -> None:
    """Weighted OFUL: a heteroscedastic environment with the identity link."""
    _check_hetero("weighted-oful", config, env, where)
    if env["link"] != "identity":
        raise ConfigError(f"{where}: policy 'weighted-oful' is a linear bandit policy: the environment's link must "
                          f"be 'identity', got {env['link']!r} (use mor-ucb for GLM links)")


def _mor_ucb_lambda(values: dict[str, Any]) -> dict[str, Any]:
    """λ omitted → the theory 4K²/κ of the link (once the link is known)."""
    if values["lam"] is None and values["link"] != "env":
        values["lam"] = ftrl_lambda(values["link"])
    return values


def _mor_ucb_env(config: dict[str, Any], env: dict[str, Any]) -> dict[str, Any]:
    """link = 'env' → the environment's link, then λ from it when omitted."""
    return _mor_ucb_lambda(_link_from_env(config, env))


_NOISE_BOUND = Hyper("noise_bound", 1.0, "noise bound R ≥ |ε_t|", static=True, low=0.0, low_open=True)
_HETERO_DELTA = Hyper("delta", 0.05, "confidence level δ of the radii", static=True, low=0.0, high=1.0, low_open=True,
                      high_open=True)
_BETA_SCALE = Hyper("beta_scale", 1.0, "multiplier of the theory radii (1 = theory)", low=0.0, low_open=True)

HETERO_POLICIES = (
    PolicyEntry(
        "mor-ucb",
        hetero.mor_ucb,
        (
            Hyper("link", "identity", "GLM link φ, the environment's ('env' takes it from the environment)",
                  kind=str, static=True, choices=tuple(LINKS) + ("env",)),
            _NOISE_BOUND,
            Hyper("sigma_bar", None, "smallest layer's noise level σ̄ (omitted: R/√d; σ̄ = R: one layer)",
                  static=True, low=0.0, low_open=True, optional=True),
            _HETERO_DELTA,
            Hyper("lam", None, "λ of λ‖θ‖² per layer (omitted: the theory 4K²/κ)", low=0.0, low_open=True,
                  optional=True),
            _BETA_SCALE,
            Hyper("solver", "auto", "per-layer FTRL solver: closed form (identity link) or Newton", kind=str,
                  static=True, choices=SOLVERS),
        ),
        "MOR-UCB (Zhao et al. 2023, Alg. 2): variance-layered FTRL estimates, min over layers of the UCBs",
        _mor_ucb_lambda,
        _check_mor_ucb,
        adapt=_mor_ucb_env,
    ),
    PolicyEntry(
        "weighted-oful",
        hetero.weighted_oful,
        (
            _NOISE_BOUND,
            Hyper("sigma_min", None, "floor σ_min of the weights' noise levels σ̄_t = max(σ_t, σ_min) (omitted: "
                  "R/√d)", static=True, low=0.0, low_open=True, optional=True),
            _HETERO_DELTA,
            Hyper("lam", 1.0, "ridge λ of Z = λI + Σ aaᵀ/σ̄² (the paper: 1/S²)", low=0.0, low_open=True),
            _S,
            _BETA_SCALE,
        ),
        "weighted OFUL (Zhou, Gu & Szepesvári 2021): 1/σ̄_t²-weighted ridge regression UCB, identity link",
        check=_check_weighted_oful,
    ),
)


POLICIES: dict[str, PolicyEntry] = {
    e.name: e
    for e in (
        PolicyEntry("uniform", baselines.uniform, (), "uniformly random available arm"),
        PolicyEntry("greedy", baselines.greedy, (_LAM,), "ridge estimate, no exploration"),
        PolicyEntry(
            "eps-greedy",
            baselines.eps_greedy,
            (_LAM, Hyper("epsilon", 0.05, "exploration probability ε", low=0.0, high=1.0)),
            "ridge greedy with probability-ε uniform exploration",
        ),
        PolicyEntry(
            "lin-ucb",
            linear.lin_ucb,
            (
                Hyper("width", "oful", "confidence width: OFUL theory √β_t, or the constant alpha", kind=str,
                      static=True, choices=("oful", "constant")),
                _LAM,
                Hyper("sigma", 0.5, "sub-Gaussian noise level σ in √β_t (OFUL width)", low=0.0),
                Hyper("delta", 0.01, "failure probability δ in √β_t (OFUL width)", low=0.0, high=1.0,
                      low_open=True, high_open=True),
                Hyper("s", 1.0, "bound S on ‖θ*‖ in √β_t (OFUL width)", low=0.0),
                Hyper("alpha", 1.0, "constant width α (constant width)", low=0.0),
            ),
            "LinUCB/OFUL (Abbasi-Yadkori et al. 2011)",
        ),
        PolicyEntry(
            "lin-ts",
            linear.lin_ts,
            (_LAM, Hyper("v", 0.5, "posterior scale v: θ̃ ~ N(θ̂, v² V⁻¹)", low=0.0)),
            "linear Thompson sampling (Agrawal & Goyal 2013), practical scale",
        ),
        PolicyEntry(
            "lin-phe",
            linear.lin_phe,
            (_LAM, _SIGMA_R, _PRIOR),
            "perturbed history, all t rewards re-perturbed each round (O(t) per round)",
            _prior_defaults_to_sigma_r,
        ),
        PolicyEntry(
            "lin-es",
            linear.lin_es,
            (Hyper("m", 25, "ensemble size m", kind=int, static=True, low=1), _LAM, _SIGMA_R, _PRIOR),
            "linear ensemble sampling (Sun, Wang & Xu 2025), m models, incremental perturbations",
            _prior_defaults_to_sigma_r,
        ),
    )
    + GLM_POLICIES
    + LOGISTIC_POLICIES
    + HETERO_POLICIES
}


ANYTIME_SUFFIX = "@anytime"
_ANYTIME_HYPERS = (
    Hyper("t0", 100, "T₀: the first epoch's length (epochs end at ⌊T₀ bⁱ⌋)", kind=int, static=True, low=1),
    Hyper("b", 2.618033988749895, "growth factor b of the epochs ((3+√5)/2 is optimal)", static=True, low=1.0,
          low_open=True),
    Hyper("schedule", "none", "per-epoch hyperparameters: none, or sun2025 (m = ⌈2 ln τ_i⌉, σ_R = 0.02 ln τ_i)",
          kind=str, static=True, choices=SCHEDULES),
    Hyper("warmup_scope", "epoch", "epoch: a new warm-up in every epoch (spec 003 U7 default); once: one warm-up, "
          "every later epoch restarts from the state at its end", kind=str, static=True, choices=WARMUP_SCOPES),
)


def _anytime_entry(base: PolicyEntry) -> PolicyEntry:
    """``<base>@anytime``: the base policy under the doubling trick (:mod:`nlbandit.policies.anytime`)."""
    names = {h.name for h in base.hypers}

    def make(spec: ProblemSpec, t0: int, b: float, schedule: str, warmup_scope: str, **static: Any) -> Policy:
        if schedule == "sun2025":  # the base holds the largest ensemble of any epoch; `m` is ignored
            static["m"] = int(epoch_table(t0, b, spec.horizon, schedule)[1]["m_used"].max())
        return anytime(base.make(spec, **static), t0, b, spec.horizon, schedule, spec.k, spec.d, warmup_scope)

    def finalize(values: dict[str, Any]) -> dict[str, Any]:
        values = base.finalize(values)
        if values["t0"] * (values["b"] - 1.0) <= 1.0:
            raise ConfigError(f"policy '{base.name}{ANYTIME_SUFFIX}': fields 't0' and 'b' must satisfy "
                              f"t0·(b − 1) > 1, got {values['t0']}·({values['b']:g} − 1)")
        if values["schedule"] == "sun2025" and not {"m", "sigma_r"} <= names:
            raise ConfigError(f"policy '{base.name}{ANYTIME_SUFFIX}': field 'schedule' = 'sun2025' sets m and "
                              "σ_R per epoch and needs an ensemble policy (lin-es, glm-es)")
        if values["warmup_scope"] == "once" and values.get("warmup", "none") == "none":
            raise ConfigError(f"policy '{base.name}{ANYTIME_SUFFIX}': field 'warmup_scope' = 'once' needs a base "
                              "policy with a warm-up (field 'warmup' other than 'none')")
        return values

    return PolicyEntry(base.name + ANYTIME_SUFFIX, make, base.hypers + _ANYTIME_HYPERS,
                       f"{base.doc}, anytime (doubling trick, full restarts; schedule sun2025 overrides m and "
                       "σ_R)", finalize, base.check, base.boundary, base.adapt)


def policy_entry(name: Any, where: str = "policy") -> PolicyEntry:
    """The registry entry for ``name`` (``<policy>@anytime`` wraps any registered policy);
    :class:`ConfigError` listing the known names otherwise."""
    if isinstance(name, str) and name.endswith(ANYTIME_SUFFIX) and name[: -len(ANYTIME_SUFFIX)] in POLICIES:
        return _anytime_entry(POLICIES[name[: -len(ANYTIME_SUFFIX)]])
    return lookup(POLICIES, name, where)


def resolve_policy(config: dict[str, Any], where: str = "policy") -> dict[str, Any]:
    """Validate ``{"name": ..., **hyperparameters}``; return it with defaults filled in."""
    entry = policy_entry(config.get("name"), where)
    return {"name": entry.name, **entry.finalize(resolve_named(entry, config, where))}


def split_policy_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a resolved policy config into (static keyword arguments, traced hyperparameters)."""
    return split_config(policy_entry(config["name"]), config)


def split_config(entry: PolicyEntry, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a resolved config of ``entry`` into (static keyword arguments, traced hyperparameters);
    boundary-only hyperparameters go to neither."""
    static = entry.static_names()
    hp = {k: v for k, v in config.items() if k != "name" and k not in entry.boundary}
    return {k: v for k, v in hp.items() if k in static}, {k: v for k, v in hp.items() if k not in static}


def check_policy_env(config: dict[str, Any], env: dict[str, Any], horizon: int,
                     where: str = "policy") -> dict[str, Any]:
    """Fill the values of a resolved policy config that follow the environment (``adapt``), cross-check it
    against the resolved environment config and the horizon, and return it."""
    entry = policy_entry(config["name"], where)
    if entry.adapt is not None:
        config = entry.adapt(config, env)
    if entry.check is not None:
        entry.check(config, env, horizon, where)
    return config


def make_policy(name: str, spec: ProblemSpec, **hyperparameters: Any) -> tuple[Policy, dict[str, Any]]:
    """Construct a registered policy; return it with its ``params`` pytree (float64 scalars).

    Example: ``policy, params = make_policy("lin-es", ProblemSpec(20, 50, 10_000), m=25, sigma_r=0.1)``.
    """
    config = resolve_policy({"name": name, **hyperparameters}, f"policy '{name}'")
    if config.get("link") == "env":
        raise ConfigError(f"policy '{name}': field 'link' 'env' takes the link from an experiment file's "
                          "environment; give the link here")
    static, traced = split_policy_config(config)
    return policy_entry(name).make(spec, **static), {k: jnp.asarray(v, jnp.float64) for k, v in traced.items()}


__all__ = ["ConfigError", "POLICIES", "check_policy_env", "make_policy", "policy_entry", "resolve_policy", "split_policy_config"]
