"""Timing a run's two phases apart, per loop: which loops can, and how a run's timer is built.

A loop whose rounds split into arm selection and model update offers a factory here, in
:data:`PHASE_TIMERS`, building a :class:`~nlbandit.core.phases.PhaseTimer` for one run; the runner
(:func:`nlbandit.experiments.runner.run_phased_job`) hands it the rounds the run's simulation kept after every chunk
(:func:`~nlbandit.experiments.runner.run_kept_job`), times the kept rounds of a group of runs in one session
(:func:`~nlbandit.core.phases.time_phases`) and stores each run's samples with it
(:meth:`nlbandit.store.Store.save_phases`). Kept apart from the loops'
modules: timing is measured beside a run and changes none of its results, so it is not part of any run's
code hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from nlbandit.core.phases import PhaseRows, PhaseTimer
from nlbandit.loops.bandit import BanditLoop

if TYPE_CHECKING:
    from nlbandit.experiments.spec import RunConfig

PHASE_SAMPLES = 10
"""Rounds at which a run is timed, evenly spaced: its chunks shrink to ⌈T / (PHASE_SAMPLES + 1)⌉ rounds."""


def bandit_timer(run: "RunConfig", min_rows: PhaseRows) -> PhaseTimer:
    """The timer of a bandit-loop run, its timed calls on at least ``min_rows`` rows per phase: its environment,
    policy and traced hyperparameters as the loop builds them (:meth:`~nlbandit.loops.bandit.BanditLoop.build`, a
    batch of one)."""
    env, policy, params, _ = BanditLoop().build([run])
    return PhaseTimer(env, policy, params, run.seeds, run.horizon, min_rows=min_rows)


PHASE_TIMERS: dict[str, Callable[["RunConfig", PhaseRows], PhaseTimer]] = {BanditLoop.name: bandit_timer}
"""Timer factories by loop name (a run, the fewest rows of a timed call per phase): the loops whose runs can have
their phases timed apart."""


def phase_chunk_size(chunk_size: int, horizon: int) -> int:
    """Rounds per chunk of a run timed at :data:`PHASE_SAMPLES` rounds."""
    return min(chunk_size, -(-horizon // (PHASE_SAMPLES + 1)))
