"""What an online agent's first use costs: numba's compilation of its host round, in processes that start cold.

Run: ``python benchmarks/first_use.py [--policies lin-ucb glm-tsl ...] [--rounds 30] [--after 40]``

Problem: d = 5, k = 10, one fixed arm set (the GLM policies keep per-arm statistics), rewards 0/1 from a fixed
generator; GLM policies warm up for 8 rounds unless a ``NAME:KEY=VALUE,...`` entry says otherwise (as in
``benchmarks/agent.py``). Each policy runs in three fresh processes, one after the other:

* cold: an empty ``NUMBA_CACHE_DIR``; the seconds an ``Agent``'s first ``--rounds`` rounds (decide + reward) take,
  with the compilation of the numba functions they run and of the agent's JAX draw blocks;
* warm: the same, with the cache that the cold process filled (numba loads instead of compiling);
* service: another empty cache; the service's warm-up of the configuration
  (``nlbandit.service.app._warm_up``, what opening or creating an agent runs), then the slowest of the next
  ``--after`` rounds of the agent it returns (every third with a mask): how long a request can wait for a
  compilation after the warm-up.

The numba functions compile once per argument type; docs/performance.md#first-use-numbas-compilation has the
measurements and what changed them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

D, K = 5, 10
GLM_WARMUP = {"glm-ucb": 8, "ucb-glm": 8, "glm-tsl": 8, "glm-fpl": 8}
"""Warm-up rounds of the GLM policies here (their plan is part of what the first rounds run)."""


def child(mode: str, name: str, options: dict, rounds: int, after: int) -> dict:
    """One process's measurement (module docstring): ``mode`` 'agent' or 'service'."""
    import numpy as np

    from nlbandit.agent import Agent
    from nlbandit.service.app import _warm_up, agent_config

    rng = np.random.default_rng(0)
    x = rng.uniform(-1.0, 1.0, (K, D)) / (2.0 * np.sqrt(D))
    mask = np.ones(K, bool)
    mask[K - 1] = False
    options = {"warmup_rounds": GLM_WARMUP[name], **options} if name in GLM_WARMUP else options

    def play(agent, n: int, masked: bool) -> list[float]:
        seconds = []
        for t in range(1, n + 1):
            start = time.perf_counter()
            decision = agent.decide(x, mask if masked and t % 3 == 0 else None)
            agent.reward(decision.event_id, float(rng.random() < 0.5))
            seconds.append(time.perf_counter() - start)
        return seconds

    if mode == "agent":
        agent = Agent(name, D, K, 1000, seed=1, **options)
        return {"seconds": sum(play(agent, rounds, False))}
    start = time.perf_counter()
    agent = _warm_up(agent_config(name, D, K, 1000, seed=1, **options))
    warm_up = time.perf_counter() - start
    return {"warm_up": warm_up, "slowest": max(play(agent, after, True))}


def measure(mode: str, spec: str, rounds: int, after: int, cache: str) -> dict:
    """Run :func:`child` in a fresh process with ``NUMBA_CACHE_DIR`` = ``cache``."""
    done = subprocess.run([sys.executable, __file__, "--child", mode, spec, "--rounds", str(rounds), "--after",
                           str(after)], env={**os.environ, "NUMBA_CACHE_DIR": cache}, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{spec} ({mode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--policies", nargs="+", default=["lin-ucb", "lin-ts", "lin-es", "glm-ucb", "glm-tsl",
                                                           "glm-fpl", "glm-es:solver=ensemble-newton"],
                        help="policy names, each optionally with hyperparameters: NAME:KEY=VALUE,...")
    parser.add_argument("--rounds", type=int, default=30, help="the agent's first rounds timed")
    parser.add_argument("--after", type=int, default=40, help="rounds after the service's warm-up")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "POLICY"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from agent import policy_option  # benchmarks/agent.py's NAME:KEY=VALUE parser

    if args.child:
        mode, spec = args.child
        print(json.dumps(child(mode, *policy_option(spec), args.rounds, args.after)))
        return
    from nlbandit import machine

    print(f"{machine.describe()}; d = {D}, k = {K}; seconds")
    print(f"{'policy':34} {'first ' + str(args.rounds) + ' rounds, cold':>22} {'warm':>8} "
          f"{'service warm-up, cold':>22} {'slowest request after':>22}")
    for spec in args.policies:
        with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as other:
            cold = measure("agent", spec, args.rounds, args.after, cache)["seconds"]
            warm = measure("agent", spec, args.rounds, args.after, cache)["seconds"]
            service = measure("service", spec, args.rounds, args.after, other)
        print(f"{spec:34} {cold:22.2f} {warm:8.2f} {service['warm_up']:22.2f} {service['slowest']:22.3f}",
              flush=True)


if __name__ == "__main__":
    main()
