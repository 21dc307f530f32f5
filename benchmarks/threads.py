"""``nb.simulate`` with XLA's default thread pool on every core, against one core and against XLA's Eigen flag.

Run: ``python benchmarks/threads.py [--seeds 20] [--horizon 2000] [--repeats 3] [--policies lin-ucb ...]``

Issue 33 item 6 asks which thread setting batched simulations should default to. XLA sizes its CPU thread pool
from the cores the process may run on when its backend starts, so a setting cannot change inside a process: each
setting runs every policy in a child process of its own, one after the other (nothing else should run):

* *default*: the child may use every core (XLA's default pool: one thread per core);
* *one core*: the child pins itself to one core (``os.sched_setaffinity``) before JAX starts, so XLA's pool has
  one thread — what the ``processes`` executor does for each of its workers
  (:mod:`nlbandit.experiments.executors`);
* *Eigen flag*: every core, with ``--xla_cpu_multi_thread_eigen=false`` added to ``XLA_FLAGS`` (XLA's matrix
  products single-threaded; a flag, unlike affinity, that a package could set for its own process — but
  ``XLA_FLAGS`` is part of every run's code hash, :mod:`nlbandit.provenance`).

Problems: the linear policies on ``make_env("linear", d=20, k=50)``, the GLM ones on ``make_env("logistic", d=10,
k=100)`` (per-arm statistics), the neural ones on the linear problem with ``--neural-horizon`` rounds. Printed per
policy: µs per seed-round of a ``simulate`` call whose program is compiled (the fastest of ``--repeats`` calls),
each setting's, and the ratios to the default (below 1: faster; the pinned process although it leaves a core
idle), with the CPU kind.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

LINEAR = ("uniform", "lin-ucb", "lin-ts", "lin-es")
GLM = ("glm-ucb", "glm-tsl", "glm-fpl", "glm-es")
NEURAL = ("neural-ucb", "neural-es")


def child(args: argparse.Namespace) -> None:
    """Time every policy in this process (pinned first when asked) and print one JSON line per policy."""
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    import numpy as np

    import nlbandit as nb

    seeds = np.arange(args.seeds)
    for name in args.policies:
        kind = "logistic" if name.startswith("glm") else "linear"
        env = nb.make_env(kind, d=10 if kind == "logistic" else 20, k=100 if kind == "logistic" else 50)
        horizon = args.neural_horizon if name in NEURAL else args.horizon
        policy, params = nb.make_policy(name, env, horizon=horizon)
        nb.simulate(env, policy, params, seeds=seeds)  # compiles
        best = float("inf")
        for _ in range(args.repeats):
            start = time.perf_counter()
            nb.simulate(env, policy, params, seeds=seeds)
            best = min(best, time.perf_counter() - start)
        print(json.dumps({"policy": name, "us": best / (args.seeds * horizon) * 1e6}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("--neural-horizon", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", nargs="+", default=list(LINEAR + GLM + NEURAL))
    parser.add_argument("--pin", type=int, default=None, help=argparse.SUPPRESS)  # (the child's)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from nlbandit import machine

    cores = sorted(os.sched_getaffinity(0))
    print(f"nb.simulate, {args.seeds} seeds x {args.horizon} rounds (neural {args.neural_horizon}), best of "
          f"{args.repeats}; {machine.describe()}; {len(cores)} cores", flush=True)
    common = [sys.executable, __file__, "--child", "--seeds", str(args.seeds), "--horizon", str(args.horizon),
              "--neural-horizon", str(args.neural_horizon), "--repeats", str(args.repeats), "--policies",
              *args.policies]
    times = {}
    flag = os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false"
    for setting, extra, env in (("default", [], None), ("one core", ["--pin", str(cores[-1])], None),
                                ("Eigen flag", [], dict(os.environ, XLA_FLAGS=flag.strip()))):
        done = subprocess.run(common + extra, capture_output=True, text=True, env=env)
        if done.returncode:
            sys.exit(f"the '{setting}' child failed:\n{done.stderr}")
        times[setting] = {row["policy"]: row["us"] for row in map(json.loads, done.stdout.splitlines())}
    print(f"{'policy':12s} {'default µs':>11s} {'one core µs':>12s} {'Eigen flag µs':>14s} {'one core / default':>19s} "
          f"{'flag / default':>15s}")
    ratios, flags = [], []
    for name in args.policies:
        default, one, eigen = (times[s][name] for s in ("default", "one core", "Eigen flag"))
        ratios.append(one / default)
        flags.append(eigen / default)
        print(f"{name:12s} {default:11.2f} {one:12.2f} {eigen:14.2f} {one / default:19.2f} {eigen / default:15.2f}")
    for what, values in (("one core", ratios), ("the Eigen flag", flags)):
        print(f"{what} faster for {sum(r < 1 for r in values)} of {len(values)} policies; median ratio "
              f"{statistics.median(values):.2f}")


if __name__ == "__main__":
    main()
