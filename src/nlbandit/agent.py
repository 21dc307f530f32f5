"""The online agent: one decision at a time, rewards whenever they arrive, state that survives a restart.

:class:`Agent` drives a registered policy the way a recommendation or experimentation service does::

    agent = nb.Agent("lin-ucb", d=20, k=50, seed=0)  # horizon: optional (below)
    decision = agent.decide(contexts)            # (K, d) features of the arms on offer
    agent.reward(decision.event_id, 1.0)         # later, in any order, once per event
    agent.save("agent.npz"); agent = nb.Agent.load("agent.npz")

Every decision gets an event id (its round number, 1, 2, …, or counted from ``first_event_id``); its contexts and
arm are kept until its reward arrives, and the reward is then learnt with the update of that round (the policy's
``update`` with the round's key and round number), so rewards may come late, out of order and in batches. An event
is learnt exactly once: a reward for an event id that was never issued, or that was already rewarded, is an error
that changes nothing.

Randomness follows :mod:`nlbandit.core.keys`: a seed's policy streams and round keys are the simulator's,
so with rewards given back in order, the agent makes the decisions that
:func:`~nlbandit.core.simulate.simulate` makes with the same seed on the same contexts and rewards.

Probabilities. ``Decision.probability`` is the probability with which the policy chose the arm given
the history and the round's contexts: exact where the policy computes it (``ActInfo.probability``:
uniform, greedy and UCB rules, ε-greedy, finite ensembles, planned warm-up pulls); for Thompson-type
policies on a host round (Lin-TS, GLM-TSL, GLM-FPL with the identity link), whose scores given the history
are Gaussian, estimated from one vectorised block of antithetic draws of that law, each integrated exactly
along the chosen arm's direction, in the compiled call that makes the choice
(:attr:`~nlbandit.host.rounds.HostRound.estimate`, :mod:`nlbandit.host.propensity`; ``estimate_draws`` = 64 by
default);
otherwise estimated by redrawing the round's decision ``estimate_draws`` times (1,000 by default) with
independent keys (perturbed history, the jitted rounds); ``Decision.method`` says which, with the estimate's
standard error. The draws use a key stream of their own, so they change no decision. Where the exploration is
drawn by the update (``PolicyEntry.draws_in_update``: GLM-TSL's sample, GLM-FPL's and repGLM-FPL's perturbed
fits), each redraw first redoes that draw (``PolicyEntry.resample``) — redrawing the decision alone would report
1 — and a host round's score law is that of the update's draw; DeepFPL and Neural-PHE, whose networks were
trained on random targets, get no estimate (NaN, and the method says why). Learnt models themselves count as
history: an ensemble's probability is exact over its member draw given the members, and a network's given its
weights (whatever minibatches trained them).

Host rounds. For ``uniform``, ``greedy``, ``eps-greedy``, ``lin-ucb``, ``lin-ts``, ``lin-es``, and ``glm-ucb``,
``ucb-glm``, ``glm-tsl`` and ``glm-fpl`` with per-arm statistics, Newton and a constant width or scale, and
``glm-es`` with per-arm statistics and ``solver="ensemble-newton"``, or its default gradient descent with the
identity link (:func:`nlbandit.host.host_rounds`), the
agent decides and learns in float64 on the host, on NumPy arrays, its loops compiled by numba
(:mod:`nlbandit.host`): the same state, formulas and random draws as the jitted policy, without the ~20 µs that
launching any XLA program costs per call; ``numpy_round=False`` runs the jitted round instead.
Decisions are the same either way except where two arms' scores differ by less than rounding.

Horizon-free. Without a ``horizon`` the agent is built for ``INITIAL_HORIZON`` decisions and, when a decision
would pass it, rebuilds its policy for twice the horizon and carries its state over (every array as it is,
a history buffer into the first rows of the larger one): nothing learnt is lost, a policy whose confidence
radius depends on T (a theory width) uses the doubled T from then on (the doubling trick on T, without the
restarts), and the rebuild costs one compilation of the jitted round at each doubling. Each decision's
``method`` says so. With rewards in order it decides as an agent built for a horizon ≥ the decisions made
wherever T enters only the buffer's size.

Compiled functions are cached per policy object, and :func:`~nlbandit.policies.registry.make_policy`
returns one object per (name, sizes, static hyperparameters): a second agent of the same policy and
shapes compiles nothing.

Threads. An agent may be shared by threads: its calls (``decide``, ``decide_batch``, ``reward``,
``counterfactual``, ``save``) run one at a time under a lock of its own; :meth:`Agent.learn` takes only the
learning lock, so a training thread does not hold decisions up.

Saved agents (:meth:`Agent.save`) are one ``.npz`` file, written atomically (a temporary file in the
same folder, then renamed), holding a JSON header (format and version, the policy's resolved
configuration, sizes, seed, round counter, pending events) and the state's arrays. :meth:`Agent.load`
refuses a file of another format version, a truncated or foreign file, and a state whose arrays do not
match what the policy builds now, each with a message saying so.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
import os
import threading
import zipfile
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.arguments import MAX_INT, check_sizes, integer, plain
from nlbandit.atomic import write_npz
from nlbandit.core.hyper import ConfigError
from nlbandit.core import round as one_round
from nlbandit.core.keys import seed_keys
from nlbandit.core.memory import check_memory
from nlbandit.core.round import round_key
from nlbandit.core.types import Feedback, Policy, ProblemSpec, healthy, to_dtype
from nlbandit.discovery import declaring_modules
from nlbandit.host import host_round
from nlbandit.host.checks import all_finite, equal, within
from nlbandit.host.draws import DrawBlocks
from nlbandit.host.normals import standard_normals
from nlbandit.policies.registry import (build_policy, build_resample, check_policy_sizes, policy_entry, policy_memory,
                                        resolve_policy)
from nlbandit.precision import require_x64

FORMAT = "nlbandit-agent"
"""The ``format`` field of a saved agent's header."""
VERSION = 1
"""The version of the saved-agent format this code writes and reads."""
_ESTIMATE_STREAM = 6
"""Index of the probability estimates' stream under the seed (the simulator uses 0–5): the redraws' key under the
seed's root key, and the host estimates' normals (:func:`nlbandit.host.normals.standard_normals`)."""
REDRAWS = 1000
"""The default number of redraws of a decision that estimate its probability (no Gaussian law on the host)."""
GAUSSIAN_DRAWS = 64
"""The default number of draws (32 antithetic pairs) of a host round's Gaussian score law that estimate its
probability (:mod:`nlbandit.host.propensity`): at d = 20, K = 50 a round with it costs 1.4–1.7× one without
(``benchmarks/agent.py``, 2026-11-26 21:35: 7.5–15 µs more, with the score law's own computation); its standard
error is about that of the 128 antithetic indicator draws used before (within 15%) where the probability is above
0.5, and 1.6–5.5 times smaller where it is below 0.1, which is where inverse-propensity weights need it (300
repeated estimates at five rounds of ``benchmarks/agent.py``'s problem, Lin-TS, GLM-TSL, GLM-FPL; 2026-11-26)."""
MAX_DRAWS = 100_000
"""The most draws per decision an agent takes to estimate a probability (``estimate_draws``): a decision's draws
are held at once (k numbers each), and beyond the defaults' 64 or 1,000 they buy little (the standard error of a
redrawn probability is at most 1/(2√draws): 0.0016 at this bound)."""
AGENT_OPTIONS = ("horizon", "seed", "estimate_draws", "numpy_round", "first_event_id", "check_unread")
"""The :class:`Agent`'s own keyword arguments beside its policy's hyperparameters (a service takes the first two as
fields of an agent's configuration and sets the others itself)."""
MAX_EVENT_ID = 2**52
"""The largest first event id an agent takes (event ids stay exact in JSON's doubles for 2**52 decisions more)."""
INITIAL_HORIZON = 1024
"""The horizon a horizon-free agent (``horizon=None``) is first built for; it doubles whenever reached."""
MAX_MAGNITUDE = 1e6
"""The largest magnitude of a context entry, a reward or a variance bound the agent accepts: squares and sums of
squares of such values over millions of rounds stay far inside float32 and float64 (larger values overflowed
the statistics of the linear and GLM policies and stopped every later decision); standardise the features."""


