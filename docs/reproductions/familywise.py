"""The committed reports' compound claims read family-wise, from the intervals their traces give.

A claim's verdict reads each interval at 95% (one-sided 2.5% on each side). A claim that combines k intervals can
then err more often than that: a PASS of `or` / `at_least(n, ...)` or a FAIL of `and`, with a probability up to
1 − 0.975^k. This script re-reads every such claim of docs/reproductions/*/*.md with a family-wise rule, valid at
2.5% per side whatever the dependence between the intervals:

* `at_least(n, c1, ..., ck)` is true when n items are true, each decided at one-sided level aT/(k − n + 1), and
  false when k − n + 1 items are false, each at aF/n (Markov's inequality on the number of items decided wrongly);
  `and` is at_least(k, ...), `or` at_least(1, ...); `not` swaps aT and aF;
* an interval compared with a number (`paired(a, b) < 0`, a seed-by-seed gap against 0, a `phase_diff`) is true
  when its bound on the claimed side, at one-sided level aT, is past the number, false when its other bound, at
  aF, is not; `lower(paired(...)) <= c` and `upper(...)` compare that bound at the level of the direction in which
  the comparison resolves a difference;
* any other comparison reads the traced numbers as the report does; the top level is aT = aF = 0.025.

Only the traced numbers are used: an interval's standard error is its half-width over the Student-t 97.5% quantile
(the report's seeds − 1 degrees of freedom, a timing's processes − 1). A call of a case that was not run is unknown,
as in the report. ``--as-reported`` divides nothing, to check that the reading gives every verdict it reads as the
report does (tests/test_reports.py).

Usage: ``python docs/reproductions/familywise.py [--as-reported]`` (needs SciPy: the ``test`` extra). Prints the
claims whose verdict the family-wise reading changes, and those it cannot read, as a Markdown table.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

from scipy import stats

HERE = Path(__file__).resolve().parent
WORDS = {True: "PASS", False: "FAIL", None: "INCONCLUSIVE"}
_BOUNDS = r"= (-?[\d.]+) \[(-?[\d.]+), (-?[\d.]+)\]"
_INTERVAL = re.compile(rf"`([^`]+?) {_BOUNDS} \(95% CI\)(?:, against 0)?`")
_TIMING = re.compile(rf"`([^`]+?) {_BOUNDS} µs per seed-round: the 95% CI over (\d+) processes")
_NUMBER = re.compile(r"`([^`\[]+?) = (-?[\d.]+(?:e[-+]?\d+)?)`")
_INTERVALS = re.compile(r"\b(paired|lower|upper|phase_diff|bias)\(")
"""The calls that give an interval (:mod:`nlbandit.experiments.claims`, the evaluate loop's ``bias``)."""
_SEED_BY_SEED = "seed by seed, "
_COMPARE = {ast.Lt: float.__lt__, ast.LtE: float.__le__, ast.Gt: float.__gt__, ast.GtE: float.__ge__}


class Unread(Exception):
    """A part of a claim this reading does not cover."""


def claims(report: Path):
    """(name, check, trace, verdict) of each evaluated claim of ``report`` that combines intervals: the trace maps
    each traced call to its (mean, lo, hi, n) interval (n: what its degrees of freedom count) or its number, ``T``
    to the horizon and ``missing`` to whether the claim was decided without cases not run."""
    text = report.read_text(encoding="utf-8")
    horizon, seeds = map(int, re.search(r"Scale \*\*full\*\*: horizon T = (\d+), (\d+) seeds", text).groups())
    for line in text.splitlines():
        if not line.startswith("| **"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        check, verdict, traced = cells[2].strip("`"), cells[4], cells[3]
        if not re.search(r"\bor\b|\band\b|at_least\(", check) or not _INTERVALS.search(check) \
                or verdict.startswith("NOT CHECKED"):
            continue  # (a claim on numbers alone has no interval to divide)
        trace: dict = {m.group(1): (*map(float, m.group(2, 3, 4)), seeds) for m in _INTERVAL.finditer(traced)}
        trace |= {m.group(1): (*map(float, m.group(2, 3, 4)), int(m.group(5))) for m in _TIMING.finditer(traced)}
        for m in _NUMBER.finditer(traced):
            trace.setdefault(m.group(1), float(m.group(2)))
        trace |= {"T": horizon, "missing": "decided without the cases not run" in traced}
        yield re.match(r"\*\*(.+?)\*\*", cells[0]).group(1), check, trace, verdict


@functools.cache
def _t(q: float, df: int) -> float:
    """The Student-t ``q`` quantile with ``df`` degrees of freedom."""
    return float(stats.t.ppf(q, df))


def _bound(interval: tuple, level: float, side: str) -> float:
    """The one-sided ``level`` bound (``side`` 'lo' or 'hi') of a traced 95% Student-t interval."""
    mean, lo, hi, n = interval
    se = (hi - lo) / 2 / _t(0.975, n - 1)
    return mean + (1 if side == "hi" else -1) * _t(1 - level, n - 1) * se


def truth(node: ast.AST, trace: dict, a_true: float, a_false: float, split: bool = True):
    """The three-valued truth of claim ``node``, deciding True at one-sided level ``a_true`` and False at
    ``a_false`` (module docstring); ``split=False`` reads every interval at those levels, as the reports do."""
    def at(items, need):
        k = len(items)
        levels = (a_true / (k - need + 1), a_false / need) if split else (a_true, a_false)
        found = [truth(item, trace, *levels, split) for item in items]
        held, open_ = sum(v is True for v in found), sum(v is None for v in found)
        return True if held >= need else False if held + open_ < need else None

    if isinstance(node, ast.BoolOp):
        return at(node.values, len(node.values) if isinstance(node.op, ast.And) else 1)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "at_least":
        return at(node.args[1:], node.args[0].value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        value = truth(node.operand, trace, a_false, a_true, split)
        return None if value is None else not value
    if not isinstance(node, ast.Compare) or any(k.arg == "stat" for n in ast.walk(node) if isinstance(n, ast.Call)
                                                for k in n.keywords):
        raise Unread(ast.unparse(node))  # (a median's interval is not a t interval)
    if len(node.ops) == 1 and type(node.ops[0]) in _COMPARE and _INTERVALS.search(ast.unparse(node)):
        return _interval_truth(node, trace, a_true, a_false)
    values = [_number(x, trace) for x in (node.left, *node.comparators)]
    return all(_COMPARE[type(op)](float(a), float(b)) for op, a, b in zip(node.ops, values, values[1:]))


def _interval_truth(node: ast.Compare, trace: dict, a_true: float, a_false: float):
    """An interval compared with a number (module docstring); None for a case not run."""
    op, left, right = node.ops[0], node.left, node.comparators[0]
    below, holds = isinstance(op, (ast.Lt, ast.LtE)), _COMPARE[type(op)]
    name = getattr(getattr(left, "func", None), "id", "")
    if name in ("lower", "upper") and isinstance(right, ast.Constant):
        interval = _interval(left.args[0], trace)
        if interval is None:
            return None
        resolves = (name == "lower") != below  # lower > c, upper < c: a difference resolved
        bound = _bound(interval, a_true if resolves else a_false, "lo" if name == "lower" else "hi")
        return holds(bound, float(right.value))
    if isinstance(right, ast.Constant):
        interval, c = _interval(left, trace), float(right.value)
    else:  # a threshold read seed by seed: the traced gap against 0
        interval, c = _gap(left, right, trace), 0.0
    if interval is None:
        return None
    if holds(_bound(interval, a_true, "hi" if below else "lo"), c):  # as claims._compare: both bounds hold
        return True
    return None if holds(_bound(interval, a_false, "lo" if below else "hi"), c) else False


def _interval(call: ast.AST, trace: dict) -> tuple | None:
    """The traced interval of ``call``: None where the report was decided without the case it reads, Unread where
    the trace has none otherwise."""
    found = trace.get(ast.unparse(call))
    if isinstance(found, tuple):
        return found
    if trace["missing"] and "case=" in ast.unparse(call):
        return None
    raise Unread(ast.unparse(call))


def _gap(left: ast.AST, right: ast.AST, trace: dict) -> tuple:
    """The traced seed-by-seed interval of ``left`` − ``right``, under the text the report gives it
    (:meth:`nlbandit.experiments.claims._Evaluator._contrast`: ``a - -0.75 * b`` reads ``a + 0.75 * b``)."""
    text, negated = ast.unparse(ast.BinOp(left, ast.Sub(), right)), ast.unparse(left) + " - -"
    text = text.replace(negated, negated[:-4] + " + ", 1) if text.startswith(negated) else text
    found = trace.get(_SEED_BY_SEED + text)
    if not isinstance(found, tuple):
        raise Unread(f"seed by seed, {text}")
    return found


def _number(node: ast.AST, trace: dict) -> float:
    """The traced value of ``node``: a number, a traced call, ``T``, or sums and products of those."""
    if isinstance(node, ast.Constant):
        return node.value
    key = "T" if isinstance(node, ast.Name) and node.id == "T" else ast.unparse(node)
    if key in trace and not isinstance(trace[key], tuple):
        return trace[key]
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
        a, b = _number(node.left, trace), _number(node.right, trace)
        return a + b if isinstance(node.op, ast.Add) else a - b if isinstance(node.op, ast.Sub) else a * b
    raise Unread(ast.unparse(node))


def reported(verdict: str) -> str:
    """A report's verdict cell as PASS, FAIL or INCONCLUSIVE (a documented failure reads FAIL)."""
    return "FAIL" if verdict.startswith("fails, as documented") else "PASS" if verdict.startswith(
        "UNEXPECTEDLY") else verdict.split(" ")[0]


def readings(split: bool = True) -> list[tuple[str, str, str, str]]:
    """(report, claim, the report's verdict, the family-wise one or 'not read: why') of every compound claim."""
    out = []
    for report in sorted(HERE.glob("*/*.md")):
        for name, check, trace, verdict in claims(report):
            try:
                value = WORDS[truth(ast.parse(check, mode="eval").body, trace, 0.025, 0.025, split)]
            except Unread as e:
                value = f"not read: {str(e)[:60]}"
            out.append((f"{report.parent.name}/{report.stem}", name, verdict.split(" (")[0], value))
    return out


if __name__ == "__main__":
    found = readings("--as-reported" not in sys.argv)
    print(f"{len(found)} compound claims read; those whose verdict changes or that are not read:\n")
    print("| report | claim | reported | family-wise |\n|---|---|---|---|")
    for report, name, verdict, value in found:
        if value != reported(verdict):
            print(f"| {report} | `{name}` | {verdict} | {value} |")
