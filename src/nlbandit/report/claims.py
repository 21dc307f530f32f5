"""Claims: small boolean expressions over an experiment's results, checked by ``nlbandit check``.

Grammar (a safe subset of Python expressions, parsed with :mod:`ast`, never ``eval``'d):

* ``regret(label, t=None, stat='mean', **case)``: cumulative pseudo-regret at round ``t`` (default: the
  horizon; otherwise the last recorded round ≤ t), averaged over seeds (``stat='median'``: the median
  seed, i.e. the typical instance);
* ``std(label, t=None, **case)``: its standard deviation across seeds;
* ``increment(label, t0, t1, stat='mean', **case)``: regret accumulated between rounds t0 and t1;
* ``se(label, t=None, **case)``: the standard error of the mean regret, std/√S;
* ``growth(label, **case)``: the late-growth ratio ρ_late = (R(T) − R(T/2)) / R(T/2) of the mean regret
  curve (≈ 1 for linear regret, ≈ 0.41 for √T growth; spec 002 §6.2);
* ``stuck(label, threshold=0.8, **case)``: the fraction of seeds whose own ρ_late exceeds ``threshold``
  (instances whose regret still grows linearly);
* ``runtime(label, **case)``: measured run time in µs per seed-round (compilation excluded; runs
  simulated side by side in one grid share their batch's time equally);
* ``quantile(label, q, t=None, **case)``: the q-quantile across seeds of the regret at round t;
* ``r2(label, key, t=None, **case)`` / ``slope(label, key, t=None, **case)``: R² and slope of the
  least-squares line through the mean regret at round t against the environment grid key ``key`` (e.g.
  ``r2('FTRL', 'd', t=1000, sigma=2.0)``: is the regret linear in d?);
* theory values (plain numbers, :mod:`nlbandit.theory`): ``l(t0, b)``, the doubling trick's constant
  factor l(T₀, b) with γ = 1/2, δ = 3/2 (Sun, Wang & Xu 2025, Fig. 3b); ``basis_regret(d, T, sigma2,
  lam)``, FTRL's exact expected regret on Theorem 5.1's instance; ``mean_field(d, T, sigma2, lam)``, its
  mean-field approximation with sphere features; ``ftrl_bound(d, T, sigma2, delta)``, Theorem 4.1's
  bound (identity link; Zhao, Zhou, He & Gu 2023);
* ``min``, ``max``, ``abs``, ``sqrt``; numbers; ``T`` (the horizon); ``+ - * / **``; comparisons; ``and``/``or``/``not``.

``case`` keywords select an environment grid case (e.g. ``regret('GLM-TSL', d=5)``). Example:
``regret('Lin-ES') <= 1.5 * min(regret('Lin-TS'), regret('Lin-UCB'))``.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.theory import anytime_constant, ftrl_basis_regret, ftrl_mean_field_regret, ftrl_regret_bound

Curves = Callable[[str, dict[str, Any]], tuple[np.ndarray, np.ndarray, float]]
"""``curves(label, case) -> (rounds (P,), cum_regret (S, P), run time in µs per seed-round)``."""

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


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _divide,
           ast.Pow: lambda a, b: float(a) ** float(b)}  # floats: overflows raise instead of growing without bound
_CMPOPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}


def value_at(rounds: np.ndarray, cum: np.ndarray, t: float | None) -> np.ndarray:
    """Per-seed values of the curves ``cum`` (S, P) at the last recorded round ≤ t (the horizon for None;
    0 before the first recorded round)."""
    if t is None:
        return cum[:, -1]
    if t <= 0:
        return np.zeros(cum.shape[0])
    i = np.searchsorted(rounds, t, side="right") - 1
    return np.zeros(cum.shape[0]) if i < 0 else cum[:, i]


class _Evaluator:
    def __init__(self, curves: Curves, horizon: int, grid: Callable[[str], list[Any]]):
        self.curves, self.horizon, self.grid = curves, horizon, grid
        self.trace: list[tuple[str, float]] = []

    def __call__(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            return node.value
        if isinstance(node, ast.Name) and node.id == "T":
            return self.horizon
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            return _BINOPS[type(node.op)](self(node.left), self(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
            v = self(node.operand)
            return -v if isinstance(node.op, ast.USub) else not v
        if isinstance(node, ast.BoolOp):
            values = [bool(self(v)) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and all(type(o) in _CMPOPS for o in node.ops):
            left, ok = self(node.left), True
            for op, right_node in zip(node.ops, node.comparators):
                right = self(right_node)
                ok = ok and _CMPOPS[type(op)](left, right)
                left = right
            return ok
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._call(node)
        raise ConfigError(f"unsupported expression element {ast.unparse(node)!r}")

    def _call(self, node: ast.Call) -> float:
        name = node.func.id
        args = [self(a) for a in node.args]
        kwargs = {k.arg: self(k.value) for k in node.keywords}
        if name in ("min", "max", "abs", "sqrt") and not kwargs and args:
            return {"min": min, "max": max, "abs": abs, "sqrt": _sqrt}[name](*args)
        if name in _THEORY and len(args) == _THEORY[name][1] and not kwargs:
            fn, _ = _THEORY[name]
            ints = _INTEGER_ARGS.get(name, ())
            try:
                value = fn(*(int(a) if i in ints and float(a).is_integer() else float(a) for i, a in enumerate(args)))
            except (TypeError, ValueError) as e:
                raise ConfigError(f"{ast.unparse(node)}: {e}") from None
            self.trace.append((ast.unparse(node), value))
            return value
        if name in ("r2", "slope") and len(args) == 2 and all(isinstance(a, str) for a in args):
            label, key = args
            t = kwargs.pop("t", None)
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
            value = float(np.quantile(value_at(rounds, cum, kwargs.get("t")), q))
            self.trace.append((ast.unparse(node), value))
            return value
        if name == "runtime" and len(args) == 1 and isinstance(args[0], str):
            value = float(self.curves(args[0], kwargs)[2])
            self.trace.append((ast.unparse(node), value))
            return value
        if name in ("growth", "stuck") and len(args) == 1 and isinstance(args[0], str):
            threshold = kwargs.pop("threshold", 0.8) if name == "stuck" else None
            rounds, cum, _ = self.curves(args[0], kwargs)
            half, end = value_at(rounds, cum, self.horizon / 2), cum[:, -1]
            if name == "growth":
                value = float((end.mean() - half.mean()) / max(half.mean(), 1e-300))
            else:
                value = float(np.mean(end - half > threshold * np.maximum(half, 1e-300)))
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
                t0, t1 = args[1], args[2]
            else:
                if len(args) != 1:
                    raise ConfigError(f"{ast.unparse(node)}: {name}(label, t=None, **case) takes one positional argument")
                t0, t1 = None, kwargs.pop("t", None)
            rounds, cum, _ = self.curves(label, kwargs)
            end = value_at(rounds, cum, t1)
            if name == "increment":
                value = float(average(end - value_at(rounds, cum, t0)))
            elif name == "regret":
                value = float(average(end))
            else:
                value = float(np.std(end, ddof=1)) if end.size > 1 else 0.0
                value = value / np.sqrt(end.size) if name == "se" else value
            self.trace.append((ast.unparse(node), value))
            return value
        raise ConfigError(
            f"{ast.unparse(node)}: unknown function; allowed: regret(label), std(label), se(label), "
            "increment(label, t0, t1), growth(label), stuck(label), runtime(label), quantile(label, q), "
            "r2(label, key), slope(label, key), l(t0, b), basis_regret(d, T, sigma2, lam), "
            "mean_field(d, T, sigma2, lam), ftrl_bound(d, T, sigma2, delta), min, max, abs, sqrt"
        )


@dataclass
class ClaimResult:
    """Outcome of one claim: ``holds`` is the expression's truth, ``ok`` whether that was expected."""

    name: str
    text: str
    check: str
    expect: str
    holds: bool
    values: list[tuple[str, float]]

    @property
    def ok(self) -> bool:
        """True when the claim came out as declared (``expect``)."""
        return self.holds == (self.expect == "pass")


