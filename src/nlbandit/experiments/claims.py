"""Claims: small boolean expressions over an experiment's results, checked by ``nlbandit check``.

A safe subset of Python expressions, parsed with :mod:`ast` (never ``eval``'d), with three-valued truths
(``paired`` intervals, Kleene logic, INCONCLUSIVE verdicts). The grammar, the verdicts and the limits are
documented in ``docs/experiments.md`` (section "Claims").
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.strata import reported_runs
from nlbandit.plugins import ClaimFunction
from nlbandit.theory import anytime_constant, ftrl_basis_regret, ftrl_mean_field_regret, ftrl_regret_bound


class Timing(NamedTuple):
    """A run's measured times in µs per seed-round: ``run``, the whole round (compilation excluded), and,
    for a run whose phases were timed apart, ``select`` and ``update`` (means over the sampled rounds and the
    processes they were timed in) and ``sampled``: (the Q sampled rounds (Q,), select + update at each in each of
    the P processes (P, Q))."""

    run: float
    select: float | None = None
    update: float | None = None
    sampled: tuple[np.ndarray, np.ndarray] | None = None


Curves = Callable[[str, dict[str, Any]], tuple[np.ndarray, np.ndarray, Timing]]
"""``curves(label, case, metric="regret") -> (rounds (P,), cumulative metric (S, P), its Timing)``; ``metric`` is
"regret" or "reward" (the realised reward, of a bandit run)."""
PHASE_FUNCTIONS = {"select_time": "select", "update_time": "update"}
"""The claim functions that read a run's phases, and the :class:`Timing` field each reads."""

PHASED = frozenset({*PHASE_FUNCTIONS, "phase_diff"})
"""The claim functions whose runs are timed apart (:func:`phased_runs`)."""
TIME_FUNCTIONS = frozenset({"runtime", *PHASED})
"""The claim functions that read a run's measured time."""

_THEORY = {"l": (anytime_constant, 2), "basis_regret": (ftrl_basis_regret, 4),
           "mean_field": (ftrl_mean_field_regret, 4), "ftrl_bound": (ftrl_regret_bound, 4)}
_INTEGER_ARGS = {"basis_regret": (0, 1), "mean_field": (0, 1), "ftrl_bound": (0, 1)}  # d and T


