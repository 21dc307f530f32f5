"""The part of the loop interface for loops whose ``[env]`` tables name files or folders (:class:`NamesPaths`).

It is kept out of :mod:`nlbandit.loops.base`, whose source keys every stored run of every loop
(:func:`nlbandit.experiments.spec.run_code`): a method added there would make every stored run and committed report
stale, while only the loops that read paths need this one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any


class NamesPaths(ABC):
    """A loop (:class:`~nlbandit.loops.base.Loop`) whose environment cases name paths, which an experiment file may
    give relative to its own folder: :func:`~nlbandit.experiments.plan.load_experiment` passes each case through
    :meth:`locate` before :meth:`~nlbandit.loops.base.Loop.case_env`."""

    @abstractmethod
    def locate(self, env: dict[str, Any], folder: Path) -> dict[str, Any]:
        """The environment case ``env`` with the paths it names made absolute, a relative one taken relative to
        ``folder`` (the experiment file's folder)."""
