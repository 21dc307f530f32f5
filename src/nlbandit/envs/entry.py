"""How an environment module declares its environments: :class:`EnvEntry`, with the hyperparameters and
checks they share.

An environment module (``synthetic``, ``heteroscedastic``, ``latent``, ``classification``, ``target``;
``streams`` for the online-regression loop) lists its environments as ``ENTRIES`` (``STREAM_ENTRIES``), each
with its constructor, its hyperparameters as :class:`~nlbandit.core.hyper.Hyper` records and its hooks:
what only it can judge of a configuration (``finalize``: derived fields, relations between fields, rewards
that stay finite), and how many floats one of its instances holds (``floats``, for the memory check).
:mod:`nlbandit.envs.registry` only collects the modules' entries and runs the hooks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from nlbandit.core.hyper import ConfigError, Hyper, SIGNATURE, signature_defaults
from nlbandit.data import sources
from nlbandit.data.cache import DataError


def _same(values: dict[str, Any], where: str) -> dict[str, Any]:
    return values


def arm_pool_floats(config: dict[str, Any]) -> int:
    """The K × d arm pool of one instance (θ* and the rest are negligible beside it)."""
    return config["d"] * config["k"]


@dataclass(frozen=True)
class EnvEntry:
    """A registered environment (or online-regression stream).

    Attributes:
      name: registry name.
      make: the constructor, ``make(**resolved hyperparameters) -> Env`` (a stream's also takes the horizon).
      hypers: declared hyperparameters (a default given by ``make``'s signature is read from it:
        :data:`~nlbandit.core.hyper.SIGNATURE`).
      doc: one line for ``nlbandit list``.
      finalize: ``finalize(values, where) -> values``: the resolved hyperparameters with derived fields filled
        in, refused (:class:`ConfigError`, naming ``where``) when they do not fit together.
      floats: ``floats(config) -> int``: floats one instance of a resolved configuration holds.
      check_horizon: for a stream, ``check_horizon(values, horizon, where)`` refuses a horizon it cannot serve.
    """

    name: str
    make: Callable[..., Any]
    hypers: tuple[Hyper, ...]
    doc: str
    finalize: Callable[[dict[str, Any], str], dict[str, Any]] = _same
    floats: Callable[[dict[str, Any]], int] = arm_pool_floats
    check_horizon: Callable[[dict[str, Any], int, str], None] | None = None

    def __post_init__(self) -> None:
        """Read the :data:`~nlbandit.core.hyper.SIGNATURE` defaults from ``make`` (a TypeError at import for a
        default declared twice or nowhere)."""
        object.__setattr__(self, "hypers", signature_defaults(self.hypers, self.make, f"environment '{self.name}'"))


VECTOR_DISTS = ("sphere", "cube", "box", "gaussian")
COMMON = (
    Hyper("d", None, "feature dimension d", kind=int, static=True, low=1),
    Hyper("k", None, "number of arms K (K_max when arms are masked)", kind=int, static=True, low=1),
    Hyper("noise_std", SIGNATURE, "Gaussian reward noise standard deviation σ", static=True, low=0.0),
    Hyper("arms", "sphere", "arm feature distribution", kind=str, static=True, choices=VECTOR_DISTS),
    Hyper("theta", "sphere", "θ* distribution", kind=str, static=True, choices=VECTOR_DISTS),
    Hyper("theta_norm", None, "rescale θ* to this norm S (omitted: keep the drawn norm)", static=True,
          low=0.0, low_open=True, optional=True),
    Hyper("theta_var", None, "θ* ~ N(0, v I) with v = 3/d^2 or 3/d (needs theta = 'gaussian')", kind=str,
          static=True, choices=("3/d^2", "3/d"), optional=True),
    Hyper("contexts", "fixed", "one arm pool per instance, or a fresh pool every round", kind=str,
          static=True, choices=("fixed", "fresh")),
    Hyper("theta_star", None, "explicit θ* (d numbers; overrides 'theta' and 'theta_norm')", kind=list,
          static=True, optional=True),
    Hyper("arm_set", None, "explicit fixed arm set (K rows of d numbers; overrides 'arms')", kind=list,
          static=True, optional=True, ndim=2),
    Hyper("avail_prob", 1.0, "probability that an arm is offered in a round", static=True, low=0.0,
          high=1.0, low_open=True),
)
"""The hyperparameters of the synthetic bandits (each environment takes those it reads)."""


def arm_norm(values: dict[str, Any]) -> tuple[str, float]:
    """(field, bound): a bound on ‖x‖ over the arms and the field that sets it (``arm_set``, or ``arms``:
    ‖v‖ ≤ 1 on the sphere and in the cube, ≤ √d in the box, and ≤ √d + 10 for N(0, I_d) w.p. 1 − e⁻⁵⁰)."""
    root_d = math.sqrt(values["d"])
    if values.get("arm_set"):
        return "arm_set", max(math.hypot(*row) for row in values["arm_set"])
    return "arms", {"sphere": 1.0, "cube": 1.0, "box": root_d, "gaussian": root_d + 10.0}[values["arms"]]


def theta_norm(values: dict[str, Any]) -> tuple[str, float]:
    """(field, bound): a bound on ‖θ*‖ and the field that sets it (θ* ~ N(0, v I) has v ≤ 3)."""
    if values.get("theta_star"):
        return "theta_star", math.hypot(*values["theta_star"])
    if values.get("theta_norm"):
        return "theta_norm", values["theta_norm"]
    scale = math.sqrt(3) if values.get("theta_var") else 1.0
    return "theta", {"sphere": 1.0, "cube": 1.0, "box": math.sqrt(values["d"]),
                     "gaussian": math.sqrt(values["d"]) + 10.0}[values["theta"]] * scale


def check_finite_rewards(values: dict[str, Any], where: str, signal: float, arm: tuple[str, float],
                         theta: tuple[str, float], noise: tuple[str, float]) -> None:
    """Refuse a configuration whose rewards could overflow: |mean| ≤ ``signal`` plus the noise bound, summed
    over up to 2³¹ rounds (the engine's limit), must stay far below float64's maximum 1.8e308 (policies
    square rewards too); the message names the largest of the ``arm``, ``theta`` and ``noise`` (field,
    bound) pairs."""
    per_round = signal + noise[1]
    if per_round * 2**31 > 1e100:
        sizes = dict((arm, theta, noise))
        raise ConfigError(f"{where}: field '{max(sizes, key=sizes.get)}' makes rewards too large: |mean| + noise "
                          f"can reach {per_round:.3g} per round (‖x‖ ≤ {arm[1]:.3g}, ‖θ*‖ ≤ {theta[1]:.3g}, noise "
                          f"≤ {noise[1]:.3g}); summed over up to 2³¹ rounds that must stay below 1e100, far from "
                          "float64's maximum 1.8e308")


def data_version(name: str, where: str) -> str:
    """The version of registered data set ``name`` (a :class:`ConfigError` for an unknown name, a
    :class:`DataError` naming ``where`` for one not in the cache)."""
    if name not in sources.SOURCES:
        raise ConfigError(f"{where}: field 'dataset' must be one of {', '.join(map(repr, sources.SOURCES))} "
                          f"(`nlbandit data list`), got {name!r}")
    try:
        return sources.version(name)
    except DataError as e:
        raise DataError(f"{where}: {e}") from None


def check_derived(values: dict[str, Any], derived: dict[str, Any], name: str, where: str) -> None:
    """Refuse a given field of ``derived`` whose value differs from the one data set ``name`` gives."""
    for field, value in derived.items():
        if values[field] is not None and values[field] != value:
            why = ("the data set's files changed since this configuration was resolved" if field == "data_sha256"
                   else f"data set {name!r} gives {value}")
            raise ConfigError(f"{where}: field '{field}' = {values[field]!r} does not match: {why}; omit it")

