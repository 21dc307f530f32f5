"""The two phases of a round timed apart: arm selection (``act``) and model update (``update``).

The engine runs whole chunks of rounds as one compiled program, so it cannot time the parts of a round.
:class:`PhaseTimer` does it beside the engine, on the engine's own states: handed a
:class:`~nlbandit.core.simulate.SimProgress` after t rounds (``simulate(..., on_chunk=...)``, whose time is
not counted in the run's), it builds round t + 1's inputs as the engine would (the same keys, contexts and
feedback) and keeps them; once the run is done, :func:`time_phases` times the policy's jitted ``act`` alone and
its jitted ``update`` alone on them, vectorised over the seeds like the engine, each the median of ``repeats``
calls after a first (compiling) one.

Runs whose costs a claim compares are timed in one session (:func:`time_phases` with all their timers, in one
process, after all their simulations): at each sampled round, each run's calls in turn, the order rotating by
one run per round. Timed one run per process, between the chunks of its own simulation, the same run's cost
shifted from process to process by more than the differences to resolve: Sun et al.'s Fig. 5 (mushroom, Lin-ES
against Lin-UCB, 320 rows, one core, 2026-11-28) read −0.55 to +1.24 µs per seed-round in five processes (the
pair's mean cost 3.0), while in one session each, after the runs, five processes read +0.46 to +0.66 (mean cost
about 2) and five more +0.59 to +1.29: a session still shifts with its process, by less
(``benchmarks/phases.py`` measures it for an experiment file's pairs), so an experiment file may have the session
repeated in several fresh processes (``phase_processes``: :func:`nlbandit.experiments.runner.time_sessions`), each
handed the kept rounds, and a claim read the spread between them.

The environment's ``observe`` and ``pull`` are computed once outside the timed calls. A timed call includes the
fixed cost of dispatching a jitted function (tens of µs here, shared among the rows of the call), which the engine,
running whole chunks in one program, does not pay per round: so a run's states are repeated to at least
``min_rows`` rows for the timed calls (a run of 2 seeds is timed on 4 copies of its 2 states), and a phase's time
per seed is the call's time over its rows. Measured on the states of Sun et al.'s Fig. 1f at t = 1001 and 2001 (2
seeds, one core, 2026-11-28), µs per seed for a call of 2, 8 and 16 rows: Neural-ES's selection 23-26, 7.8-8.8,
5.7-5.9 (a call of 50, 66 and 93 µs: ~40 µs of it fixed), NeuralUCB's 71-118, 55-61, 41; so on the run's own 2 rows
the fixed cost stood in for most of Neural-ES's selection and NeuralUCB read 2.8× it, on 8 rows 7×. A policy whose
phases cost a few µs per seed needs hundreds of rows (an experiment file's ``phase_rows``, and ``select_rows`` for
the selection alone: a model update that costs milliseconds per seed needs no more than a few): on Sun et al.'s
Fig. 5 (mushroom, 10 seeds, 2026-11-28) uniform play's select + update read 7.8 µs per seed on 10 rows, 1.2 on 80
and 0.3-0.4 on 320.

A timed call also allocates its temporary buffers afresh, which the engine does once per chunk, and glibc's malloc
returns freed memory to the system once more than its trim threshold of it lies free (twice the largest block freed
so far; large blocks are mapped apart until then): so a call whose buffers add up to more maps them anew and faults
on each of their pages on every call. Measured on Sun et al.'s Fig. 1f (NeuralUCB's selection, quick scale, one
core, 2026-11-28): 239 and 241 µs per seed on calls of 32 and 64 rows (214,000 and 371,000 page faults in the run),
47 and 62 with freed memory kept (46,000 and 52,000); a process whose earlier frees had raised the thresholds read
45-65 on 32 rows. So the timed calls run under :func:`heap_allocations`.

A sample is one round: with a training cadence ``train_every > 1`` it catches a training round or not, so
such a policy's update time is the mean over the sampled rounds of an uneven cost. Spec 003 §4.1 [REC]
(select and update recorded apart), Sun, Wang & Xu (2025) Fig. 1f.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import statistics
import time
from typing import Any, Iterator, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core import round as one_round
from nlbandit.core.keys import seed_keys
from nlbandit.core.params import as_params
from nlbandit.core.types import Env, Policy, to_dtype


MIN_BATCH = 8
"""The fewest rows a timed call computes by default: a run's seeds' rows are repeated, in whole copies, up to at
least this (an experiment file's ``phase_rows`` sets its own)."""
MAX_PHASE_ROWS = 4096
"""The most rows an experiment file may ask a timed call for (``phase_rows``)."""


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_HEAP_BLOCKS = 32 * 2**20  # glibc's largest mmap threshold on 64-bit systems, where its adaptive one stops
_ADAPTED_TRIM = 2 * _HEAP_BLOCKS  # the trim threshold glibc's adaptation sets beside it
_KEEP_FREED = 2**30


@contextlib.contextmanager
def heap_allocations() -> Iterator[bool]:
    """Within the block, glibc's malloc serves blocks of up to 32 MiB from its heap and keeps freed memory, so that
    a timed call's temporary buffers reuse pages already mapped instead of mapping and faulting on fresh ones every
    call (module doc). After it, malloc keeps the thresholds that its own adaptation, which setting one stops,
    reaches at most: blocks of up to 32 MiB from the heap, free memory beyond 64 MiB returned. Yields whether it
    took effect: not with a C library without ``mallopt`` (macOS), whose calls are then timed as they come."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        yield False
        return
    took = bool(mallopt(_M_MMAP_THRESHOLD, _HEAP_BLOCKS)) and bool(mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED))
    try:
        yield took
    finally:
        mallopt(_M_TRIM_THRESHOLD, _ADAPTED_TRIM)


class PhaseRows(NamedTuple):
    """Rows of the timed calls, per phase: ``select`` for ``act``, ``update`` for ``update`` (the fewest asked
    for, or, from :meth:`of_seeds`, those a run's calls compute)."""

    select: int = MIN_BATCH
    update: int = MIN_BATCH

    def of_seeds(self, n_seeds: int) -> "PhaseRows":
        """The rows the timed calls of a run of ``n_seeds`` seeds compute: whole copies of its seeds' rows, at least
        as many as asked, per phase."""
        return PhaseRows(*(n_seeds * -(-fewest // n_seeds) for fewest in self))


class PhaseSample(NamedTuple):
    """One timed round: ``t`` (1-based), and the seconds per seed of ``act`` and of ``update``."""

    t: int
    select_s: float
    update_s: float


class KeptRound(NamedTuple):
    """A simulation's state after ``t_done`` rounds as a :class:`PhaseTimer` reads it from a
    :class:`~nlbandit.core.simulate.SimProgress` (``policy_state``: the leaves of the policy's state, per seed):
    kept by a simulation whose timer is built elsewhere (:func:`rounds_to_bytes`)."""

    t_done: int
    policy_state: list[np.ndarray]

    @classmethod
    def of(cls, progress) -> "KeptRound":
        """The round of ``progress`` (its leaves copied: the engine's next chunk may reuse them)."""
        return cls(int(progress.t_done), [np.array(leaf, copy=True) for leaf in progress.policy_state])


def rounds_to_bytes(rounds: Sequence[KeptRound]) -> bytes:
    """Serialise (npz, no pickles) the rounds of one simulation, all with leaves of the same shapes."""
    buf = io.BytesIO()
    leaves = zip(*(r.policy_state for r in rounds)) if rounds else ()
    np.savez(buf, t_done=np.array([r.t_done for r in rounds], np.int64),
             **{f"leaf_{j}": np.stack(leaf) for j, leaf in enumerate(leaves)})
    return buf.getvalue()


def rounds_from_bytes(data: bytes) -> list[KeptRound]:
    """Inverse of :func:`rounds_to_bytes`."""
    z = np.load(io.BytesIO(data), allow_pickle=False)
    leaves = [z[f"leaf_{j}"] for j in range(sum(k.startswith("leaf_") for k in z.files))]
    return [KeptRound(int(t), [leaf[i] for leaf in leaves]) for i, t in enumerate(z["t_done"])]


class PhaseTimer:
    """Keeps the inputs of ``policy``'s act and update at sampled rounds of a simulation of ``env`` over ``seeds``
    (not a grid: the run a timing belongs to is simulated in a batch of one), for :func:`time_phases` to time.

    Call it with each :class:`~nlbandit.core.simulate.SimProgress` of the simulation (or its :class:`KeptRound`,
    kept where the simulation ran): each call made before the horizon (round t + 1 must exist) keeps one round;
    :attr:`samples` collects a :class:`PhaseSample` per kept round once timed; :attr:`rows` is the
    :class:`PhaseRows` its timed calls compute, at least ``min_rows`` per phase.
    """

    def __init__(self, env: Env, policy: Policy, params: Any, seeds, horizon: int, repeats: int = 5,
                 min_rows: PhaseRows = PhaseRows()):
        self.horizon, self.repeats = horizon, repeats
        self.params = to_dtype(as_params(policy.meta.params_type, params), policy.meta.dtype)
        self.keys = jax.vmap(seed_keys)(jnp.asarray(np.asarray(list(seeds), np.uint32)))
        self.n_seeds = int(self.keys.policy_act.shape[0])
        self.rows = min_rows.of_seeds(self.n_seeds)  # of a timed call: whole copies of the seeds' rows
        self.env_states = jax.jit(jax.vmap(env.reset))(self.keys.env_reset)
        self.treedef = jax.tree.structure(jax.eval_shape(policy.init, self.params, self.keys.policy_init[0]))
        self.kept: list[tuple[jax.Array, tuple, tuple]] = []  # (t, act's, update's inputs but the keys) per round
        self.samples: list[PhaseSample] = []

        # The round's casts happen outside the timed act and update, once per round as in the engine, so the two
        # phases time the policy alone (the cast of an already cast array is no operation).
        def observe(keys, env_state, t):
            contexts, mask = one_round.observe(env, env_state, keys, t)
            return to_dtype(contexts, policy.meta.dtype), mask, contexts

        def pull(keys, env_state, t, contexts, arm):
            return to_dtype(one_round.pull(env, env_state, keys, t, contexts, arm), policy.meta.dtype)

        def act(params, keys, state, seen, mask, t):
            return one_round.act(policy, params, state, keys.policy_act, seen, mask, t)[0]

        def update(params, keys, state, seen, arm, feedback, t):
            return one_round.update(policy, params, state, keys.policy_update, seen, arm, feedback, t)

        self._observe = jax.jit(jax.vmap(observe, in_axes=(0, 0, None)))
        self._pull = jax.jit(jax.vmap(pull, in_axes=(0, 0, None, 0, 0)))
        self._act = jax.jit(jax.vmap(act, in_axes=(None, 0, 0, 0, 0, None)))
        self._update = jax.jit(jax.vmap(update, in_axes=(None, 0, 0, 0, 0, 0, None)))

    def seconds_per_row(self, phase: str, i: int) -> float:
        """The median seconds of ``repeats`` calls of ``phase`` ('select' or 'update') on the inputs of the
        ``i``-th kept round, its seeds' rows repeated to :attr:`rows`, over those rows (after a first call, which
        compiles on the first round)."""
        fn, n_rows = (self._act, self.rows.select) if phase == "select" else (self._update, self.rows.update)
        t, *batched = self.kept[i]
        rows = jax.tree.map(lambda a: jnp.concatenate([a] * (n_rows // self.n_seeds)),
                            (self.keys, *batched[0 if phase == "select" else 1]))
        jax.block_until_ready(fn(self.params, *rows, t))
        times = []
        for _ in range(self.repeats):
            t0 = time.perf_counter()
            jax.block_until_ready(fn(self.params, *rows, t))
            times.append(time.perf_counter() - t0)
        return statistics.median(times) / n_rows

    def __call__(self, progress) -> jax.Array | None:
        """Keep round ``progress.t_done + 1``'s inputs, from the states after ``progress.t_done`` rounds; return
        the arms ``act`` chose there, per seed (the engine's choices of that round), or None after the horizon."""
        t = progress.t_done + 1
        if t > self.horizon:
            return None
        states = jax.tree.unflatten(self.treedef, [jnp.asarray(a) for a in progress.policy_state])
        tt = jnp.asarray(t)  # the engine's round counter: JAX's default integer
        seen, mask, contexts = self._observe(self.keys, self.env_states, tt)
        arms = self._act(self.params, self.keys, states, seen, mask, tt)
        feedback = self._pull(self.keys, self.env_states, tt, contexts, arms)
        self.kept.append((tt, (states, seen, mask), (states, seen, arms, feedback)))
        return arms


def time_phases(timers: Sequence[PhaseTimer]) -> None:
    """Time the kept rounds of ``timers`` in one session (module doc), filling each one's ``samples`` (one
    :class:`PhaseSample` per kept round; the i-th rounds of all timers are timed together): at the i-th round, the
    selections of every timer in turn, starting with timer i mod n, then their updates in the same order. The
    timed calls run under :func:`heap_allocations`."""
    timers = list(timers)
    for timer in timers:
        timer.samples = []
    with heap_allocations():
        for i in range(max((len(timer.kept) for timer in timers), default=0)):
            first = i % len(timers)
            turn = [timer for timer in timers[first:] + timers[:first] if i < len(timer.kept)]
            select = {id(timer): timer.seconds_per_row("select", i) for timer in turn}
            update = {id(timer): timer.seconds_per_row("update", i) for timer in turn}
            for timer in turn:
                timer.samples.append(PhaseSample(int(timer.kept[i][0]), select[id(timer)], update[id(timer)]))
