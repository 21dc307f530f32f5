"""How a policy family declares its policies: :class:`PolicyEntry`.

A family module (``linear``, ``glm``, ...) lists its policies as ``ENTRIES``, each with its constructor
and its hyperparameters as :class:`~nlbandit.core.hyper.Hyper` records (defaults, bounds, static or
traced) next to the code that reads them; :mod:`nlbandit.policies.registry` only collects the families.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from nlbandit.core.hyper import ConfigError, Hyper, signature_defaults
from nlbandit.core.params import params_record
from nlbandit.core.types import Env, Policy, ProblemSpec


def _same(values: dict[str, Any]) -> dict[str, Any]:
    return values


@dataclass(frozen=True)
class PolicyEntry:
    """A registered policy.

    Attributes:
      name: registry name.
      make: ``make(spec, **static_hyperparameters) -> Policy``.
      hypers: declared hyperparameters (static ones go to ``make``, the rest into ``params``, the
        policy's typed params record of float scalars, :attr:`params_type`); a static one's default is read
        from ``make``'s signature (:data:`~nlbandit.core.hyper.SIGNATURE`).
      doc: one line for ``nlbandit list``.
      finalize: fills values that default to other values (e.g. prior_scale = σ_R) and checks relations
        between fields.
      check: ``check(config, env, horizon, where)`` raises :class:`ConfigError` for what only this family
        can judge (e.g. a warm-up longer than the horizon); what any policy needs from any environment is
        :func:`nlbandit.core.compat.check_compatible`'s job.
      adapt: ``adapt(config, env) -> config`` fills values that follow the environment (``link = "env"``).
      boundary: hyperparameters read only at the boundary (neither passed to ``make`` nor traced).
      wraps: modules beyond ``make``'s own that compute the policy (for :mod:`nlbandit.provenance`).
      test_hypers: ``test_hypers(spec) -> {hyperparameter: value}``, the small, fast configuration that
        :func:`nlbandit.testing.check_policy` runs on the sizes ``spec`` (e.g. a warm-up that fits its short
        horizon), or None for the defaults.
      draws_in_update: the update draws randomness that the next decisions depend on (a Thompson sample, a
        fit to perturbed rewards), so redrawing ``act`` alone does not redraw the decision: the online agent
        estimates such a policy's probabilities through ``resample``, or not at all
        (:class:`~nlbandit.agent.Agent`).
      resample: ``resample(spec, **static_hyperparameters) -> fn``, called like ``make``, or ``None``; ``fn(
        params, state, key) -> state`` is the state after an update with its random draw redone from ``key``
        (the estimate refitted or resampled from the stored data), for a policy with ``draws_in_update``.
    """

    name: str
    make: Callable[..., Policy]
    hypers: tuple[Hyper, ...]
    doc: str
    finalize: Callable[[dict[str, Any]], dict[str, Any]] = _same
    check: Callable[[dict[str, Any], Env, int, str], None] | None = None
    adapt: Callable[[dict[str, Any], Env], dict[str, Any]] | None = None
    boundary: tuple[str, ...] = ()
    wraps: tuple[str, ...] = ()
    test_hypers: Callable[[ProblemSpec], dict[str, Any]] | None = None
    draws_in_update: bool = False
    resample: Callable[..., Callable[[Any, Any, Any], Any]] | None = None

    def __post_init__(self) -> None:
        """Read the :data:`~nlbandit.core.hyper.SIGNATURE` defaults from ``make`` (a TypeError at import for a
        default declared twice or nowhere)."""
        object.__setattr__(self, "hypers", signature_defaults(self.hypers, self.make, f"policy '{self.name}'"))

    def modules(self) -> tuple[str, ...]:
        """The modules that define the policy's computation (for :mod:`nlbandit.provenance`)."""
        return (self.make.__module__,) + self.wraps

    def static_names(self) -> tuple[str, ...]:
        """Names of the shape- or code-path-changing hyperparameters (passed to ``make``)."""
        return tuple(h.name for h in self.hypers if h.static and h.name not in self.boundary)

    @property
    def params_type(self) -> type:
        """The policy's params record (:mod:`nlbandit.core.params`): one field per traced hyperparameter, in
        declaration order; e.g. ``LinUcbParams(lam, sigma, delta, s, alpha)`` for ``lin-ucb``."""
        static = set(self.static_names()) | set(self.boundary)
        title = "".join(part.capitalize() for part in self.name.replace("@", "-").split("-"))
        return params_record(f"{title}Params", tuple(h.name for h in self.hypers if h.name not in static))

    def split(self, config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Split a resolved config into (static keyword arguments, traced hyperparameters); boundary-only
        hyperparameters go to neither."""
        static = self.static_names()
        hp = {k: v for k, v in config.items() if k != "name" and k not in self.boundary}
        return {k: v for k, v in hp.items() if k in static}, {k: v for k, v in hp.items() if k not in static}


def link_from_env(config: dict[str, Any], env: Env) -> dict[str, Any]:
    """``link = "env"`` → the environment's link (:class:`~nlbandit.core.types.EnvFacts`); an environment
    whose mean is not a GLM has none to give."""
    if config.get("link") != "env":
        return config
    if env.facts.link is None:
        raise ConfigError(f"policy '{config['name']}': field 'link' = 'env' takes the environment's link, but "
                          f"environment '{env.name}' declares none (its mean is not μ(xᵀθ*)); name the link")
    return {**config, "link": env.facts.link}
