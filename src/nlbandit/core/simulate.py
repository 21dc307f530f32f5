"""The compiled simulation engine: ``jit(vmap(scan))`` over rounds, vectorised over seeds and grids.

Rounds run in chunks of ``chunk_size`` through one compiled function (a second compilation only when
the horizon is not a multiple of the chunk size); compiled functions are cached across calls with the
same environment and policy objects and the same shapes. Between chunks the host accumulates the curves in
float64, advances the progress bar, and may hand a :class:`SimProgress` to ``on_chunk`` for
checkpointing; ``simulate(..., resume=progress)`` continues from it with bit-identical results, because
round ``t``'s keys depend only on the seed and ``t`` (see :mod:`nlbandit.core.keys`).
"""

from __future__ import annotations

import functools
import io
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from tqdm.auto import tqdm

from nlbandit.core.compat import check_compatible
from nlbandit.core.keys import seed_keys
from nlbandit.core.memory import check_memory, policy_parts, tree_bytes
from nlbandit.core.params import as_params
from nlbandit.core.round import observe, play, start
from nlbandit.core.types import Env, Policy, healthy, to_dtype

NUMERICS = 1
"""Version of the numbers the bandit engine computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


def recorded_rounds(horizon: int, max_points: int) -> np.ndarray:
    """The 1-based rounds at which curves are kept: every ⌈T/max_points⌉-th round, and always T."""
    stride = -(-horizon // max_points)
    return np.unique(np.r_[np.arange(stride, horizon + 1, stride), horizon]).astype(np.int64)


@dataclass
class SimProgress:
    """Host-side state of a simulation after ``t_done`` rounds: everything needed to resume it.

    Arrays have a leading batch shape ``B = (S,)``, or ``(G, S)`` for a grid.
    """

    t_done: int
    policy_state: list[np.ndarray]
    cum_regret: np.ndarray  # B + (P,), filled for rounds ≤ t_done
    cum_reward: np.ndarray  # B + (P,)
    arms: np.ndarray  # B + (T,), int32
    last_regret: np.ndarray  # B, cumulative regret after t_done rounds
    last_reward: np.ndarray  # B
    compile_s: float = 0.0
    run_s: float = 0.0
    chunk_seconds: list[float] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        """Serialise (npz) for a checkpoint."""
        buf = io.BytesIO()
        arrays = {f"state_{i}": a for i, a in enumerate(self.policy_state)}
        np.savez(
            buf,
            t_done=self.t_done,
            cum_regret=self.cum_regret,
            cum_reward=self.cum_reward,
            arms=self.arms,
            last_regret=self.last_regret,
            last_reward=self.last_reward,
            timing=np.array([self.compile_s, self.run_s]),
            chunk_seconds=np.array(self.chunk_seconds, dtype=np.float64),
            **arrays,
        )
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "SimProgress":
        """Inverse of :meth:`to_bytes`."""
        z = np.load(io.BytesIO(data))
        n_state = sum(1 for k in z.files if k.startswith("state_"))
        return cls(
            t_done=int(z["t_done"]),
            policy_state=[z[f"state_{i}"] for i in range(n_state)],
            cum_regret=z["cum_regret"],
            cum_reward=z["cum_reward"],
            arms=z["arms"],
            last_regret=z["last_regret"],
            last_reward=z["last_reward"],
            compile_s=float(z["timing"][0]),
            run_s=float(z["timing"][1]),
            chunk_seconds=list(z["chunk_seconds"]),
        )


@dataclass
class SimResult:
    """Result of :func:`simulate`. Batch shape ``B`` is ``(S,)`` or ``(G, S)`` for a grid.

    Attributes:
      rounds: (P,) recorded 1-based rounds (always ending at the horizon).
      cum_regret: B + (P,) cumulative pseudo-regret Σ_{s≤t} (max_x h(x) − h(X_s)) at ``rounds``.
      cum_reward: B + (P,) cumulative realised reward at ``rounds``.
      arms: B + (T,) chosen arm index in every round.
      compile_s: seconds spent compiling; run_s: seconds spent running (compilation excluded).
      chunk_seconds: run time of each chunk, in order (for per-round cost versus t).
      chunk_size: rounds per chunk.
    """

    rounds: np.ndarray
    cum_regret: np.ndarray
    cum_reward: np.ndarray
    arms: np.ndarray
    compile_s: float
    run_s: float
    chunk_seconds: list[float]
    chunk_size: int

    @property
    def final_regret(self) -> np.ndarray:
        """Exact cumulative pseudo-regret at the horizon, shape B."""
        return self.cum_regret[..., -1]

    @property
    def horizon(self) -> int:
        """Number of rounds simulated."""
        return int(self.rounds[-1])


def _one_seed(env: Env, policy: Policy):
    """(params, keys, env_state, policy_state, ts) -> (policy_state, (regret, reward, arm, healthy)) for one
    seed: :func:`nlbandit.core.round.play` over the rounds ``ts`` (``healthy``:
    :func:`~nlbandit.core.types.healthy` after each round's update)."""

    def run(params, keys, env_state, state, ts):
        params = to_dtype(params, policy.meta.dtype)

        def body(state, t):
            state, out = play(env, policy, params, keys, env_state, state, t)
            return state, (out.regret, out.reward, out.arm, healthy(state))

        return jax.lax.scan(body, state, ts)

    return run


def _initial_state(env: Env, policy: Policy):
    """(params, keys, env_state) -> the policy's state before round 1 (:func:`nlbandit.core.round.start`,
    preparing on round 1's arms)."""

    def initial(params, keys, env_state):
        return start(policy, to_dtype(params, policy.meta.dtype), keys.policy_init, *observe(env, env_state, keys, 1))

    return initial


@dataclass
class _Programs:
    """The jitted pieces of a simulation of one (environment, policy, grid) triple, and its compiled
    chunks by argument signature (shapes, dtypes and tree structure)."""

    reset: Callable
    init: Callable
    run: Callable
    chunks: dict[Any, Any] = field(default_factory=dict)


def _build_programs(env: Env, policy: Policy, grid: bool) -> _Programs:
    run = jax.vmap(_one_seed(env, policy), in_axes=(None, 0, 0, 0, None))
    init = jax.vmap(_initial_state(env, policy), in_axes=(None, 0, 0))
    if grid:
        run = jax.vmap(run, in_axes=(0, None, None, 0, None))
        init = jax.vmap(init, in_axes=(0, None, None))
    return _Programs(jax.jit(jax.vmap(env.reset)), jax.jit(init), jax.jit(run, donate_argnums=(3,)))


_cached_programs = functools.lru_cache(maxsize=32)(_build_programs)


def _programs(env: Env, policy: Policy, grid: bool) -> _Programs:
    """:class:`_Programs` of the triple, cached across calls (a second simulation of the same environment
    and policy objects with the same shapes compiles nothing), unless the objects are not hashable."""
    try:
        hash((env, policy))
    except TypeError:
        return _build_programs(env, policy, grid)
    return _cached_programs(env, policy, grid)


def _signature(args) -> tuple:
    leaves, treedef = jax.tree.flatten(args)
    return treedef, tuple((np.shape(a), str(getattr(a, "dtype", type(a)))) for a in leaves)


def simulate(
    env: Env,
    policy: Policy,
    params: Any,
    horizon: int | None = None,
    seeds=None,
    *,
    grid: bool = False,
    chunk_size: int = 1000,
    max_points: int = 2000,
    progress: bool | str = False,
    on_chunk: Callable[[SimProgress], None] | None = None,
    resume: SimProgress | None = None,
) -> SimResult:
    """Run ``policy`` on ``env`` for ``horizon`` rounds, for every seed (and grid point) at once.

    Args:
      env, policy: the environment and policy (see :mod:`nlbandit.core.types`).
      params: the policy's traced hyperparameters: its params record (as
        :func:`~nlbandit.policies.registry.make_policy` returns it) or a dict of the same fields (converted
        to the record, :attr:`PolicyMeta.params_type`); with ``grid=True`` every leaf has a leading axis G
        and the grid points are run side by side (common random numbers: all see the same instances and
        noise draws; a realised reward, mean + σ·z, may differ in its last bit between compiled programs).
      horizon: number of rounds T ≥ 1; omitted, the horizon the policy was built for (its ``spec``).
      seeds: integer seeds, one per repetition (required).
      chunk_size: rounds per compiled chunk (progress and checkpoints advance per chunk).
      max_points: curves are kept at at most about this many rounds (final values always exact).
      progress: show a progress bar when stderr is a terminal (a string is used as its description).
      on_chunk: called with the :class:`SimProgress` after every chunk (for checkpoints).
      resume: continue from a :class:`SimProgress` produced by an earlier call with the same arguments.

    Returns:
      A :class:`SimResult`.

    Raises:
      ValueError: naming the argument, before anything is computed: ``horizon`` not an integer in
        [1, 2³¹ − 1]; ``seeds`` empty, not integers in [0, 2³² − 1] or not distinct; ``chunk_size`` or
        ``max_points`` not an integer >= 1; ``params`` missing a field of the policy's record or with
        one it does not have; with ``grid=True``, ``params`` leaves without one common
        leading length G >= 1; ``resume`` from a call with other shapes; or the policy cannot run on the
        environment (:func:`~nlbandit.core.compat.check_compatible`: sizes, horizon, arm set, noise level,
        rewards). After a chunk, when a round had no available arm or a non-finite mean or reward, or
        left the policy unhealthy (:func:`~nlbandit.core.types.healthy`: a diverged training).
      ConfigError (a ``ValueError``): before anything is compiled, when the run's arrays need more than this
        machine's memory (:func:`~nlbandit.core.memory.check_memory`, naming the parts).
    """

    def integer(value: Any) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

    if horizon is None:
        if policy.meta.spec is None or not policy.meta.spec.horizon:
            raise ValueError("horizon: give the number of rounds (the policy was not built for one)")
        horizon = policy.meta.spec.horizon
    if seeds is None:
        raise ValueError("seeds must be given: a sequence of integer seeds, one per repetition")
    if not integer(horizon) or not 1 <= horizon <= 2**31 - 1:
        raise ValueError(f"horizon must be an integer in [1, 2**31 - 1] (the engine's int32 rounds), got {horizon!r}")
    for name, value in (("chunk_size", chunk_size), ("max_points", max_points)):
        if not integer(value) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    check_compatible(policy, env, policy.meta.spec, horizon)
    params = as_params(policy.meta.params_type, params)
    try:
        seed_list = list(np.asarray(seeds).tolist() if isinstance(seeds, (np.ndarray, jax.Array)) else seeds)
    except TypeError:  # a single number
        raise ValueError(f"seeds must be a sequence of integers, got {seeds!r}") from None
    bad = [s for s in seed_list if not integer(s) or not 0 <= s <= 2**32 - 1]
    if bad:
        raise ValueError(f"seeds must be integers in [0, 2**32 - 1], got {bad[0]!r}")
    if not seed_list:
        raise ValueError("seeds must contain at least one seed")
    unique, counts = np.unique(np.asarray(seed_list, dtype=np.uint32), return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"seeds must be distinct, got {unique[counts > 1].tolist()} more than once")
    seeds = jnp.asarray(np.asarray(seed_list, dtype=np.uint32))
    n_seeds = len(seed_list)
    leaves = jax.tree.leaves(params)
    lengths = {np.shape(a)[0] if np.ndim(a) else 0 for a in leaves}
    if grid and (not leaves or len(lengths) > 1 or 0 in lengths):
        raise ValueError("params: grid=True needs every leaf to have the same leading grid length G >= 1, got leaf "
                         f"shapes {[np.shape(a) for a in leaves]}")
    batch = (lengths.pop(), n_seeds) if grid else (n_seeds,)
    if resume is not None and (np.shape(resume.arms) != batch + (horizon,) or np.shape(resume.cum_regret)
                               != batch + recorded_rounds(horizon, max_points).shape):
        raise ValueError(f"resume: the progress has arms of shape {np.shape(resume.arms)} (grid points × seeds × "
                         f"rounds), but this call needs {batch + (horizon,)}, with {max_points} max_points: resume "
                         "only with the arguments of the call that saved it")
    keys = jax.vmap(seed_keys)(seeds)
    programs = _programs(env, policy, grid)
    lanes = int(np.prod(batch))
    env_shapes = jax.eval_shape(programs.reset, keys.env_reset)
    check_memory({
        "environment instances": tree_bytes(env_shapes),
        **policy_parts(policy, tree_bytes(jax.eval_shape(programs.init, params, keys, env_shapes)), lanes),
        "a chunk's per-round outputs": lanes * min(chunk_size, horizon) * 21,
        "chosen arms and curves on the host": lanes * (4 * horizon + 16 * len(recorded_rounds(horizon, max_points))),
    }, f"simulating policy '{policy.meta.name}' on environment '{env.name}' ({lanes} seed(s) and grid points × "
       f"{horizon} rounds)", "simulate")

    t0 = time.perf_counter()
    env_states = programs.reset(keys.env_reset)
    if resume is None:
        states = programs.init(params, keys, env_states)
    else:
        treedef = jax.tree.structure(jax.eval_shape(programs.init, params, keys, env_states))
        states = jax.tree.unflatten(treedef, [jnp.asarray(a) for a in resume.policy_state])
    jax.block_until_ready((env_states, states))
    setup_s = time.perf_counter() - t0

    rounds = recorded_rounds(horizon, max_points)
    chunk_size = max(1, min(chunk_size, horizon))
    if resume is None:
        prog = SimProgress(
            0,
            [],
            np.zeros(batch + rounds.shape),
            np.zeros(batch + rounds.shape),
            np.zeros(batch + (horizon,), np.int32),
            np.zeros(batch),
            np.zeros(batch),
        )
    else:
        prog = resume
    prog.compile_s += setup_s

    bar = tqdm(total=horizon, initial=prog.t_done, unit="round", disable=None if progress else True,
               desc=progress if isinstance(progress, str) else None, leave=False)
    while prog.t_done < horizon:
        length = min(chunk_size, horizon - prog.t_done)
        ts = jnp.arange(prog.t_done + 1, prog.t_done + length + 1)
        signature = _signature((params, keys, env_states, states, ts))
        if signature not in programs.chunks:
            c0 = time.perf_counter()
            programs.chunks[signature] = programs.run.lower(params, keys, env_states, states, ts).compile()
            prog.compile_s += time.perf_counter() - c0
        c0 = time.perf_counter()
        states, (regret, reward, arm, sound) = programs.chunks[signature](params, keys, env_states, states, ts)
        regret, reward, arm, sound = jax.device_get((regret, reward, arm, sound))
        if not sound.all():  # checked on the host, after the chunk
            at = tuple(np.argwhere(~sound)[0])
            point = jax.tree.map(lambda a: (np.asarray(a)[at[0]] if grid else np.asarray(a)).tolist(), params)
            raise ValueError(f"policy '{policy.meta.name}', seed {seed_list[at[-2]]}"
                             + (f" (grid point {at[0]}; diverged in this chunk: grid points "
                                f"{sorted(set(np.argwhere(~sound)[:, 0].tolist()))})" if grid else "")
                             + f", round {prog.t_done + at[-1] + 1}: its state became non-finite (training "
                             f"diverged) with params {point}; use a smaller step size or rescale the "
                             "features")
        finite = np.isfinite(regret) & np.isfinite(reward)
        if not finite.all():
            at = tuple(np.argwhere(~finite)[0])  # (grid point,) seed, round in the chunk
            raise ValueError(f"seed {seed_list[at[-2]]}" + (f" (grid point {at[0]})" if grid else "") + f", round "
                             f"{prog.t_done + at[-1] + 1}: regret {regret[at]}, reward {reward[at]}: the environment "
                             "offered no available arm (an all-false mask), or gave a non-finite mean or reward")
        elapsed = time.perf_counter() - c0
        prog.run_s += elapsed
        prog.chunk_seconds.append(elapsed)
        _accumulate(prog, rounds, regret, reward, arm)
        bar.update(length)
        if on_chunk is not None:
            prog.policy_state = [np.asarray(a) for a in jax.tree.leaves(jax.device_get(states))]
            on_chunk(prog)
    bar.close()
    return SimResult(rounds, prog.cum_regret, prog.cum_reward, prog.arms, prog.compile_s, prog.run_s,
                     list(prog.chunk_seconds), chunk_size)


def _accumulate(prog: SimProgress, rounds: np.ndarray, regret, reward, arm) -> None:
    """Fold one chunk's per-round outputs (batch + (L,)) into ``prog`` (float64 running sums)."""
    start, length = prog.t_done, regret.shape[-1]

    def running_sum(last, values):  # sequential order, so the sums do not depend on the chunking
        return np.cumsum(np.concatenate([last[..., None], np.asarray(values, np.float64)], axis=-1), axis=-1)[..., 1:]

    cum_regret = running_sum(prog.last_regret, regret)
    cum_reward = running_sum(prog.last_reward, reward)
    in_chunk = (rounds > start) & (rounds <= start + length)
    offsets = rounds[in_chunk] - start - 1
    prog.cum_regret[..., in_chunk] = cum_regret[..., offsets]
    prog.cum_reward[..., in_chunk] = cum_reward[..., offsets]
    prog.arms[..., start : start + length] = arm
    prog.last_regret = cum_regret[..., -1]
    prog.last_reward = cum_reward[..., -1]
    prog.t_done = start + length