def evaluate_claim(check: str, curves: Curves, horizon: int,
                   grid: Callable[[str], list[Any]] = lambda key: []) -> tuple[bool, list[tuple[str, float]]]:
    """Evaluate ``check``; return its truth and the values of every regret/std/increment call.

    ``grid(key)`` lists the values of an environment grid key (for ``r2`` and ``slope``)."""
    try:
        tree = ast.parse(" ".join(check.splitlines()), mode="eval")  # a claim may span several lines
    except SyntaxError as e:
        raise ConfigError(f"claim {check!r} is not a valid expression: {e.msg}") from None
    ev = _Evaluator(curves, horizon, grid)
    return bool(ev(tree)), ev.trace


def grid_values(exp) -> Callable[[str], list[Any]]:
    """``grid(key)``: the sorted values an environment grid key takes in ``exp``."""
    return lambda key: sorted({dict(r.case)[key] for r in exp.runs if key in dict(r.case)})


def run_selector(exp, where: str = "claim") -> Callable[[str, dict[str, Any]], Any]:
    """``select(label, case) -> RunConfig``: the unique run of ``exp`` with that label and case."""

    def select(label: str, case: dict[str, Any]):
        if label not in exp.labels:
            raise ConfigError(f"{where}: unknown label {label!r}; labels: {', '.join(exp.labels)}")
        hits = [r for r in exp.runs if r.label == label and all(dict(r.case).get(k) == v for k, v in case.items())]
        if len(hits) != 1:
            cases = "; ".join(r.case_label for r in exp.runs if r.label == label)
            raise ConfigError(f"{where}: {label!r} with {case or 'no case'} matches {len(hits)} runs; "
                              f"give the environment case as keywords (cases: {cases})")
        return hits[0]

    return select


def validate_claim(check: str, exp, where: str) -> None:
    """Check syntax, functions and label/case references of a claim without any results."""
    select = run_selector(exp, where)

    def fake(label, case):
        select(label, case)
        return np.array([exp.horizon]), np.ones((2, 1)), 1.0

    try:
        evaluate_claim(check, fake, exp.horizon, grid_values(exp))
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") if not str(e).startswith(where) else e from None
