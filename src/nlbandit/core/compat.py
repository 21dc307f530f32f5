"""One generic check that a policy can run on an environment: the policy's :class:`Requirements`
against the environment's :class:`EnvFacts`, plus the sizes.

It replaces per-name matching: any environment that declares its facts, registered or written by a user,
is checked the same way, before anything is compiled.
"""

from __future__ import annotations

from nlbandit.core.hyper import ConfigError
from nlbandit.core.types import Env, Policy, ProblemSpec


def _interval(r: tuple[float, float]) -> str:
    return f"[{r[0]:g}, {r[1]:g}]"


def compatibility_errors(policy: Policy, env: Env, spec: ProblemSpec | None = None,
                         horizon: int | None = None) -> list[str]:
    """Every reason why ``policy`` (built for ``spec``) cannot run ``horizon`` rounds on ``env``."""
    need, facts, errors = policy.meta.requires, env.facts, []
    if spec is not None and (spec.d, spec.k) != (env.spec.d, env.spec.k):
        errors.append(f"policy '{policy.meta.name}' was built for d = {spec.d}, K = {spec.k}, but environment "
                      f"'{env.name}' has d = {env.spec.d}, K = {env.spec.k}")
    if horizon is not None and policy.meta.max_horizon is not None and horizon > policy.meta.max_horizon:
        errors.append(f"horizon {horizon} exceeds the {policy.meta.max_horizon} rounds policy '{policy.meta.name}' was "
                      "built for (ProblemSpec.horizon)")
    if need.fixed_arms and not facts.fixed_arms:
        errors.append(f"policy '{policy.meta.name}' keeps per-arm state and needs a fixed arm set, but environment "
                      f"'{env.name}' offers new arms every round (use contexts = 'fixed', or a history backend)")
    if need.noise_level and not facts.noise_level:
        errors.append(f"policy '{policy.meta.name}' needs the noise level σ_t revealed after each round, which "
                      f"environment '{env.name}' does not reveal (use environment 'heteroscedastic')")
    if need.reward_range is not None:
        lo, hi = need.reward_range
        if facts.reward_range[0] < lo or facts.reward_range[1] > hi:
            errors.append(f"policy '{policy.meta.name}' models rewards in {_interval(need.reward_range)}, but "
                          f"environment '{env.name}' gives rewards in {_interval(facts.reward_range)}")
    if need.link is not None and facts.link != need.link:
        errors.append(f"policy '{policy.meta.name}' assumes the mean reward μ(xᵀθ*) with link '{need.link}', but "
                      f"environment '{env.name}' has " + (f"link '{facts.link}'" if facts.link else "no GLM link"))
    if need.noise_bound is not None:
        if facts.noise_bound is None:
            errors.append(f"policy '{policy.meta.name}' assumes noise bounded by R = {need.noise_bound:g}, but "
                          f"environment '{env.name}' declares no noise bound")
        elif facts.noise_bound > need.noise_bound:
            errors.append(f"policy '{policy.meta.name}': its noise bound R = {need.noise_bound:g} must bound the "
                          f"noise, but environment '{env.name}' has noise up to {facts.noise_bound:g}")
    return errors


def check_compatible(policy: Policy, env: Env, spec: ProblemSpec | None = None, horizon: int | None = None,
                     where: str = "") -> None:
    """Raise :class:`~nlbandit.core.hyper.ConfigError` (a ``ValueError``) listing every incompatibility
    found by :func:`compatibility_errors`; ``where`` prefixes the message."""
    errors = compatibility_errors(policy, env, spec, horizon)
    if errors:
        raise ConfigError((f"{where}: " if where else "") + "; ".join(errors))
