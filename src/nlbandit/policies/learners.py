"""Online-regression learners and their registry (the ``[[policies]]`` of ``loop = "regression"`` files).

* ``ftrl``: follow-the-regularized-leader with the quadratic regularizer λ‖μ‖² (Zhao, Zhou, He & Gu
  2023, Algorithm 1; :mod:`nlbandit.models.ftrl`). λ defaults to the theory value 4A²K²/κ of
  Theorems 4.1/4.4 for the stream's link and bounds A, B (4 for the identity link with unit features).
"""

from __future__ import annotations

from typing import Any

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE, lookup, resolve_named
from nlbandit.core.regress import METRICS, UNITS
from nlbandit.core.types import Learner, Stream
from nlbandit.models.ftrl import SOLVERS, ftrl
from nlbandit.policies.entry import PolicyEntry
from nlbandit.theory import ftrl_lambda

NUMERICS = 1
"""Version of the numbers its learners compute: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


def ftrl_learner(stream: Stream, solver: str = "auto") -> Learner:
    """FTRL on ``stream``'s link, sized for its horizon; params ``{"lam": λ}``."""
    est = ftrl(stream.link, stream.d, stream.horizon, solver)
    return Learner(
        "ftrl",
        stream.link,
        lambda p: est.init(p["lam"]),
        lambda p, state, x: x @ state.theta,
        lambda p, state, x, y: est.update(state, x, y, p["lam"]),
    )


_MEASURE = (
    Hyper("regret", "stochastic", "the curve stored and plotted for this series (spec 000 §1.3)", kind=str,
          static=True, choices=METRICS),
    Hyper("units", "ell", "ℓ units of eq. (3.2), or the square loss (×2; identity link)", kind=str,
          static=True, choices=UNITS),
)

LEARNERS: dict[str, PolicyEntry] = {
    e.name: e
    for e in (
        PolicyEntry(
            "ftrl",
            ftrl_learner,
            (Hyper("lam", None, "regularizer λ of λ‖μ‖² (omitted: the theory value 4A²K²/κ)", low=0.0,
                   low_open=True, optional=True),
             Hyper("solver", SIGNATURE, "closed form (identity link) or Newton on the history", kind=str,
                   static=True, choices=SOLVERS)) + _MEASURE,
            "FTRL for online GLM regression (Zhao et al. 2023, Alg. 1)",
            boundary=("regret", "units"),
        ),
    )
}


def learner_entry(name: Any, where: str = "learner") -> PolicyEntry:
    """The registry entry for ``name``; :class:`ConfigError` listing the known names otherwise."""
    return lookup(LEARNERS, name, where)


def resolve_learner(config: dict[str, Any], stream: dict[str, Any], where: str = "learner") -> dict[str, Any]:
    """Validate a learner config against a resolved stream config; fill defaults (λ from the theory)."""
    entry = learner_entry(config.get("name"), where)
    values = resolve_named(entry, config, where)
    link = stream.get("link", "identity")
    if values["lam"] is None:
        values["lam"] = ftrl_lambda(link, stream["a"], stream.get("b", 1.0))
    if values["solver"] == "closed-form" and link != "identity":
        raise ConfigError(f"{where}: field 'solver' 'closed-form' needs the identity link, got link = {link!r}")
    truth = stream["name"] != "adversarial"
    if values["regret"] in ("stochastic", "pseudo") and not truth:
        raise ConfigError(f"{where}: field 'regret' {values['regret']!r} needs a stream with a true μ*; "
                          f"stream 'adversarial' has none (use 'adversarial')")
    if values["regret"] == "adversarial" and link != "identity":
        raise ConfigError(f"{where}: field 'regret' 'adversarial' is computed for the identity link only, "
                          f"got link = {link!r}")
    if values["units"] == "square" and link != "identity":
        raise ConfigError(f"{where}: field 'units' 'square' needs the identity link, got link = {link!r}")
    return {"name": entry.name, **values}


def split_learner_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a resolved learner config into (static keyword arguments, traced hyperparameters)."""
    return learner_entry(config["name"]).split(config)