class UnknownEvent(ValueError):
    """A reward for an event id that this agent never issued."""


class RepeatedReward(ValueError):
    """A reward for an event that was already rewarded (an event is learnt once)."""


class PolicyDiverged(RuntimeError):
    """The policy's state is no longer finite (a network whose training diverged): the agent makes no more
    decisions, as :func:`~nlbandit.core.simulate.simulate` stops such a run."""


class Decision(NamedTuple):
    """One decision.

    Attributes:
      event_id: the id to give back with the reward: the decision's round number, from 1 (from the agent's
        ``first_event_id``).
      arm: index of the chosen arm in the round's contexts.
      probability: the probability of choosing ``arm`` (module docstring), NaN when ``method`` is ``"none"``.
      method: ``"exact"``; ``"estimate: N redraws, se S"``; or ``"none"`` (no exact value and no redraws).
      score: the chosen arm's value under the policy's rule (UCB index, sampled mean, ...), NaN if none.
      bonus: the exploration part of ``score``, NaN where the policy has no separate point estimate.
    """

    event_id: int
    arm: int
    probability: float
    method: str
    score: float
    bonus: float


class _Programs(NamedTuple):
    """The jitted pieces of one policy object."""

    init: Any
    prepare: Any
    act: Any
    act_batch: Any
    update: Any
    update_act: Any
    redraw: Any


@functools.lru_cache(maxsize=64)
def _programs(policy: Policy, draws: int, redo: Callable | None) -> _Programs:
    """Compiled ``init``/``prepare``/``act``/``update`` of ``policy`` (round keys derived inside), and the
    ``draws``-fold redraw of a decision (first redoing the update's draw with ``redo``, its entry's
    :attr:`~nlbandit.policies.entry.PolicyEntry.resample`, where asked); one set per policy object (module
    docstring)."""

    def prepare(params, state, stream, arms, mask):
        return one_round.prepare(policy, params, state, stream, arms, mask)

    def act(params, state, stream, contexts, mask, t):  # one float64 vector, so one transfer to the host: the
        arm, info = one_round.act(policy, params, state, stream, contexts, mask, t)  # arm, ActInfo, healthy
        return jnp.stack([arm.astype(jnp.float64), *(v.astype(jnp.float64) for v in info),
                          healthy(state).astype(jnp.float64)])

    def update(params, state, stream, contexts, arm, reward, bound, t):
        return one_round.update(policy, params, state, stream, contexts, arm, Feedback(reward, bound), t)

    def update_act(params, state, streams, learn, contexts, mask, t):  # one dispatch for a round's reward and
        state = update(params, state, streams[0], *learn)               # the next decision
        return state, act(params, state, streams[1], contexts, mask, t)

    def redraw(params, state, stream, contexts, mask, t, resample):
        keys = jax.random.split(round_key(stream, t), draws)
        seen = to_dtype(contexts, policy.meta.dtype)

        def decide(key):
            if not resample:
                return policy.act(params, state, key, seen, mask, t)[0]
            k_state, k_act = jax.random.split(key)
            return policy.act(params, redo(params, state, k_state), k_act, seen, mask, t)[0]

        arms = jax.vmap(decide)(keys)
        return jnp.zeros(contexts.shape[0], jnp.int32).at[arms].add(1)

    return _Programs(jax.jit(policy.init), None if policy.prepare is None else jax.jit(prepare), jax.jit(act),
                     jax.jit(jax.vmap(act, in_axes=(None, None, None, 0, 0, 0))), jax.jit(update),
                     jax.jit(update_act, donate_argnums=1),
                     jax.jit(redraw, static_argnums=6) if draws else None)


