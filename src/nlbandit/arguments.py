"""Keyword arguments at the library's Python boundary, as the validation of hyperparameters reads them.

A value taken from a NumPy array is a NumPy scalar (``np.int64(5)``, ``np.float32(0.5)``), which is not a Python
``int`` (nor, for float32, a ``float``), so the registries' checks refused it as "must be an integer". The entry
points that take hyperparameters as Python arguments (:func:`nlbandit.make_env`, :func:`nlbandit.make_policy`,
:class:`nlbandit.Agent`) pass them through :func:`plain` first; a NumPy boolean stays a boolean, refused where a
number is asked for, as ``True`` is. Experiment files and the service read TOML and JSON, which have no NumPy values.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def plain(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """``hyperparameters`` with each NumPy scalar (a 0-d array too) replaced by the Python value it holds (``int``,
    ``float``, ``bool``, ``str``); every other value as given."""
    return {name: _plain(value) for name, value in hyperparameters.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        return value.item()
    return value
