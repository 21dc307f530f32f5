"""Typed params records: a policy's traced hyperparameters as a named tuple of arrays.

Every registered policy family declares its hyperparameters (:class:`~nlbandit.core.hyper.Hyper`); the
traced ones form the policy's params record, a :class:`typing.NamedTuple` subclass with exactly those
fields (``params.lam``, ``params.sigma_r``), built once per field list by :func:`params_record`. A record
is a JAX pytree (it vmaps over a grid axis, and ``jax.tree.map`` keeps its type), it refuses unknown or
missing fields at construction, and it reads like a mapping (``params["lam"]``, ``{**params}``) so that
code written for plain dicts keeps working. :func:`as_params` converts a user's dict at the boundary.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from collections.abc import Mapping
from typing import Any


class ParamsRecord(tuple):
    """Mixin of every params record (see the module docstring); never instantiated itself."""

    __slots__ = ()
    _fields: tuple[str, ...]

    def __getitem__(self, key):
        """``record["lam"]`` reads a field by name; integer indices and slices act as on a tuple."""
        if isinstance(key, str):
            try:
                return getattr(self, key)
            except AttributeError:
                raise KeyError(key) from None
        return tuple.__getitem__(self, key)

    def keys(self) -> tuple[str, ...]:
        """The field names (so that ``{**record}`` and ``dict(record)`` give a plain dict)."""
        return self._fields


@functools.lru_cache(maxsize=None)
def params_record(name: str, fields: tuple[str, ...]) -> type:
    """The params record class named ``name`` with ``fields`` (one class per arguments, so that equal
    policies share one pytree structure and hence their compiled programs)."""
    base = namedtuple(name, fields)  # type: ignore[misc]  # noqa: PYI024  (fields are known only at run time)
    return type(name, (ParamsRecord, base), {"__slots__": (), "__module__": __name__})


def as_params(record: type | None, params: Any, where: str = "params") -> Any:
    """``params`` as an instance of ``record``: a mapping is converted (its values untouched), an
    instance passes; ``record = None`` (a policy without a declared record) passes anything through.

    Raises:
      ValueError: naming the missing or unknown fields, or the type that is neither.
    """
    if record is None or isinstance(params, record):
        return params
    if not isinstance(params, Mapping):
        raise ValueError(f"{where} must be a mapping with the fields {', '.join(record._fields) or '(none)'}, "
                         f"got {type(params).__name__}")
    missing = [f for f in record._fields if f not in params]
    unknown = sorted(str(k) for k in params if k not in record._fields)
    if missing or unknown:
        raise ValueError(f"{where} must have exactly the fields {', '.join(record._fields) or '(none)'}"
                         + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; unknown {', '.join(unknown)}" if unknown else ""))
    return record(**{f: params[f] for f in record._fields})
