"""Problem instances as plain arrays, so that other libraries can be compared on identical problems.

:func:`export_instance` draws one instance of an environment for a seed, exactly as
:func:`~nlbandit.core.simulate.simulate` does (the same keys, :mod:`nlbandit.core.keys`), and tabulates for
every round t ≤ T the arms on offer (contexts (T, K, d) and mask (T, K)), the reward each arm *would* pay
if chosen in that round (T, K: the environment's ``pull`` with the round's key, for every arm), and the
mean rewards (T, K). The instance's own arrays (θ*, an arm pool, ...) come along by name.

:func:`replay_arms` scores any arm sequence on it: the realised rewards and the pseudo-regret against the
best available mean of each round. Since the simulator pays the chosen arm exactly the tabulated reward,
replaying the arms a simulation chose gives that simulation's rewards, and its regret, to rounding: bit for
bit where the noise scale is a power of two, else up to the last bit of a reward (mean + σ·z, which XLA may
fuse into one multiply-add in one compiled program and not in another; 1.4e-14 in a cumulative reward of 1,000
rounds at σ = 0.3), and the means likewise (a link function rounded otherwise); an external
policy (Vowpal Wabbit, coba, MABWiser, ...) played round by round on ``contexts`` and paid from ``rewards``
faces the same problem and the same noise (common random numbers).

:meth:`Instance.save` / :meth:`Instance.load` keep it as one ``.npz`` (written atomically) with a JSON header
naming the environment (its configuration, where :func:`export_instance` was given it as ``config``) and
the seed; the horizon is the arrays' length.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.arguments import integer
from nlbandit.atomic import write_npz
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import observe, pull
from nlbandit.core.types import Env

_FORMAT = "nlbandit-instance"


class Instance(NamedTuple):
    """One environment instance tabulated over T rounds (module docstring).

    Attributes:
      contexts: (T, K, d) the arms on offer in each round.
      mask: (T, K) which arms are available.
      rewards: (T, K) the reward each arm would pay in each round.
      means: (T, K) the mean rewards (for pseudo-regret).
      state: the instance's arrays by name (θ*, arm pools, ...; ``jax.tree_util.keystr`` paths).
      env: the environment's name and, when known, its configuration.
      seed: the seed it was drawn with.
    """

    contexts: np.ndarray
    mask: np.ndarray
    rewards: np.ndarray
    means: np.ndarray
    state: dict[str, np.ndarray]
    env: dict[str, Any]
    seed: int

    @property
    def horizon(self) -> int:
        """Number of rounds T."""
        return self.contexts.shape[0]

    def save(self, path: str | os.PathLike) -> Path:
        """Write the instance to ``path`` (``.npz``) atomically; return the path."""
        path = Path(path)
        header = {"format": _FORMAT, "version": 1, "env": self.env, "seed": self.seed, "state": list(self.state)}
        arrays = {"contexts": self.contexts, "mask": self.mask, "rewards": self.rewards, "means": self.means,
                  "header": np.frombuffer(json.dumps(header).encode(), np.uint8),
                  **{f"state_{i}": a for i, a in enumerate(self.state.values())}}
        return write_npz(path, arrays, compress=True)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Instance":
        """The instance saved at ``path``; ``ValueError`` for a file that is not one."""
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            header = json.loads(arrays["header"].tobytes().decode())
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"Instance.load: {path} is not a saved instance ({e})") from None
        if header.get("format") != _FORMAT or header.get("version") != 1:
            raise ValueError(f"Instance.load: {path} is not a version-1 saved instance (header {header})")
        state = {name: arrays[f"state_{i}"] for i, name in enumerate(header["state"])}
        return cls(arrays["contexts"], arrays["mask"], arrays["rewards"], arrays["means"], state, header["env"],
                   header["seed"])


def export_instance(env: Env, seed: int, horizon: int, config: dict[str, Any] | None = None,
                    chunk: int = 1000) -> Instance:
    """The instance of ``env`` for ``seed`` over ``horizon`` rounds (module docstring), tabulated ``chunk``
    rounds at a time; ``config`` (the environment's configuration, if known) is recorded with it."""
    if not integer(horizon) or horizon < 1:
        raise ValueError(f"horizon must be an integer >= 1, got {horizon!r}")
    if not integer(seed) or not 0 <= seed <= 2**32 - 1:
        raise ValueError(f"seed must be an integer in [0, 2**32 - 1], got {seed!r}")
    seed, horizon = int(seed), int(horizon)
    keys = seed_keys(jnp.uint32(seed))
    state = jax.jit(env.reset)(keys.env_reset)
    parts = [jax.device_get(_tabulate(env, state, keys, jnp.arange(s + 1, min(s + chunk, horizon) + 1)))
             for s in range(0, horizon, chunk)]
    contexts, mask, pay, means = (np.concatenate(p) for p in zip(*parts))
    named = {jax.tree_util.keystr(p): np.asarray(jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key)
                                                 else a)
             for p, a in jax.tree_util.tree_leaves_with_path(state)}
    return Instance(contexts, mask, pay.astype(np.float64), means.astype(np.float64), named,
                    {"name": env.name, **(config or {})}, seed)


@functools.partial(jax.jit, static_argnums=0)
def _tabulate(env: Env, state: Any, keys: Any, ts: jax.Array) -> tuple[jax.Array, ...]:
    """Rounds ``ts`` of the instance ``state`` of ``env`` drawn with the seed's ``keys``: (contexts, mask, the
    reward of every arm, the mean rewards), each with a leading round axis; compiled once per environment object
    and chunk length, whatever the seed."""
    def one(t):
        contexts, mask = observe(env, state, keys, t)
        pay = jax.vmap(lambda arm: pull(env, state, keys, t, contexts, arm).reward)(jnp.arange(env.spec.k))
        return contexts, mask, pay, env.mean(state, contexts)
    return jax.vmap(one)(ts)


def replay_arms(instance: Instance, arms: Any) -> dict[str, np.ndarray]:
    """Score the arm sequence ``arms`` (T,) on ``instance``: per round the reward paid and the
    pseudo-regret (best available mean minus the chosen arm's), and their running sums."""
    arms = np.asarray(arms)
    t, k = instance.mask.shape
    if arms.shape != (t,) or not np.issubdtype(arms.dtype, np.integer):
        raise ValueError(f"arms must be {t} integer arm indices (one per round), got {arms.dtype} {arms.shape}")
    if (arms < 0).any() or (arms >= k).any():
        raise ValueError(f"arms must lie in 0..{k - 1}")
    rows = np.arange(t)
    if not instance.mask[rows, arms].all():
        first = int(np.argmin(instance.mask[rows, arms]))
        raise ValueError(f"arms: round {first + 1} chose arm {arms[first]}, which was not available")
    best = np.where(instance.mask, instance.means, -np.inf).max(axis=1)
    reward, regret = instance.rewards[rows, arms], best - instance.means[rows, arms]
    return {"reward": reward, "regret": regret, "cum_reward": np.cumsum(reward), "cum_regret": np.cumsum(regret)}


__all__ = ["Instance", "export_instance", "replay_arms"]
