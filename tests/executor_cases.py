"""What the executor tests share: an experiment with a tuned series, a grid and a timed run, its results under
an executor (with the checkpoints written through the store), and their bit-for-bit comparison."""

from __future__ import annotations

import numpy as np

from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.tuning import tune_experiment
from nlbandit.store import Store

EXPERIMENT = """
title = "executors"
horizon = {horizon}
seeds = {seeds}
[tune]
seeds = 2
[env]
name = "logistic"
d = 4
k = 6
[[policies]]
label = "TS"
name = "glm-tsl"
tune = {{ a = [0.5, 2.0] }}
[[policies]]
label = "ES"
name = "lin-es"
m = 4
[[policies]]
label = "UCB"
name = "lin-ucb"
width = "constant"
alpha = [0.5, 1.0]
[[claims]]
name = "timed"
text = "a runtime claim: its run stays in the driver"
check = "runtime('UCB [alpha=0.5]') > 0"
"""
"""The experiment file's text; ``.format(horizon=..., seeds=...)``."""


class Recording:
    """A store that records the checkpoints written through it."""

    def __init__(self, store):
        self._store, self.checkpoints = store, []

    def save_checkpoint(self, batch_id, t_done, progress):
        self.checkpoints.append((batch_id, t_done))
        self._store.save_checkpoint(batch_id, t_done, progress)

    def __getattr__(self, name):
        return getattr(self._store, name)


def results(path, executor, db, chunk_size=1000):
    """Tune and run the experiment at ``path`` on ``executor`` (None: the local one) into a fresh database
    ``db``: every run's (curves, arms, batch size) by run id, and the (batch, round) of each checkpoint
    written."""
    exp = load_experiment(path)
    with Store(db) as plain:
        store = Recording(plain)
        exp = tune_experiment(exp, store, progress=False, log=lambda m: None, executor=executor,
                              chunk_size=chunk_size)
        run_experiment(exp, store, progress=False, log=lambda m: None, executor=executor, chunk_size=chunk_size)
        out = {}
        for r in exp.runs + [c for t in exp.tuning for c in t.candidates]:
            stored = plain.load(r.series_id, r.seeds, with_arms=True)
            out[r.run_id] = (stored.curves, stored.arms, stored.batch_size)
    return out, store.checkpoints


def seed_parts(path, db):
    """The experiment at ``path`` as stored in ``db``: by label, the seeds (below 10) of each part its series is
    stored in (a batch computed whole is one part, one cut between its seeds one part per piece)."""
    with Store(db) as store:  # (its tuning's points are stored: tuning picks them again without computing)
        runs = tune_experiment(load_experiment(path), store, progress=False, log=lambda m: None).runs
        parts = store.parts(r.series_id for r in runs)
    return {r.label: [p.holds for p in parts[r.series_id] if p.first_seed < 10] for r in runs}


CUT_IN_TWO = {"UCB [alpha=0.5]": [tuple(range(10))],  # timed: whole
              **{label: [tuple(range(5)), tuple(range(5, 10))] for label in ("TS", "ES", "UCB [alpha=1.0]")}}
""":func:`seed_parts` of the experiment at 10 seeds computed by two workers: every batch in two pieces of 5 seeds
but the timed run's (TS's chosen point is also the tuning's series, on seeds 10⁹ and up)."""


def assert_same(local, other):
    """The two :func:`results` hold the same runs, bit for bit (in batches of the same or other sizes)."""
    assert local.keys() == other.keys()
    for run_id, (curves, arms, _) in local.items():
        other_curves, other_arms, _ = other[run_id]
        np.testing.assert_array_equal(arms, other_arms)
        for metric in curves:
            np.testing.assert_array_equal(curves[metric], other_curves[metric])