def _divide(a: float, b: float) -> float:
    """a / b in IEEE arithmetic (x/0 = ±inf, 0/0 = nan) rather than an exception."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(a) / np.float64(b))


def _sqrt(x: float) -> float:
    """√x, nan for x < 0."""
    return math.sqrt(x) if x >= 0 else math.nan


_T975 = (12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252,
         2.306004135, 2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688,
         2.131449546, 2.119905299, 2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845,
         2.073873068, 2.068657610, 2.063898562, 2.059538553, 2.055529439, 2.051830516, 2.048407142,
         2.045229642, 2.042272456)
"""The 97.5% quantiles of Student's t with 1..30 degrees of freedom."""
Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` ≥ 1 degrees of freedom: a table up to 30, beyond it
    the Cornish–Fisher expansion z + g₁/ν + g₂/ν² + g₃/ν³ + g₄/ν⁴ about the normal quantile z (Abramowitz &
    Stegun 26.7.5; error below 1e-7 for ν > 30)."""
    if df < 1:
        raise ValueError(f"t_quantile_975: df must be an integer >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = Z975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4))


def _median_rank(s: int) -> int:
    """The largest k with P(Bin(s, ½) ≤ k − 1) ≤ 2.5%: the order statistics [d₍ₖ₎, d₍ₛ₋ₖ₊₁₎] of s
    differences cover their median with probability at least 95% (0: no pair does, s ≤ 5)."""
    k, cdf = 0, 2.0**-s  # cdf = P(Bin(s, ½) ≤ k)
    while cdf <= 0.025:
        k += 1
        cdf += math.comb(s, k) / 2**s
    return k


class Interval(NamedTuple):
    """A paired difference: its mean (or median) over seeds and the bounds of its 95% confidence interval."""

    mean: float
    lo: float
    hi: float

    def text(self) -> str:
        """``mean [lo, hi]`` for reports."""
        return f"{self.mean:.2f} [{self.lo:.2f}, {self.hi:.2f}]"


def paired_interval(diff: np.ndarray, stat: str = "mean") -> Interval:
    """The mean of the per-seed differences ``diff`` with its 95% confidence interval (Student t with S − 1
    degrees of freedom), or with ``stat='median'`` their median with the distribution-free interval between
    two order statistics. Unbounded when the seeds are too few for any (one seed; five for the median)."""
    if stat == "mean":
        centre = float(diff.mean())
        if diff.size < 2:
            return Interval(centre, -math.inf, math.inf)
        half = t_quantile_975(diff.size - 1) * float(np.std(diff, ddof=1)) / math.sqrt(diff.size)
        return Interval(centre, centre - half, centre + half)
    k, ordered = _median_rank(diff.size), np.sort(diff)
    if k == 0:
        return Interval(float(np.median(diff)), -math.inf, math.inf)
    return Interval(float(np.median(diff)), float(ordered[k - 1]), float(ordered[diff.size - k]))


def process_interval(diff: np.ndarray) -> Interval:
    """The mean of differences timed at the same Q rounds in each of P processes, ``diff`` (P, Q), with its 95%
    confidence interval over both: the grand mean's standard error from the spread of the processes' means (over
    P) and of the rounds' means (over Q), added in quadrature (which counts their residual twice, so it errs wide),
    Student t at P − 1 degrees of freedom. Unbounded with fewer than two processes or rounds."""
    n_processes, n_rounds = diff.shape
    centre = float(diff.mean())
    if n_processes < 2 or n_rounds < 2:
        return Interval(centre, -math.inf, math.inf)
    variance = np.var(diff.mean(axis=1), ddof=1) / n_processes + np.var(diff.mean(axis=0), ddof=1) / n_rounds
    half = t_quantile_975(n_processes - 1) * math.sqrt(float(variance))
    return Interval(centre, centre - half, centre + half)


def _number(value, what: str, interval: bool = False):
    """``value`` if it is a number (or, with ``interval``, an :class:`Interval`); a ConfigError otherwise."""
    if (interval and isinstance(value, Interval)) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
        return value
    kind = "a paired() interval" if isinstance(value, Interval) else repr(value)
    raise ConfigError(f"{what} needs numbers, got {kind}")


def _finite(result, *operands):
    """``result``; OverflowError where finite operands gave a non-finite number (``1e308 * 1e308``)."""
    def values(x):
        return x if isinstance(x, Interval) else (x,)

    if all(math.isfinite(v) for x in operands for v in values(x)) and not all(map(math.isfinite, values(result))):
        raise OverflowError
    return result


def _shift(a, b, sign: float):
    """a + sign·b where either may be an :class:`Interval`."""
    if isinstance(b, Interval):
        b = Interval(sign * b.mean, *sorted((sign * b.lo, sign * b.hi)))
        a, b = b, a
    elif sign < 0:
        b = -b
    if isinstance(a, Interval):
        if isinstance(b, Interval):
            raise ConfigError("two paired() intervals cannot be added; compare each with a number")
        return _finite(Interval(a.mean + b, a.lo + b, a.hi + b), a, b)
    return _finite(a + b, a, b)


def _scale(a, b):
    """a·b where at most one is an :class:`Interval` (a negative factor swaps its bounds; 0 gives [0, 0])."""
    if isinstance(b, Interval):
        a, b = b, a
    if isinstance(a, Interval):
        if isinstance(b, Interval):
            raise ConfigError("two paired() intervals cannot be multiplied")
        if b == 0:
            return Interval(0.0, 0.0, 0.0)
        return _finite(Interval(a.mean * b, *sorted((a.lo * b, a.hi * b))), a, b)
    return _finite(a * b, a, b)


def _div(a, b):
    """a / b: IEEE for numbers (x/0 = ±inf, 0/0 = nan); an :class:`Interval` only by a positive number."""
    if isinstance(b, Interval):
        raise ConfigError("a paired() interval cannot be a divisor")
    if isinstance(a, Interval):
        if not b > 0:
            raise ConfigError("a paired() interval can only be divided by a positive number")
        return _finite(Interval(a.mean / b, a.lo / b, a.hi / b), a, b)
    return _divide(a, b) if b == 0 else _finite(_divide(a, b), a, b)


def _pow(a, b):
    """a ** b in floats (an overflow raises OverflowError instead of growing a huge integer); nan for a
    negative base with a fractional exponent, inf for 0 to a negative power."""
    if isinstance(a, Interval) or isinstance(b, Interval):
        raise ConfigError("a paired() interval cannot be raised to a power")
    try:
        return math.pow(a, b)
    except ValueError:
        return math.inf if a == 0 else math.nan


class _NotPerSeed(Exception):
    """Raised while a comparison is evaluated seed by seed (:meth:`_Evaluator._contrast`) by an operation whose mean
    over seeds is not the same operation on the means (a product of two runs' values, a min, a median)."""


def _per_seed(op: ast.operator, a, b) -> np.ndarray:
    """``a op b`` where one or both are per-seed values (arrays over the same seeds): only the affine operations (a
    sum or difference, a product with a number, a division by a nonzero number); :class:`_NotPerSeed` otherwise."""
    arrays = [isinstance(x, np.ndarray) for x in (a, b)]
    if not all(is_array or (isinstance(x, (int, float)) and not isinstance(x, bool)) for x, is_array in
               zip((a, b), arrays, strict=True)):
        raise _NotPerSeed
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult) and not all(arrays):
        return a * b
    if isinstance(op, ast.Div) and not arrays[1] and b != 0:
        return a / b
    raise _NotPerSeed


_BINOPS = {ast.Add: lambda a, b: _shift(a, b, 1.0), ast.Sub: lambda a, b: _shift(a, b, -1.0), ast.Mult: _scale,
           ast.Div: _div, ast.Pow: _pow}
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _compare(op, left, right) -> bool | None:
    """``left op right``; three-valued when one side is an :class:`Interval` (None: the interval
    straddles the other side, so the comparison is undetermined)."""
    if not isinstance(left, Interval) and not isinstance(right, Interval):
        if any(isinstance(v, float) and math.isnan(v) for v in (left, right)):
            raise ConfigError("a comparison with NaN (0/0, inf - inf, 0 * inf or the square root of a negative "
                              "number), which is neither true nor false")
        return bool(_CMPOPS[type(op)](left, right))
    if isinstance(op, (ast.Eq, ast.NotEq)):
        raise ConfigError("a paired() interval can only be compared with <, <=, > or >=")
    if isinstance(left, Interval) and isinstance(right, Interval):
        raise ConfigError("two paired() intervals cannot be compared with each other")
    fn = _CMPOPS[type(op)]
    if isinstance(left, Interval):
        outcomes = {bool(fn(left.lo, right)), bool(fn(left.hi, right))}
    else:
        outcomes = {bool(fn(left, right.lo)), bool(fn(left, right.hi))}
    return outcomes.pop() if len(outcomes) == 1 else None


def _kleene_and(values: list[bool | None]) -> bool | None:
    """Kleene's three-valued conjunction: False if any is False, else None if any is undetermined."""
    if any(v is False for v in values):
        return False
    return None if any(v is None for v in values) else True


def _kleene_or(values: list[bool | None]) -> bool | None:
    """Kleene's three-valued disjunction: True if any is True, else None if any is undetermined."""
    if any(v is True for v in values):
        return True
    return None if any(v is None for v in values) else False


SEED_BY_SEED = "seed by seed, "
"""How a traced comparison decided seed by seed (:meth:`_Evaluator._contrast`) begins, as reports print it."""

MAX_CHARS, MAX_DEPTH = 10_000, 60
MAX_TERMS = 10_000_000
"""basis_regret(d, T, ...) sums d + T terms in Python: bounded, so that a claim cannot stall validation."""


def value_at(rounds: np.ndarray, cum: np.ndarray, t: float | None) -> np.ndarray:
    """Per-seed values of the curves ``cum`` (S, P) at the last recorded round ≤ t (the horizon for None;
    0 before the first recorded round)."""
    if t is None:
        return cum[:, -1]
    if t <= 0:
        return np.zeros(cum.shape[0])
    i = np.searchsorted(rounds, t, side="right") - 1
    return np.zeros(cum.shape[0]) if i < 0 else cum[:, i]


class MissingCase(Exception):
    """Raised by a ``curves`` callback for a case that was not run (its data set is not available, or
    ``--cases`` left it out): the call that read it has an unknown value."""


class _Unknown:
    """The value of a call that reads a case that was not run: arithmetic on it stays unknown, a comparison
    with it is undetermined, so a claim is decided only when its other parts decide it."""

    def __repr__(self) -> str:
        return "unknown"


UNKNOWN = _Unknown()


class _Evaluator:
    def __init__(self, curves: Curves, horizon: int, grid: Callable[[str], list[Any]],
                 functions: tuple[ClaimFunction, ...] = (), margins: bool = False):
        self._curves, self.horizon, self.grid, self._find_margins = curves, horizon, grid, margins
        self.functions = {f.name: f for f in functions}
        self.trace: list[tuple[str, float]] = []
        self.differences: list[tuple[str, str, np.ndarray, int]] = []  # every paired(): (call, stat, a − b, id)
        self.margins: dict[int, float | None] = {}  # a paired() call's id → its margin (None: not read)
        self._probing: dict[int, float] = {}  # while a margin is found: a call's id → the number it stands for
        self.contrasts: list[tuple[str, np.ndarray, int]] = []  # per-seed comparisons: (text, gap, paired id)
        self._per_seed = False  # while a comparison is evaluated seed by seed (_contrast)

    def curves(self, label: str, case: dict[str, Any],
               metric: str = "regret") -> tuple[np.ndarray, np.ndarray, Timing]:
        """The run's curves (:data:`Curves`), refused where a seed's values are not finite: a NaN or an infinity
        in a mean or an interval would decide a comparison whichever way the claim is phrased."""
        rounds, cum, timing = self._curves(label, case, metric) if metric != "regret" else self._curves(label, case)
        bad = ~np.isfinite(cum).all(axis=-1)
        if bad.any():
            raise ConfigError(f"{label!r}: its {metric} curve is not finite (NaN or infinite) in {int(bad.sum())} "
                              f"of its {bad.size} seeds, so no claim can read it")
        return rounds, cum, timing

    def __call__(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            if isinstance(node.value, float) and not math.isfinite(node.value):
                raise OverflowError  # a literal such as 1e309
            return node.value
        if isinstance(node, ast.Name) and node.id == "T":
            return self.horizon
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            operands = [self(x) for x in (node.left, node.right)]
            if any(x is UNKNOWN for x in operands):
                return UNKNOWN
            if any(isinstance(x, np.ndarray) for x in operands):
                return _per_seed(node.op, *operands)
            a, b = (_number(x, f"{ast.unparse(node)!r}", interval=True) for x in operands)
            return _BINOPS[type(node.op)](a, b)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = self(node.operand)
            if operand is UNKNOWN:
                return UNKNOWN
            if isinstance(operand, np.ndarray):
                return -operand
            return _scale(_number(operand, f"{ast.unparse(node)!r}", interval=True), -1.0)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            v = self._truth(self(node.operand))
            return None if v is None else not v
        if isinstance(node, ast.BoolOp):
            values = [self._truth(self(v)) for v in node.values]
            return _kleene_and(values) if isinstance(node.op, ast.And) else _kleene_or(values)
        if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            left_node, left, outcomes = node.left, self(node.left), []
            for op, right_node in zip(node.ops, node.comparators):
                right = self(right_node)
                outcome = None if left is UNKNOWN or right is UNKNOWN else _compare(op, left, right)
                contrast = None if left is UNKNOWN or right is UNKNOWN or self._probing or self._per_seed \
                    else self._contrast(left_node, right_node)
                outcomes.append(outcome if contrast is None else _compare(op, contrast, 0.0))
                if self._find_margins and not self._probing:  # (only for seeds: a verdict does not need them)
                    self._note_margin(left_node, right_node)
                left_node, left = right_node, right
            return _kleene_and(outcomes)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._call(node)
        raise ConfigError(f"unsupported expression element {ast.unparse(node)!r}")

    def _note_margin(self, left_node: ast.AST, right_node: ast.AST) -> None:
        """Keep the margin of the one ``paired(...)`` a comparison reads (:attr:`margins`): the value of the paired
        mean (or of its ``lower``/``upper`` end) at which the comparison turns, the rest of it held at its values
        here (``paired(a, b) / regret(b) <= -0.5`` turns at -0.5·regret(b), ``-paired(a, b) >= 20`` at -20).
        Found by evaluating the two sides with the call standing for 0, 1 and 2: None where they are not affine in
        it (a square root, a min) or the comparison reads several paired() calls."""
        calls = [n for side in (left_node, right_node) for n in ast.walk(side) if _named(n, "paired")]
        if not calls:
            return
        if len(calls) > 1:
            self.margins.update({id(n): None for n in calls if id(n) not in self.margins})
            return
        target = next((n for side in (left_node, right_node) for n in ast.walk(side)
                       if _named(n, "lower") or _named(n, "upper")), calls[0])
        trace, differences = len(self.trace), len(self.differences)
        try:
            gaps = []
            for x in (0.0, 1.0, 2.0):
                self._probing[id(target)] = x
                left, right = self(left_node), self(right_node)
                gaps.append(float(left) - float(right))
        except (ConfigError, TypeError, ValueError, ArithmeticError):
            gaps = []
        finally:
            self._probing.clear()
            del self.trace[trace:], self.differences[differences:]
        slope = gaps[1] - gaps[0] if gaps else 0.0
        affine = bool(gaps) and slope != 0 and abs(gaps[2] - gaps[1] - slope) <= 1e-9 * max(map(abs, gaps + [1.0]))
        margin, before = (-gaps[0] / slope if affine else None), self.margins.get(id(calls[0]), 0.0)
        if id(calls[0]) in self.margins and None not in (margin, before):  # a chained comparison's two bounds: the
            mean = next(d.mean() for *_, d, n in self.differences if n == id(calls[0]))  # nearer decides the seeds
            margin = min(margin, before, key=lambda m: abs(mean - m))
        self.margins[id(calls[0])] = None if margin is None else margin + 0.0  # (not -0.0)

    def _contrast(self, left_node: ast.AST, right_node: ast.AST) -> Interval | None:
        """The comparison ``left op right`` of one ``paired(a, b)`` with a threshold that reads runs' means
        (``paired(a, b) <= 0.25 * regret(b)``), as the 95% interval of its per-seed gap left − right (a − 1.25·b, seed
        by seed), to be compared with 0: the threshold's own sampling error counts, where comparing the paired
        interval with the threshold's point estimate would ignore it. Its mean is the point gap (the operations are
        affine). None, leaving the comparison to the interval of paired() alone, unless the two sides read exactly
        one paired() and at least one regret() or increment(), all means (not medians), all over the same number of
        seeds (the same seeds, as paired() assumes of a file's runs), combined only by sums, differences and
        products or quotients with numbers (:func:`_per_seed`)."""
        calls = [n.func.id for side in (left_node, right_node) for n in ast.walk(side)
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
        if calls.count("paired") != 1 or not {"regret", "increment"} & set(calls):
            return None
        trace, differences = len(self.trace), len(self.differences)
        self._per_seed = True
        try:
            gap = self(left_node) - self(right_node)
            paired = next(n for *_, n in self.differences[differences:])
        except (_NotPerSeed, ConfigError, TypeError, ValueError, StopIteration):  # (lower(), runs of other seeds)
            return None
        finally:
            self._per_seed = False
            del self.trace[trace:], self.differences[differences:]
        if not isinstance(gap, np.ndarray):
            return None
        if not np.all(np.isfinite(gap)):
            raise OverflowError
        value, text = paired_interval(gap), ast.unparse(ast.BinOp(left_node, ast.Sub(), right_node))
        negated = ast.unparse(left_node) + " - -"  # (a - -0.75 * b reads a + 0.75 * b)
        text = text.replace(negated, negated[:-4] + " + ", 1) if text.startswith(negated) else text
        self.trace.append((f"{SEED_BY_SEED}{text} = {value.text()} (95% CI), against 0", value.mean))
        self.contrasts.append((text, gap, paired))
        return value

    @staticmethod
    def _truth(value) -> bool | None:
        """``value`` as a three-valued truth (None: undetermined); a ConfigError unless it is one."""
        if value is None or isinstance(value, bool):
            return value
        if value is UNKNOWN:
            return None
        if isinstance(value, Interval):
            raise ConfigError("a paired() interval is not a truth value; compare it with a number")
        raise ConfigError(f"{value!r} is not a truth value; a claim is a comparison such as regret('A') <= 100")

    def _phases(self, node: ast.Call, label: str, case: dict[str, Any]) -> Timing:
        """The :class:`Timing` of run ``label`` (in ``case``), whose phases a claim reads; a ConfigError when they
        were not timed apart."""
        timing = self.curves(label, case)[2]
        if timing.sampled is None:
            raise ConfigError(f"{ast.unparse(node)}: run {label!r} has no phases timed apart (computed before its "
                              "experiment asked for them); delete it from the store and run it again")
        return timing

    def _call(self, node: ast.Call) -> Any:
        if id(node) in self._probing:
            return self._probing[id(node)]
        name = node.func.id
        args = [self(a) for a in node.args]
        kwargs = {k.arg: self(k.value) for k in node.keywords}
        if name != "at_least" and any(a is UNKNOWN for a in [*args, *kwargs.values()]):
            return UNKNOWN
        try:
            return self._known_call(node, name, args, kwargs)
        except MissingCase:
            return UNKNOWN

    def _round(self, node: ast.Call, value: Any, what: str = "t") -> float | None:
        """``value`` as a round of the horizon (None stays None: the horizon); a ConfigError unless it is a number
        in [0, T]."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= self.horizon:
            raise ConfigError(f"{ast.unparse(node)}: {what} must be a round in [0, T = {self.horizon}], got {value!r}")
        return value

    def _known_call(self, node: ast.Call, name: str, args: list, kwargs: dict) -> Any:
        """The value of call ``node`` (function ``name``) with its evaluated arguments."""
        if name == "paired" and len(args) == 2 and all(isinstance(a, str) for a in args):
            t, stat = self._round(node, kwargs.pop("t", None)), kwargs.pop("stat", "mean")
            if stat not in ("mean", "median"):
                raise ConfigError(f"{ast.unparse(node)}: stat must be 'mean' or 'median'")
            rounds_a, cum_a, _ = self.curves(args[0], kwargs)
            rounds_b, cum_b, _ = self.curves(args[1], kwargs)
            diff = value_at(rounds_a, cum_a, t) - value_at(rounds_b, cum_b, t)
            if self._per_seed and stat != "mean":
                raise _NotPerSeed
            value = paired_interval(diff, stat)
            self.trace.append((f"{ast.unparse(node)} = {value.text()} (95% CI)", value.mean))
            self.differences.append((ast.unparse(node), stat, diff, id(node)))
            return diff if self._per_seed else value
        if name in ("lower", "upper") and len(args) == 1 and isinstance(args[0], Interval) and not kwargs:
            return args[0].lo if name == "lower" else args[0].hi
        if name == "at_least" and len(args) >= 2 and not kwargs:
            n = _number(args[0], f"{ast.unparse(node)!r}")
            if not float(n).is_integer() or not 1 <= n <= len(args) - 1:
                raise ConfigError(f"{ast.unparse(node)}: the count must be an integer in [1, {len(args) - 1}]")
            truths = [self._truth(a) for a in args[1:]]
            held, open_ = sum(v is True for v in truths), sum(v is None for v in truths)
            self.trace.append((f"at_least({int(n)}, …): {held} of {len(truths)} hold, {open_} undetermined", held))
            return True if held >= n else (False if held + open_ < n else None)
        if name in ("min", "max", "abs", "sqrt") and not kwargs and args:
            args = [_number(a, f"{ast.unparse(node)!r}") for a in args]
            return {"min": min, "max": max, "abs": abs, "sqrt": _sqrt}[name](*args)
        if name in _THEORY and len(args) == _THEORY[name][1] and not kwargs:
            fn, _ = _THEORY[name]
            ints = _INTEGER_ARGS.get(name, ())
            if name == "basis_regret" and sum(_number(a, f"{ast.unparse(node)!r}") for a in args[:2]) > MAX_TERMS:
                raise ConfigError(f"{ast.unparse(node)}: sums d + T terms; at most {MAX_TERMS:,} are allowed")
            try:
                value = fn(*(int(a) if i in ints and float(a).is_integer() else float(a) for i, a in enumerate(args)))
            except (TypeError, ValueError) as e:
                raise ConfigError(f"{ast.unparse(node)}: {e}") from None
            self.trace.append((ast.unparse(node), value))
            return value
        if name in ("r2", "slope") and len(args) == 2 and all(isinstance(a, str) for a in args):
            label, key = args
            t = self._round(node, kwargs.pop("t", None))
            xs = self.grid(key)
            if len(xs) < 3 or key in kwargs:
                raise ConfigError(f"{ast.unparse(node)}: {key!r} must be an environment grid key with at least 3 "
                                  f"values (got {xs})")
            ys = np.array([np.mean(value_at(*self.curves(label, {**kwargs, key: x})[:2], t)) for x in xs])
            xs = np.asarray(xs, float)
            slope, intercept = np.polyfit(xs, ys, 1)
            total = np.sum((ys - ys.mean()) ** 2)
            value = float(slope) if name == "slope" else float(
                1.0 - np.sum((ys - slope * xs - intercept) ** 2) / total if total > 0 else 1.0)
            self.trace.append((ast.unparse(node), value))
            return value
        if name == "quantile" and len(args) == 2 and isinstance(args[0], str):
            q = float(args[1])
            if not 0.0 <= q <= 1.0:
                raise ConfigError(f"{ast.unparse(node)}: the quantile must be in [0, 1], got {q}")
            rounds, cum, _ = self.curves(args[0], {k: v for k, v in kwargs.items() if k != "t"})
            value = float(np.quantile(value_at(rounds, cum, self._round(node, kwargs.get("t"))), q))
            self.trace.append((ast.unparse(node), value))
            return value
        if name == "runtime" and len(args) == 1 and isinstance(args[0], str):
            value = float(self.curves(args[0], kwargs)[2].run)
            self.trace.append((ast.unparse(node), value))
            return value
        if name in PHASE_FUNCTIONS and len(args) == 1 and isinstance(args[0], str):
            value = getattr(self._phases(node, args[0], kwargs), PHASE_FUNCTIONS[name])
            self.trace.append((ast.unparse(node), float(value)))
            return float(value)
        if name == "phase_diff" and len(args) == 2 and all(isinstance(a, str) for a in args):
            spread = _number(kwargs.pop("spread", 0.0), f"{ast.unparse(node)!r}: spread")
            if not 0.0 <= spread <= 1.0:
                raise ConfigError(f"{ast.unparse(node)}: spread must be a number in [0, 1], got {spread!r}")
            (rounds_a, own_a), (rounds_b, own_b) = (self._phases(node, label, kwargs).sampled for label in args)
            if not np.array_equal(rounds_a, rounds_b):
                raise ConfigError(f"{ast.unparse(node)}: the two runs were timed at different rounds ({rounds_a} "
                                  f"and {rounds_b}); give them the same horizon")
            if own_a.shape != own_b.shape:
                raise ConfigError(f"{ast.unparse(node)}: the two runs were timed in {own_a.shape[0]} and "
                                  f"{own_b.shape[0]} processes; time them in one group (the same seeds)")
            processes = own_a.shape[0]
            if processes > 1 and spread:
                raise ConfigError(f"{ast.unparse(node)}: spread widens the interval of a timing in one process for "
                                  f"the shift between processes; these runs were timed in {processes}, whose "
                                  "interval measures it: drop spread")
            if processes > 1:
                value = process_interval(own_a - own_b)
                over = f"{processes} processes × {rounds_a.size} sampled rounds"
            else:
                value = paired_interval(own_a[0] - own_b[0])
                widen = spread * float(own_a.mean() + own_b.mean()) / 2
                value = Interval(value.mean, value.lo - widen, value.hi + widen)
                over = f"{rounds_a.size} sampled rounds" + (f", widened by ±{widen:.2f}" if spread else "")
            self.trace.append((f"{ast.unparse(node)} = {value.text()}: the 95% CI over {over}", value.mean))
            return value
        if name in ("growth", "stuck") and len(args) == 1 and isinstance(args[0], str):
            threshold = _number(kwargs.pop("threshold", 0.8), f"{ast.unparse(node)!r}: threshold") \
                if name == "stuck" else None
            if threshold is not None and not threshold >= 0:  # (a string once a NumPy error, -1 accepted)
                raise ConfigError(f"{ast.unparse(node)}: threshold must be a number >= 0, got {threshold!r}")
            rounds, cum, _ = self.curves(args[0], kwargs)
            half, end = value_at(rounds, cum, self.horizon / 2), cum[:, -1]
            if name == "growth":
                value = float((end.mean() - half.mean()) / max(half.mean(), 1e-300))
            else:
                value = float(np.mean(end - half > threshold * np.maximum(half, 1e-300)))
            self.trace.append((ast.unparse(node), value))
            return value
        if name == "reward" and len(args) == 1 and isinstance(args[0], str):
            t = self._round(node, kwargs.pop("t", None))
            rounds, cum, _ = self.curves(args[0], kwargs, "reward")
            at = self.horizon if t is None else (rounds[rounds <= t][-1] if np.any(rounds <= t) else 0)
            value = float(np.mean(value_at(rounds, cum, t))) / max(float(at), 1.0)
            self.trace.append((ast.unparse(node), value))
            return value
        if name in ("regret", "std", "se", "increment") and args and isinstance(args[0], str):
            label = args[0]
            stat = kwargs.pop("stat", "mean")
            if stat not in ("mean", "median") or (name in ("std", "se") and stat != "mean"):
                raise ConfigError(f"{ast.unparse(node)}: stat must be 'mean' or 'median' (regret, increment)")
            average = np.mean if stat == "mean" else np.median
            if name == "increment":
                if len(args) != 3:
                    raise ConfigError(f"{ast.unparse(node)}: increment(label, t0, t1) takes three arguments")
                t0, t1 = self._round(node, args[1], "t0"), self._round(node, args[2], "t1")
                if t0 > t1:
                    raise ConfigError(f"{ast.unparse(node)}: the window must run forward, t0 <= t1 (got {t0} > {t1})")
            else:
                if len(args) != 1:
                    raise ConfigError(f"{ast.unparse(node)}: {name}(label, t=None, **case) takes one positional "
                                      "argument")
                t0, t1 = None, self._round(node, kwargs.pop("t", None))
            rounds, cum, _ = self.curves(label, kwargs)
            end = value_at(rounds, cum, t1)
            if self._per_seed and name in ("regret", "increment"):
                if stat != "mean":
                    raise _NotPerSeed
                return end - value_at(rounds, cum, t0) if name == "increment" else end
            if name == "increment":
                value = float(average(end - value_at(rounds, cum, t0)))
            elif name == "regret":
                value = float(average(end))
            else:
                value = float(np.std(end, ddof=1)) if end.size > 1 else 0.0
                value = value / np.sqrt(end.size) if name == "se" else value
            self.trace.append((ast.unparse(node), value))
            return value
        own = self.functions.get(name)
        if own is not None and len(args) == 1 + own.args and isinstance(args[0], str):
            label = args[0]
            value = own.value(lambda metric: self.curves(label, kwargs, metric)[1][:, -1], *args[1:])
            self.trace.append((f"{ast.unparse(node)} = {own.text(value)}",
                               value.mean if isinstance(value, Interval) else value))
            return value
        forms = _FORMS + tuple(f.usage for f in self.functions.values())
        fitting = [form for form in forms if form.split("(")[0] == name]
        if fitting:
            note = " (a label is a string: 'Lin-ES')" if any("label" in f or "a, b" in f for f in fitting) else ""
            raise ConfigError(f"{ast.unparse(node)}: these arguments do not fit: {name} takes "
                              f"{' or '.join(fitting)}{note}")
        usage = ", ".join(forms)
        raise ConfigError(f"{ast.unparse(node)}: unknown function; allowed: {usage}")


_FORMS = ("regret(label)", "reward(label)", "paired(a, b)", "lower(paired(...))", "upper(paired(...))", "std(label)",
          "se(label)", "increment(label, t0, t1)", "growth(label)", "stuck(label)", "runtime(label)",
          "select_time(label)", "update_time(label)", "phase_diff(a, b)", "quantile(label, q)", "r2(label, key)",
          "slope(label, key)", "at_least(n, claim, ...)", "l(t0, b)", "basis_regret(d, T, sigma2, lam)",
          "mean_field(d, T, sigma2, lam)", "ftrl_bound(d, T, sigma2, delta)", "min(x, ...)", "max(x, ...)", "abs(x)",
          "sqrt(x)")
"""The claim functions and their arguments, as error messages show them (a loop's own are added)."""

KINDS = ("paper", "regression", "sanity")
"""Claim kinds: a statement of the paper or its spec (``paper``); a threshold the paper does not justify,
kept to catch regressions of the implementation (``regression``); true by construction, a sanity check
(``sanity``)."""


@dataclass
class ClaimResult:
    """Outcome of one claim: ``holds`` is the expression's truth (None: undetermined, the seeds cannot
    resolve it), ``ok`` whether the outcome is acceptable (as declared, or inconclusive)."""

    name: str
    text: str
    check: str
    expect: str
    holds: bool | None
    values: list[tuple[str, float]]
    kind: str = "paper"
    missing: str = ""  # why it was not checked (a data set that is not available)
    repeats: float | None = None  # the share of resampled draws that read as it does (None: not resampled)

    @property
    def ok(self) -> bool:
        """False only when a determined outcome contradicts ``expect``; an inconclusive claim is reported
        as such, not failed."""
        return self.holds is None or self.holds == (self.expect == "pass")


def traced_text(text: str, value: float) -> str:
    """One traced call as reports print it: ``regret('A') = 12.30``, or a text that states its value already (it
    does not end with the call's closing parenthesis, whatever its labels hold, or it ends with `` (95% CI)``: a
    ``paired(...)`` call with its mean and interval, an ``at_least(...)`` count, a loop's claim function,
    :class:`~nlbandit.plugins.ClaimFunction`) or a "decided without" note; a ``reward(...)`` (a rate, often below
    0.01) with four decimals."""
    if text.endswith(" (95% CI)") or not text.endswith(")") or text.startswith("decided without "):
        return text
    return f"{text} = {value:.4f}" if text.startswith("reward(") else f"{text} = {value:.2f}"


@functools.lru_cache(maxsize=1024)
def parse_claim(check: str) -> ast.Expression:
    """The syntax tree of a claim (which may span several lines), within the length and depth limits; cached, as a
    claim is read when its file is loaded and at every evaluation (:mod:`nlbandit.experiments.power` evaluates it
    thousands of times), and nothing changes a tree once parsed.

    Raises:
      ConfigError: not an expression, or too long or too deeply nested.
    """
    text = " ".join(check.splitlines())
    if len(text) > MAX_CHARS:
        raise ConfigError(f"claim is {len(text)} characters long; at most {MAX_CHARS} are allowed")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ConfigError(f"claim {check!r} is not a valid expression: {e.msg}") from None
    except (RecursionError, MemoryError):
        raise ConfigError(f"claim is nested too deeply (at most {MAX_DEPTH} levels)") from None
    depth = _depth(tree)
    if depth > MAX_DEPTH:
        raise ConfigError(f"claim is nested {depth} levels deep; at most {MAX_DEPTH} are allowed")
    return tree


def evaluate_claim(check: str, curves: Curves, horizon: int, grid: Callable[[str], list[Any]] = lambda key: [],
                   functions: tuple[ClaimFunction, ...] = ()) -> tuple[bool | None, list[tuple[str, float]]]:
    """Evaluate ``check``; return its truth (None when undetermined) and the values of every call.

    ``grid(key)`` lists the values of an environment grid key (for ``r2`` and ``slope``); ``functions`` are those
    the experiment's loop adds (:func:`nlbandit.plugins.claim_functions`)."""
    tree = parse_claim(check)
    text = " ".join(check.splitlines())
    ev = _Evaluator(curves, horizon, grid, functions)
    try:
        value = ev(tree)
    except ConfigError:
        raise
    except (OverflowError, MemoryError):
        raise ConfigError(f"claim {text[:80]!r}: arithmetic overflow") from None
    except (TypeError, ValueError) as e:  # e.g. a label where a number belongs: regret('A', t='B')
        raise ConfigError(f"claim {text[:80]!r}: {e}") from None
    return ev._truth(value), ev.trace


def paired_differences(check: str, curves: Curves, horizon: int, grid: Callable[[str], list[Any]] = lambda key: [],
                       functions: tuple[ClaimFunction, ...] = ()) -> list[tuple[str, str, np.ndarray, float | None]]:
    """Every ``paired(a, b, ...)`` that evaluating ``check`` computes (one reading a case that was not run is left
    out): (the call, its statistic, the per-seed differences a − b, its margin: the value of the paired mean, or of
    its ``lower``/``upper`` end, at which its comparison turns, evaluated on these curves (``_note_margin``); 0
    where it is compared with nothing, e.g. inside at_least's count; None where it cannot be read), for
    :mod:`nlbandit.experiments.power`. A paired() whose comparison is decided seed by seed
    (``paired(a, b) <= 0.25 * regret(b)``, :meth:`_Evaluator._contrast`) is given as that comparison instead: (its
    gap ``paired(a, b) - 0.25 * regret(b)``, 'mean', the per-seed gaps, margin 0)."""
    ev = _Evaluator(curves, horizon, grid, functions, margins=True)
    ev(parse_claim(check))
    out = []
    for call, stat, diff, node in ev.differences:
        contrasts = [(text, "mean", gap, 0.0) for text, gap, paired in ev.contrasts if paired == node]
        out.extend(contrasts or [(call, stat, diff, ev.margins.get(node, 0.0))])
    return out


def _named(node: ast.AST, name: str) -> bool:
    """Whether ``node`` is a call of the claim function ``name``."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _depth(node: ast.AST) -> int:
    """Nesting depth of an expression tree (iterative, so a deep tree cannot exhaust the stack)."""
    deepest, todo = 0, [(node, 1)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        todo.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def grid_values(exp) -> Callable[[str], list[Any]]:
    """``grid(key)``: the sorted values an environment grid key takes in ``exp`` (a ConfigError for a stratified
    field, whose values are pooled)."""
    def grid(key: str) -> list[Any]:
        values = sorted({dict(r.case)[key] for r in reported_runs(exp) if key in dict(r.case)})
        if not values and key in set(exp.strata.values()):
            raise ConfigError(f"{key!r} is a stratified field (an [[env]] table's 'strata'): its values share out "
                              "the seeds of one case, not a grid")
        return values

    return grid


def run_selector(exp, where: str = "claim") -> Callable[[str, dict[str, Any]], Any]:
    """``select(label, case) -> RunConfig``: the unique run of ``exp`` with that label and case (a stratified
    case's runs pooled: :func:`~nlbandit.experiments.strata.reported_runs`)."""
    runs = reported_runs(exp)

    def select(label: str, case: dict[str, Any]):
        if label in exp.labels_elsewhere:  # (once 'unknown label')
            raise ConfigError(f"{where}: series {label!r} does not run at the {exp.scale} scale (its table's "
                              "'scales'); give this claim the scales that run it (scales = [...])")
        if label not in exp.labels:
            raise ConfigError(f"{where}: unknown label {label!r}; labels: {', '.join(exp.labels)}")
        own = [r for r in runs if r.label == label]
        keys = sorted({k for r in own for k in dict(r.case)})
        unknown = sorted(set(case) - set(keys))
        if unknown:
            raise ConfigError(f"{where}: {label!r}: keyword {unknown[0]!r} is neither one this function takes "
                              "(docs/experiments.md#claims) nor an environment case key"
                              + (f" ({', '.join(keys)})" if keys else " (its runs have a single environment case)"))
        hits = [r for r in own if all(dict(r.case).get(k) == v for k, v in case.items())]
        if len(hits) != 1:
            cases = "; ".join(r.case_label for r in own)
            raise ConfigError(f"{where}: {label!r} with {case or 'no case'} matches {len(hits)} runs; "
                              f"give the environment case as keywords (cases: {cases})")
        return hits[0]

    return select


def _evaluate_unrun(check: str, exp, where: str, read: set[str] | None = None) -> None:
    """Evaluate claim ``check`` of ``exp`` on stand-in curves, every run it names resolved (and its id added to
    ``read``, a case not run read as missing); every operand is evaluated, and/or included, so each run any
    outcome could need is named."""
    select = run_selector(exp, where)

    from nlbandit.loops import LOOPS
    from nlbandit.plugins import claim_functions

    loop = LOOPS[exp.loop]

    def fake(label, case, metric="regret"):
        if metric not in loop.metrics:
            what = "rewards" if metric == "reward" else f"{metric!r} curve"
            raise ConfigError(f"{metric}({label!r}): a {exp.loop} run stores no {what}")
        if read is not None and case.get("case") in exp.missing:
            raise MissingCase(case["case"])
        run = select(label, case)
        if read is not None:
            read.add(run.run_id)
        sampled = (np.arange(1, 3), np.ones((exp.phase_processes, 2)))  # (a spread refused for several processes)
        return np.array([exp.horizon]), np.ones((2, 1)), Timing(1.0, 1.0, 1.0, sampled)

    try:
        evaluate_claim(check, fake, exp.horizon, grid_values(exp), claim_functions(exp.loop))
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") if not str(e).startswith(where) else e from None


def validate_claim(check: str, exp, where: str) -> None:
    """Check syntax, functions and label/case references of a claim without any results."""
    _evaluate_unrun(check, exp, where)


def claimed_runs(exp) -> set[str]:
    """The run ids that the claims of ``exp`` read (those it evaluates: an unchecked claim reads nothing, one that
    reads a case not run reads the others), found by evaluating each on stand-in curves (``[scales.X] series =
    "claimed"``)."""
    read: set[str] = set()
    for claim in exp.claims:
        if not claim.unchecked:
            _evaluate_unrun(claim.check, exp, f"claim {claim.name!r}", read)
    return read


def cases_read(check: str) -> set[str]:
    """The [[env]] case names that claim ``check`` names with a literal ``case='…'`` keyword."""
    return {k.value.value for node in ast.walk(parse_claim(check)) if isinstance(node, ast.Call)
            for k in node.keywords if k.arg == "case" and isinstance(k.value, ast.Constant)}


def _calls(check: str, functions) -> list[ast.Call]:
    """The calls in claim ``check`` of a function named in ``functions``."""
    return [node for node in ast.walk(parse_claim(check))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions]


def _runs_read_by(exp, functions) -> set[str]:
    """The run ids that a call of one of ``functions`` (names) in a claim of ``exp`` could read: a label or
    case keyword that is not a literal selects every run it could mean."""
    out: set[str] = set()
    for claim in exp.claims:
        for node in _calls(claim.check, functions):
            named = node.args[:2 if node.func.id == "phase_diff" else 1] or [None]  # its two labels
            labels = {a.value if isinstance(a, ast.Constant) else None for a in named}
            case = {k.arg: k.value.value for k in node.keywords
                    if k.arg and k.arg != "spread" and isinstance(k.value, ast.Constant)}
            out |= {r.run_id for r in exp.runs if (None in labels or r.label in labels)
                    and all(dict(r.case).get(k) == v for k, v in case.items())}
    return out


def reads_times(check: str) -> bool:
    """Whether claim ``check`` calls a function that reads a run's measured time (:data:`TIME_FUNCTIONS`)."""
    return bool(_calls(check, TIME_FUNCTIONS))


def phased_runs(exp) -> set[str]:
    """The run ids whose phases a claim of ``exp`` reads (``select_time``, ``update_time``, ``phase_diff``):
    computed alone with :class:`~nlbandit.core.phases.PhaseTimer`."""
    return _runs_read_by(exp, PHASED)


def runtime_runs(exp) -> set[str]:
    """The run ids whose whole simulation's time a claim of ``exp`` reads (``runtime``): simulated alone. (A run
    whose phases alone are read is simulated beside other work; only its timing session is alone.)"""
    return _runs_read_by(exp, {"runtime"})


def timed_runs(exp) -> set[str]:
    """The run ids whose measured time a claim of ``exp`` reads (``runtime``, ``select_time``,
    ``update_time``, ``phase_diff``).

    A run computed side by side with others shares their batch's time, which is the pace of its slowest
    lane, not its own; :func:`nlbandit.experiments.runner.run_experiment` computes these runs in batches of one:
    those of :func:`runtime_runs` with nothing beside them, the others (their phases read) beside other work, and
    then their timing sessions with nothing beside them.
    """
    return _runs_read_by(exp, TIME_FUNCTIONS)
