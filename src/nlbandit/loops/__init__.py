"""Experiment loops (:class:`~nlbandit.loops.base.Loop`): how an experiment file's runs are resolved,
computed, stored and reported. :data:`LOOPS` maps the ``loop`` field of an experiment file to its loop."""

from nlbandit.loops.bandit import BanditLoop
from nlbandit.loops.base import Loop
from nlbandit.loops.evaluate import EvaluateLoop
from nlbandit.loops.regression import RegressionLoop
from nlbandit.loops.replay import ReplayLoop

LOOPS: dict[str, Loop] = {loop.name: loop for loop in (BanditLoop(), RegressionLoop(), ReplayLoop(), EvaluateLoop())}
"""Every loop, by the name an experiment file's ``loop`` field gives."""
DEFAULT_LOOP = BanditLoop.name
"""The loop of an experiment file without a ``loop`` field (a run's identity names any other)."""
