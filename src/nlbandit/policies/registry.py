"""The policy registry: collects the families' declared policies under their stable kebab-case names.

Each family module of the package (:mod:`~nlbandit.policies.baselines`, :mod:`~nlbandit.policies.linear`,
:mod:`~nlbandit.policies.glm`, :mod:`~nlbandit.policies.squarecb`, ...) declares its policies and their
hyperparameters as ``ENTRIES``; the registry finds them (:data:`FAMILIES`: every module of
``nlbandit.policies`` with ``ENTRIES``), so adding a policy means adding it to its family's ``ENTRIES``, or
writing a new family module, and nothing else. ``<name>@anytime`` wraps any of them in the doubling trick
(:mod:`~nlbandit.policies.anytime`).
"""

from __future__ import annotations

import functools
from typing import Any, Collection

import jax.numpy as jnp

from nlbandit.arguments import check_int_sizes, check_sizes, integer, plain
from nlbandit.core.compat import check_compatible
from nlbandit.core.hyper import ConfigError, lookup, resolve_named
from nlbandit.core.memory import policy_parts, state_bytes
from nlbandit.core.types import Env, EnvFacts, Policy, ProblemSpec
from nlbandit.discovery import declaring_modules
from nlbandit.policies.anytime import SUFFIX, anytime_entry
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.reads import check_reads
from nlbandit.precision import require_x64

FAMILIES = declaring_modules("nlbandit.policies", "ENTRIES", skip=__name__)
"""The family modules whose ``ENTRIES`` make up the registry, by module name."""

POLICIES: dict[str, PolicyEntry] = {e.name: e for family in FAMILIES for e in family.ENTRIES}


def policy_entry(name: Any, where: str = "policy", field: str = "name") -> PolicyEntry:
    """The registry entry for ``name`` (``<policy>@anytime`` wraps any registered policy);
    :class:`ConfigError` naming ``field`` (the argument the name came in: an experiment file's ``name``, the
    agent's and the service's ``policy``) and listing the known names otherwise."""
    if isinstance(name, str) and name.endswith(SUFFIX) and name[: -len(SUFFIX)] in POLICIES:
        return anytime_entry(POLICIES[name[: -len(SUFFIX)]])
    if field != "name" and (not isinstance(name, str) or name not in POLICIES):
        raise ConfigError(f"{where}: field '{field}' must be one of {', '.join(sorted(POLICIES))} (or "
                          f"<policy>{SUFFIX}), got {name!r}")
    return lookup(POLICIES, name, where)


def resolve_policy(config: dict[str, Any], where: str = "policy", entry: PolicyEntry | None = None,
                   reads: bool = False, unread: Collection[str] = ()) -> dict[str, Any]:
    """Validate ``{"name": ..., **hyperparameters}``; return it with defaults filled in (``entry``: an entry
    that is not registered, e.g. one :func:`nlbandit.testing.check_policy` checks). With ``reads`` (what a
    user writes: :func:`make_policy`, the agent, an experiment file), a hyperparameter set away from its
    default where the configuration does not read it is refused (:func:`~nlbandit.policies.reads.check_reads`),
    but those named in ``unread`` (set so knowingly, e.g. a paper's table row)."""
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: expected a table {{name = ..., <hyperparameter> = ...}}, got {config!r}")
    entry = policy_entry(config.get("name"), where) if entry is None else entry

    def resolved(given: dict[str, Any]) -> dict[str, Any]:
        values = resolve_named(entry, given, where)
        check_int_sizes(entry.hypers, values, where)
        try:
            return {"name": entry.name, **entry.finalize(values)}
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None

    values = resolved(config)
    if reads:
        check_reads(values, {k: v for k, v in config.items() if k not in unread}, resolved, where)
    return values


