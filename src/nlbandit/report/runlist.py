"""The run list written beside a report, and revalidation of a committed report from it.

``<name>.runs.json`` lists every run of the report: its label and case, its identity (the resolved environment
and policy, sizes, seeds and the hash of the code that computed it,
:meth:`~nlbandit.experiments.spec.RunConfig.identity`) and a digest of its first and last seed
(:func:`digest`: the chosen arms bit for bit, the curves to 6 significant digits). Each seed's results are
the same whichever seeds run beside it, up to float rounding that a float32 network can carry into a near-tie's
arm (seen on 2026-11-27: Kveton Fig. 2's DeepFPL, Bae's NeuralLog-UCB-2 on h5, equal computed beside all the
run's seeds, not computed alone). So recomputing those two seeds under new code (alone, then where that differs
beside the run's other seeds) and finding every digest equal shows that the code change left the report's
numbers as they are: :func:`revalidate_report` then records the runs' new code hashes in the report and its run
list, without the results database. A report any of whose digests differs is left as it is, stale, to be
regenerated. The tuning runs a tuned series was chosen by are not recomputed: the chosen run's digest, computed
by the same code, stands for them.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from nlbandit import machine
from nlbandit.atomic import write_files
from nlbandit.experiments.results import recompute_sample, sample_seeds
from nlbandit.experiments.runner import batch_key
from nlbandit.experiments.spec import RunConfig
from nlbandit.loops.base import Computed
from nlbandit.provenance import package_hash
from nlbandit.store import Store

CURVE_DIGITS = 6
"""Significant digits of the curves in a :func:`digest`: XLA may sum a float64 over 2 seeds in another order
than over S, moving a value's last bits (seen: 1e-13 relative), which must not change the digest."""


def digest(rounds: np.ndarray, arms: np.ndarray, curves: dict[str, np.ndarray]) -> str:
    """A 16-hex-digit hash of some seeds' results: the recorded rounds, the chosen arms (S, T) and each curve
    (S, P) rounded to :data:`CURVE_DIGITS` significant digits."""
    h = hashlib.sha256(np.asarray(rounds, np.int64).tobytes() + np.asarray(arms, np.int32).tobytes())
    for metric in sorted(curves):
        values = np.asarray(curves[metric], np.float64).reshape(-1)
        h.update(metric.encode() + " ".join(f"{v:.{CURVE_DIGITS - 1}e}" for v in values).encode())
    return h.hexdigest()[:16]


def stored_digests(store: Store, runs: list[RunConfig]) -> list[str]:
    """The :func:`digest` of the first and last seed of each stored run of ``runs``."""
    samples = store.load_many([(run.series_id, sample_seeds(list(run.seeds))) for run in runs], with_arms=True)
    return [digest(sample.rounds, sample.arms, sample.curves) for sample in samples]


def run_list_path(md: Path) -> Path:
    """Where the run list of report ``md`` is: ``<name>.runs.json`` beside it."""
    return md.with_name(md.stem + ".runs.json")


def run_list(runs: list[RunConfig], digests: list[str]) -> str:
    """The JSON text of the run list of ``runs`` with their digests (one run per line)."""
    entries = [json.dumps({"label": r.label, "case": [list(c) for c in r.case], "identity": r.identity(),
                           "sample_seeds": sample_seeds(list(r.seeds)), "digest": d}, sort_keys=True)
               for r, d in zip(runs, digests)]
    return "[\n" + ",\n".join(entries) + "\n]\n"


def _runs(entries: list[dict[str, Any]]) -> list[RunConfig]:
    """The runs a run list describes, under the current code."""
    return [replace(RunConfig.from_identity(e["identity"], e["label"]), case=tuple(tuple(c) for c in e["case"]))
            for e in entries]


_REVALIDATED = re.compile(r"^_Runs revalidated on .*_\n\n", re.M)


