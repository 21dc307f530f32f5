"""Experiment files (TOML): schema, validation at the boundary, grid expansion.

The schema (top-level keys, ``[scales.X]``, ``[env]`` / ``[[env]]`` cases, ``[[policies]]``, ``[[claims]]``,
``[tune]``, ``loop``) and the validation rules are documented in ``docs/experiments.md``. Everything is
validated before any computation; errors name the field and what is allowed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import re
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlbandit.core.hyper import ConfigError, Hyper, resolve
from nlbandit.data.cache import DataError
from nlbandit.experiments.claims import KINDS, cases_read, phased_runs, validate_claim
from nlbandit.loops import DEFAULT_LOOP, LOOPS
from nlbandit.core.memory import check_memory
from nlbandit.loops.phases import PHASE_TIMERS
from nlbandit.policies.neural_memory import neural_memory
from nlbandit.provenance import code_hash

SCALES = ("quick", "full")
EXTRA_PLOTS = ("anytime-constant", "regret-vs-d")
"""Report panels beside the regret curves: ``anytime-constant`` plots l(T₀, b) against b for the T₀ of
the experiment's ``@anytime`` runs (Sun, Wang & Xu 2025, Fig. 3b); ``regret-vs-d`` plots the mean
regret at each of the ``checkpoints`` against the environment grid key ``d``, one panel per series and
remaining grid case (Zhao, Zhou, He & Gu 2023, Fig. 3)."""

_TOP = (
    Hyper("name", None, "experiment name", kind=str, optional=True),
    Hyper("paper", None, "paper folder (zhao2023, bae2025, kveton2020, sun2025)", kind=str, optional=True),
    Hyper("title", "", "one-line title", kind=str),
    Hyper("description", "", "free text shown in the report", kind=str),
    Hyper("horizon", None, "number of rounds T", kind=int, low=1),
    Hyper("seeds", None, "number of repetitions", kind=int, low=1),
    Hyper("record_points", 1000, "number of curve points kept", kind=int, low=2),
    Hyper("curves", True, "plot the regret curves (one panel per environment case)", kind=bool),
    Hyper("checkpoints", None, "rounds read by the 'regret-vs-d' panel (omitted: the horizon)", kind=list,
          optional=True),
    Hyper("ci", None, "level of the report's intervals of the mean, Student t with S − 1 degrees of freedom "
          "(omitted: 95% normal intervals)", low=0.0, high=1.0, low_open=True, high_open=True, optional=True),
    Hyper("loop", DEFAULT_LOOP, "bandit simulation, or online regression (Zhao et al. 2023): a loop of "
          "nlbandit.loops.LOOPS", kind=str),
)
_TABLES = ("scales", "env", "policies", "claims", "plots", "tune", "diagnostics")
DIAGNOSTICS = ("effective-dimension",)
"""Report sections computed from the environments rather than the runs: ``effective-dimension`` tabulates,
per environment case, the realised d̃ = log det((R/λ₀)H̃ + I) over the T·K contexts each reported seed
presents (Bae & Lee 2025, spec 001 §4.4; :func:`nlbandit.models.ntk.realized_effective_dimension`)."""
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")
"""What ``name`` and ``paper`` may be: report paths are built from them, so a plain file name (no ``/``,
``\\``, NUL or leading ``.``) that cannot point outside the report folder."""
MAX_ROUNDS = 2**31 - 1
"""The largest horizon: the engine counts rounds in int32 ranges."""
MAX_SEEDS = 2**32
"""The most repetitions: seeds 0..S−1 are uint32 (:func:`nlbandit.core.simulate.simulate`)."""
MAX_GRID = 10_000
"""The most configurations one table's grid (the product of its list values) or one file may expand to."""
_SCALE_KEYS = (
    Hyper("horizon", None, "number of rounds T", kind=int, low=1, optional=True),
    Hyper("seeds", None, "number of repetitions", kind=int, low=1, optional=True),
    Hyper("tune_seeds", None, "number of tuning seeds ([tune] seeds)", kind=int, low=1, optional=True),
)
OBJECTIVES = ("min-regret", "max-reward")
"""What tuning optimises: the mean final cumulative regret (minimised) or reward (maximised)."""
_TUNE_KEYS = (
    Hyper("seeds", None, "number of tuning seeds", kind=int, low=1),
    Hyper("objective", "min-regret", "the mean final value a tuning point is chosen by", kind=str,
          choices=OBJECTIVES),
    Hyper("offset", 10**9, "the first tuning seed (tuning seeds are offset..offset+seeds-1)", kind=int, low=1),
)
_CLAIM_KEYS = (
    Hyper("name", None, "short identifier", kind=str),
    Hyper("text", "", "what the claim says, with its source", kind=str),
    Hyper("check", None, "expression over regret(...), std(...), increment(...)", kind=str),
    Hyper("expect", "pass", "whether the claim is expected to hold (a documented negative finding "
          "is declared with 'fail')", kind=str, choices=("pass", "fail")),
    Hyper("kind", "paper", "paper: the paper's or spec's statement; regression: a threshold the paper does not "
          "justify, a check on the implementation; sanity: true by construction", kind=str,
          choices=KINDS),
)