def split_policy_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a resolved policy config into (static keyword arguments, traced hyperparameters)."""
    return policy_entry(config["name"]).split(config)


def build_policy(config: dict[str, Any], spec: ProblemSpec, entry: PolicyEntry | None = None) -> tuple[Policy, Any]:
    """The policy of a resolved config (``link = "env"`` already adapted), with its ``params`` (its
    :attr:`~nlbandit.policies.entry.PolicyEntry.params_type` record of float64 scalars); ``entry``: an entry
    that is not registered (built anew, not cached)."""
    if entry is None:
        static, traced = split_policy_config(config)
        policy = _make(config["name"], spec, tuple(sorted(static.items())))
    else:
        static, traced = entry.split(config)
        policy = _stamped(entry, spec, static)
    return policy, policy.meta.params_type(**{k: jnp.asarray(v, jnp.float64) for k, v in traced.items()})


def policy_memory(config: dict[str, Any] | None, spec: ProblemSpec, n_seeds: int) -> dict[str, int]:
    """Bytes of the arrays a resolved config's policy holds over ``n_seeds`` seeds, by part, as the engine checks
    them (:func:`~nlbandit.core.memory.policy_parts`: its states from ``jax.eval_shape``, twice, and the working
    arrays it declares); nothing for ``None``."""
    if config is None:
        return {}
    static = tuple(sorted(split_policy_config(config)[0].items()))
    return policy_parts(_make(config["name"], spec, static), n_seeds * _state_bytes(config["name"], spec, static),
                        n_seeds)


@functools.lru_cache(maxsize=256)
def _state_bytes(name: str, spec: ProblemSpec, static: tuple[tuple[str, Any], ...]) -> int:
    """One seed's state bytes of a policy (its traced values cannot change the shapes: zeros stand in)."""
    policy = _make(name, spec, static)
    return state_bytes(policy, policy.meta.params_type(*(jnp.zeros(()) for _ in policy.meta.params_type._fields)))


def build_resample(config: dict[str, Any], spec: ProblemSpec):
    """The :attr:`~nlbandit.policies.entry.PolicyEntry.resample` function of a resolved config's policy (one
    object per policy, as :func:`build_policy`'s), or None when its family declares none."""
    return _resample(config["name"], spec, tuple(sorted(split_policy_config(config)[0].items())))


@functools.lru_cache(maxsize=256)
def _resample(name: str, spec: ProblemSpec, static: tuple[tuple[str, Any], ...]):
    entry = policy_entry(name)
    return None if entry.resample is None else entry.resample(spec, **dict(static))


@functools.lru_cache(maxsize=256)
def _make(name: str, spec: ProblemSpec, static: tuple[tuple[str, Any], ...]) -> Policy:
    """One :class:`Policy` object per (name, sizes, static hyperparameters), so that simulations of equal
    policies share their compiled programs (:func:`nlbandit.core.simulate.simulate` caches by object)."""
    return _stamped(policy_entry(name), spec, dict(static))


def _stamped(entry: PolicyEntry, spec: ProblemSpec, static: dict[str, Any]) -> Policy:
    """``entry``'s policy on ``spec``, its meta holding the entry's name (a factory shared by several entries, or
    copied under a new name, is named as the entry that built it), the sizes and the params record it was built
    for."""
    policy = entry.make(spec, **static)
    return policy._replace(meta=policy.meta._replace(name=entry.name, spec=spec, params_type=entry.params_type))


def check_policy_env(config: dict[str, Any], env: Env, horizon: int, where: str = "policy", *,
                     facts: bool = True, entry: PolicyEntry | None = None) -> dict[str, Any]:
    """Fill the values of a resolved policy config that follow the environment (``adapt``), check it
    against the environment and the horizon (the family's own check, then, unless ``facts`` is false, the
    generic :func:`~nlbandit.core.compat.check_compatible` of the built policy against the environment's
    facts; ``entry``: an entry that is not registered), and return it."""
    found = policy_entry(config["name"], where) if entry is None else entry
    if found.adapt is not None:
        try:
            config = found.adapt(config, env)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
    if found.check is not None:
        found.check(config, env, horizon, where)
    if facts:
        spec = ProblemSpec(env.spec.d, env.spec.k, horizon)
        check_compatible(build_policy(config, spec, entry)[0], env, spec, horizon, where)
    return config


ONLINE_FACTS = EnvFacts(reward_range=(0.0, 0.0))
"""The facts of an environment known by its sizes only (:func:`check_policy_sizes`): no reward promised
outside any range a policy models, since each reward is checked as it arrives against the range the policy
models (:meth:`nlbandit.agent.Agent.reward`); no link, arm set or noise level promised."""


