"""Policy registry: kebab-case names used in experiment files, their hyperparameters, constructors.

Names are stable: ``uniform``, ``greedy``, ``eps-greedy``, ``lin-ucb``, ``lin-ts``, ``lin-phe``, ``lin-es``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax.numpy as jnp

from nlbandit.core.hyper import ConfigError, Hyper, lookup, resolve_named
from nlbandit.core.types import Policy, ProblemSpec
from nlbandit.policies import baselines, linear

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
    """

    name: str
    make: Callable[..., Policy]
    hypers: tuple[Hyper, ...]
    doc: str
    finalize: Callable[[dict[str, Any]], dict[str, Any]] = lambda values: values

    def static_names(self) -> tuple[str, ...]:
        """Names of the shape- or code-path-changing hyperparameters."""
        return tuple(h.name for h in self.hypers if h.static)


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
}


def policy_entry(name: Any, where: str = "policy") -> PolicyEntry:
    """The registry entry for ``name``; :class:`ConfigError` listing the known names otherwise."""
    return lookup(POLICIES, name, where)


def resolve_policy(config: dict[str, Any], where: str = "policy") -> dict[str, Any]:
    """Validate ``{"name": ..., **hyperparameters}``; return it with defaults filled in."""
    entry = policy_entry(config.get("name"), where)
    return {"name": entry.name, **entry.finalize(resolve_named(entry, config, where))}


def split_policy_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a resolved policy config into (static keyword arguments, traced hyperparameters)."""
    static = policy_entry(config["name"]).static_names()
    hp = {k: v for k, v in config.items() if k != "name"}
    return {k: v for k, v in hp.items() if k in static}, {k: v for k, v in hp.items() if k not in static}


def make_policy(name: str, spec: ProblemSpec, **hyperparameters: Any) -> tuple[Policy, dict[str, Any]]:
    """Construct a registered policy; return it with its ``params`` pytree (float64 scalars).

    Example: ``policy, params = make_policy("lin-es", ProblemSpec(20, 50, 10_000), m=25, sigma_r=0.1)``.
    """
    config = resolve_policy({"name": name, **hyperparameters}, f"policy '{name}'")
    static, traced = split_policy_config(config)
    return POLICIES[name].make(spec, **static), {k: jnp.asarray(v, jnp.float64) for k, v in traced.items()}


__all__ = ["ConfigError", "POLICIES", "make_policy", "policy_entry", "resolve_policy", "split_policy_config"]
