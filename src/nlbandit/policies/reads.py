"""Which hyperparameters a policy configuration reads: a value set where the configuration never reads it is refused.

``lin-ucb`` with its default OFUL width never reads ``alpha`` (the constant width's), so a sweep over ``alpha``
without ``width = "constant"`` gave identical series under different labels, and a researcher would read that
LinUCB is insensitive to its width. :data:`READ_WHEN` declares, for the policies whose switches (a width, a
scale, a solver, a mode) decide whether a traced hyperparameter is read, when it is; :func:`check_reads`
refuses a hyperparameter *set away from its default* that the resolved configuration does not read, naming
the switch that would make it count (defaults are never refused, so a stored or saved configuration, which
holds every field, still resolves). The logistic families refuse the fields of their other ``mode``
themselves, first; the table lists those too, so that it says all that the programs read.

The table is checked against the programs themselves: ``tests/test_reads.py`` traces each policy's ``init``,
``act`` and ``update`` and asks JAX which parameters the outputs depend on (dead-code elimination of the
jaxpr), for each value of the switches; a table that says more or less than the programs fails it. It lives
here, beside the registry, rather than in the family modules, whose source keys every stored run.
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from nlbandit.core.hyper import ConfigError


class Read(NamedTuple):
    """When a hyperparameter is read.

    Attributes:
      when: ``when(values) -> bool`` on the resolved configuration.
      says: the condition in words, for the message (e.g. ``"width = 'constant'"``).
    """

    when: Callable[[dict[str, Any]], bool]
    says: str


def _is(switch: str, *choices: str) -> Read:
    """Read when ``switch`` is one of ``choices``."""
    quoted = " or ".join(repr(c) for c in choices)
    return Read(lambda v: v[switch] in choices, f"{switch} = {quoted}")


def _and(*reads: Read) -> Read:
    """Read when every one of ``reads`` holds."""
    return Read(lambda v: all(r.when(v) for r in reads), " and ".join(r.says for r in reads))


NEVER = Read(lambda v: False, "never")
"""For a hyperparameter a policy declares with its family but never reads."""

_GLM_SOLVER = {"lr": _is("solver", "gd")}
_GLM_SCALE = {"a": _is("scale", "constant"), "sigma": _is("scale", "theory"), "mu_dot_min": _is("scale", "theory"),
              **_GLM_SOLVER}
_EXPERIMENT = {"nu": _is("mode", "experiment"), "lr": _is("mode", "experiment")}
_THEORY = _is("mode", "theory")


def _neural_logistic(theory: str, never: str, lam_in_theory: bool = False) -> dict[str, Read]:
    """Bae & Lee's neural rules: the spec 001 §2 constants ``theory`` are read in theory mode, ``never`` in
    none; λ is the experiment's where theory mode computes its own."""
    rules = {**_EXPERIMENT, **{n: _THEORY for n in theory.split()}, **{n: NEVER for n in never.split()}}
    return rules if lam_in_theory else {**rules, "lam": _is("mode", "experiment")}


READ_WHEN: dict[str, dict[str, Read]] = {
    "lin-ucb": {"alpha": _is("width", "constant"), **{n: _is("width", "oful") for n in ("sigma", "delta", "s")}},
    "glm-ucb": {"alpha": _is("width", "constant"), "reward_bound": _is("width", "theory"),
                "mu_dot_min": _is("width", "theory"), "sigma": NEVER, **_GLM_SOLVER},
    "ucb-glm": {"alpha": _is("width", "constant"), "sigma": _is("width", "theory"),
                "mu_dot_min": _is("width", "theory"), **_GLM_SOLVER},
    "glm-tsl": _GLM_SCALE,
    "glm-fpl": _GLM_SCALE,
    "glm-phe": _GLM_SCALE,
    "glm-es": _GLM_SOLVER,
    "glm-squarecb": _GLM_SOLVER,
    "logistic-ucb-1": {"alpha": _is("width", "constant"),
                       "delta": _and(_is("width", "theory", "reference"), _is("mode", "original")),
                       "lam": Read(lambda v: v["mode"] == "experiment" or v["schedule"] == "constant",
                                   "schedule = 'constant' (or mode = 'experiment')"),
                       "lam_scale": _and(_is("schedule", "log"), _is("mode", "original")), **_EXPERIMENT},
    "ada-ofu-ecolog": {"alpha": _is("width", "constant"), "delta": _and(_is("width", "ada", "lee"),
                                                                         _is("mode", "original")), **_EXPERIMENT},
    "ncbf-ucb": _neural_logistic("delta c5", "c1 c6 c7", lam_in_theory=True),
    "neurallog-ucb-1": _neural_logistic("delta c1 c5 c6", "c7"),
    "neurallog-ts-1": _neural_logistic("delta c1 c5 c6", "c7"),
    "neurallog-ucb-2": _neural_logistic("delta c1 c5 c7", "c6 kappa"),
    "neurallog-ts-2": _neural_logistic("delta c1 c5 c7", "c6 kappa"),
}
"""Per policy, the hyperparameters that only some configurations read, and when (module docstring); a policy or
hyperparameter not listed is read by every configuration (in the logistic families: of its mode)."""


def unread(values: dict[str, Any]) -> dict[str, str]:
    """The hyperparameters the resolved configuration ``values`` (with ``name``) does not read, each with the
    condition under which it would be (:data:`READ_WHEN`)."""
    rules = READ_WHEN.get(values["name"].removesuffix("@anytime"), {})
    return {name: read.says for name, read in rules.items() if name in values and not read.when(values)}


def check_reads(values: dict[str, Any], given: dict[str, Any], defaults: Callable[[dict[str, Any]], dict[str, Any]],
                where: str) -> None:
    """Refuse a hyperparameter of ``given`` (the configuration as written) that the resolved configuration
    ``values`` (with ``name``) does not read (:func:`unread`), set away from its default: ``defaults(config)``
    resolves a configuration (called with ``given`` less those fields, only where one is given).

    Raises:
      ConfigError: naming the field, the switch values that leave it unread, and when it is read.
    """
    idle = {name: says for name, says in unread(values).items() if name in given}
    if not idle:
        return
    default = defaults({k: v for k, v in given.items() if k not in idle})
    for name, says in idle.items():
        if values[name] == default.get(name):
            continue
        head = f"{where}: field {name!r} = {values[name]!r} has no effect: {values['name']}"
        if says == NEVER.says:
            raise ConfigError(f"{head} never reads it (its family declares it for the others); leave it out")
        switches = ", ".join(f"{s} = {values[s]!r}" for s in ("mode", "width", "scale", "schedule", "solver")
                             if s in values and s in says)
        raise ConfigError(f"{head} with {switches} does not read it (it reads it with {says}); set that, or leave "
                          f"{name!r} out")


__all__ = ["NEVER", "READ_WHEN", "Read", "check_reads", "unread"]