def check_policy_sizes(config: dict[str, Any], spec: ProblemSpec, where: str = "policy",
                       entry: PolicyEntry | None = None) -> dict[str, Any]:
    """:func:`check_policy_env` for a policy known only by its sizes and horizon (``make_policy`` with a
    :class:`ProblemSpec`, the online agent, the service): its family's ``adapt`` and ``check`` on an
    environment of those sizes (:data:`ONLINE_FACTS`), so that a configuration its family refuses is refused
    here too, with the same message, before anything is compiled (``entry``: an entry that is not registered)."""
    if config.get("link") == "env":
        raise ConfigError(f"{where}: field 'link' 'env' takes the link from an experiment file's environment; give "
                          "the link here")
    env = Env.described("of the given sizes", ProblemSpec(spec.d, spec.k, 0), ONLINE_FACTS)
    return check_policy_env(config, env, spec.horizon, where, facts=False, entry=entry)


def make_policy(name: str | PolicyEntry, spec: ProblemSpec | Env, horizon: int | None = None,
                **hyperparameters: Any) -> tuple[Policy, Any]:
    """Construct a registered policy, or the policy of a :class:`PolicyEntry` that is not registered (your own, kept
    out of the package: validated, checked and built exactly as a registered one); return it with its ``params``:
    its typed record of traced hyperparameters (float64 scalars; :mod:`nlbandit.core.params`), e.g.
    ``params.sigma_r``. Replace a value with ``params._replace(sigma_r=0.2)`` (that field alone: a default derived
    from it here, such as an ensemble's ``prior_scale`` = σ_R, keeps its value; replace both, or build each point
    here); a grid is a record of equal-length arrays.

    ``spec`` gives the sizes (d, K, horizon), or is the environment the policy will run on: then d and K are
    the environment's, ``horizon`` (T) is required, and the policy is checked against the environment exactly
    as an experiment file's is (its family's checks, :func:`check_policy_env`; ``link = "env"`` takes the
    environment's link), so what the command line refuses, this refuses too.

    Examples: ``make_policy("lin-es", env, horizon=10_000, m=25)``;
    ``make_policy("lin-es", ProblemSpec(20, 50, 10_000), m=25, sigma_r=0.1)``;
    ``make_policy(MY_ENTRY, env, horizon=10_000, tau=0.2)`` (docs/contributing.md#trying-it-out-of-tree).
    """
    entry = name if isinstance(name, PolicyEntry) else None
    if entry is not None:
        name = entry.name
    require_x64(f"policy '{name}'")
    config = resolve_policy({"name": name, **plain(hyperparameters)}, f"policy '{name}'", entry, reads=True)
    for field, value in (("horizon", horizon), *((("spec.horizon", spec.horizon), ("spec.d", spec.d),
                                                   ("spec.k", spec.k)) if isinstance(spec, ProblemSpec) else ())):
        if value is not None and (not integer(value) or value < 1):
            what = "the rounds it will run" if field.endswith("horizon") else "a size"
            raise ConfigError(f"policy '{name}': {field} must be an integer >= 1 ({what}), got {value!r}")
        check_sizes(f"policy '{name}'", **{field: value})
    if isinstance(spec, Env):
        if horizon is None:
            raise ConfigError(f"policy '{name}': built for an environment, it needs horizon=T (the rounds it will run)")
        config = check_policy_env(config, spec, horizon, f"policy '{name}'", entry=entry)
        return build_policy(config, ProblemSpec(spec.spec.d, spec.spec.k, horizon), entry)
    if horizon is not None and horizon != spec.horizon:
        raise ConfigError(f"policy '{name}': horizon={horizon} differs from the ProblemSpec's {spec.horizon}; give it "
                          "once")
    return build_policy(check_policy_sizes(config, spec, f"policy '{name}'", entry), spec, entry)


__all__ = ["ConfigError", "FAMILIES", "ONLINE_FACTS", "POLICIES", "build_policy", "build_resample", "check_policy_env",
           "check_policy_sizes", "make_policy", "policy_entry", "policy_memory", "resolve_policy",
           "split_policy_config"]
