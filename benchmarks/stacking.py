"""Whether agents of one policy and shapes learn faster as one compiled call over their stacked states.

Run: ``python benchmarks/stacking.py [--agents 16] [--policies glm-es neural-ucb lin-ts]``

Issue 32 asks a service's agents of the same policy and shapes to be "computed together where that is faster
(one compiled call over a stacked state)". This measures it for the jitted rounds (the host rounds compute on
NumPy and never dispatch XLA programs): ``--agents`` agents (d = 20, K = 50, seeds 0.., GLM policies with the
identity link), each having learnt 30 rewards, each owing one more. Per agent-update, the mean of 5 repeats:

* ``sequential``: each agent's own compiled update (what the service's training thread runs);
* ``stacked per call``: the agents' states, parameters, keys and rewards stacked, one ``vmap``-ped compiled
  update, and each agent's new state sliced back out (what stacking costs when each agent keeps its own
  state, as a service's agents do);
* ``stacked state kept``: the ``vmap``-ped call alone, on inputs stacked once (the bound for a service that
  kept every such agent's state in one stacked array, and so also decided for them in batches).

The stacked results equal the sequential ones (largest difference printed). Ratios are within one run.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from nlbandit import machine  # noqa: E402
from nlbandit.agent import Agent  # noqa: E402
from nlbandit.core import round as one_round  # noqa: E402
from nlbandit.core.types import Feedback  # noqa: E402

D, K, REPEATS = 20, 50, 5


def agents_owing(name: str, n: int) -> list[Agent]:
    """``n`` jitted agents of ``name``, each with 30 rewards learnt and one owed."""
    extra = {"link": "identity"} if name.startswith("glm") else {}
    x = np.random.default_rng(0).normal(size=(K, D)) * 0.3
    agents = [Agent(name, d=D, k=K, horizon=1000, seed=i, numpy_round=False, **extra) for i in range(n)]
    for agent in agents:
        for _ in range(31):
            decision = agent.decide(x)
            agent.reward(decision.event_id, 0.5)
    return agents


def stack(trees: list) -> object:
    """The pytrees ``trees`` stacked leaf by leaf on a new first axis."""
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *trees)


def measure(name: str, n: int) -> None:
    """Print the three timings of the module docstring for ``n`` agents of ``name``."""
    agents = agents_owing(name, n)
    policy, owed = agents[0].policy, [agent._owed[0] for agent in agents]

    def update(params, state, stream, contexts, arm, reward, t):
        return one_round.update(policy, params, state, stream, contexts, arm, Feedback(reward, None), t)

    single, batched = jax.jit(update), jax.jit(jax.vmap(update))
    args = [(a._params, a._state, a._keys.policy_update, o[0], o[1], o[2], o[4]) for a, o in zip(agents, owed)]
    stacked_args = [stack(list(column)) if i < 3 else jnp.asarray(np.stack(column)) for i, column in
                    enumerate(zip(*args))]

    def sequential():
        return [single(*a) for a in args]

    def per_call():
        inputs = [stack(list(column)) if i < 3 else jnp.asarray(np.stack(column)) for i, column in
                  enumerate(zip(*args))]
        out = batched(*inputs)
        return [jax.tree.map(lambda leaf: leaf[i], out) for i in range(n)]

    def kept():
        return batched(*stacked_args)

    expected, found = sequential(), per_call()
    worst = max(float(jnp.max(jnp.abs(p - q))) for a, b in zip(expected, found)
                for p, q in zip(jax.tree.leaves(a), jax.tree.leaves(b)) if jnp.issubdtype(p.dtype, jnp.floating))
    jax.block_until_ready(kept())
    timings = {}
    for label, run in (("sequential", sequential), ("stacked per call", per_call), ("stacked state kept", kept)):
        start = time.perf_counter()
        for _ in range(REPEATS):
            jax.block_until_ready(run())
        timings[label] = 1e6 * (time.perf_counter() - start) / (REPEATS * n)
    base = timings["sequential"]
    for label, us in timings.items():
        print(f"{name:12s} {n:4d} agents  {label:20s} {us:10.1f} µs per agent-update  ({base / us:5.2f}x sequential)")
    print(f"{name:12s} stacked vs sequential results: largest difference {worst:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=16)
    parser.add_argument("--policies", nargs="+", default=["glm-es", "neural-ucb", "lin-ts"])
    args = parser.parse_args()
    print(f"jitted updates, d = {D}, K = {K}; jax {jax.__version__}; {machine.describe()}")
    for name in args.policies:
        measure(name, args.agents)


if __name__ == "__main__":
    main()
