"""Pluggable loops (issue 12 §3): a loop defined outside the package, registered in ``LOOPS``, runs an
experiment file end to end — validation, batching, storing its own curves, report columns and claims —
without a change to the spec, the runner, the store or the report."""

from __future__ import annotations

import numpy as np
import pytest

from nlbandit.core.hyper import ConfigError, Hyper, resolve
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.loops import LOOPS
from nlbandit.loops.base import Computed, Loop, traced_params
from nlbandit.report.build import load_rows, write_report
from nlbandit.store import Store

_ENV = (Hyper("name", None, "toy environment", kind=str, choices=("toy",)),
        Hyper("d", 1, "size", kind=int, low=1))
_POLICY = (Hyper("name", None, "toy policy", kind=str, choices=("drift",)),
           Hyper("rate", 1.0, "regret per round (traced)", kind=float, low=0.0))


class DriftLoop(Loop):
    """A loop whose 'policy' loses ``rate · d`` per round plus the seed: regret = t·rate·d + seed, and a
    second stored curve ``hits`` = t."""

    name = "drift"
    metrics = ("regret", "hits")

    def __init__(self):
        self.batches: list[int] = []

    def fixed_env_fields(self, env, where):
        return ("name",)

    def case_env(self, env, horizon, n_seeds, record_points, where):
        return resolve(_ENV, env, where)

    def resolve_series(self, policy, env, series_env, horizon, where):
        return env, resolve(_POLICY, policy, where)

    def split(self, policy):
        return {}, {"rate": policy["rate"]}

    def code_modules(self, policy, env):
        return (__name__,)

    def memory(self, env, policy, horizon, n_seeds, record_points):
        return {"curves": 16 * n_seeds * min(record_points, horizon)}

    def describe(self, batch, resume=None):
        return f"{len(batch)} drift run(s)"

    def compute(self, batch, seeds, *, chunk_size=1000, progress=False, on_chunk=None, resume=None):
        params, grid = traced_params(self, batch)
        self.batches.append(len(batch))
        first = batch[0]
        rounds = np.arange(1, first.horizon + 1)
        rates = np.atleast_1d(np.asarray(params["rate"]))
        offsets = np.asarray(seeds)[:, None]
        return Computed(rounds, [{"regret": rates[i] * first.env["d"] * rounds + offsets,
                                  "hits": np.broadcast_to(rounds, (len(seeds), first.horizon))}
                                 for i in range(len(batch))],
                        [np.zeros((len(seeds), 0), np.int32)] * len(batch), 0.0, 0.0, first.horizon, [0.0])

    def regret_name(self, runs):
        return "cumulative drift"

    def report_columns(self):
        return ("hits",)

    def report_cells(self, run, curves):
        return (f"{curves['hits'][:, -1].mean():.0f}",)


TOY = """
title = "toy"
loop = "drift"
horizon = 10
seeds = 3
record_points = 10

[env]
name = "toy"
d = [1, 2]

[[policies]]
label = "slow"
name = "drift"
rate = 1.0

[[policies]]
label = "fast"
name = "drift"
rate = [2.0, 3.0]

[[claims]]
name = "fast-loses-more"
check = "paired('fast [rate=2.0]', 'slow', d=2) > 15"
"""


def test_a_new_loop_is_one_module(experiment_file, tmp_path, monkeypatch):
    loop = DriftLoop()
    monkeypatch.setitem(LOOPS, "drift", loop)
    exp = load_experiment(experiment_file(TOY))
    assert len(exp.runs) == 6
    with Store(tmp_path / "r.duckdb") as store:
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 6
        assert loop.batches == [3, 3]  # per d, the three rates (traced) side by side
        rows = load_rows(exp, store)
        md, claims = write_report(exp, rows, tmp_path / "out", "test")
    stored = {(r.run.label, r.run.case): r.stored for r in rows}
    fast = stored[("fast [rate=3.0]", (("d", 2),))]
    np.testing.assert_array_equal(fast.cum_regret[:, -1], 3.0 * 2 * 10 + np.arange(3))
    np.testing.assert_array_equal(fast.curves["hits"][:, -1], [10, 10, 10])
    assert claims[0].holds  # paired difference 20 − 0 per seed
    text = md.read_text()
    assert "| policy | case | hits | mean |" in text and "cumulative drift" in text


def test_unknown_loop_names_the_loaded_loops(experiment_file):
    with pytest.raises(ConfigError,
                       match="field 'loop' must be one of 'bandit', 'regression', 'replay', 'evaluate', got 'drift'"):
        load_experiment(experiment_file(TOY))