def revalidate_report(md: Path, log: Callable[[str], None] = print) -> str:
    """Bring report ``md`` to the current code when its numbers are unchanged: ``current`` when every run's code
    is current already; ``revalidated`` when some were not and every run's recomputed first and last seed give
    its digest (computed alone, then, where that differs, beside every other seed of the run: a float32 network
    vectorised over 2 seeds can round otherwise than over S and flip a near-tie's arm, seen on 2026-11-27 for
    Kveton Fig. 2's DeepFPL and Bae Figs. 1/4's NeuralLog-UCB-2 on h5, equal over all their seeds); the
    report's and the run list's code hashes are then replaced, and a line above the report's description says
    so; ``stale`` (nothing written) when a digest differs or a run cannot be computed;
    ``no run list`` for a report written before run lists, ``unreadable run list`` for one that is not a run
    list (damaged, or edited by hand)."""
    path = run_list_path(md)
    if not path.is_file():
        log(f"{md}: no run list ({path.name}); regenerate it with the command at its top")
        return "no run list"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
        runs = _runs(entries)
        if not all({"digest", "sample_seeds"} <= e.keys() and isinstance(e["sample_seeds"], list) for e in entries):
            raise ValueError("an entry lacks its digest or its sample seeds")
    except (ValueError, TypeError, KeyError, AttributeError) as e:  # (UnicodeDecodeError is a ValueError)
        log(f"{md}: its run list {path.name} is not one the report wrote ({type(e).__name__}: {e}); regenerate the "
            "report with the command at its top")
        return "unreadable run list"
    stale = [i for i, (e, r) in enumerate(zip(entries, runs)) if e["identity"]["code"] != r.code]
    if not stale:
        return "current"
    groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for i in stale:
        groups.setdefault((batch_key(runs[i]), tuple(entries[i]["sample_seeds"])), []).append(i)
    for (_, sample), members in groups.items():
        batch = [runs[i] for i in members]

        def differ(out: Computed) -> list[int]:
            return [i for j, i in enumerate(members)
                    if digest(out.rounds, out.arms[j], out.curves[j]) != entries[i]["digest"]]

        try:
            out = recompute_sample(batch, list(sample), lambda o: not differ(o))
        except (KeyError, TypeError, ValueError) as e:  # ConfigError and DataError are ValueErrors
            log(f"{md}: {batch[0].label}: cannot be computed under the current code ({e}); left stale")
            return "stale"
        bad = differ(out)
        if bad:
            i = bad[0]
            log(f"{md}: {runs[i].label} ({runs[i].case_label or 'one case'}): seeds {list(sample)} computed now "
                f"(alone and beside the run's other seeds, on {machine.describe()}) differ from the report's; left "
                "stale (regenerate it)")
            return "stale"
    renamed: dict[str, str] = {}
    for i in stale:
        old, new = entries[i]["identity"]["code"], runs[i].code
        if renamed.setdefault(old, new) != new:
            log(f"{md}: code {old} stands for runs of two codes now ({renamed[old]}, {new}); regenerate it")
            return "stale"
    text = md.read_text(encoding="utf-8")
    for old, new in renamed.items():
        text = text.replace(f"(code {old})", f"(code {new})")
    note = (f"_Runs revalidated on {datetime.date.today().isoformat()} under source hash {package_hash()}: the first "
            f"and last seed of every run recomputed on {machine.describe()} to the digests of `{path.name}`, so "
            "every regret, reward and arm below is the current code's (times are those measured when the report was "
            "generated)._\n\n")
    text = _REVALIDATED.sub("", text)
    head, _, rest = text.partition("\n\n")  # the title
    generated, _, body = rest.partition("\n\n")  # the _Generated by ..._ line
    write_files({path: run_list(runs, [e["digest"] for e in entries]).encode(),  # (together: nlbandit.atomic)
                 md: f"{head}\n\n{generated}\n\n{note}{body}".encode()})
    log(f"{md}: {len(stale)} run(s) recomputed on their first and last seed, equal; codes "
        + ", ".join(f"{old} -> {new}" for old, new in renamed.items()))
    return "revalidated"
