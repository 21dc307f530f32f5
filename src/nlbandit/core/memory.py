"""Memory a run needs, and the one refusal of a run that would not fit, whichever door it came in by.

The engine (:func:`nlbandit.core.simulate.simulate`) measures what it will hold before it compiles anything:
the environments' instances and the policies' states from ``jax.eval_shape`` of ``reset`` and ``init``
(nothing is allocated), the state twice (the compiled scan's carry in and out) with the working arrays the
policy declares for a round (:attr:`~nlbandit.core.types.PolicyMeta.transients`: :func:`policy_parts`), one
chunk's per-round outputs, and the chosen arms and curves it keeps on the host. The experiment loader checks
the same policy parts (with :func:`state_bytes` per seed) and its loop's arrays
(:meth:`nlbandit.loops.base.Loop.memory`) for a file's runs earlier, at load, before anything is compiled;
both refuse through :func:`check_memory`, with the same message naming the parts.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.core.types import Policy, to_dtype


def physical_memory() -> int:
    """Bytes of physical memory of this machine (``os.sysconf``): the most a run may need."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def tree_bytes(tree: Any) -> int:
    """Bytes of the arrays (or ``jax.ShapeDtypeStruct`` s) of a pytree; a PRNG key counts as its key data."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            total += int(np.prod(jax.eval_shape(jax.random.key_data, leaf).shape)) * 4
        else:
            total += int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
    return total


def state_bytes(policy: Policy, params: Any) -> int:
    """Bytes of one seed's policy state: ``jax.eval_shape`` of ``init`` on ``params`` cast to the policy's dtype,
    as the engine hands them (nothing is allocated)."""
    return tree_bytes(jax.eval_shape(policy.init, to_dtype(params, policy.meta.dtype), jax.random.key(0)))


def policy_parts(policy: Policy, states: int, lanes: int) -> dict[str, int]:
    """A policy's arrays over ``lanes`` seeds and grid points whose states take ``states`` bytes together: the
    states twice (the compiled scan's carry in and out) and each working array the policy declares for a round
    (:attr:`~nlbandit.core.types.PolicyMeta.transients`), once per lane."""
    return {"policy states (the scan's carry in and out)": 2 * states,
            **{f"{part} (transient)": lanes * need for part, need in policy.meta.transients}}


def check_memory(parts: dict[str, int], what: str, where: str) -> None:
    """Refuse ``what`` when its arrays (``parts``: bytes by name) need more than :func:`physical_memory`."""
    need, limit = sum(parts.values()), physical_memory()
    if need > limit:
        detail = ", ".join(f"{name} {need_b / 2**30:.3g} GiB" for name, need_b in parts.items() if need_b)
        raise ConfigError(f"{where}: {what} needs about {need / 2**30:.3g} GiB of memory ({detail}), more than this "
                          f"machine's {limit / 2**30:.3g} GiB of physical memory; lower the horizon, seeds, d or k")