def run_code(policy: str, env: str, loop: str = DEFAULT_LOOP) -> str:
    """:func:`~nlbandit.provenance.code_hash` of the modules that compute a run of registered ``policy``
    (or learner) on ``env`` (or stream) in ``loop``: the loop's engine, the policy's and the environment's
    constructors with everything they import (:meth:`~nlbandit.loops.base.Loop.code_modules`), and the
    loop's own module and its base, which decide what is stored."""
    return code_hash(LOOPS[loop].code_modules(policy, env),
                     shallow=(type(LOOPS[loop]).__module__, "nlbandit.loops.base"))


@dataclass(frozen=True)
class RunConfig:
    """One (environment case, policy configuration) pair to simulate.

    Attributes:
      label: display label (policy label plus its grid values).
      case: the environment grid values of this run ({} without an environment grid).
      env, policy: fully resolved configs (registry name + every hyperparameter).
      horizon, n_seeds, record_points: simulation sizes; seeds are seed_offset..seed_offset+n_seeds-1.
      loop: the name of its :class:`~nlbandit.loops.base.Loop` (``bandit``: env and policy registries;
        ``regression``: streams and learners).
      seed_offset: the first seed (0 for reported runs, ``[tune] offset`` for tuning runs).
    """

    label: str
    case: tuple[tuple[str, Any], ...]
    env: dict[str, Any]
    policy: dict[str, Any]
    horizon: int
    n_seeds: int
    record_points: int
    loop: str = DEFAULT_LOOP
    seed_offset: int = 0

    @property
    def seeds(self) -> range:
        """The run's seeds."""
        return range(self.seed_offset, self.seed_offset + self.n_seeds)

    @property
    def code(self) -> str:
        """The hash of the source that computes this run (:func:`run_code`)."""
        return run_code(self.policy["name"], self.env["name"], self.loop)

    def identity(self) -> dict[str, Any]:
        """What determines the run's results (the label does not): the resolved configuration and the
        hash of the code that computes it, so that a stored run is never reused after that code changed."""
        ident = {
            "env": self.env,
            "policy": self.policy,
            "horizon": self.horizon,
            "n_seeds": self.n_seeds,
            "record_points": self.record_points,
            "code": self.code,
        }
        if self.seed_offset:
            ident["seed_offset"] = self.seed_offset
        return ident if self.loop == DEFAULT_LOOP else {**ident, "loop": self.loop}

    @classmethod
    def from_identity(cls, identity: dict[str, Any], label: str = "") -> "RunConfig":
        """The run a stored :meth:`identity` describes, under the current code (its ``code`` is recomputed)."""
        return cls(label, (), identity["env"], identity["policy"], identity["horizon"], identity["n_seeds"],
                   identity["record_points"], identity.get("loop", DEFAULT_LOOP), identity.get("seed_offset", 0))

    @property
    def run_id(self) -> str:
        """Hash of :meth:`identity`."""
        blob = json.dumps(self.identity(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:20]

    @property
    def case_label(self) -> str:
        """``d=5, k=100`` style text for the environment case ('' without a grid)."""
        return ", ".join(f"{k}={v}" for k, v in self.case)


@dataclass(frozen=True)
class Tuning:
    """The tuning of one series on one environment case (:mod:`nlbandit.experiments.tuning`).

    Attributes:
      label, case: the series and the case, as its reported run has them.
      points: the grid's points ({field: value}), in grid order.
      candidates: each point's run on the tuning seeds.
      reported: each point's run on the reported seeds; the chosen one is the series' run on the case.
      objective: one of :data:`OBJECTIVES`.
    """

    label: str
    case: tuple[tuple[str, Any], ...]
    points: tuple[dict[str, Any], ...]
    candidates: tuple[RunConfig, ...]
    reported: tuple[RunConfig, ...]
    objective: str

    @property
    def case_label(self) -> str:
        """The case as :attr:`RunConfig.case_label` writes it."""
        return self.reported[0].case_label


@dataclass(frozen=True)
class Claim:
    """A checkable claim of an experiment file."""

    name: str
    text: str
    check: str
    expect: str
    kind: str = "paper"
    missing: str = ""  # why it cannot be checked: it reads an [[env]] case whose data set is not available


@dataclass
class Experiment:
    """A parsed, validated experiment at one scale."""

    path: Path
    name: str
    paper: str
    title: str
    description: str
    scale: str
    horizon: int
    n_seeds: int
    runs: list[RunConfig]
    claims: list[Claim]
    labels: list[str] = field(default_factory=list)
    env_cases: list[tuple[tuple[str, Any], ...]] = field(default_factory=list)
    plots: tuple[str, ...] = ()
    loop: str = DEFAULT_LOOP
    curves: bool = True
    checkpoints: tuple[int, ...] = ()
    full_seeds: int = 0  # the file's full-scale repetition count, which a report run below it states
    diagnostics: tuple[str, ...] = ()
    ci: float | None = None  # the report's interval level (Student t); None: 95% normal intervals
    tuning: list[Tuning] = field(default_factory=list)  # a tuned series' run in ``runs`` stands in for the chosen
    tuned: tuple = ()  # once ``runs`` holds the chosen runs, the TuningResults they were chosen by
    # (:func:`nlbandit.experiments.tuning.tune_experiment`)
    missing: dict[str, str] = field(default_factory=dict)  # [[env]] case name -> why its data set is unavailable


def _plots(value: Any, where: str) -> tuple[str, ...]:
    """The validated ``plots`` field (a list of names from :data:`EXTRA_PLOTS`)."""
    if value is None:
        return ()
    if not isinstance(value, list) or any(v not in EXTRA_PLOTS for v in value) or len(set(value)) < len(value):
        raise ConfigError(f"{where}: field 'plots' must be a list of distinct names from "
                          f"{', '.join(repr(p) for p in EXTRA_PLOTS)}, got {value!r}")
    return tuple(value)


def _diagnostics(value: Any, loop: str, envs: list[dict[str, Any]], where: str) -> tuple[str, ...]:
    """The validated ``diagnostics`` field (a list of names from :data:`DIAGNOSTICS`)."""
    if value is None:
        return ()
    if not isinstance(value, list) or any(v not in DIAGNOSTICS for v in value) or len(set(value)) < len(value):
        raise ConfigError(f"{where}: field 'diagnostics' must be a list of distinct names from "
                          f"{', '.join(repr(p) for p in DIAGNOSTICS)}, got {value!r}")
    other = [v for v in value if v not in LOOPS[loop].diagnostics]
    if other:
        raise ConfigError(f"{where}: diagnostic {other[0]!r} is not one that loop = {loop!r} reports")
    if "effective-dimension" in value and any(env["d"] % 2 for env in envs):
        raise ConfigError(f"{where}: diagnostic 'effective-dimension' needs an even d in every case (its features "
                          "are gradients at the block-symmetric θ₀)")
    return tuple(value)


def _checkpoints(value: tuple[float, ...] | None, horizon: int, where: str) -> tuple[int, ...]:
    """The validated ``checkpoints`` field: increasing integer rounds in [1, horizon] (default: the horizon)."""
    if value is None:
        return (horizon,)
    if any(not v.is_integer() or not 1 <= v <= horizon for v in value) or list(value) != sorted(set(value)):
        raise ConfigError(f"{where}: field 'checkpoints' must be increasing integer rounds in [1, {horizon}], "
                          f"got {list(value)}")
    return tuple(int(v) for v in value)


def _scales(value: Any, where: str) -> tuple[str, ...]:
    """The validated ``scales`` field of a series or claim: a non-empty list of scale names (default: all)."""
    if value is None:
        return SCALES
    if not isinstance(value, (list, tuple)) or not value or any(v not in SCALES for v in value):
        raise ConfigError(f"{where}: field 'scales' must be a non-empty list of scale names from "
                          f"{', '.join(repr(s) for s in SCALES)}, got {value!r}")
    return tuple(value)


def _series_env(value: Any, loop: str, where: str) -> dict[str, Any]:
    """A series' own environment fields (``env = {...}`` in a ``[[policies]]`` table, where its loop allows
    them: a regression file's streams)."""
    if value is None:
        return {}
    if not LOOPS[loop].series_env:
        allowed = " or ".join(repr(name) for name, lp in LOOPS.items() if lp.series_env)
        raise ConfigError(f"{where}: field 'env' is allowed only with loop = {allowed}")
    table = _table(value, f"{where}: field 'env'")
    grids = [k for k, v in table.items() if isinstance(v, list)]
    if grids:
        raise ConfigError(f"{where}: field 'env.{grids[0]}' must be a single value (grids go in [env])")
    return table


def _series_cases(value: Any, env_cases: list, missing: dict[str, str], where: str) -> list:
    """The env cases a series runs on: all, or those matching ``only = {key = value or [values], ...}`` on the
    cases' keys (the [[env]] case name ``case`` and the env grid fields); none when it names only cases whose
    data sets are ``missing``."""
    if value is None:
        return env_cases
    table = _table(value, f"{where}: field 'only'")
    keys = {k for _, case in env_cases for k, _ in case} | ({"case"} if missing else set())
    for key in table:
        if key not in keys:
            raise ConfigError(f"{where}: field 'only.{key}' is not a case key; the cases vary "
                              f"{', '.join(sorted(keys)) or 'nothing'}")
    wanted = {k: v if isinstance(v, list) else [v] for k, v in table.items()}
    chosen = [(cfg, case) for cfg, case in env_cases
              if all(dict(case).get(k) in values for k, values in wanted.items())]
    if not chosen and set(wanted) == {"case"} and set(wanted["case"]) <= set(missing):
        return []
    if not chosen:
        raise ConfigError(f"{where}: field 'only' = {table!r} matches no environment case")
    return chosen


def _expand(table: dict[str, Any], fixed: tuple[str, ...], where: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Cartesian product over list-valued entries: [(config, {varying key: value})].

    Keys in ``fixed`` (the name, and array-valued fields such as ``arm_set``) are never grids. An empty
    list, or a product of more than :data:`MAX_GRID` configurations, is a :class:`ConfigError`.
    """
    grid_keys = [k for k, v in table.items() if isinstance(v, list) and k not in fixed]
    for k in grid_keys:
        if not table[k]:
            raise ConfigError(f"{where}: field '{k}' is an empty list; a grid needs at least one value")
    size = math.prod(len(table[k]) for k in grid_keys)
    if size > MAX_GRID:
        raise ConfigError(f"{where}: the grid over {', '.join(grid_keys)} has {size} configurations, more than "
                          f"{MAX_GRID}")
    out = []
    for values in itertools.product(*(table[k] for k in grid_keys)):
        varying = dict(zip(grid_keys, values))
        out.append(({**table, **varying}, varying))
    return out


def _tune_grid(value: Any, where: str) -> dict[str, list] | None:
    """A validated tuning grid (a table of field = [values], at least one field), or None for ``false``."""
    if value is False:
        return None
    table = _table(value, where)
    if not table:
        raise ConfigError(f"{where} must name at least one field (field = [values]), or be false")
    for k, v in table.items():
        if not isinstance(v, list) or not v:
            raise ConfigError(f"{where}: field '{k}' must be a non-empty list of values to try, got {v!r}")
    _expand(table, (), where)  # the size limit
    return table


def _tune(raw: dict[str, Any], scales: dict[str, dict], scale: str, top: dict[str, Any], seeds: int | None,
          where: str) -> dict[str, Any] | None:
    """The validated ``[tune]`` table at ``scale`` (None without one): seeds, objective, offset and the default
    grid, with tuning seeds disjoint from the reported seeds of every scale and of ``--seeds``."""
    if "tune" not in raw:
        if any(sc.get("tune_seeds") is not None for sc in scales.values()):
            raise ConfigError(f"{where}: field 'scales.*.tune_seeds' needs a [tune] table")
        return None
    if not LOOPS[top["loop"]].tunable:
        raise ConfigError(f"{where}: field 'tune': loop = {top['loop']!r} has no tuning (loops with one: "
                          f"{', '.join(repr(n) for n, loop in LOOPS.items() if loop.tunable)})")
    table = dict(_table(raw["tune"], f"{where}: field 'tune'"))
    grid = _tune_grid(table.pop("grid"), f"{where}: field 'tune.grid'") if "grid" in table else None
    tune = resolve(_TUNE_KEYS, table, f"{where}: tune")
    tune["seeds"] = scales.get(scale, {}).get("tune_seeds") or tune["seeds"]
    reported = max([top["seeds"], seeds or 0] + [sc.get("seeds") or 0 for sc in scales.values()])
    if tune["offset"] < reported:
        raise ConfigError(f"{where}: field 'tune.offset' = {tune['offset']} must be at least {reported}, the most "
                          "reported seeds of any scale (tuning seeds never overlap reported seeds)")
    _at_most(tune["offset"] + tune["seeds"], MAX_SEEDS, "tune.offset", "seeds are uint32", where)
    return {**tune, "grid": grid}


def _table(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a table ({{key = value, ...}}), got {raw!r}")
    return raw


def _read_toml(path: Path) -> dict[str, Any]:
    """The parsed experiment file at ``path``.

    What is not a regular UTF-8 TOML file is refused with a :class:`ConfigError` before it is opened (a
    FIFO would block its reader), and so are integers outside TOML's 64-bit range (which ``tomllib``
    accepts).

    Raises:
      FileNotFoundError: when nothing is at ``path``.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such experiment file") from None
    except OSError as e:  # a symlink loop, a path through a file, no permission
        raise ConfigError(f"{path}: cannot read the experiment file: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{path}: is a folder; expected an experiment file (TOML)")
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path}: is not a regular file (a FIFO, socket or device); expected an experiment file "
                          "(TOML)")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the experiment file: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark, as some editors write, is dropped
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); experiment "
                          "files are UTF-8 TOML") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except (RecursionError, ValueError):  # nesting deeper than the parser's recursion; an integer of > 4300 digits
        raise ConfigError(f"{path}: not valid TOML: arrays or tables nested too deeply, or an integer too "
                          "long") from None
    stack: list[tuple[str, Any]] = [("", raw)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{key}.{k}" if key else k, v) for k, v in value.items()]
        elif isinstance(value, list):
            stack += [(f"{key}[{i}]", v) for i, v in enumerate(value)]
        elif isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise ConfigError(f"{path}: field '{key}' is an integer outside TOML's 64-bit range")
    return raw


def _plain_name(value: str | None, name: str, where: str) -> str | None:
    """``value`` (the ``name`` or ``paper`` field, or None) if it matches :data:`_PLAIN_NAME`."""
    if value is not None and not _PLAIN_NAME.fullmatch(value):
        raise ConfigError(f"{where}: field '{name}' must be a plain file name (at most 200 letters, digits, '_', '-' "
                          f"or '.', not starting with '.'), got {value!r}")
    return value


def _registry_name(table: dict[str, Any], where: str) -> None:
    """Refuse a ``name`` that is not a string (a list or table) before a registry looks it up."""
    name = table.get("name")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"{where}: field 'name' must be a string (a registered name, see `nlbandit list`), "
                          f"got {name!r}")


