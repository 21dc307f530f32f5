"""The bandit loop (``loop = "bandit"``, the default): environments of :data:`nlbandit.envs.registry.ENVS`,
policies of :data:`nlbandit.policies.registry.POLICIES`, simulated by :func:`nlbandit.core.simulate.simulate`.

Stored curves: ``regret`` (cumulative pseudo-regret) and ``reward`` (cumulative realised reward), plus the
chosen arm of every round. A batch checkpoints after every chunk; when a process dies, the next call
resumes the batch from its last checkpoint, and the results are bit-identical to an uninterrupted run.
"""

from __future__ import annotations

from nlbandit.core.hyper import ConfigError
from nlbandit.core.simulate import SimProgress, simulate
from nlbandit.core.types import ProblemSpec
from nlbandit.data.sources import SOURCES
from nlbandit.envs.registry import env_entry, instance_floats, make_env, resolve_env
from nlbandit.core.memory import check_memory
from nlbandit.loops.base import Computed, Loop, pick, traced_params
from nlbandit.policies.registry import (build_policy, check_policy_env, policy_entry, policy_memory, resolve_policy,
                                        split_policy_config)

MAX_ARMS = 2**31 - 1
"""The most arms: the engine stores chosen arms as int32."""
ARM_BYTES = 24
"""Host bytes per seed and round of the chosen arms: the int32 array, the two copies that serialise it into
each checkpoint, another in the database, and the 8-byte references of the integer lists stored per seed."""


class BanditLoop(Loop):
    """Contextual bandit simulation: pseudo-regret and reward curves, chosen arms, checkpointed batches."""

    name = "bandit"
    metrics = ("regret", "reward")
    tunable = True
    diagnostics = ("effective-dimension",)

    def fixed_env_fields(self, env, where):
        """The name and the environment's list-valued hyperparameters (e.g. ``arm_set``)."""
        return ("name",) + tuple(h.name for h in env_entry(env.get("name"), where).hypers if h.kind is list)

    def case_env(self, env, horizon, n_seeds, record_points, where):
        """The resolved environment, refused when K exceeds :data:`MAX_ARMS` or its runs' arrays exceed memory."""
        env = resolve_env(env, where)
        if env["k"] > MAX_ARMS:
            raise ConfigError(f"{where}: field 'k' = {env['k']} is more than {MAX_ARMS} (arm indices are int32)")
        check_memory(self.memory(env, None, horizon, n_seeds, record_points), "every run on this environment", where)
        return env

    def resolve_series(self, policy, env, series_env, horizon, where):
        """The policy resolved, adapted to the environment (e.g. its link) and checked against it."""
        return env, check_policy_env(resolve_policy(policy, where), make_env(**env), horizon, where)

    def split(self, policy):
        """:func:`~nlbandit.policies.registry.split_policy_config`."""
        return split_policy_config(policy)

    def data_sources(self, env):
        """The data sets a classification environment's ``dataset`` field names (one, or a grid of them)."""
        names = env.get("dataset")
        names = names if isinstance(names, list) else [names]
        return {n: SOURCES[n] for n in names if isinstance(n, str) and n in SOURCES}

    def code_modules(self, policy, env):
        """The engine, the policy's modules and the environment's constructor."""
        return ("nlbandit.core.simulate", *policy_entry(policy).modules(), env_entry(env).make.__module__)

    def memory(self, env, policy, horizon, n_seeds, record_points):
        """Chosen arms (S×T, :data:`ARM_BYTES` each), curves (2×S×P float64), the instances (arm pools S×K×d
        and any matrix, float64: :func:`~nlbandit.envs.registry.instance_floats`) and the policy's arrays
        (:func:`policy_memory`)."""
        return {
            "chosen arms S×T": ARM_BYTES * n_seeds * horizon,
            "curves": 16 * n_seeds * min(record_points, horizon),
            "environment arrays": 8 * n_seeds * instance_floats(env),
            **policy_memory(policy, ProblemSpec(env["d"], env["k"], horizon), n_seeds),
        }

    def describe(self, batch, resume=None):
        """The labels, the case, the seeds and rounds, and the round a checkpoint resumes at."""
        first = batch[0]
        case = f" ({first.case_label})" if first.case else ""
        return (f"{', '.join(r.label for r in batch)}{case}: {first.n_seeds} seeds x {first.horizon} rounds"
                + (f", resuming at round {SimProgress.from_bytes(resume).t_done}" if resume is not None else ""))

    def compute(self, batch, seeds, *, chunk_size=1000, progress=False, on_chunk=None, resume=None):
        """:func:`~nlbandit.core.simulate.simulate` with ``grid=True`` over the batch, checkpointing after every
        chunk."""
        first = batch[0]
        env, policy, params, grid = self.build(batch)
        res = simulate(env, policy, params, first.horizon, seeds, grid=grid, chunk_size=chunk_size,
                       max_points=first.record_points, progress=progress, on_chunk=on_chunk,
                       resume=None if resume is None else SimProgress.from_bytes(resume))
        return Computed(res.rounds, [{"regret": pick(res.cum_regret, i, grid), "reward": pick(res.cum_reward, i, grid)}
                                     for i in range(len(batch))],
                        [pick(res.arms, i, grid) for i in range(len(batch))], res.compile_s, res.run_s,
                        res.chunk_size, res.chunk_seconds)

    def build(self, batch):
        """The environment, the policy and the traced hyperparameters (with a leading grid axis, and ``True``,
        for several runs) of a batch: the one place a bandit run's configuration becomes objects (each cached,
        one object per configuration, so equal runs share their compiled programs)."""
        first = batch[0]
        env = make_env(**first.env)
        policy, _ = build_policy(first.policy, ProblemSpec(env.spec.d, env.spec.k, first.horizon))
        return (env, policy, *traced_params(self, batch))

    def regret_name(self, runs):
        """``cumulative pseudo-regret``."""
        return "cumulative pseudo-regret"
