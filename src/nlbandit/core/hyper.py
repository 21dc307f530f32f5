"""Declared hyperparameters: defaults, documentation, and validation at the boundary.

Every policy and environment in the registries lists its hyperparameters as :class:`Hyper` records.
``static`` ones change shapes or code paths and are fixed at construction; the others are traced (they
go into the ``params`` pytree, so one compilation serves a grid of values). Values are validated here,
once, before any computation; jitted code never re-checks them.

A default is written once. A hyperparameter that the constructor takes as an argument declares
:data:`SIGNATURE` and its default is read from the constructor's signature (:func:`signature_defaults`, as
optax's ``inject_hyperparams`` reads an optimizer's), so calling the constructor directly and naming the
policy in an experiment file agree; a traced one, which no constructor takes, declares its default here.
A constructor that passes ``**options`` on to a shared one shows that one's parameters in its signature
(:func:`forwards`).
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np


class ConfigError(ValueError):
    """A configuration value is missing, unknown, of the wrong type, or out of range."""


class _Signature:
    """The type of :data:`SIGNATURE`."""

    def __repr__(self) -> str:
        return "SIGNATURE"


SIGNATURE: Any = _Signature()
"""The default of a :class:`Hyper` that the constructor's signature gives (:func:`signature_defaults`)."""


@dataclass(frozen=True)
class Hyper:
    """One hyperparameter.

    Attributes:
      name: key used in experiment files and keyword arguments.
      default: value when not given (``None`` allowed only with ``optional``), or :data:`SIGNATURE`: the
        constructor's (:func:`signature_defaults`).
      doc: one line, with the paper symbol and equation where there is one.
      kind: ``float``, ``int``, ``bool``, ``str``, or ``list`` (an array of finite numbers with ``ndim``
        dimensions, returned as a tuple, so that configs stay hashable and JSON-serialisable).
      static: True when the value changes shapes or code paths (not traced).
      low, high: numeric bounds; ``low_open``/``high_open`` make them strict.
      choices: allowed values for ``str`` kinds.
      optional: ``None`` is an allowed value (meaning described in ``doc``).
      from_signature: the default was read from a constructor's signature (:func:`signature_defaults`).
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
    from_signature: bool = False

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


def signature_defaults(hypers: tuple[Hyper, ...], make: Callable[..., Any], where: str) -> tuple[Hyper, ...]:
    """``hypers`` with each :data:`SIGNATURE` default read from ``make``'s signature (idempotent: a default read
    from a signature before is checked against this one).

    Raises:
      TypeError: (at import, for the author of an entry) when the signature gives no default for a
        :data:`SIGNATURE` hyperparameter, gives one for a hyperparameter that declares its own (a default lives in
        one place), or gives another than the one read before.
    """
    params = inspect.signature(make).parameters
    out = []
    for h in hypers:
        given = params[h.name].default if h.name in params else inspect.Parameter.empty
        if h.default is SIGNATURE:
            if given is inspect.Parameter.empty:
                raise TypeError(f"{where}: hyperparameter '{h.name}' takes its default from the signature of "
                                f"{make.__qualname__}, which gives none")
            h = replace(h, default=given, from_signature=True)
        elif given is not inspect.Parameter.empty and not (h.from_signature and given == h.default):
            raise TypeError(f"{where}: hyperparameter '{h.name}' has a default ({h.default!r}) beside the one of "
                            f"{make.__qualname__}'s signature ({given!r}); declare it once: Hyper('{h.name}', "
                            "SIGNATURE, ...)")
        out.append(h)
    return tuple(out)


def forwards(*inner: Callable[..., Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a constructor that passes ``**options`` on to the constructors ``inner``: its signature
    (``inspect.signature``, ``help``) shows their keyword parameters with their defaults after its own, so
    :func:`signature_defaults` reads them as the defaults the constructor really applies."""

    def decorate(make: Callable[..., Any]) -> Callable[..., Any]:
        own = [p for p in inspect.signature(make).parameters.values() if p.kind is not p.VAR_KEYWORD]
        names = {p.name for p in own}
        for fn in inner:
            for p in inspect.signature(fn).parameters.values():
                if p.name not in names and p.default is not p.empty and p.kind is not p.VAR_KEYWORD:
                    own.append(p.replace(kind=p.KEYWORD_ONLY))
                    names.add(p.name)
        make.__signature__ = inspect.Signature(own)
        return make

    return decorate


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