def _serialised(method: Callable) -> Callable:
    """``method`` run under the agent's call lock: an agent shared by threads (a threaded web server) makes one
    call at a time, so no two decisions get the same event id and no reward is learnt twice."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with self._calls:
            return method(self, *args, **kwargs)
    return call


class Agent:
    """A registered policy as an online agent (module docstring).

    Args:
      policy: a registered policy name (``nlbandit list``), e.g. ``"lin-ucb"``, ``"glm-es"``.
      d: feature dimension of an arm.
      k: the most arms offered in a round (fewer through ``mask``).
      horizon: the number of decisions the agent is built for; policies that keep a history buffer hold this
        many observations and refuse decisions beyond it, the others only use it where their confidence
        radii depend on T. None (the default): horizon-free, the module docstring's anytime form.
      seed: the seed of the agent's random streams (the simulator's streams of that seed).
      estimate_draws: draws per decision that estimate the probability where the policy has no exact one (0:
        report NaN with method ``"none"``); None: :data:`GAUSSIAN_DRAWS` on a host round's Gaussian score law,
        else :data:`REDRAWS` redraws (module docstring).
      numpy_round: decide and learn on the host where the policy has a host round (module docstring); False:
        always the jitted round.
      first_event_id: the event id of the first decision (later ones count on from it): a service gives each of
        its agents a block of ids of its own, so that a reward sent to another agent, or a late one for a removed
        agent's event, is refused rather than learnt for another decision (:mod:`nlbandit.service.fleet`).
      check_unread: refuse a hyperparameter set where the configuration does not read it
        (:mod:`nlbandit.policies.reads`); False restores an agent configured before that check (a service).
      **hyperparameters: the policy's hyperparameters, as in :func:`~nlbandit.policies.registry.make_policy`;
        those not given take the agent's practice defaults (:func:`agent_defaults`), else the registered ones.

    Raises:
      ConfigError: an unknown policy or hyperparameter, a value out of its range, or sizes, horizon or seed
        that are not integers in range.
    """

    def __init__(self, policy: str, d: int, k: int, horizon: int | None = None, seed: int = 0, *,
                 estimate_draws: int | None = None, numpy_round: bool = True, first_event_id: int = 1,
                 check_unread: bool = True, **hyperparameters: Any):
        require_x64("Agent")
        _check_fields("Agent", d=d, k=k, horizon=INITIAL_HORIZON if horizon is None else horizon, seed=seed,
                      estimate_draws=estimate_draws, numpy_round=numpy_round, first_event_id=first_event_id)
        spec = ProblemSpec(int(d), int(k), INITIAL_HORIZON if horizon is None else int(horizon))
        known = {h.name for h in policy_entry(policy, f"Agent policy '{policy}'", field="policy").hypers}
        unknown = sorted(set(hyperparameters) - known)
        if unknown:
            raise ConfigError(f"Agent: unknown argument '{unknown[0]}'; the Agent's own are "
                              f"{', '.join(AGENT_OPTIONS)}, and policy "
                              f"'{policy}' takes {', '.join(sorted(known)) or 'no hyperparameters'}")
        config = agent_policy(policy, plain(hyperparameters), spec, f"Agent policy '{policy}'", check_unread)
        self._setup(config, spec, int(seed), None if estimate_draws is None else int(estimate_draws), numpy_round,
                    horizon is None, int(first_event_id))
        self._state = self._host_state(self._programs.init(self._params, self._keys.policy_init))
        if not _finite(jax.tree.leaves(self._state)):
            given = ", ".join(f"{name}={value!r}" for name, value in hyperparameters.items()) or "the defaults"
            raise ConfigError(f"Agent policy '{policy}': its initial state is not finite with {given} (a value beyond "
                              "float64's range: e.g. lam = 1e-320 makes V⁻¹ = I/λ infinite); choose them nearer 1")

    def _setup(self, config: dict[str, Any], spec: ProblemSpec, seed: int, draws: int | None, numpy_round: bool,
               horizon_free: bool, first_event_id: int) -> None:
        self.seed, self._asked_draws, self.horizon_free = seed, draws, horizon_free
        self.first_event_id = first_event_id
        self._base = first_event_id - 1  # event id = round number + _base
        self._keys = seed_keys(jnp.uint32(seed))
        self._estimate_key = jax.random.fold_in(jax.random.key(jnp.uint32(seed)), _ESTIMATE_STREAM)
        self._build(config, spec, numpy_round)
        self._t = 0
        self._pending: dict[int, tuple[Any, int]] = {}  # event id -> (its contexts (host copy), arm)
        self._owed: list[tuple] = []  # checked rewards not yet learnt: (contexts, arm, reward, bound, t)
        self._learnt_upto = 0  # the round number of the reward learnt last
        self._learnt = 0  # rewards learnt into the state
        self._decided_with = 0  # rewards learnt into the state the last decision used (decided_with)
        self._lock = threading.RLock()  # serialises learning (a service may learn in a thread of its own)
        self._calls = threading.RLock()  # serialises the calls (_serialised); taken before _lock, never after
        self._host_ok = True  # whether the host round's state is finite (checked after each update)
        self._checked: list = []  # the leaves of the host state last checked finite
        self._rewarded = 0
        self.meta: dict[str, Any] = {}
        self._arms: np.ndarray | None = None  # round 1's arm set (``prepare``; fixed-arm policies)
        self._all_arms = np.ones(spec.k, bool)
        self._all_arms.flags.writeable = False

    def _build(self, config: dict[str, Any], spec: ProblemSpec, numpy_round: bool) -> None:
        """The policy of ``config`` for ``spec`` and what runs it (host round, compiled programs)."""
        check_memory(policy_memory(config, spec, 1), f"an agent of policy '{config['name']}' (d = {spec.d}, "
                     f"k = {spec.k}, horizon = {spec.horizon})", "Agent")
        self.config, self.spec = config, spec
        self.policy, params = build_policy(config, spec)
        self._params = to_dtype(params, self.policy.meta.dtype)
        self._host = host_round(self.policy, config) if numpy_round else None
        if self._host is not None:
            self._host_params = jax.tree.map(float, jax.device_get(self._params))
            self._act_draws = _draw_blocks(self._host.act_draws, self._keys.policy_act)
            self._update_draws = _draw_blocks(self._host.update_draws, self._keys.policy_update)
        self._resample = build_resample(config, spec)
        self._draws_in_update = policy_entry(config["name"]).draws_in_update  # looked up once, not per decision
        if self._asked_draws is not None:
            self.estimate_draws = self._asked_draws
        else:
            self.estimate_draws = GAUSSIAN_DRAWS if self._host is not None and self._host.estimate else REDRAWS
        self._programs = _programs(self.policy, self.estimate_draws, self._resample)

    def _grow(self, rounds: int) -> None:
        """Rebuild a horizon-free agent's policy for the horizon doubled until it covers ``rounds`` decisions,
        keeping everything it has learnt: each state array is carried over, a history buffer into the first
        rows of the larger one (module docstring); under the learning lock, so that no training thread updates
        the state being carried over."""
        with self._lock:
            self._grow_locked(rounds)

    def _grow_locked(self, rounds: int) -> None:
        self._learn()
        horizon = self.spec.horizon
        while horizon < rounds:
            horizon = min(2 * horizon, MAX_INT)  # (the most a saved agent's horizon may be: int32 rounds)
        spec, where = self.spec._replace(horizon=horizon), f"Agent policy '{self.config['name']}'"
        old = self._state
        kept = self._host_caches()
        self._build(check_policy_sizes(self.config, spec, where), spec, self._host is not None)
        fresh = self._programs.init(self._params, self._keys.policy_init)
        if jax.tree.structure(old) != jax.tree.structure(fresh):
            raise ConfigError(f"{where}: its state changes structure with the horizon; give the agent a horizon")
        self._state = self._host_state(jax.tree.map(_carry_over, old, fresh))
        if all(np.shape(a) == np.shape(b) for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(fresh))):
            self._restore_caches(kept)  # (the same state: what the old round derived from it holds)

    def _host_caches(self) -> list[np.ndarray | None]:
        """The values the host round keeps for the current state (:attr:`~nlbandit.host.rounds.HostRound.caches`:
        e.g. a Gram factor updated by rank-one steps, whose last bits depend on the path), None where it keeps
        none or not a float array."""
        if self._host is None:
            return []
        values = [cache.kept(self._state) for cache in self._host.caches]
        return [v if isinstance(v, np.ndarray) and v.dtype == np.float64 else None for v in values]

    def _restore_caches(self, values: list[np.ndarray | None]) -> None:
        """Give the host round the values ``_host_caches`` returned (a rebuilt or loaded agent's), so that it
        continues as the round that kept them, to the bit; each is checked against the state at its first use
        (:meth:`~nlbandit.host.rounds.LastState.restore`)."""
        if self._host is not None and len(values) == len(self._host.caches):
            for cache, value in zip(self._host.caches, values):
                if value is not None:
                    cache.restore(self._state, value)

    def _host_state(self, state: Any) -> Any:
        """``state`` as the agent keeps it: NumPy leaves for a host round (writable copies, as every state a host
        update returns: numba compiles a function once per argument type, read-only arrays being another type,
        so the initial state's read-only views would compile each learning step twice), else as given."""
        return state if self._host is None else jax.tree.map(np.array, jax.device_get(state))

    def __repr__(self) -> str:
        """The policy, sizes, horizon, seed and counts, then the resolved hyperparameters, e.g. ``<Agent 'lin-ucb'
        d=20 k=50 horizon-free (built for T = 1024) seed=0: 1000 decisions, 998 rewarded, 2 pending; alpha=1.0,
        ...>``."""
        horizon = f"horizon-free (built for T = {self.spec.horizon})" if self.horizon_free else \
            f"horizon={self.spec.horizon}"
        hyper = ", ".join(f"{name}={value!r}" for name, value in self.config.items() if name != "name")
        return (f"<Agent {self.config['name']!r} d={self.spec.d} k={self.spec.k} {horizon} seed={self.seed}: "
                f"{self.rounds} decisions, {self.rewarded} rewarded, {len(self._pending)} pending"
                + (f"; {hyper}" if hyper else "") + ">")

    @property
    def _anytime(self) -> str:
        """What a horizon-free agent adds to each decision's ``method``."""
        return f"; horizon-free: built for T = {self.spec.horizon}, doubled when reached" if self.horizon_free else ""

    @property
    def numpy_round(self) -> bool:
        """Whether this agent decides and learns on the host, not by XLA programs (module docstring)."""
        return self._host is not None

    @property
    def rounds(self) -> int:
        """Decisions made so far (the last event id issued is ``first_event_id - 1 + rounds``)."""
        return self._t

    @property
    def rewarded(self) -> int:
        """Rewards accepted so far, learnt or still owed (each event at most once; :attr:`learnt`: those learnt)."""
        return self._rewarded

    @property
    def pending(self) -> list[int]:
        """Event ids decided but not yet rewarded, in increasing order."""
        return sorted(self._pending)

    @property
    def state(self) -> Any:
        """A host copy of the policy's current state (a pytree of NumPy arrays, the agent's own arrays
        untouched by changes to it)."""
        with self._lock:  # (a decision that learns donates the state it replaces, under this lock: copied here)
            self._learn_locked(False, None)
            return jax.device_get(self._state) if self._host is None else jax.tree.map(np.array, self._state)

    @property
    def learnt(self) -> int:
        """Rewards learnt into the state so far (``rewarded`` counts those accepted, learnt or still owed)."""
        return self._learnt

    @property
    def decided_with(self) -> int:
        """Rewards learnt into the state the last decision (or batch) used: with ``learn=False`` and a training
        thread, :attr:`learnt` may have moved on by the time the call returns, this has not (a service journals
        it with the decision, so that a replay learns exactly those first)."""
        return self._decided_with

    def learn(self, upto: int | None = None) -> int:
        """Learn the rewards given so far (or the first of them until :attr:`learnt` is ``upto``) now, and wait
        until the state is updated; return how many. :meth:`decide` learns them anyway (the jitted round in one
        program with the decision) unless told not to; a service calls this when idle, or in a thread of its
        own while decisions go on with the state before it (``decide(..., learn=False)``): the new state is
        swapped in whole when its update is done, and calls are serialised by a lock."""
        before = self._learnt
        self._learn(upto=upto)
        while True:  # (a decision that learns, in another thread, may donate this state meanwhile: its successor)
            state = self._current()[0]
            try:
                jax.block_until_ready(state)
                return self._learnt - before
            except RuntimeError:  # (JaxRuntimeError, or jax's own for an array deleted)
                if not any(leaf.is_deleted() for leaf in jax.tree.leaves(state) if isinstance(leaf, jax.Array)):
                    raise

    def _learn(self, keep_last: bool = False, upto: int | None = None) -> tuple | None:
        """Learn the rewards given since the last decision, in the order given (until :attr:`learnt` is
        ``upto``); with ``keep_last``, all but the last, which is returned (as the arguments of ``update``) to
        be learnt in one dispatch with the next decision."""
        with self._lock:
            return self._learn_locked(keep_last, upto)

    def _learn_locked(self, keep_last: bool, upto: int | None) -> tuple | None:
        last = self._owed.pop() if keep_last and self._owed and self._host is None else None
        learnt = False
        while self._owed and (upto is None or self._learnt < upto):  # each reward leaves the queue once its
            if self._host is not None:  # update is applied: learnt once, even if a later update raises
                x, arm, reward, _, t = self._owed[0]
                draws = None if self._update_draws is None else self._update_draws(t)
                self._state = self._host.update(self._host_params, self._state, draws, x, arm, reward, t)
            else:  # the state before stays valid (no donation) for decisions made meanwhile in another thread
                self._state = self._programs.update(self._params, self._state, self._keys.policy_update,
                                                    *self._owed[0])
            self._learnt_upto = self._owed.pop(0)[-1]
            self._learnt += 1
            learnt = True
        if learnt and self._host is not None:
            leaves = jax.tree.leaves(self._state)
            self._host_ok = _finite(leaves, self._checked)
            self._checked = leaves if self._host_ok else []  # (a non-finite array carried over stays unchecked)
        return last

    def _current(self) -> tuple[Any, int]:
        """The state and the number of rewards learnt into it, read together: a training thread
        (:meth:`learn`) swaps the state whole and then counts it, so a decision that reads both once uses one
        state throughout and knows which."""
        with self._lock:
            return self._state, self._learnt

    def _check_health(self, ok: bool) -> None:
        """Refuse to decide with a state that is no longer finite (:class:`PolicyDiverged`)."""
        if not ok:
            raise PolicyDiverged(f"policy '{self.policy.meta.name}': its state is no longer finite after learning "
                                 f"the rewards up to event {self._learnt_upto + self._base} (a training that "
                                 "diverged: lower the learning rate, or standardise the features); this agent makes "
                                 "no more decisions")

    def _check_round(self, contexts: Any, mask: Any, where: str, first: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
        """``contexts`` and ``mask`` of a decision checked (ValueError naming ``where``) and as the agent keeps them;
        ``first``: the contexts of a batch's first decision, which a fixed-arm policy's first batch fixes."""
        k, d = self.spec.k, self.spec.d
        # copies of its own (kept until the reward, whatever the caller does), C-ordered and writable whatever the
        # caller's layout, so that the host round's numba functions see one argument type (one compilation each)
        x = _real_array(contexts, where)
        if x.shape != (k, d):
            fewer = x.ndim == 2 and x.shape[1] == d and x.shape[0] < k
            raise ValueError(f"{where}: contexts must have shape (k, d) = ({k}, {d}), got {x.shape}"
                             + ("; to offer fewer arms, pad the contexts to k rows and mask the extra ones out "
                                "(mask)" if fewer else ""))
        if not within(x, MAX_MAGNITUDE):  # (False for NaN too)
            raise ValueError(f"{where}: contexts must be finite numbers of magnitude at most {MAX_MAGNITUDE:g} "
                             f"(found {np.abs(x).max():g}); standardise the features")
        m = self._all_arms if mask is None else np.array(mask, order="C")
        if mask is not None and (m.shape != (k,) or m.dtype != bool):
            raise ValueError(f"{where}: mask must be a boolean array of shape ({k},), got {m.dtype} {m.shape}")
        if mask is not None and not m.any():
            raise ValueError(f"{where}: mask offers no arm (every entry False)")
        arms = self._arms if self._arms is not None else first
        if self.policy.meta.requires.fixed_arms and arms is not None and not equal(x, arms):
            raise ValueError(f"{where}: policy '{self.policy.meta.name}' keeps per-arm statistics of a fixed arm "
                             "set, but these contexts differ from the first decision's; use a policy for changing "
                             "contexts, or this policy's history form where it has one (the GLM policies: "
                             "backend='history' with warmup='none' or 'round-robin')")
        return x, m

    def _room(self, n: int, where: str) -> None:
        if self._t + n > MAX_INT:
            raise ValueError(f"{where}: this agent has made {self._t} decisions and makes at most {MAX_INT} (its "
                             "rounds are int32); start another agent to go on")
        if self.horizon_free and self._t + n > self.spec.horizon:
            self._grow(self._t + n)
        if self.policy.meta.max_horizon is not None and self._t + n > self.policy.meta.max_horizon:
            raise ValueError(f"{where}: policy '{self.policy.meta.name}' keeps a history of at most "
                             f"{self.policy.meta.max_horizon} observations (horizon {self.spec.horizon}); this agent "
                             f"has made {self._t} decisions. "
                             "Build the agent with a larger horizon")

    def _prepare(self, x: np.ndarray, m: np.ndarray) -> None:
        if self._arms is None:
            self._arms = x.copy()
            if self._programs.prepare is not None:
                self._state = self._host_state(self._programs.prepare(self._params, self._state,
                                                                      self._keys.policy_init, x, m))

    def _probability(self, p: float, x: np.ndarray, m: np.ndarray, t: int, arm: int,
                     state: Any) -> tuple[float, str]:
        if not math.isnan(p):
            return p, "exact"
        if not self.estimate_draws:
            return math.nan, "none"
        # after an update, a policy that draws while learning is redrawn through its resample
        resample = self._draws_in_update and self._rewarded > 0
        if resample and self._resample is None:
            return math.nan, (f"none: {self.policy.meta.name} draws its exploration while learning and has no "
                              "redraw of it")
        counts = np.asarray(self._programs.redraw(self._params, state, self._estimate_key, x, m, t, resample))
        q = counts[arm] / self.estimate_draws
        se = math.sqrt(q * (1 - q) / self.estimate_draws)
        return float(q), f"estimate: {self.estimate_draws} redraws, se {se:.2g}"

    def _estimates(self) -> bool:
        """Whether this round's probability comes from the host round's ``estimate`` (its Gaussian law): asked
        for, and, for a policy that draws while learning, after its first reward (before it, its draw is the
        initial state's, redrawn by the jitted program)."""
        return bool(self.estimate_draws) and self._host.estimate is not None and (
            self._rewarded > 0 or not self._draws_in_update)

    def _jit_act(self, x: np.ndarray, m: np.ndarray, t: int, learn: tuple | None,
                 state: Any) -> tuple[int, float, float, float]:
        """(arm, score, bonus, probability) of round ``t`` by the jitted policy on ``state``, after learning
        ``learn`` (the last owed reward, or None) in the same dispatch (which replaces, and donates, the agent's
        state: the caller holds the lock)."""
        if learn is None:
            out = self._programs.act(self._params, state, self._keys.policy_act, x, m, t)
        else:
            self._state, out = self._programs.update_act(self._params, state, (self._keys.policy_update,
                                                         self._keys.policy_act), learn, x, m, t)
            self._learnt_upto, self._learnt = learn[-1], self._learnt + 1
        arm, score, bonus, p, ok = np.asarray(out).tolist()
        self._check_health(ok)
        return int(arm), score, bonus, p

    def _host_act(self, x: np.ndarray, m: np.ndarray, t: int,
                  state: Any) -> tuple[int, float, float, float, str | None]:
        """(arm, score, bonus, probability, how it was estimated: None if it was not) of round ``t`` by the host
        round on ``state``."""
        self._check_health(self._host_ok)
        draws = None if self._act_draws is None else self._act_draws(t)
        mask = None if m is self._all_arms else m
        try:
            if self._estimates():
                pairs = max(self.estimate_draws // 2, 1)
                arm, score, bonus, p, se = self._host.estimate(self._host_params, state, draws, x, mask, t,
                                                               standard_normals(self.seed, _ESTIMATE_STREAM, t,
                                                                                self.spec.d, pairs))
                how = None if se is None else f"estimate: {2 * pairs} conditional Gaussian draws, se {se:.2g}"
                return arm, float(score), float(bonus), float(p), how
            arm, score, bonus, p = self._host.act(self._host_params, state, draws, x, mask, t)
        except ArithmeticError as e:  # (numba's division by zero on a non-finite width, an overflow)
            raise ValueError(f"policy '{self.policy.meta.name}': round {t}'s arithmetic failed ({type(e).__name__}: "
                             f"{e}) with hyperparameters {self.config}: a value beyond float64's range (a scale this "
                             "large, or a λ this small); choose them nearer 1") from None
        return arm, float(score), float(bonus), float(p), None

    @_serialised
    def decide(self, contexts: Any, mask: Any = None, *, learn: bool = True) -> Decision:
        """Choose an arm among ``contexts`` (K, d) (those with ``mask`` True; all by default) and return the
        :class:`Decision`; its contexts and arm are kept until :meth:`reward` gives its reward. With ``learn``
        False the rewards not yet learnt stay owed: the decision uses the state as it is (:meth:`learn`)."""
        x, m = self._check_round(contexts, mask, "decide")
        self._room(1, "decide")
        self._prepare(x, m)
        t = self._t + 1
        with self._lock if learn else contextlib.nullcontext():  # (learning: update_act donates the state)
            owed = self._learn_locked(True, None) if learn else None
            state, used = self._current()
            if self._host is None:
                (arm, score, bonus, p), how = self._jit_act(x, m, t, owed, state), None
                state, used = (state, used) if owed is None else (self._state, self._learnt)
            else:
                arm, score, bonus, p, how = self._host_act(x, m, t, state)
            p, method = (p, how) if how is not None else self._probability(p, x, m, t, arm, state)
        self._t, self._decided_with = t, used
        self._pending[t + self._base] = (x, arm)
        return Decision(t + self._base, arm, p, method + self._anytime, score, bonus)

    @_serialised
    def decide_batch(self, contexts: Any, masks: Any = None, *, learn: bool = True) -> list[Decision]:
        """Decisions for B rounds at once, ``contexts`` (B, K, d) (``masks`` (B, K)), all made with the
        current state (no reward in between), as B calls of :meth:`decide` without rewards would make them."""
        x = _real_array(contexts, "decide_batch")  # a C-ordered copy of its own, as in _check_round
        if x.ndim != 3 or x.shape[0] < 1:
            raise ValueError(f"decide_batch: contexts must have shape (B, k, d) with B >= 1, got {x.shape}")
        ms = [None] * x.shape[0] if masks is None else np.asarray(masks)
        if masks is not None and (ms.ndim != 2 or len(ms) != x.shape[0]):
            raise ValueError(f"decide_batch: masks must have shape (B, k) with one row per context set (B = "
                             f"{x.shape[0]}), got shape {np.shape(ms)}")
        rounds = [self._check_round(xi, mi, f"decide_batch[{i}]", x[0]) for i, (xi, mi) in enumerate(zip(x, ms))]
        self._room(len(rounds), "decide_batch")
        self._prepare(*rounds[0])
        if learn:
            self._learn()
        state, used = self._current()
        xs, mss = np.stack([r[0] for r in rounds]), np.stack([r[1] for r in rounds])
        ts = np.arange(self._t + 1, self._t + 1 + len(rounds))
        if self._host is not None:
            rows = [self._host_act(xi, mi, t, state) for xi, mi, t in zip(xs, mss, ts.tolist())]
        else:  # one vmapped program: its scores may differ from B decides' in the last bits (service replays
            # a batch as a batch, so its recovery sees the same numbers)
            rows = np.asarray(self._programs.act_batch(self._params, state, self._keys.policy_act, xs, mss,
                                                       ts)).tolist()
            self._check_health(all(row[4] for row in rows))
            rows = [(*row[:4], None) for row in rows]
        out = []
        for i, (t, (arm, score, bonus, p, how)) in enumerate(zip(ts.tolist(), rows)):
            p, method = (p, how) if how is not None else self._probability(p, xs[i], mss[i], t, int(arm), state)
            out.append(Decision(t + self._base, int(arm), p, method + self._anytime, score, bonus))
        self._t, self._decided_with = int(ts[-1]), used
        self._pending.update({d.event_id: (xs[i], d.arm) for i, d in enumerate(out)})
        return out

    @_serialised
    def counterfactual(self, contexts: Any, arm: int, mask: Any = None) -> tuple[int, np.ndarray]:
        """For off-policy evaluation: this round's probability of each arm under the policy, without deciding,
        then ``arm`` (chosen by another policy: a logged decision) recorded as the round's decision, kept until
        its reward like the agent's own. Returns (its event id, the (K,) probabilities: the frequencies of
        ``estimate_draws`` redraws of the decision, exact for a deterministic policy).

        Raises:
          ValueError: as :meth:`decide`; an ``arm`` that is not an available arm; ``estimate_draws`` = 0.
        """
        x, m = self._check_round(contexts, mask, "counterfactual")
        if not isinstance(arm, (int, np.integer)) or isinstance(arm, bool) or not 0 <= arm < self.spec.k or not m[arm]:
            raise ValueError(f"counterfactual: arm must be an available arm in 0..{self.spec.k - 1}, got {arm!r}")
        if not self.estimate_draws:
            raise ValueError("counterfactual: the probabilities are redraws; build the agent with estimate_draws >= 1")
        resample = self._draws_in_update and self._rewarded > 0
        if resample and self._resample is None:
            raise ValueError(f"counterfactual: {self.policy.meta.name} draws its exploration while learning and has "
                             "no redraw of it, so it has no probabilities to evaluate")
        self._room(1, "counterfactual")
        self._prepare(x, m)
        self._learn()
        t = self._t + 1
        counts = np.asarray(self._programs.redraw(self._params, self._state, self._estimate_key, x, m, t, resample))
        self._t = t
        self._pending[t + self._base] = (x, int(arm))
        return t + self._base, counts / counts.sum()

    @_serialised
    def reward(self, event_id: int | Sequence[int], value: float | Sequence[float],
               variance_bound: float | Sequence[float] | None = None) -> None:
        """Learn the reward ``value`` of decision ``event_id``, or of each of a sequence of them (then
        ``value`` a sequence of the same length). Policies that read a noise level need ``variance_bound``
        (the bound σ revealed with the reward). All of a batch is checked before any of it is learnt.

        Raises:
          UnknownEvent, RepeatedReward: (ValueErrors) an event id that was never issued, or that was already
            rewarded.
          ValueError: an event id twice in one batch, a reward that is not finite or outside the rewards the
            policy's model describes, a missing or unexpected ``variance_bound``; nothing is learnt then.
        """
        if isinstance(event_id, np.ndarray) and event_id.ndim == 0:
            event_id = event_id[()]
        batch = isinstance(event_id, (list, tuple, np.ndarray))
        if not batch and (not isinstance(event_id, (int, np.integer)) or isinstance(event_id, (bool, np.bool_))):
            raise ValueError("reward: event_id must be an integer, or a list, tuple or 1-D array of them, got "
                             f"{type(event_id).__name__} {event_id!r}")
        if batch and np.ndim(event_id) != 1:
            raise ValueError(f"reward: a batch of event ids must be 1-D, got shape {np.shape(event_id)}")
        ids = list(event_id) if batch else [event_id]
        values = _items(value) if batch else [value]  # (strings and booleans stay as given: refused below)
        if len(values) != len(ids):
            raise ValueError(f"reward: {len(ids)} event ids but {len(values)} values")
        needs_bound = self.policy.meta.requires.noise_level
        if needs_bound and variance_bound is None:
            raise ValueError(f"reward: policy '{self.policy.meta.name}' reads the noise level of each reward: give "
                             "variance_bound")
        if not needs_bound and variance_bound is not None:
            raise ValueError(f"reward: policy '{self.policy.meta.name}' does not read a noise level; omit "
                             "variance_bound")
        bounds = [None] * len(ids) if variance_bound is None else (
            _items(variance_bound) if batch else [variance_bound])
        if len(bounds) != len(ids):
            raise ValueError(f"reward: {len(ids)} event ids but {len(bounds)} variance bounds")
        low, high = self.policy.meta.requires.reward_range or (-math.inf, math.inf)
        seen = set()
        for e, v, b in zip(ids, values, bounds):
            if not isinstance(e, (int, np.integer)) or isinstance(e, bool):
                raise ValueError(f"reward: event id must be an integer, got {e!r}")
            if e in seen:
                raise ValueError(f"reward: event {e} is rewarded twice in this batch; nothing was learnt")
            if e not in self._pending:
                if self._base < e <= self._base + self._t:
                    raise RepeatedReward(f"reward: event {e} was already rewarded (pending: {len(self._pending)} "
                                         "events)")
                issued = f"{self._base + 1}..{self._base + self._t}" if self._t else "none yet"
                raise UnknownEvent(f"reward: event {e} was never issued (this agent has issued {issued})")
            seen.add(e)
            if not _real(v) or not abs(v) <= MAX_MAGNITUDE:
                raise ValueError(f"reward: value of event {e} must be a finite number of magnitude at most "
                                 f"{MAX_MAGNITUDE:g}, got {v!r}")
            if not low <= v <= high:
                raise ValueError(f"reward: value of event {e} is {v}, outside [{low}, {high}], the rewards policy "
                                 f"'{self.policy.meta.name}' models")
            if b is not None and (not _real(b) or not 0 <= b <= MAX_MAGNITUDE):
                raise ValueError(f"reward: variance_bound of event {e} must be a number in [0, {MAX_MAGNITUDE:g}], "
                                 f"got {b!r}")
        for e, v, b in zip(ids, values, bounds):
            x, arm = self._pending.pop(int(e))
            self._owed.append((x, arm, np.float64(v), None if b is None else np.float64(b), int(e) - self._base))
            self._rewarded += 1

    @_serialised
    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> Path:
        """Write the agent to ``path`` (a ``.npz`` file) atomically and return the path; ``meta``, a
        JSON-serialisable dict, is saved with it (:attr:`meta` of the loaded agent)."""
        if meta is not None and not isinstance(meta, dict):
            raise ValueError(f"Agent.save: meta must be a dict (JSON-serialisable), got {type(meta).__name__}")
        path = Path(path)
        leaves = jax.tree.leaves(self.state)
        arrays = {f"state_{i}": _plain(a) for i, a in enumerate(leaves)}
        ids = sorted(self._pending)
        if ids:
            arrays["pending_contexts"] = np.stack([np.asarray(self._pending[e][0]) for e in ids])
        if self._arms is not None:
            arrays["first_arms"] = self._arms
        arrays.update({f"host_cache_{i}": v for i, v in enumerate(self._host_caches()) if v is not None})
        header = {"format": FORMAT, "version": VERSION, "policy": _jsonable(self.config), "d": self.spec.d,
                  "k": self.spec.k, "horizon": self.spec.horizon, "horizon_free": self.horizon_free, "seed": self.seed,
                  "estimate_draws": self._asked_draws, "numpy_round": self.numpy_round, "rounds": self._t,
                  "rewarded": self._rewarded, "learnt_upto": self._learnt_upto, "meta": dict(meta or {}),
                  "first_event_id": self.first_event_id,
                  "pending": [[e - self._base, self._pending[e][1]] for e in ids], "state_leaves": len(leaves)}
        try:
            arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
        except (TypeError, ValueError) as e:
            raise ValueError(f"Agent.save: meta must be JSON-serialisable (numbers, strings, lists, dicts): {e}") \
                from None
        return write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Agent":
        """The agent saved at ``path``; ``ValueError`` naming the problem for a file that is missing,
        truncated, not a saved agent, of another format version, or whose state does not fit the policy."""
        arrays = _SavedArrays(Path(path))
        try:
            return cls._from_saved(arrays)
        finally:
            arrays.close()

    @classmethod
    def _from_saved(cls, arrays: "_SavedArrays") -> "Agent":
        """The agent of an open saved file (:meth:`load`)."""
        path = arrays.path
        try:
            header = json.loads(arrays.get("header", dtype=np.uint8).tobytes().decode())
            fmt, version = header.get("format"), header.get("version")
        except (KeyError, ValueError, AttributeError, RecursionError):  # (AttributeError: none, or not an object)
            raise ValueError(f"Agent.load: {path} has no saved-agent header; it is not a file Agent.save "
                             "wrote") from None
        if fmt != FORMAT:
            raise ValueError(f"Agent.load: {path} is not a saved agent (format {fmt!r}, expected {FORMAT!r})")
        if version != VERSION:
            raise ValueError(f"Agent.load: {path} was written in saved-agent format version {version}; this nlbandit "
                             f"reads version {VERSION} only. Load it with the nlbandit version that saved it")
        where = f"Agent.load: {path}: header"
        fields = {name: header.get(name) for name in ("d", "k", "horizon", "seed", "estimate_draws", "numpy_round")}
        fields["first_event_id"] = header.get("first_event_id", 1)
        try:
            _check_fields(where, **fields)
            spec = ProblemSpec(fields["d"], fields["k"], fields["horizon"])
            config = check_policy_sizes(resolve_policy(header.get("policy"), "Agent.load policy"), spec,
                                        "Agent.load policy")
            agent = cls.__new__(cls)
            horizon_free = header.get("horizon_free", False)
            if not isinstance(horizon_free, bool):
                raise ConfigError(f"{where}: field 'horizon_free' must be true or false, got {horizon_free!r}")
            agent._setup(config, spec, fields["seed"], fields["estimate_draws"], fields["numpy_round"], horizon_free,
                         fields["first_event_id"])
        except ConfigError as e:
            raise ValueError(f"Agent.load: {path}: the saved configuration does not resolve: {e}") from None
        template = jax.eval_shape(agent._programs.init, agent._params, agent._keys.policy_init)
        shapes = jax.tree.leaves(template)
        leaves = header.get("state_leaves")
        saved = [arrays.get(f"state_{i}", *_saved_form(s)) for i, s in enumerate(shapes)] if leaves == len(shapes) \
            else []
        if len(saved) != len(shapes) or any(a is None for a in saved):
            raise ValueError(f"Agent.load: {path}: the saved state does not match the state policy "
                             f"'{config['name']}' has in this nlbandit version (saved by an incompatible version)")
        if not _finite(saved):
            raise ValueError(f"Agent.load: {path}: the saved state holds NaN or infinite values")
        rounds, rewarded, pending, first_arms = _events(header, path, spec, arrays)
        agent._state = agent._host_state(jax.tree.unflatten(jax.tree.structure(template),
                                                            [_restore(a, s) for a, s in zip(saved, shapes)]))
        agent._t, agent._rewarded, agent._learnt = rounds, rewarded, rewarded
        agent._pending = {e + agent._base: event for e, event in pending.items()}
        agent._learnt_upto, agent.meta = header.get("learnt_upto", 0), header.get("meta", {})
        if not isinstance(agent._learnt_upto, int) or isinstance(agent._learnt_upto, bool) or \
                not 0 <= agent._learnt_upto <= rounds:
            raise ValueError(f"Agent.load: {path}: the header's 'learnt_upto' must be an integer in [0, rounds = "
                             f"{rounds}], got {agent._learnt_upto!r}")
        if not isinstance(agent.meta, dict):
            raise ValueError(f"Agent.load: {path}: the header's 'meta' must be an object, got {agent.meta!r}")
        agent._arms = first_arms
        if agent._host is not None:  # (a file without them, or with others, derives them afresh)
            at_most = sum(a.nbytes for a in saved)  # (a cache is computed from the state)
            caches = [arrays.get(f"host_cache_{i}", max_bytes=at_most) for i in range(len(agent._host.caches))]
            agent._restore_caches([np.array(a, np.float64, order="C") if a is not None and a.dtype == np.float64
                                   and np.isfinite(a).all() else None for a in caches])
        return agent


@functools.cache
def agent_defaults() -> dict[str, dict[str, Any]]:
    """The agent's practice defaults by policy name: what it sets where the caller sets nothing, instead of the
    registered defaults, which follow the papers (e.g. lin-ucb's OFUL theory width). Each family declares its own
    as ``AGENT_DEFAULTS`` in its ``nlbandit/policies/<family>_host.py``, with the measurements that chose them
    (``benchmarks/agent_defaults.py``); a caller's value, e.g. ``width="oful"``, always wins."""
    found: dict[str, dict[str, Any]] = {}
    for module in declaring_modules("nlbandit.policies", "AGENT_DEFAULTS"):
        found.update(module.AGENT_DEFAULTS)
    return found


def agent_policy(policy: str, hyperparameters: dict[str, Any], spec: ProblemSpec, where: str,
                 reads: bool = True) -> dict[str, Any]:
    """The resolved configuration of the policy that an :class:`Agent` of ``policy`` with ``hyperparameters`` runs
    for sizes ``spec``: the agent's practice defaults (:func:`agent_defaults`) where ``hyperparameters`` sets
    nothing, checked for those sizes (:func:`~nlbandit.policies.registry.check_policy_sizes`).

    Raises:
      ConfigError: naming the field (``where``): an unknown policy or hyperparameter, a value out of its range.
    """
    huge = [name for name, value in hyperparameters.items()
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**1024]
    if huge:  # (an HTTP body's JSON integer is unbounded: past float64's range it would overflow, not be refused)
        raise ConfigError(f"{where}: field '{huge[0]}' is an integer of {len(str(abs(hyperparameters[huge[0]])))} "
                          "digits, beyond float64's range (about 1.8e308)")
    given = {**agent_defaults().get(policy, {}), **hyperparameters}
    practice = [name for name in given if name not in hyperparameters]  # (the agent's choice, not the caller's)
    return check_policy_sizes(resolve_policy({"name": policy, **given}, where, reads=reads, unread=practice), spec,
                              where)


def _real(v: Any) -> bool:
    """Whether ``v`` is a real number as the HTTP API takes one: an integer or a float (not a boolean, a string or
    a complex number)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def _items(values: Any) -> list:
    """A batch's values as given, one per event: a list's or tuple's own elements (NumPy would turn a ``True``
    among floats into 1.0, which the HTTP API refuses), an array's or a scalar's (``np.atleast_1d``)."""
    return list(values) if isinstance(values, (list, tuple)) else list(np.atleast_1d(values))


def _real_array(contexts: Any, where: str) -> np.ndarray:
    """``contexts`` as a C-ordered float64 copy of the agent's own; ValueError unless they are real numbers (not
    booleans, strings or complex numbers, which the HTTP API refuses too) in rows of one length."""
    try:
        raw = np.asarray(contexts)
    except ValueError:  # (NumPy's "inhomogeneous shape")
        raise ValueError(f"{where}: contexts must be an array of real numbers with rows of one length (k rows of d "
                         "numbers), got rows of different lengths") from None
    if raw.dtype.kind not in "iuf":
        raise ValueError(f"{where}: contexts must be real numbers (not booleans, strings or complex ones), got "
                         f"dtype {raw.dtype}")
    return np.array(raw, np.float64, order="C")


def _check_fields(where: str, **fields: Any) -> None:
    """The agent's sizes, seed and options (the constructor's and a saved header's): ConfigError naming the field."""
    for name, low in (("d", 1), ("k", 1), ("horizon", 1), ("seed", 0), ("estimate_draws", 0)):
        value = fields[name]
        if name == "estimate_draws" and value is None:
            continue
        if not integer(value) or value < low:
            raise ConfigError(f"{where}: field {name!r} must be an integer >= {low}, got {value!r}")
    check_sizes(where, d=fields["d"], k=fields["k"], horizon=fields["horizon"])
    if fields["seed"] > 2**32 - 1:
        raise ConfigError(f"{where}: field 'seed' must be an integer in [0, 2**32 - 1], got {fields['seed']!r}")
    if fields["estimate_draws"] is not None and fields["estimate_draws"] > MAX_DRAWS:
        raise ConfigError(f"{where}: field 'estimate_draws' must be an integer in [0, {MAX_DRAWS}], got "
                          f"{fields['estimate_draws']!r}")
    if not isinstance(fields["numpy_round"], bool):
        raise ConfigError(f"{where}: field 'numpy_round' must be true or false, got {fields['numpy_round']!r}")
    first = fields["first_event_id"]
    if not integer(first) or not 1 <= first <= MAX_EVENT_ID:
        raise ConfigError(f"{where}: field 'first_event_id' must be an integer in [1, 2**52], got {first!r}")


class _SavedArrays:
    """The members of a saved agent's ``.npz`` file, open (a file replaced meanwhile is not mixed in): each
    member's declared shape and type read from its own header and checked against the bytes it holds when opened,
    its data read only when asked for (:meth:`get`), so that a member the agent does not read, or one declared
    other than the agent expects, is never allocated (a crafted file of huge or unknown members is refused or
    skipped, not read)."""

    def __init__(self, path: Path):
        if not path.exists():
            raise ValueError(f"Agent.load: no file {path}")
        if not path.is_file():
            raise ValueError(f"Agent.load: {path} is not a regular file")
        self.path, self._declared = path, {}
        self._zip: zipfile.ZipFile | None = None
        with self._reading():
            self._zip = zipfile.ZipFile(path)  # (it closes the file itself when it is not a zip)
            for info in self._zip.infolist():
                with self._zip.open(info) as f:
                    shape, fortran, dtype = self._header(f)
                    size = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if dtype.hasobject or f.tell() + size != info.file_size:
                        raise ValueError(f"member {info.filename!r} declares {size} bytes of {dtype} but holds "
                                         f"{info.file_size - f.tell()}")
                self._declared[info.filename.removesuffix(".npy")] = (info, tuple(shape), fortran, dtype, size)

    @staticmethod
    def _header(f: Any) -> tuple:
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        return read(f)

    @contextlib.contextmanager
    def _reading(self):
        try:
            yield
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, TypeError) as e:
            self.close()
            raise ValueError(f"Agent.load: {self.path} is not a readable saved agent (truncated or another kind of "
                             f"file: {e})") from None

    def __contains__(self, name: str) -> bool:
        return name in self._declared

    def get(self, name: str, shape: tuple | None = None, dtype: Any = None,
            max_bytes: int | None = None) -> np.ndarray | None:
        """Member ``name``'s array; None where there is none, or where it is declared of another ``shape`` or
        ``dtype`` than given, or larger than ``max_bytes`` (nothing read then)."""
        if name not in self._declared:
            return None
        info, declared, fortran, declared_dtype, size = self._declared[name]
        if (shape is not None and declared != tuple(shape)) or (dtype is not None and declared_dtype != dtype) \
                or (max_bytes is not None and size > max_bytes):
            return None
        with self._reading(), self._zip.open(info) as f:
            self._header(f)
            return np.frombuffer(f.read(size), declared_dtype).reshape(declared, order="F" if fortran else "C")

    def close(self) -> None:
        """Close the file."""
        if self._zip is not None:
            self._zip.close()
            self._zip = None


def _events(header: dict[str, Any], path: Path, spec: ProblemSpec, arrays: _SavedArrays) -> tuple:
    """(rounds, rewarded, pending, first arms or None) of a saved header and its arrays, checked: every decision is
    rewarded or pending, pending events are distinct decisions with an arm among k, and their contexts and the first
    decision's arms are finite (k, d) arrays."""
    rounds, rewarded, pending = header.get("rounds"), header.get("rewarded"), header.get("pending")

    def integer(v, low, high):
        return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high
    if not (integer(rounds, 0, 2**62) and integer(rewarded, 0, rounds) and isinstance(pending, list)
            and all(isinstance(p, list) and len(p) == 2 and integer(p[0], 1, rounds) and integer(p[1], 0, spec.k - 1)
                    for p in pending)
            and len({p[0] for p in pending}) == len(pending) == rounds - rewarded):
        raise ValueError(f"Agent.load: {path}: the header's rounds, rewarded and pending events are inconsistent "
                         "(every decision 1..rounds must be rewarded or pending once, with an arm in 0..k-1)")
    shapes = {"pending_contexts": (len(pending), spec.k, spec.d), "first_arms": (spec.k, spec.d)}
    read = {}
    for name, shape in shapes.items():
        if name not in arrays and (name == "first_arms" or not pending):
            continue
        read[name] = arrays.get(name, shape, np.float64)
        if read[name] is None or not np.isfinite(read[name]).all():
            raise ValueError(f"Agent.load: {path}: array {name!r} must be finite float64 of shape {shape}")
    contexts = read.get("pending_contexts")
    return rounds, rewarded, {e: (contexts[i], arm) for i, (e, arm) in enumerate(pending)}, read.get("first_arms")


def _carry_over(old: Any, fresh: Any) -> Any:
    """State array ``old`` in the shape of ``fresh``, the same array of a policy built for a longer horizon:
    unchanged where the shapes agree, else (a history buffer) in the first rows of ``fresh``."""
    old_shape, new_shape = np.shape(old), np.shape(fresh)
    if old_shape == new_shape:
        return old
    if len(old_shape) != len(new_shape) or old_shape[1:] != new_shape[1:] or old_shape[0] > new_shape[0]:
        raise ConfigError(f"Agent: a state array of shape {old_shape} becomes {new_shape} with the horizon, not a "
                          "longer buffer; give the agent a horizon")
    return jnp.asarray(fresh).at[:old_shape[0]].set(old)


def _finite(leaves: list, checked: list = ()) -> bool:
    """Whether every floating array of ``leaves`` (a state's) is finite, skipping those that are the very objects
    at the same place in ``checked`` (the leaves of the state last checked: a host round never changes a state's
    arrays in place, tests/test_host_rounds.py, so an array carried over unchanged was checked already)."""
    for a, before in itertools.zip_longest(leaves, checked[:len(leaves)]):
        if a is not before:
            a = a if isinstance(a, np.ndarray) else np.asarray(a)
            if a.dtype.kind == "f" and not all_finite(a):
                return False
    return True


def _draw_blocks(draws: Any, stream: jax.Array) -> DrawBlocks | None:
    """The draws of a host round's step from ``stream`` (None for a step that draws nothing)."""
    return None if draws is None else DrawBlocks(draws, stream)


def _plain(a: Any) -> np.ndarray:
    """A state leaf as a NumPy array (a PRNG key as its raw key data)."""
    if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(a))
    return np.asarray(a)


def _saved_form(template: Any) -> tuple[tuple, np.dtype]:
    """The shape and type that state leaf ``template`` is saved in (as :func:`_plain` writes it)."""
    expected = jax.eval_shape(jax.random.key_data, template) if jnp.issubdtype(template.dtype,
                                                                                jax.dtypes.prng_key) else template
    return tuple(expected.shape), np.dtype(expected.dtype)


def _restore(a: np.ndarray, template: Any) -> jax.Array:
    """Saved array ``a`` as the state leaf ``template`` describes (key data wrapped back into a key)."""
    if jnp.issubdtype(template.dtype, jax.dtypes.prng_key):
        return jax.random.wrap_key_data(jnp.asarray(a), impl=jax.random.key_impl(template))
    return jnp.asarray(a)


def _jsonable(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` with NumPy scalars and tuples made JSON values."""
    def plain(v):
        if isinstance(v, (np.generic,)):
            return v.item()
        if isinstance(v, tuple):
            return [plain(x) for x in v]
        return v
    return {key: plain(v) for key, v in config.items()}


__all__ = ["Agent", "Decision", "FORMAT", "RepeatedReward", "UnknownEvent", "VERSION"]
