"""A file's batches shared between workers: cut between their seeds (:func:`nlbandit.experiments.runner.balance`)
against computed whole, side by side in one run of this script.

Run: ``python benchmarks/balance.py [--file experiments/sun2025/fig1d_distance.toml] [--scale full] [--seeds 10]
[--horizon 2000] [--workers 2]``

A file of few batches whose rounds cost very different amounts (Sun Fig. 1d: seven runs of equal seed-rounds, the
anytime variants' about 20 times the baselines') once left one worker on its costliest batch long after the other
was done; ``balance`` now cuts each batch of such a file into one piece per worker. This computes the file (its
horizon replaced by ``--horizon``, its seeds by ``--seeds``) twice, each time in a fresh database on ``--workers``
worker processes: once with nothing cut between seeds (``runner.JOBS_PER_WORKER = 0``), then as the runner does,
and prints each one's wall time and stored parts (its jobs), the ratio, and whether every stored curve value and
arm is the same (nothing else should run meanwhile; the VM's speed moves by ±20% between hours, so compare the two
rows of one run).

Measured (2026-11-29, AMD EPYC family 26 model 2, 2 cores, nothing else running): at the defaults, 10 seeds × 2,000
rounds, 128.9 s whole against 127.9 s cut, every number the same: even, because at that horizon the anytime
variants' ensembles are small and the seven runs cost about as much each; at 10 × 100 rounds, 13.4 against 20.2 s
(compilation is all of it, and each piece compiles its program on its own worker). The gain is where the costs
differ: the paper's 50 seeds × 10⁴ took 56.8 min of wall time cut against 79.5 whole (two runs, not side by side:
docs/reproductions/scale.md).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nlbandit import machine
from nlbandit.experiments import runner
from nlbandit.experiments.executors import ProcessExecutor
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.schedule import run_experiments
from nlbandit.store import Store


CUT = runner.JOBS_PER_WORKER


def compute(path: Path, args: argparse.Namespace, db: Path, cut: bool) -> tuple[float, int, dict]:
    """(wall seconds, stored parts, every run's stored (curves, arms) by label and case) of the file computed into
    a fresh ``db``, its batches cut between their seeds or not."""
    runner.JOBS_PER_WORKER = CUT if cut else 0  # (0: a file always has enough batches, none is cut by seeds)
    try:
        exp = load_experiment(path, args.scale, args.seeds)
        start = time.perf_counter()
        with Store(db) as store, contextlib.closing(ProcessExecutor(args.workers)) as executor:
            exps, _ = run_experiments([exp], store, executor, progress=False, log=lambda line: None)
            wall = time.perf_counter() - start
            runs = exps[0].runs
            parts = store.parts(r.series_id for r in runs)
            stored = {(r.label, r.case_label): store.load(r.series_id, r.seeds, with_arms=True) for r in runs}
    finally:
        runner.JOBS_PER_WORKER = CUT
    return wall, sum(len(p) for p in parts.values()), {k: (v.curves, v.arms) for k, v in stored.items()}


def same(a: dict, b: dict) -> bool:
    """Whether two :func:`compute` results hold the same runs, bit for bit."""
    return a.keys() == b.keys() and all(
        np.array_equal(a[k][1], b[k][1]) and a[k][0].keys() == b[k][0].keys()
        and all(np.array_equal(a[k][0][m], b[k][0][m]) for m in a[k][0]) for k in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--file", type=Path, default=Path("experiments/sun2025/fig1d_distance.toml"))
    parser.add_argument("--scale", default="full", choices=("quick", "full"))
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = args.file.read_text(encoding="utf-8")
        path = Path(tmp) / args.file.name  # (the top-level horizon, and the scale's, replaced)
        path.write_text(re.sub(r"(?m)^horizon = \d+", f"horizon = {args.horizon}", text), encoding="utf-8")
        whole = compute(path, args, Path(tmp) / "whole.duckdb", cut=False)
        pieces = compute(path, args, Path(tmp) / "pieces.duckdb", cut=True)
    print(f"{args.file} at --scale {args.scale}, {args.seeds} seeds x {args.horizon} rounds, {args.workers} workers, "
          f"on {machine.describe()}")
    print(f"  batches whole:            {whole[0]:8.1f} s  ({whole[1]} parts stored)")
    print(f"  cut between their seeds:  {pieces[0]:8.1f} s  ({pieces[1]} parts stored)  ratio "
          f"{pieces[0] / whole[0]:.3f}")
    print(f"  every stored number the same: {same(whole[2], pieces[2])} ({len(whole[2])} runs)")
    sys.exit(0 if same(whole[2], pieces[2]) else 1)


if __name__ == "__main__":
    main()
