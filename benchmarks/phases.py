"""The phase timer's shift between processes: the pilot that fixes a ``phase_diff`` claim's ``spread``.

Run: ``python benchmarks/phases.py FILE [--scale full] [--rounds 2000] [--processes 5]``

A ``phase_diff`` interval covers the variation between the sampled rounds of two runs timed in one session, not a
shift of the whole session (another process, another minute of a shared VM); its ``spread`` widens it for that
shift, and an experiment file fixes it on a pilot before the measured run (docs/experiments.md). This script is
that pilot: each of ``--processes`` fresh processes, one after the other and pinned to one core as the
``processes`` executor pins its workers, simulates the file's phased runs (:func:`nlbandit.experiments.claims.
phased_runs`) over their first ``--rounds`` rounds, keeping their sampled rounds as the runner does, and times
them in one session per group of the same horizon and seeds (:func:`nlbandit.core.phases.time_phases`, on the
file's ``phase_rows`` and ``select_rows``). Printed, with the CPU kind: each run's own cost (select + update, µs
per seed-round, the mean over its sampled rounds) per process; for each pair that a ``phase_diff`` call of the
file's claims names, its difference per process, their median, and the largest deviation of a process's
difference from that median over the pair's mean cost: the smallest ``spread`` that covers every pilot process.
Nothing else should run meanwhile.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys


def child(args: argparse.Namespace) -> None:
    """Simulate and time the file's phased runs in this process (pinned to one core); print one JSON line per run:
    its label, case and own cost at each sampled round."""
    os.sched_setaffinity(0, {args.pin})
    from nlbandit.core.phases import PhaseTimer, time_phases
    from nlbandit.core.simulate import simulate
    from nlbandit.experiments.claims import phased_runs
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.experiments.runner import phase_groups
    from nlbandit.loops.bandit import BanditLoop
    from nlbandit.loops.phases import phase_chunk_size

    exp = load_experiment(args.file, args.scale)
    groups = {id(group): group for group in phase_groups(exp.runs, phased_runs(exp)).values()}.values()
    for group in groups:
        timers = []
        for run in group:
            rounds = min(args.rounds, run.horizon)
            env, policy, params, _ = BanditLoop().build([run])  # as loops.phases.bandit_timer, over fewer rounds
            timer = PhaseTimer(env, policy, params, run.seeds, rounds, min_rows=exp.phase_rows)
            simulate(env, policy, params, rounds, run.seeds, chunk_size=phase_chunk_size(1000, rounds), on_chunk=timer)
            timers.append(timer)
        time_phases(timers)
        for run, timer in zip(group, timers):
            own = [1e6 * (s.select_s + s.update_s) for s in timer.samples]
            print(json.dumps({"label": run.label, "case": run.case_label, "own": own}), flush=True)


def pairs(file: str, scale: str) -> list[tuple[str, str, str]]:
    """(label a, label b, case label) of each ``phase_diff(a, b, case=...)`` call in the file's claims whose labels
    are literals, each once."""
    from nlbandit.experiments.claims import parse_claim
    from nlbandit.experiments.plan import load_experiment

    exp = load_experiment(file, scale)
    out = []
    for claim in exp.claims:
        for node in ast.walk(parse_claim(claim.check)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "phase_diff" \
                    and all(isinstance(a, ast.Constant) for a in node.args[:2]):
                case = ", ".join(f"{k.arg}={k.value.value}" for k in node.keywords
                                 if k.arg != "spread" and isinstance(k.value, ast.Constant))
                if (pair := (node.args[0].value, node.args[1].value, case)) not in out:
                    out.append(pair)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--scale", default="full")
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--pin", type=int, default=None, help=argparse.SUPPRESS)  # (the child's)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from nlbandit import machine

    core = sorted(os.sched_getaffinity(0))[0]
    print(f"{args.file} ({args.scale}): phased runs over their first {args.rounds} rounds, one session per "
          f"process, {args.processes} processes on one core; {machine.describe()}", flush=True)
    own: dict[tuple[str, str], list[float]] = {}  # (label, case) -> mean own cost per process
    for i in range(args.processes):
        done = subprocess.run([sys.executable, __file__, args.file, "--scale", args.scale, "--rounds",
                               str(args.rounds), "--child", "--pin", str(core)], capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"process {i + 1} failed:\n{done.stderr}")
        for row in map(json.loads, done.stdout.splitlines()):
            own.setdefault((row["label"], row["case"]), []).append(statistics.fmean(row["own"]))
    print("own cost, µs per seed-round, per process:")
    for (label, case), costs in own.items():
        print(f"  {label} {case}".ljust(40) + " ".join(f"{c:8.2f}" for c in costs))
    for a, b, case in pairs(args.file, args.scale):
        if (a, case) not in own or (b, case) not in own:
            print(f"phase_diff({a!r}, {b!r}, {case}): not timed here (a case the file does not run)")
            continue
        diffs = [x - y for x, y in zip(own[(a, case)], own[(b, case)])]
        mean_cost = statistics.fmean(own[(a, case)] + own[(b, case)])
        median = statistics.median(diffs)
        worst = max(abs(d - median) for d in diffs) / mean_cost
        print(f"phase_diff({a!r}, {b!r}, {case}): " + " ".join(f"{d:+.2f}" for d in diffs)
              + f"; median {median:+.2f}, the pair's mean cost {mean_cost:.2f}, largest deviation / mean cost "
              f"{worst:.3f}")


if __name__ == "__main__":
    main()
