"""The online-regression loop (``loop = "regression"``, Zhao, Zhou, He & Gu 2023): streams of
:data:`nlbandit.envs.registry.STREAMS`, learners of :data:`nlbandit.policies.learners.LEARNERS`, computed by
:func:`nlbandit.core.regress.regress`.

A series may carry its own stream fields (``env = {...}``, merged over ``[env]``), and names the regret it
records (``regret`` = stochastic, pseudo or adversarial; ``units``). Stored curves: ``regret`` (that
regret) and ``clipped`` (the cumulative number of clipped labels, which the report counts). A batch takes
seconds, so it is computed in one piece without checkpoints; no arms are stored.
"""

from __future__ import annotations

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.core.regress import regress
from nlbandit.envs.registry import STREAMS, make_stream, resolve_stream
from nlbandit.loops.base import Computed, Loop, pick, traced_params
from nlbandit.policies.learners import learner_entry, resolve_learner, split_learner_config


class RegressionLoop(Loop):
    """Online GLM regression: one regret curve per learner and the clipped-label count per trial."""

    name = "regression"
    metrics = ("regret", "clipped")
    series_env = True

    def fixed_env_fields(self, env, where):
        """Only the name: a stream has no array-valued fields."""
        return ("name",)

    def case_env(self, env, horizon, n_seeds, record_points, where):
        """``env`` unchanged: a stream is resolved per series, with the series' own fields."""
        return env

    def resolve_series(self, policy, env, series_env, horizon, where):
        """The stream (``[env]`` with the series' ``env`` fields over it) and the learner resolved on it."""
        stream = resolve_stream({**env, **series_env}, horizon, f"{where}: env")
        return stream, resolve_learner(policy, stream, where)

    def split(self, policy):
        """:func:`~nlbandit.policies.learners.split_learner_config`."""
        return split_learner_config(policy)

    def batch_fields(self, run):
        """The recorded regret and its units."""
        return [run.policy["regret"], run.policy["units"]]

    def code_modules(self, policy, env):
        """The regression engine, the learner's and the stream's modules."""
        if env not in STREAMS:
            raise ConfigError(f"stream {env!r} is not registered")
        return ("nlbandit.core.regress", learner_entry(policy).make.__module__, STREAMS[env].make.__module__)

    def memory(self, env, policy, horizon, n_seeds, record_points):
        """Curves (2×S×P float64) and the stream's S×T×d float64 features (a learner's state is O(d²))."""
        return {"curves": 16 * n_seeds * min(record_points, horizon),
                "environment arrays": 8 * n_seeds * env["d"] * horizon}

    def describe(self, batch, resume=None):
        """The labels, the trials and rounds, and the recorded regret."""
        first = batch[0]
        return (f"{', '.join(r.label for r in batch)}: {first.n_seeds} trials x {first.horizon} rounds "
                f"({first.policy['regret']} regret)")

    def compute(self, batch, seeds, *, chunk_size=1000, progress=False, on_chunk=None, resume=None):
        """:func:`~nlbandit.core.regress.regress` over the batch (a grid when it has several runs), in one piece."""
        first = batch[0]
        stream = make_stream(first.env["name"], first.horizon, **{k: v for k, v in first.env.items() if k != "name"})
        learner = learner_entry(first.policy["name"]).make(stream, **self.split(first.policy)[0])
        params, grid = traced_params(self, batch)
        metric, units = first.policy["regret"], first.policy["units"]
        res = regress(stream, learner, params, seeds, adversarial=metric == "adversarial", units=units, grid=grid,
                      max_points=first.record_points)
        clipped = np.asarray(res.curves["clipped"])
        return Computed(res.rounds, [{"regret": pick(res.curves[metric], i, grid), "clipped": clipped}
                                     for i in range(len(batch))],
                        [np.zeros((len(seeds), 0), np.int32)] * len(batch), res.compile_s, res.run_s, first.horizon,
                        [res.run_s])

    def regret_name(self, runs):
        """The series' regrets and units, e.g. ``cumulative stochastic / adversarial regret (ℓ units)``."""
        kinds = sorted({r.policy["regret"] for r in runs})
        units = sorted({"square loss" if r.policy["units"] == "square" else "ℓ units" for r in runs})
        return f"cumulative {' / '.join(kinds)} regret ({', '.join(units)})"

    def report_columns(self):
        """The recorded regret and the clipped labels."""
        return ("regret", "clipped labels")

    def report_cells(self, run, curves):
        """The series' regret kind; the mean number of clipped labels per trial and the trials with any."""
        clipped = curves["clipped"][:, -1]
        return run.policy["regret"], f"{clipped.mean():.1f} ({int(np.sum(clipped > 0))}/{clipped.size})"

    def report_notes(self):
        """What the clipped-labels column counts."""
        return ["Clipped labels: mean number per trial, and the trials with any."]
