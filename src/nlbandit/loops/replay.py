"""The logged-data replay loop (``loop = "replay"``): policies of :data:`nlbandit.policies.registry.POLICIES`
evaluated on a logged data set by :func:`nlbandit.core.replay.replay` (Li et al. 2011's rejection replay).

Logged data sets (the ``[env]`` table): ``obd``, the Open Bandit Dataset sample with Bae & Lee's 5-arm,
45-feature reduction (:mod:`nlbandit.data.obd`; field ``passes``: the most passes over the reshuffled
sample). The horizon counts accepted events; a run that reaches fewer in its passes is refused (a ConfigError naming
``passes``), as its click rate would be read per event over events never accepted.

Stored curves, against the accepted events: ``regret`` and ``reward`` both hold the cumulative clicks (there is
no regret without counterfactuals, spec 001 §4.5; the report's first table column and ``regret()`` in claims
read clicks, ``reward()`` the click rate per accepted event, Table 2's CTR), and ``events`` the logged events
read; the arm of every accepted event. A batch is computed in one piece, without checkpoints.
"""

from __future__ import annotations

import numpy as np

from nlbandit.core.hyper import ConfigError, Hyper, resolve
from nlbandit.core.replay import Logged, replay
from nlbandit.core.types import Env, EnvFacts, ProblemSpec
from nlbandit.data import obd
from nlbandit.data.cache import DataError
from nlbandit.loops.base import Computed, Loop, pick, traced_params
from nlbandit.policies.registry import (build_policy, check_policy_env, policy_entry, policy_memory, resolve_policy,
                                        split_policy_config)

LOGGED_HYPERS = (
    Hyper("name", None, "the logged data set: 'obd'", kind=str, choices=("obd",)),
    Hyper("passes", 10, "the most passes over the reshuffled events; a run that needs more to reach the horizon is "
          "refused", kind=int, low=1),
    Hyper("d", None, "feature dimension (derived)", kind=int, optional=True, low=1),
    Hyper("k", None, "arms per event (derived)", kind=int, optional=True, low=1),
    Hyper("data_sha256", None, "the data's checksum (derived)", kind=str, optional=True),
)


def _facts_env(env: dict) -> Env:
    """The logged data's sizes and reward range, for the policy checks."""
    return Env.described(env["name"], ProblemSpec(env["d"], env["k"], 0), EnvFacts(reward_range=(0.0, 1.0)))


class ReplayLoop(Loop):
    """Rejection replay of logged events: cumulative clicks and events read per accepted event."""

    name = "replay"
    metrics = ("regret", "reward", "events")

    def fixed_env_fields(self, env, where):
        """Only the name."""
        return ("name",)

    def case_env(self, env, horizon, n_seeds, record_points, where):
        """The logged data set resolved, its sizes and checksum derived (a :class:`DataError` when it is not in
        the cache)."""
        values = resolve(LOGGED_HYPERS, env, where)
        try:
            version = obd.SOURCE.version("obd")
        except DataError as e:
            raise DataError(f"{where}: {e}") from None
        derived = {"d": obd.USER_DIMS * 2 + obd.ITEM_DIMS + 1 + 3 + 1, "k": obd.ARMS, "data_sha256": version}
        for field, value in derived.items():
            if values[field] is not None and values[field] != value:
                raise ConfigError(f"{where}: field '{field}' = {values[field]!r} does not match the data ({value!r}); "
                                  "omit it")
        return {**values, **derived}

    def resolve_series(self, policy, env, series_env, horizon, where):
        """The policy resolved and checked against the data's sizes and reward range."""
        return env, check_policy_env(resolve_policy(policy, where), _facts_env(env), horizon, where)

    def split(self, policy):
        """:func:`~nlbandit.policies.registry.split_policy_config`."""
        return split_policy_config(policy)

    def data_sources(self, env):
        """The logged data set (``obd``)."""
        return {"obd": obd.SOURCE}

    def code_modules(self, policy, env):
        """The replay engine, the policy's modules and the logged data's reader."""
        return ("nlbandit.core.replay", *policy_entry(policy).modules(), "nlbandit.data.obd")

    def memory(self, env, policy, horizon, n_seeds, record_points):
        """The events' contexts (shared), the per-seed pass orders, curves and arms, and the policy's arrays
        (:func:`~nlbandit.policies.registry.policy_memory`)."""
        events = 10_000
        return {"logged contexts (shared)": 8 * events * env["k"] * env["d"],
                "pass orders": 4 * n_seeds * env["passes"] * events,
                "curves and arms": 4 * 8 * n_seeds * horizon,
                **policy_memory(policy, ProblemSpec(env["d"], env["k"], horizon), n_seeds)}

    def describe(self, batch, resume=None):
        """The labels, the case, the seeds and accepted events."""
        first = batch[0]
        case = f" ({first.case_label})" if first.case else ""
        return f"{', '.join(r.label for r in batch)}{case}: {first.n_seeds} seeds x {first.horizon} accepted events"

    def compute(self, batch, seeds, *, chunk_size=1000, progress=False, on_chunk=None, resume=None):
        """:func:`~nlbandit.core.replay.replay` over the batch (a grid when it has several runs), in one piece."""
        first = batch[0]
        data = obd.bandit(obd.load())
        policy, _ = build_policy(first.policy, ProblemSpec(first.env["d"], first.env["k"], first.horizon))
        params, grid = traced_params(self, batch)
        res = replay(Logged(data.contexts, data.logged, data.click), policy, params, first.horizon, seeds,
                     grid=grid, passes=first.env["passes"])
        idx = np.unique(np.linspace(0, first.horizon - 1, min(first.record_points, first.horizon)).round().astype(int))
        curves = []
        for i in range(len(batch)):
            clicks, events = pick(res.cum_reward, i, grid)[:, idx], pick(res.events, i, grid)[:, idx].astype(np.float64)
            curves.append({"regret": clicks, "reward": clicks, "events": events})
        accepted = int(np.min(res.accepted))
        if accepted < first.horizon:  # (its clicks would be read per event as if T had been accepted)
            raise ConfigError(f"{self.describe(batch)}: a run accepted {accepted} events in {first.env['passes']} "
                              f"passes over the logged data, fewer than the horizon's {first.horizon}; raise the "
                              "[env] field 'passes' or lower the horizon")
        return Computed(idx + 1, curves, [pick(res.arms, i, grid) for i in range(len(batch))], res.compile_s,
                        res.run_s, first.horizon, [res.run_s])

    def regret_name(self, runs):
        """``cumulative clicks`` (per accepted event)."""
        return "cumulative clicks over accepted events"

    def report_columns(self):
        """The click rate and the events read."""
        return ("CTR", "events read")

    def report_cells(self, run, curves):
        """Clicks per accepted event, and the mean number of logged events read."""
        return (f"{curves['reward'][:, -1].mean() / run.horizon:.4f}", f"{curves['events'][:, -1].mean():.0f}")

    def report_notes(self):
        """What the table shows."""
        return ["Replay: the 'mean' column is the cumulative number of clicks at the horizon of accepted events "
                "(no regret: the logged data has no counterfactuals); CTR = clicks / accepted events (Table 2); "
                "events read: logged events streamed to reach the horizon (about K per accepted event)."]