def _at_most(value: int, limit: int, name: str, why: str, where: str) -> None:
    """Refuse ``value`` above ``limit``, naming the field and ``why`` the limit."""
    if value > limit:
        raise ConfigError(f"{where}: field '{name}' = {value} is more than {limit} ({why})")


def load_experiment(path: str | Path, scale: str = "quick", seeds: int | None = None,
                    cases: list[str] | None = None) -> Experiment:
    """Read and validate an experiment file at ``scale``; ``seeds`` overrides the repetition count, ``cases``
    the [[env]] cases the scale runs (the others are reported as not run, and the claims that read them are
    not checked).

    Raises:
      ConfigError: naming the field and what is allowed, before anything is computed; also when the path
        is not a regular UTF-8 TOML file, and when a batch of runs would need more memory than the machine
        has (:func:`~nlbandit.core.memory.physical_memory`) or sizes beyond the engine's integer ranges.
      FileNotFoundError: when the file does not exist.
    """
    path = Path(path)
    if scale not in SCALES:
        raise ConfigError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    raw = _read_toml(path)
    where = str(path)
    unknown = sorted(set(raw) - {h.name for h in _TOP} - set(_TABLES))
    if unknown:
        allowed = sorted([h.name for h in _TOP] + list(_TABLES))
        raise ConfigError(f"{where}: unknown field '{unknown[0]}'; allowed fields: {', '.join(allowed)}")
    top = resolve(_TOP, {k: v for k, v in raw.items() if k not in _TABLES}, where)
    if top["loop"] not in LOOPS:
        raise ConfigError(f"{where}: field 'loop' must be one of {', '.join(repr(n) for n in LOOPS)}, "
                          f"got {top['loop']!r}")
    _plain_name(top["name"], "name", where)
    _plain_name(top["paper"], "paper", where)
    scales = {}
    for s, overrides in _table(raw.get("scales", {}), f"{where}: field 'scales'").items():
        if s not in SCALES:
            raise ConfigError(f"{where}: field 'scales.{s}' is not a scale; allowed: {', '.join(SCALES)}")
        overrides = dict(_table(overrides, f"{where}: field 'scales.{s}'"))
        listed = overrides.pop("cases", None)
        if listed is not None and (not isinstance(listed, list) or not listed
                                   or not all(isinstance(c, str) for c in listed)):
            raise ConfigError(f"{where}: field 'scales.{s}.cases' must be a non-empty list of [[env]] case names, "
                              f"got {listed!r}")
        scales[s] = {**resolve(_SCALE_KEYS, overrides, f"{where}: scales.{s}"), "cases": listed}
    chosen = scales.get(scale, {})
    horizon = chosen.get("horizon") or top["horizon"]
    n_seeds = seeds if seeds is not None else (chosen.get("seeds") or top["seeds"])
    if seeds is not None:
        Hyper("seeds", None, "", kind=int, low=1).validate(seeds, "--seeds")
    _at_most(horizon, MAX_ROUNDS, "horizon", "the engine's int32 range of rounds", where)
    _at_most(n_seeds, MAX_SEEDS, "seeds", "seeds 0..S-1 are uint32", where)

    if "env" not in raw:
        raise ConfigError(f"{where}: field 'env' is required (a table with the environment's name)")
    loop = LOOPS[top["loop"]]
    env_cases, every_case = [], []
    missing: dict[str, str] = {}  # case name -> why its data set is not available
    for i, env_raw in enumerate(raw["env"] if isinstance(raw["env"], list) else [raw["env"]]):
        ewhere = f"{where}: env" + (f"[{i}]" if isinstance(raw["env"], list) else "")
        env_raw = dict(_table(env_raw, f"{ewhere}"))
        _registry_name(env_raw, ewhere)
        name = Hyper("case", None, "case name", kind=str, optional=True).validate(env_raw.pop("case", None), ewhere)
        if isinstance(raw["env"], list) and name is None:
            raise ConfigError(f"{ewhere}: field 'case' is required when [[env]] lists several cases (a short name)")
        for env_cfg, varying in _expand(env_raw, loop.fixed_env_fields(env_raw, ewhere), ewhere):
            case = (("case", name),) * (name is not None) + tuple(sorted(varying.items()))
            every_case.append(case)
            try:
                env_cases.append((loop.case_env(env_cfg, horizon, n_seeds, top["record_points"], ewhere), case))
            except DataError as e:  # a real data set that is not in the cache: the other cases still run
                if name is None or varying:
                    raise ConfigError(str(e)) from None
                missing[name] = f"data set not available: {e}"
    if len(set(every_case)) < len(every_case):
        raise ConfigError(f"{where}: field 'case': the [[env]] cases must have distinct names")
    names = {dict(case).get("case") for _, case in env_cases} | set(missing)
    for s, sc in scales.items():
        unknown = [c for c in sc["cases"] or () if c not in names]
        if unknown:
            raise ConfigError(f"{where}: field 'scales.{s}.cases' names {unknown[0]!r}, not an [[env]] case; cases: "
                              + ", ".join(sorted(n for n in names if n is not None)))
    scale_cases = chosen.get("cases")  # the cases run at this scale (all when None)
    if cases is not None:
        unknown = [c for c in cases if c not in names]
        if unknown or not cases:
            raise ConfigError(f"--cases must name [[env]] cases of {where}, got {unknown[0] if unknown else 'none'!r}; "
                              "cases: " + ", ".join(sorted(n for n in names if n is not None)))
        scale_cases = list(cases)
        for name in sorted(n for n in names - set(cases) - set(missing) if n is not None):
            missing[name] = f"not selected: --cases {','.join(cases)} ran the others only"

    tune = _tune(raw, scales, scale, top, seeds, where)
    tunings: list[Tuning] = []
    pol_raw = raw.get("policies")
    if not isinstance(pol_raw, list) or not pol_raw:
        raise ConfigError(f"{where}: field 'policies' must be a non-empty array of tables ([[policies]])")
    runs, labels, elsewhere = [], [], []
    batch_memory: dict[str, tuple[list[str], dict[str, int]]] = {}  # the arrays of runs simulated side by side
    neural_batches: set[str] = set()  # the batches with a neural policy's arrays among them

    def account(tag: str, label: str, run_env: dict, resolved: dict, history: bool, size: int) -> None:
        """Add a run of ``size`` seeds to the memory of the batch it is simulated in."""
        key = json.dumps([tag, run_env, resolved["name"], loop.split(resolved)[0]], sort_keys=True)
        names, parts = batch_memory.setdefault(key, ([], {}))
        names.append(label)
        for part, need in loop.memory(run_env, horizon, size, top["record_points"], history).items():
            parts[part] = parts.get(part, 0) + need
        for part, need in neural_memory(resolved, run_env, horizon).items():
            parts[f"{part} ×S"] = parts.get(f"{part} ×S", 0) + size * need
            neural_batches.add(key)

    for i, p in enumerate(pol_raw):
        p = dict(_table(p, f"{where}: policies[{i}]"))
        pwhere = f"{where}: policies[{i}]"
        _registry_name(p, pwhere)
        label = Hyper("label", None, "display label", kind=str).validate(p.pop("label", None), pwhere)
        series_env = _series_env(p.pop("env", None), top["loop"], pwhere)
        series_cases = [(cfg, case) for cfg, case in _series_cases(p.pop("only", None), env_cases, missing, pwhere)
                        if scale_cases is None or dict(case).get("case") in scale_cases]
        here = scale in _scales(p.pop("scales", None), pwhere)  # validated at every scale, run at its own
        grid = tune and tune["grid"]
        if "tune" in p:
            if tune is None:
                raise ConfigError(f"{pwhere}: field 'tune' needs a [tune] table (its seeds and objective)")
            grid = _tune_grid(p.pop("tune"), f"{pwhere}: field 'tune'")
        both = [k for k in grid or () if isinstance(p.get(k), list)]
        if both:
            raise ConfigError(f"{pwhere}: field '{both[0]}' is both a series grid and tuned; keep one")
        for pol_cfg, varying in _expand(p, ("name",), pwhere):
            full_label = label + (" [" + ", ".join(f"{k}={v}" for k, v in varying.items()) + "]" if varying else "")
            if full_label in labels or full_label in elsewhere:
                raise ConfigError(f"{pwhere}: field 'label' {full_label!r} is used twice; labels must be unique")
            (labels if here else elsewhere).append(full_label)
            for env_cfg, case in series_cases:
                points = [point for _, point in _expand(grid, (), pwhere)] if grid else [{}]
                configs = [loop.resolve_series({**pol_cfg, **point}, env_cfg, series_env, horizon,
                                               f"{pwhere} ({full_label}" + (f", tuning {point})" if point else ")"))
                           for point in points]
                if not here:
                    continue
                reported = [RunConfig(full_label, case, e, r, horizon, n_seeds, top["record_points"], top["loop"])
                            for e, r, _ in configs]
                runs.append(reported[0])  # a tuned series' stand-in until its point is chosen
                if len(runs) > MAX_GRID:
                    raise ConfigError(f"{where}: the file expands to more than {MAX_GRID} runs")
                account("", full_label, *configs[0], n_seeds)
                if grid:
                    tunings.append(Tuning(full_label, case, tuple(points), tuple(
                        RunConfig(full_label, case, e, r, horizon, tune["seeds"], top["record_points"], top["loop"],
                                  tune["offset"]) for e, r, _ in configs), tuple(reported), tune["objective"]))
                    for config in configs:
                        account("tune", full_label, *config, tune["seeds"])
    for key, (names, parts) in batch_memory.items():
        neural = (" (a neural policy: also lower width, depth or m, or use backend = 'arms')"
                  if key in neural_batches else "")
        check_memory(parts, f"run {names[0]!r}" + (f" with the {len(names) - 1} other(s) simulated side by side"
                                                    if len(names) > 1 else "") + neural, where)

    if not isinstance(raw.get("claims", []), list):
        raise ConfigError(f"{where}: field 'claims' must be an array of tables ([[claims]]), got {raw['claims']!r}")
    claims = []
    for i, c in enumerate(raw.get("claims", [])):
        cw = f"{where}: claims[{i}]"
        c = dict(_table(c, cw))
        at = _scales(c.pop("scales", None), cw)  # a claim about a series run at some scales only is checked there
        c = resolve(_CLAIM_KEYS, c, cw)
        if scale in at:
            gone = sorted(cases_read(c["check"]) & set(missing))
            claims.append(Claim(c["name"], c["text"], c["check"], c["expect"], c["kind"],
                                "; ".join(f"case {g!r}: {missing[g]}" for g in gone)))

    exp = Experiment(
        path=path,
        name=top["name"] or path.stem,
        paper=top["paper"] or Path(os.path.abspath(path)).parent.name,  # '../x.toml': the folder's name, not '..'
        title=top["title"],
        description=top["description"],
        scale=scale,
        horizon=horizon,
        n_seeds=n_seeds,
        runs=runs,
        claims=claims,
        labels=labels,
        env_cases=[case for _, case in env_cases if scale_cases is None or dict(case).get("case") in scale_cases],
        plots=_plots(raw.get("plots"), where),
        diagnostics=_diagnostics(raw.get("diagnostics"), top["loop"], [cfg for cfg, _ in env_cases], where),
        loop=top["loop"],
        curves=top["curves"],
        checkpoints=_checkpoints(top["checkpoints"], horizon, where),
        full_seeds=scales.get("full", {}).get("seeds") or top["seeds"],
        tuning=tunings,
        ci=top["ci"],
        missing=missing,
    )
    if "regret-vs-d" in exp.plots and not any(k == "d" for case in exp.env_cases for k, _ in case):
        raise ConfigError(f"{where}: plot 'regret-vs-d' needs a grid over env field 'd' (d = [...])")
    if not exp.curves and not exp.plots:
        raise ConfigError(f"{where}: field 'curves' = false needs at least one panel in 'plots'")
    for i, claim in enumerate(claims):
        if not claim.missing:
            validate_claim(claim.check, exp, f"{where}: claims[{i}] field 'check'")
    if phased_runs(exp) and exp.loop not in PHASE_TIMERS:
        raise ConfigError(f"{where}: select_time/update_time claims need a loop whose rounds have an act and an "
                          f"update phase; loop '{exp.loop}' has not")
    return exp
