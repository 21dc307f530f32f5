"""Declared hyperparameters: defaults, documentation, and validation at the boundary.

Every policy and environment in the registries lists its hyperparameters as :class:`Hyper` records.
``static`` ones change shapes or code paths and are fixed at construction; the others are traced (they
go into the ``params`` pytree, so one compilation serves a grid of values). Values are validated here,
once, before any computation; jitted code never re-checks them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type, or out of range."""


@dataclass(frozen=True)
class Hyper:
    """One hyperparameter.

    Attributes:
      name: key used in experiment files and keyword arguments.
      default: value when not given (``None`` allowed only with ``optional``).
      doc: one line, with the paper symbol and equation where there is one.
      kind: ``float``, ``int``, ``bool``, ``str``, or ``list`` (an array of finite numbers with ``ndim``
        dimensions, returned as a tuple, so that configs stay hashable and JSON-serialisable).
      static: True when the value changes shapes or code paths (not traced).
      low, high: numeric bounds; ``low_open``/``high_open`` make them strict.
      choices: allowed values for ``str`` kinds.
      optional: ``None`` is an allowed value (meaning described in ``doc``).
    """

    name: str
    default: Any
    doc: str
    kind: type = float
    static: bool = False
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | None = None
    optional: bool = False
    ndim: int = 1

    def allowed(self) -> str:
        """Human-readable description of the allowed values."""
        if self.kind is list:
            text = "a list of finite numbers" if self.ndim == 1 else "a list of equal-length lists of finite numbers"
        elif self.choices is not None:
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        else:
            text = {float: "a number", int: "an integer", bool: "true or false", str: "a string"}[self.kind]
            if self.low is not None:
                text += f" {'>' if self.low_open else '>='} {self.low:g}"
            if self.high is not None:
                text += f"{' and' if self.low is not None else ''} {'<' if self.high_open else '<='} {self.high:g}"
        return text + (" (or omitted)" if self.optional else "")

    def validate(self, value: Any, where: str) -> Any:
        """Return ``value`` coerced to ``kind``; raise :class:`ConfigError` naming ``where.name``."""
        field = f"{where}: field '{self.name}'"
        if value is None:
            if self.optional:
                return None
            raise ConfigError(f"{field} must be {self.allowed()}, got nothing")
        bad = ConfigError(f"{field} must be {self.allowed()}, got {value!r}")
        if self.kind is bool:
            if not isinstance(value, bool):
                raise bad
            return value
        if self.kind is list:
            try:
                arr = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                raise bad from None
            if arr.ndim != self.ndim or arr.size == 0 or not np.all(np.isfinite(arr)):
                raise bad
            return tuple(arr.tolist()) if self.ndim == 1 else tuple(tuple(r) for r in arr.tolist())
        if self.kind is str:
            if not isinstance(value, str) or (self.choices is not None and value not in self.choices):
                raise bad
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if self.kind is int:
            if isinstance(value, float) and not value.is_integer():
                raise bad
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise bad
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise bad
        if self.high is not None and (value > self.high or (self.high_open and value == self.high)):
            raise bad
        return value


def resolve(hypers: tuple[Hyper, ...], given: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate ``given`` against ``hypers`` and fill in defaults.

    Raises:
      ConfigError: on an unknown key (the message lists the known ones) or an invalid value.
    """
    known = {h.name: h for h in hypers}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ConfigError(
            f"{where}: unknown field '{unknown[0]}'; allowed fields: {', '.join(sorted(known)) or '(none)'}"
        )
    return {h.name: h.validate(given.get(h.name, h.default), where) for h in hypers}


def lookup(table: dict[str, Any], name: Any, where: str) -> Any:
    """``table[name]`` for a registry; :class:`ConfigError` listing the known names otherwise."""
    if name not in table:
        raise ConfigError(f"{where}: field 'name' must be one of {', '.join(sorted(table))}, got {name!r}")
    return table[name]


def resolve_named(entry: Any, config: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate the hyperparameters of ``config`` (everything but its ``name``) against ``entry.hypers``."""
    return resolve(entry.hypers, {k: v for k, v in config.items() if k != "name"}, where)
