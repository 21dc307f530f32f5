"""The online agent: one decision at a time, rewards whenever they arrive, state that survives a restart.

:class:`Agent` drives a registered policy the way a recommendation or experimentation service does::

    agent = nb.Agent("lin-ucb", d=20, k=50, horizon=10_000, seed=0)
    decision = agent.decide(contexts)            # (K, d) features of the arms on offer
    agent.reward(decision.event_id, 1.0)         # later, in any order, once per event
    agent.save("agent.npz"); agent = nb.Agent.load("agent.npz")

Every decision gets an event id (its round number, 1, 2, …); its contexts and arm are kept until its reward
arrives, and the reward is then learnt with the update of that round (the policy's ``update`` with the
round's key and round number), so rewards may come late, out of order and in batches. An event is learnt
exactly once: a reward for an event id that was never issued, or that was already rewarded, is an error
that changes nothing.

Randomness follows :mod:`nlbandit.core.keys`: a seed's policy streams and round keys are the simulator's,
so with rewards given back in order, the agent makes the decisions that
:func:`~nlbandit.core.simulate.simulate` makes with the same seed on the same contexts and rewards.

Probabilities. ``Decision.probability`` is the probability with which the policy chose the arm given
the history and the round's contexts: exact where the policy computes it (``ActInfo.probability``:
uniform, greedy and UCB rules, ε-greedy, finite ensembles, planned warm-up pulls), otherwise estimated
by redrawing the round's decision ``estimate_draws`` times with independent keys (Thompson sampling,
perturbed history); ``Decision.method`` says which, with the estimate's standard error. The redraws use
a key stream of their own, so they change no decision. Where the exploration is drawn by the update
(``PolicyEntry.draws_in_update``: GLM-TSL's sample, GLM-FPL's and repGLM-FPL's perturbed fits), each redraw
first redoes that draw (``PolicyEntry.resample``) — redrawing the decision alone would report 1; DeepFPL and
Neural-PHE, whose networks were trained on random targets, get no estimate (NaN, and the method says
why). Learnt models themselves count as history: an ensemble's probability is exact over its member
draw given the members, and a network's given its weights (whatever minibatches trained them).

Host rounds. For ``uniform``, ``greedy``, ``eps-greedy``, ``lin-ucb``, ``lin-ts``, ``lin-es``, and ``glm-ucb``,
``ucb-glm``, ``glm-tsl`` and ``glm-fpl`` with per-arm statistics, Newton and a constant width or scale
(:func:`nlbandit.host.host_rounds`), the agent decides and learns in float64 on the host, on NumPy arrays,
its loops compiled by numba (:mod:`nlbandit.host`): the same state, formulas and random draws as the jitted
policy, without the ~20 µs that launching any XLA program costs per call; ``numpy_round=False`` runs the
jitted round instead.
Decisions are the same either way except where two arms' scores differ by less than rounding.

Compiled functions are cached per policy object, and :func:`~nlbandit.policies.registry.make_policy`
returns one object per (name, sizes, static hyperparameters): a second agent of the same policy and
shapes compiles nothing.

Saved agents (:meth:`Agent.save`) are one ``.npz`` file, written atomically (a temporary file in the
same folder, then renamed), holding a JSON header (format and version, the policy's resolved
configuration, sizes, seed, round counter, pending events) and the state's arrays. :meth:`Agent.load`
refuses a file of another format version, a truncated or foreign file, and a state whose arrays do not
match what the policy builds now, each with a message saying so.
"""

from __future__ import annotations

import functools
import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.atomic import write_npz
from nlbandit.core.hyper import ConfigError
from nlbandit.core import round as one_round
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import round_key
from nlbandit.core.types import Feedback, Policy, ProblemSpec, to_dtype
from nlbandit.host import host_round
from nlbandit.host.draws import DrawBlocks
from nlbandit.policies.registry import build_policy, build_resample, check_policy_sizes, policy_entry, resolve_policy

