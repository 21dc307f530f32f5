"""How the registries find what the package declares: every module of a subpackage with a given attribute, so
a new policy family or environment module is registered by existing, not by a line in a list."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def declaring_modules(package: str, attribute: str, skip: str = "") -> tuple[ModuleType, ...]:
    """The modules of ``package`` (e.g. ``"nlbandit.policies"``) that define ``attribute``, by module name;
    ``skip``: a module not to import (the registry asking, which is importing itself)."""
    path = importlib.import_module(package).__path__
    names = sorted(m.name for m in pkgutil.iter_modules(path) if f"{package}.{m.name}" != skip)
    return tuple(m for m in (importlib.import_module(f"{package}.{n}") for n in names) if hasattr(m, attribute))
