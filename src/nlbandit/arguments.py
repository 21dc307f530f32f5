"""Arguments at the library's boundary, before the validation of hyperparameters and what it lets through.

A value taken from a NumPy array is a NumPy scalar (``np.int64(5)``, ``np.float32(0.5)``), which is not a Python
``int`` (nor, for float32, a ``float``), so the registries' checks refused it as "must be an integer". The entry
points that take hyperparameters as Python arguments (:func:`nlbandit.make_env`, :func:`nlbandit.make_policy`,
:class:`nlbandit.Agent`) pass them through :func:`plain` first; a NumPy boolean stays a boolean, refused where a
number is asked for, as ``True`` is. Experiment files and the service read TOML and JSON, which have no NumPy values.

Every surface (the registries' ``resolve_*``, so ``make_env``/``make_policy``, experiment files, the agent and the
service) bounds integer sizes by :data:`MAX_INT` (:func:`check_int_sizes`): the engine counts rounds, arms and
sizes in int32, and XLA aborted the whole process, with no Python error, when the memory check traced an array of
more than 2**63 elements (``m`` = 4e18 for an ensemble, d = 3,037,000,500 for a d × d matrix).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nlbandit.core.hyper import ConfigError

MAX_INT = 2**31 - 1
"""The largest integer size, count or index the engine takes (int32)."""


def integer(value: Any) -> bool:
    """Whether ``value`` is an integer, Python's or NumPy's, and not a boolean."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def plain(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """``hyperparameters`` with each NumPy scalar (a 0-d array too) replaced by the Python value it holds (``int``,
    ``float``, ``bool``, ``str``); every other value as given."""
    return {name: _plain(value) for name, value in hyperparameters.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value


def check_int_sizes(hypers: Any, values: dict[str, Any], where: str) -> None:
    """Refuse (ConfigError naming the field) an integer hyperparameter among ``hypers`` (``Hyper`` records) whose
    value in ``values`` exceeds :data:`MAX_INT` in magnitude."""
    for hyper in hypers:
        value = values.get(hyper.name)
        if hyper.kind is int and isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT:
            raise ConfigError(f"{where}: field '{hyper.name}' = {value} is more than {MAX_INT} in magnitude (the "
                              "engine's sizes and indices are int32)")


def check_sizes(where: str, **sizes: Any) -> None:
    """Refuse (ConfigError naming the field) a size (d, k, a horizon) beyond :data:`MAX_INT`; its type and lower
    bound are the caller's to check."""
    for name, value in sizes.items():
        if integer(value) and value > MAX_INT:
            raise ConfigError(f"{where}: field '{name}' = {value} is more than {MAX_INT} (the engine's sizes, "
                              "rounds and indices are int32)")
