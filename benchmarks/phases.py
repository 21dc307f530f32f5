"""The phase timer's shift between processes: the pilot that sizes a ``phase_diff`` claim's timing.

Run: ``python benchmarks/phases.py FILE [--scale full] [--rounds 2000] [--processes 10]``

A ``phase_diff`` claim compares two runs' select + update costs. Timed in one process its interval covers the
variation between the sampled rounds, not a shift of the whole session (another process, another minute of a
shared VM); an experiment file either widens it by a ``spread`` fixed on a pilot, or repeats the session in
``phase_processes`` fresh processes and reads the interval over processes and rounds
(:func:`nlbandit.experiments.claims.process_interval`; docs/experiments.md). This script is the pilot of that
design, run as the runner runs it: pinned to one core as the ``processes`` executor pins its workers, it
simulates the file's phased runs (:func:`nlbandit.experiments.claims.phased_runs`) over their first ``--rounds``
rounds, keeping their sampled rounds, then times each group of the same horizon and seeds in one session in each
of ``--processes`` fresh processes (:func:`nlbandit.experiments.runner.time_sessions`, on the file's ``phase_rows``
and ``select_rows``). Printed, with the CPU kind: each run's own cost (µs per seed-round, the mean over its sampled
rounds) per process; for each pair that a ``phase_diff`` call of the file's claims names, its difference per
process, their mean and standard deviation, the largest deviation of a process's difference from their median
over the pair's mean cost (the smallest ``spread`` covering every process), the interval over all the processes,
and the half-width that P processes would give at the pilot's spreads (t at P − 1 degrees of freedom × the
standard error of :func:`~nlbandit.experiments.claims.process_interval`). Nothing else should run meanwhile.
"""

from __future__ import annotations

import argparse
import ast
import math
import os
import statistics

import numpy as np


def pairs(exp) -> list[tuple[str, str, str]]:
    """(label a, label b, case label) of each ``phase_diff(a, b, case=...)`` call in ``exp``'s claims whose labels
    are literals, each once."""
    from nlbandit.experiments.claims import parse_claim

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
    parser.add_argument("--processes", type=int, default=10)
    args = parser.parse_args()
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # (the timing processes inherit it)
    from nlbandit import machine
    from nlbandit.core.phases import PhaseTimer
    from nlbandit.core.simulate import simulate
    from nlbandit.experiments.claims import phased_runs, process_interval, t_quantile_975
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.experiments.runner import phase_groups, time_sessions
    from nlbandit.loops.bandit import BanditLoop
    from nlbandit.loops.phases import phase_chunk_size

    exp = load_experiment(args.file, args.scale)
    exp.phase_processes = args.processes
    print(f"{args.file} ({args.scale}): phased runs over their first {args.rounds} rounds, one session in each of "
          f"{args.processes} fresh processes on one core; {machine.describe()}", flush=True)
    own: dict[tuple[str, str], np.ndarray] = {}  # (label, case) -> own cost (processes, sampled rounds)
    for group in {id(g): g for g in phase_groups(exp.runs, phased_runs(exp)).values()}.values():
        timers = []
        for run in group:
            rounds = min(args.rounds, run.horizon)
            env, policy, params, _ = BanditLoop().build([run])  # as loops.phases.bandit_timer, over fewer rounds
            timer = PhaseTimer(env, policy, params, run.seeds, rounds, min_rows=exp.phase_rows)
            simulate(env, policy, params, rounds, run.seeds, chunk_size=phase_chunk_size(1000, rounds), on_chunk=timer)
            timers.append(timer)
        sessions = time_sessions(exp, group, timers)
        for i, run in enumerate(group):
            own[(run.label, run.case_label)] = np.array([[1e6 * (s.select_s + s.update_s) for s in session[i]]
                                                         for session in sessions])
    print("own cost, µs per seed-round, per process:")
    for (label, case), costs in own.items():
        print(f"  {label} {case}".ljust(40) + " ".join(f"{c:8.2f}" for c in costs.mean(axis=1)))
    for a, b, case in pairs(exp):
        if (a, case) not in own or (b, case) not in own:
            print(f"phase_diff({a!r}, {b!r}, {case}): not timed here (a case the file does not run)")
            continue
        diff = own[(a, case)] - own[(b, case)]
        per_process = diff.mean(axis=1)
        mean_cost = float(np.mean([own[(a, case)], own[(b, case)]]))
        median = statistics.median(per_process)
        worst = max(abs(d - median) for d in per_process) / mean_cost
        between, rounds = per_process.var(ddof=1), diff.mean(axis=0).var(ddof=1) / diff.shape[1]
        halves = ", ".join(f"P = {p}: ±{t_quantile_975(p - 1) * math.sqrt(between / p + rounds):.2f}"
                           for p in (3, 5, 8, 10))
        print(f"phase_diff({a!r}, {b!r}, {case}): " + " ".join(f"{d:+.2f}" for d in per_process)
              + f"; mean {per_process.mean():+.2f}, sd between processes {math.sqrt(between):.2f}, the pair's mean "
              f"cost {mean_cost:.2f}, largest deviation from the median / mean cost {worst:.3f}; over all "
              f"{diff.shape[0]} processes {process_interval(diff).text()}; half-width with {halves}")


if __name__ == "__main__":
    main()