FORMAT = "nlbandit-agent"
"""The ``format`` field of a saved agent's header."""
VERSION = 1
"""The version of the saved-agent format this code writes and reads."""
_ESTIMATE_STREAM = 6
"""Index of the redraws' key stream under the seed's root key (the simulator uses 0–5)."""


class UnknownEvent(ValueError):
    """A reward for an event id that this agent never issued."""


class RepeatedReward(ValueError):
    """A reward for an event that was already rewarded (an event is learnt once)."""


class Decision(NamedTuple):
    """One decision.

    Attributes:
      event_id: the id to give back with the reward (the decision's round number, from 1).
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

    def act(params, state, stream, contexts, mask, t):  # one float64 vector, so one transfer to the host
        arm, info = one_round.act(policy, params, state, stream, contexts, mask, t)
        return jnp.stack([arm.astype(jnp.float64), *(v.astype(jnp.float64) for v in info)])

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
                     jax.jit(jax.vmap(act, in_axes=(None, None, None, 0, 0, 0))), jax.jit(update, donate_argnums=1),
                     jax.jit(update_act, donate_argnums=1),
                     jax.jit(redraw, static_argnums=6) if draws else None)


class Agent:
    """A registered policy as an online agent (module docstring).

    Args:
      policy: a registered policy name (``nlbandit list``), e.g. ``"lin-ucb"``, ``"glm-es"``.
      d: feature dimension of an arm.
      k: the most arms offered in a round (fewer through ``mask``).
      horizon: the number of decisions the agent is built for; policies that keep a history buffer hold this
        many observations and refuse decisions beyond it, the others only use it where their confidence
        radii depend on T.
      seed: the seed of the agent's random streams (the simulator's streams of that seed).
      estimate_draws: redraws per decision that estimate the probability where the policy has no exact one
        (0: report NaN with method ``"none"``).
      numpy_round: decide and learn on the host where the policy has a host round (module docstring); False:
        always the jitted round.
      **hyperparameters: the policy's hyperparameters, as in :func:`~nlbandit.policies.registry.make_policy`.

    Raises:
      ConfigError: an unknown policy or hyperparameter, a value out of its range, or sizes, horizon or seed
        that are not integers in range.
    """

    def __init__(self, policy: str, d: int, k: int, horizon: int, seed: int = 0, *, estimate_draws: int = 1000,
                 numpy_round: bool = True, **hyperparameters: Any):
        for name, value, low in (("d", d, 1), ("k", k, 1), ("horizon", horizon, 1), ("seed", seed, 0),
                                 ("estimate_draws", estimate_draws, 0)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < low:
                raise ConfigError(f"Agent: field {name!r} must be an integer >= {low}, got {value!r}")
        if not isinstance(numpy_round, bool):
            raise ConfigError(f"Agent: field 'numpy_round' must be true or false, got {numpy_round!r}")
        if seed > 2**32 - 1:
            raise ConfigError(f"Agent: field 'seed' must be an integer in [0, 2**32 - 1], got {seed!r}")
        spec, where = ProblemSpec(int(d), int(k), int(horizon)), f"Agent policy '{policy}'"
        config = check_policy_sizes(resolve_policy({"name": policy, **hyperparameters}, where), spec, where)
        self._setup(config, spec, int(seed), int(estimate_draws), numpy_round)
        self._state = self._host_state(self._programs.init(self._params, self._keys.policy_init))

    def _setup(self, config: dict[str, Any], spec: ProblemSpec, seed: int, draws: int, numpy_round: bool) -> None:
        self.config, self.spec, self.seed, self.estimate_draws = config, spec, seed, draws
        self.policy, params = build_policy(config, spec)
        self._params = to_dtype(params, self.policy.meta.dtype)
        self._keys = seed_keys(jnp.uint32(seed))
        self._host = host_round(self.policy, config) if numpy_round else None
        if self._host is not None:
            self._host_params = jax.tree.map(float, jax.device_get(self._params))
            self._act_draws = _draw_blocks(self._host.act_draws, self._keys.policy_act)
            self._update_draws = _draw_blocks(self._host.update_draws, self._keys.policy_update)
        self._estimate_key = jax.random.fold_in(jax.random.key(jnp.uint32(seed)), _ESTIMATE_STREAM)
        self._resample = build_resample(config, spec)
        self._draws_in_update = policy_entry(config["name"]).draws_in_update  # looked up once, not per decision
        self._programs = _programs(self.policy, draws, self._resample)
        self._t = 0
        self._pending: dict[int, tuple[Any, int]] = {}  # event id -> (its contexts (host copy), arm)
        self._owed: list[tuple] = []  # checked rewards not yet learnt: (contexts, arm, reward, bound, t)
        self._rewarded = 0
        self.meta: dict[str, Any] = {}
        self._arms: np.ndarray | None = None  # round 1's arm set (``prepare``; fixed-arm policies)
        self._all_arms = np.ones(spec.k, bool)
        self._all_arms.flags.writeable = False

    def _host_state(self, state: Any) -> Any:
        """``state`` as the agent keeps it: NumPy leaves for a host round, else as given."""
        return state if self._host is None else jax.device_get(state)

    @property
    def numpy_round(self) -> bool:
        """Whether this agent decides and learns on the host, not by XLA programs (module docstring)."""
        return self._host is not None

    @property
    def rounds(self) -> int:
        """Decisions made so far (the last event id issued)."""
        return self._t

    @property
    def rewarded(self) -> int:
        """Rewards learnt so far (each event at most once)."""
        return self._rewarded

    @property
    def pending(self) -> list[int]:
        """Event ids decided but not yet rewarded, in increasing order."""
        return sorted(self._pending)

    @property
    def state(self) -> Any:
        """A host copy of the policy's current state (a pytree of NumPy arrays, the agent's own arrays
        untouched by changes to it)."""
        self._learn()
        return jax.device_get(self._state) if self._host is None else jax.tree.map(np.array, self._state)

    def learn(self) -> int:
        """Learn every reward given since the last decision now, and wait until the state is updated; return
        how many. :meth:`decide` learns them anyway (the jitted round in one program with the decision); a
        service calls this when idle, so that the next decision does not wait for the update (a neural
        policy's training)."""
        owed = len(self._owed)
        self._learn()
        jax.block_until_ready(self._state)
        return owed

    def _learn(self, keep_last: bool = False) -> tuple | None:
        """Learn the rewards given since the last decision, in the order given; with ``keep_last``, all but the
        last, which is returned (as the arguments of ``update``) to be learnt in one dispatch with the next
        decision."""
        last = self._owed.pop() if keep_last and self._owed and self._host is None else None
        if self._host is not None:
            for x, arm, reward, _, t in self._owed:
                draws = None if self._update_draws is None else self._update_draws(t)
                self._state = self._host.update(self._host_params, self._state, draws, x, arm, reward, t)
        else:
            for learn in self._owed:
                self._state = self._programs.update(self._params, self._state, self._keys.policy_update, *learn)
        self._owed = []
        return last

    def _check_round(self, contexts: Any, mask: Any, where: str) -> tuple[np.ndarray, np.ndarray]:
        k, d = self.spec.k, self.spec.d
        x = np.array(contexts, np.float64)  # a copy of its own: kept until the reward, whatever the caller does
        if x.shape != (k, d):
            raise ValueError(f"{where}: contexts must have shape (k, d) = ({k}, {d}), got {x.shape}")
        if not np.isfinite(x).all():
            raise ValueError(f"{where}: contexts must be finite (found NaN or infinity)")
        m = self._all_arms if mask is None else np.asarray(mask)
        if m.shape != (k,) or m.dtype != bool:
            raise ValueError(f"{where}: mask must be a boolean array of shape ({k},), got {m.dtype} {m.shape}")
        if not m.any():
            raise ValueError(f"{where}: mask offers no arm (every entry False)")
        if self.policy.meta.requires.fixed_arms and self._arms is not None and not np.array_equal(x, self._arms):
            raise ValueError(f"{where}: policy '{self.policy.meta.name}' keeps per-arm statistics of a fixed arm "
                             "set, but these contexts differ from the first decision's; use a policy for changing "
                             "contexts")
        return x, m

    def _room(self, n: int, where: str) -> None:
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

    def _probability(self, p: float, x: np.ndarray, m: np.ndarray, t: int, arm: int) -> tuple[float, str]:
        if not math.isnan(p):
            return p, "exact"
        if not self.estimate_draws:
            return math.nan, "none"
        # after an update, a policy that draws while learning is redrawn through its resample
        resample = self._draws_in_update and self._rewarded > 0
        if resample and self._resample is None:
            return math.nan, (f"none: {self.policy.meta.name} draws its exploration while learning and has no "
                              "redraw of it")
        counts = np.asarray(self._programs.redraw(self._params, self._state, self._estimate_key, x, m, t, resample))
        q = counts[arm] / self.estimate_draws
        se = math.sqrt(q * (1 - q) / self.estimate_draws)
        return float(q), f"estimate: {self.estimate_draws} redraws, se {se:.2g}"

    def _jit_act(self, x: np.ndarray, m: np.ndarray, t: int, learn: tuple | None) -> tuple[int, float, float, float]:
        """(arm, score, bonus, probability) of round ``t`` by the jitted policy, after learning ``learn`` (the
        last owed reward, or None) in the same dispatch."""
        if learn is None:
            out = self._programs.act(self._params, self._state, self._keys.policy_act, x, m, t)
        else:
            self._state, out = self._programs.update_act(self._params, self._state, (self._keys.policy_update,
                                                         self._keys.policy_act), learn, x, m, t)
        arm, score, bonus, p = np.asarray(out).tolist()
        return int(arm), score, bonus, p

    def _host_act(self, x: np.ndarray, m: np.ndarray, t: int) -> tuple[int, float, float, float]:
        """(arm, score, bonus, probability) of round ``t`` by the host round."""
        draws = None if self._act_draws is None else self._act_draws(t)
        arm, score, bonus, p = self._host.act(self._host_params, self._state, draws, x,
                                              None if m is self._all_arms else m, t)
        return arm, float(score), float(bonus), float(p)

    def decide(self, contexts: Any, mask: Any = None) -> Decision:
        """Choose an arm among ``contexts`` (K, d) (those with ``mask`` True; all by default) and return the
        :class:`Decision`; its contexts and arm are kept until :meth:`reward` gives its reward."""
        x, m = self._check_round(contexts, mask, "decide")
        self._room(1, "decide")
        self._prepare(x, m)
        t = self._t + 1
        learn = self._learn(keep_last=True)
        arm, score, bonus, p = self._jit_act(x, m, t, learn) if self._host is None else self._host_act(x, m, t)
        p, method = self._probability(p, x, m, t, arm)
        self._t = t
        self._pending[t] = (x, arm)
        return Decision(t, arm, p, method, score, bonus)

    def decide_batch(self, contexts: Any, masks: Any = None) -> list[Decision]:
        """Decisions for B rounds at once, ``contexts`` (B, K, d) (``masks`` (B, K)), all made with the
        current state (no reward in between), as B calls of :meth:`decide` without rewards would make them."""
        x = np.array(contexts, np.float64)  # a copy of its own: kept until the reward, whatever the caller does
        if x.ndim != 3 or x.shape[0] < 1:
            raise ValueError(f"decide_batch: contexts must have shape (B, k, d) with B >= 1, got {x.shape}")
        ms = [None] * x.shape[0] if masks is None else list(np.asarray(masks))
        if len(ms) != x.shape[0]:
            raise ValueError(f"decide_batch: masks must have one row per context set ({x.shape[0]}), got {len(ms)}")
        rounds = [self._check_round(xi, mi, f"decide_batch[{i}]") for i, (xi, mi) in enumerate(zip(x, ms))]
        self._room(len(rounds), "decide_batch")
        self._prepare(*rounds[0])
        self._learn()
        xs, mss = np.stack([r[0] for r in rounds]), np.stack([r[1] for r in rounds])
        ts = np.arange(self._t + 1, self._t + 1 + len(rounds))
        if self._host is not None:
            rows = [self._host_act(xi, mi, t) for xi, mi, t in zip(xs, mss, ts.tolist())]
        else:
            rows = np.asarray(self._programs.act_batch(self._params, self._state, self._keys.policy_act, xs, mss,
                                                       ts)).tolist()
        out = []
        for i, (t, (arm, score, bonus, p)) in enumerate(zip(ts.tolist(), rows)):
            p, method = self._probability(p, xs[i], mss[i], t, int(arm))
            out.append(Decision(t, int(arm), p, method, score, bonus))
        self._t = int(ts[-1])
        self._pending.update({d.event_id: (xs[i], d.arm) for i, d in enumerate(out)})
        return out

    def reward(self, event_id: int | Sequence[int], value: float | Sequence[float],
               variance_bound: float | Sequence[float] | None = None) -> None:
        """Learn the reward ``value`` of decision ``event_id``, or of each of a sequence of them (then
        ``value`` a sequence of the same length). Policies that read a noise level need ``variance_bound``
        (the bound σ revealed with the reward). All of a batch is checked before any of it is learnt.

        Raises:
          UnknownEvent, RepeatedReward: (ValueErrors) an event id that was never issued, or that was already
            rewarded (also twice in one batch).
          ValueError: a reward that is not finite or outside the rewards the policy's model describes, a
            missing or unexpected ``variance_bound``; nothing is learnt then.
        """
        batch = not np.isscalar(event_id)
        ids = list(event_id) if batch else [event_id]
        values = list(np.atleast_1d(np.asarray(value, np.float64))) if batch else [value]
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
            list(np.atleast_1d(np.asarray(variance_bound, np.float64))) if batch else [variance_bound])
        if len(bounds) != len(ids):
            raise ValueError(f"reward: {len(ids)} event ids but {len(bounds)} variance bounds")
        low, high = self.policy.meta.requires.reward_range or (-math.inf, math.inf)
        seen = set()
        for e, v, b in zip(ids, values, bounds):
            if not isinstance(e, (int, np.integer)) or isinstance(e, bool):
                raise ValueError(f"reward: event id must be an integer, got {e!r}")
            if e not in self._pending or e in seen:
                if 1 <= e <= self._t:
                    raise RepeatedReward(f"reward: event {e} was already rewarded (pending: {len(self._pending)} "
                                         "events)")
                raise UnknownEvent(f"reward: event {e} was never issued (this agent has issued 1..{self._t})")
            seen.add(e)
            if not isinstance(v, (int, float, np.number)) or not math.isfinite(v):
                raise ValueError(f"reward: value of event {e} must be a finite number, got {v!r}")
            if not low <= v <= high:
                raise ValueError(f"reward: value of event {e} is {v}, outside [{low}, {high}], the rewards policy "
                                 f"'{self.policy.meta.name}' models")
            if b is not None and not (math.isfinite(b) and b >= 0):
                raise ValueError(f"reward: variance_bound of event {e} must be a finite number >= 0, got {b!r}")
        for e, v, b in zip(ids, values, bounds):
            x, arm = self._pending.pop(int(e))
            self._owed.append((x, arm, np.float64(v), None if b is None else np.float64(b), int(e)))
            self._rewarded += 1

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None) -> Path:
        """Write the agent to ``path`` (a ``.npz`` file) atomically and return the path; ``meta``, a
        JSON-serialisable dict, is saved with it (:attr:`meta` of the loaded agent)."""
        path = Path(path)
        leaves = jax.tree.leaves(self.state)
        arrays = {f"state_{i}": _plain(a) for i, a in enumerate(leaves)}
        ids = sorted(self._pending)
        if ids:
            arrays["pending_contexts"] = np.stack([np.asarray(self._pending[e][0]) for e in ids])
        if self._arms is not None:
            arrays["first_arms"] = self._arms
        header = {"format": FORMAT, "version": VERSION, "policy": _jsonable(self.config), "d": self.spec.d,
                  "k": self.spec.k, "horizon": self.spec.horizon, "seed": self.seed,
                  "estimate_draws": self.estimate_draws, "numpy_round": self.numpy_round, "rounds": self._t,
                  "rewarded": self._rewarded, "meta": dict(meta or {}),
                  "pending": [[e, self._pending[e][1]] for e in ids], "state_leaves": len(leaves)}
        arrays["header"] = np.frombuffer(json.dumps(header).encode(), np.uint8)
        return write_npz(path, arrays)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Agent":
        """The agent saved at ``path``; ``ValueError`` naming the problem for a file that is missing,
        truncated, not a saved agent, of another format version, or whose state does not fit the policy."""
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
        except FileNotFoundError:
            raise ValueError(f"Agent.load: no file {path}") from None
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:
            raise ValueError(f"Agent.load: {path} is not a readable saved agent (truncated or another kind of "
                             f"file: {e})") from None
        try:
            header = json.loads(arrays.pop("header").tobytes().decode())
            fmt, version = header.get("format"), header.get("version")
        except (KeyError, ValueError, AttributeError):
            raise ValueError(f"Agent.load: {path} has no saved-agent header; it is not a file Agent.save "
                             "wrote") from None
        if fmt != FORMAT:
            raise ValueError(f"Agent.load: {path} is not a saved agent (format {fmt!r}, expected {FORMAT!r})")
        if version != VERSION:
            raise ValueError(f"Agent.load: {path} was written in saved-agent format version {version}; this nlbandit "
                             f"reads version {VERSION} only. Load it with the nlbandit version that saved it")
        agent = cls.__new__(cls)
        try:
            spec = ProblemSpec(header["d"], header["k"], header["horizon"])
            where = "Agent.load policy"
            config = check_policy_sizes(resolve_policy(header["policy"], where), spec, where)
        except ConfigError as e:
            raise ValueError(f"Agent.load: {path}: the saved policy configuration no longer resolves: {e}") from None
        agent._setup(config, spec, header["seed"],
                     header["estimate_draws"], header.get("numpy_round", True))
        template = jax.eval_shape(agent._programs.init, agent._params, agent._keys.policy_init)
        shapes = jax.tree.leaves(template)
        saved = [arrays.get(f"state_{i}") for i in range(header["state_leaves"])]
        if len(saved) != len(shapes) or not all(a is not None and _fits(a, s) for a, s in zip(saved, shapes)):
            raise ValueError(f"Agent.load: {path}: the saved state does not match the state policy "
                             f"'{config['name']}' has in this nlbandit version (saved by an incompatible version)")
        agent._state = agent._host_state(jax.tree.unflatten(jax.tree.structure(template),
                                                            [_restore(a, s) for a, s in zip(saved, shapes)]))
        agent._t, agent._rewarded, agent.meta = header["rounds"], header["rewarded"], header["meta"]
        agent._arms = arrays.get("first_arms")
        contexts = arrays.get("pending_contexts")
        agent._pending = {e: (contexts[i], arm) for i, (e, arm) in enumerate(header["pending"])}
        return agent


def _draw_blocks(draws: Any, stream: jax.Array) -> DrawBlocks | None:
    """The draws of a host round's step from ``stream`` (None for a step that draws nothing)."""
    return None if draws is None else DrawBlocks(draws, stream)


def _plain(a: Any) -> np.ndarray:
    """A state leaf as a NumPy array (a PRNG key as its raw key data)."""
    if jnp.issubdtype(a.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(a))
    return np.asarray(a)


def _fits(a: np.ndarray, template: Any) -> bool:
    """Whether saved array ``a`` has the shape and type of state leaf ``template`` (as :func:`_plain` writes it)."""
    expected = jax.eval_shape(jax.random.key_data, template) if jnp.issubdtype(template.dtype,
                                                                                jax.dtypes.prng_key) else template
    return a.shape == expected.shape and a.dtype == expected.dtype


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
