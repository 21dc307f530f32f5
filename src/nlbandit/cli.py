"""Command line: ``nlbandit run|report|check|results|list``.

* ``nlbandit run FILE [--scale quick|full] [--seeds N]``: simulate the missing runs into the results
  database, print the results table, write the report (markdown + PNG).
* ``nlbandit report FILE``: (run what is missing and) write the report.
* ``nlbandit check FILE``: (run what is missing and) check the claims; exit status 1 if one fails.
  FILE may be a folder: every ``*.toml`` below it is validated first, then run in turn, and a summary of
  minutes and verdicts per file ends with the total time.
* ``nlbandit results [list|prune]``: the stored runs and whether the code that computed them is current;
  ``prune`` deletes the stale ones.
* ``nlbandit list``: policies, environments, regression streams and learners, and experiment files.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

from nlbandit.core.hyper import ConfigError

DEFAULT_DB = "results/nlbandit.duckdb"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nlbandit", description="Nonlinear contextual bandits: run, report, check.")
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("run", "simulate missing runs, print the table, write the report"),
                       ("report", "write the report (running what is missing)"),
                       ("check", "check the claims (running what is missing); exit 1 if one fails")):
        c = sub.add_parser(name, help=text, description=text)
        c.add_argument("file", type=Path, help="experiment file (TOML), or a folder: every *.toml below it, one "
                       "after the other, with a summary of times and verdicts")
        c.add_argument("--scale", choices=("quick", "full"), default="quick", help="experiment scale (default quick)")
        c.add_argument("--seeds", type=int, default=None, help="override the number of repetitions")
        c.add_argument("--db", type=Path, default=Path(os.environ.get("NLBANDIT_DB", DEFAULT_DB)),
                       help=f"results database (default $NLBANDIT_DB or {DEFAULT_DB})")
        c.add_argument("--out", type=Path, default=None, help="report folder (default reports/<paper>)")
        c.add_argument("--chunk-size", type=int, default=1000, help="rounds per compiled chunk/checkpoint")
        c.add_argument("--no-progress", action="store_true", help="no progress bar (it is off anyway when stderr "
                       "is not a terminal)")
    res = sub.add_parser("results", help="list the stored runs (or prune those computed by code that has changed)",
                         description="List the stored runs with their code hash and whether it is the current "
                         "one; 'prune' deletes the runs whose code hash is not current.")
    res.add_argument("action", nargs="?", choices=("list", "prune"), default="list")
    res.add_argument("--db", type=Path, default=Path(os.environ.get("NLBANDIT_DB", DEFAULT_DB)),
                     help=f"results database (default $NLBANDIT_DB or {DEFAULT_DB})")
    lst = sub.add_parser("list", help="list policies, environments, streams, learners and experiment files")
    lst.add_argument("what", nargs="?", choices=("policies", "envs", "streams", "learners", "experiments"),
                     default=None)
    return p


def _list(what: str | None) -> None:
    from nlbandit.envs.registry import ENVS, STREAMS
    from nlbandit.policies.learners import LEARNERS
    from nlbandit.policies.registry import POLICIES

    def hypers(entry) -> str:
        return ", ".join(f"{h.name}={h.default!r}" + ("*" if h.static else "") for h in entry.hypers)

    if what in (None, "policies"):
        print("policies (hyperparameter=default; * = static, changes shapes):")
        for e in POLICIES.values():
            print(f"  {e.name:<12} {e.doc}\n  {'':<12} {hypers(e) or '(none)'}")
    if what in (None, "envs"):
        print("environments:")
        for e in ENVS.values():
            print(f"  {e.name:<12} {e.doc}\n  {'':<12} {hypers(e)}")
    if what in (None, "streams"):
        print("online-regression streams (loop = \"regression\"):")
        for e in STREAMS.values():
            print(f"  {e.name:<12} {e.doc}\n  {'':<12} {hypers(e)}")
    if what in (None, "learners"):
        print("online-regression learners:")
        for e in LEARNERS.values():
            print(f"  {e.name:<12} {e.doc}\n  {'':<12} {hypers(e)}")
    if what in (None, "experiments"):
        print("experiments (under ./experiments):")
        for f in sorted(Path("experiments").glob("*/*.toml")):
            print(f"  {f}")


def _results(action: str, db: Path) -> int:
    """``nlbandit results [list|prune]``: the stored runs, current or stale (:mod:`nlbandit.experiments.results`)."""
    from nlbandit.experiments.results import annotated_runs, prune_stale
    from nlbandit.store import Store

    if not db.is_file():
        print(f"error: no results database at {db}", file=sys.stderr)
        return 2
    with Store(db) as store:
        if action == "prune":
            gone = prune_stale(store)
            print(f"pruned {len(gone)} stale run(s) from {db}; {len(store.index())} current run(s) kept")
            return 0
        runs = annotated_runs(store)
    for r in runs:
        state = "current" if r["current"] else "STALE"
        print(f"{r['run_id']}  {r['code'] or '(no hash)':<16}  {state:<7}  {r['experiment']}: {r['label']} "
              f"({r['n_seeds']} seeds x {r['horizon']} rounds)")
    stale = sum(not r["current"] for r in runs)
    print(f"{len(runs)} run(s) in {db}: {len(runs) - stale} current, {stale} stale (code changed since; "
          "'nlbandit results prune' deletes them)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nlbandit`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    if args.command == "list":
        _list(args.what)
        return 0
    if args.command == "results":
        return _results(args.action, args.db)
    try:
        from nlbandit.experiments.spec import load_experiment

        if args.chunk_size < 1:
            raise ConfigError(f"--chunk-size must be an integer >= 1, got {args.chunk_size}")
        files = sorted(args.file.rglob("*.toml")) if args.file.is_dir() else [args.file]
        if not files:
            raise ConfigError(f"{args.file}: the folder holds no experiment file (*.toml)")
        experiments = [(f, load_experiment(f, args.scale, args.seeds)) for f in files]  # all valid before any runs
    except (ConfigError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2

    from nlbandit.store import Store, StoreBusyError

    try:
        store = Store(args.db)
    except StoreBusyError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    status, summary, start = 0, [], time.perf_counter()
    with store:
        for path, exp in experiments:
            t0 = time.perf_counter()
            code, verdicts = _run_one(args, path, exp, store)
            status = max(status, code)
            summary.append((path, time.perf_counter() - t0, verdicts))
    if len(experiments) > 1:
        print(f"\n{'experiment':<48} {'minutes':>8}  claims")
        for path, seconds, verdicts in summary:
            counts = ", ".join(f"{n} {v}" for v, n in sorted(Counter(verdicts).items())) or "none"
            print(f"{str(path):<48} {seconds / 60:>8.2f}  {counts}")
        print(f"{'total':<48} {(time.perf_counter() - start) / 60:>8.2f}")
    return status


def _run_one(args, path: Path, exp, store) -> tuple[int, list[str]]:
    """Run, report and (for ``check``) judge one experiment; return (exit status, claim verdicts)."""
    from nlbandit.experiments.runner import run_experiment
    from nlbandit.report.build import claim_verdict, load_rows, results_table, write_report

    out = args.out / exp.paper if args.out is not None and args.file.is_dir() else args.out
    out = out or Path("reports") / exp.paper
    command = f"nlbandit report {path} --scale {args.scale}" + (
        f" --seeds {args.seeds}" if args.seeds else "") + f" --out {out}"
    log = (lambda msg: print(msg, file=sys.stderr))
    print(f"== {path}", flush=True)
    run_experiment(exp, store, progress=not args.no_progress, chunk_size=args.chunk_size, log=log)
    rows = load_rows(exp, store)
    md, claims = write_report(exp, rows, out, command)
    if args.command == "run":
        print(results_table(rows))
    print(f"report: {md} (+ {md.with_suffix('.png').name})")
    for c in claims:
        print(f"{claim_verdict(c):<12} {c.name}: {c.check}  ["
              + "; ".join(t if " = " in t else f"{t} = {v:.2f}" for t, v in c.values) + "]")
    verdicts = [claim_verdict(c) for c in claims]
    if args.command != "check":
        return 0, verdicts
    failed = [c for c in claims if not c.ok]
    print(f"{len(claims) - len(failed)} of {len(claims)} claims as declared" + (
        f"; failed: {', '.join(c.name for c in failed)}" if failed else ""), flush=True)
    return (1 if failed else 0), verdicts


if __name__ == "__main__":
    sys.exit(main())
