"""Experiment files, stage 1 of 3: the schema. A TOML file is read and its tables validated into a
:class:`FileSpec` (pure validation: nothing is built or computed); :mod:`nlbandit.experiments.plan` then resolves
it into runs, and :mod:`nlbandit.experiments.runner` computes them.

The schema (top-level keys, ``[scales.X]``, ``[env]`` / ``[[env]]`` cases, ``[[policies]]``, ``[[claims]]``,
``[tune]``, ``loop``) and the validation rules are documented in ``docs/experiments.md``. Errors name the field
and what is allowed.
"""

from __future__ import annotations

import itertools
import math
import re
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nlbandit.core.hyper import ConfigError, Hyper, resolve
from nlbandit.core.phases import MAX_PHASE_ROWS, MIN_BATCH
from nlbandit.experiments.claims import KINDS
from nlbandit.loops import DEFAULT_LOOP, LOOPS

SCALES = ("quick", "full")

MAX_PHASE_PROCESSES = 32
"""The most processes an experiment file may have its runs timed apart in (``phase_processes``)."""

_TOP = (
    Hyper("name", None, "experiment name", kind=str, optional=True),
    Hyper("paper", None, "paper folder (zhao2023, bae2025, kveton2020, sun2025)", kind=str, optional=True),
    Hyper("title", "", "one-line title", kind=str),
    Hyper("description", "", "free text shown in the report", kind=str),
    Hyper("horizon", None, "number of rounds T", kind=int, low=1),
    Hyper("seeds", None, "number of repetitions", kind=int, low=1),
    Hyper("first_seed", 0, "the first reported seed (seeds first_seed..first_seed+seeds-1): a run on seeds a pilot "
          "did not use", kind=int, low=0),
    Hyper("record_points", 1000, "number of curve points kept", kind=int, low=2),
    Hyper("curves", True, "plot the regret curves (one panel per environment case)", kind=bool),
    Hyper("checkpoints", None, "rounds read by the 'regret-vs-d' panel (omitted: the horizon)", kind=list,
          optional=True),
    Hyper("ci", None, "level of the report's intervals of the mean, Student t with S − 1 degrees of freedom "
          "(omitted: 0.95)", low=0.0, high=1.0, low_open=True, high_open=True, optional=True),
    Hyper("loop", DEFAULT_LOOP, "bandit simulation, or online regression (Zhao et al. 2023): a loop of "
          "nlbandit.loops.LOOPS", kind=str),
    Hyper("phase_rows", MIN_BATCH, "the fewest rows of a timed call of a run timed apart (select_time, "
          "update_time and phase_diff claims; its seeds repeated in whole copies, nlbandit.core.phases)", kind=int,
          low=1, high=MAX_PHASE_ROWS),
    Hyper("select_rows", None, "the fewest rows of a timed call of the selection alone (omitted: phase_rows)",
          kind=int, low=1, high=MAX_PHASE_ROWS, optional=True),
    Hyper("phase_processes", 1, "the fresh processes, one after another, in each of which the runs timed apart are "
          "timed in one session (1: in the timing job's own process); phase_diff reads the spread between them",
          kind=int, low=1, high=MAX_PHASE_PROCESSES),
)
_TABLES = ("scales", "env", "policies", "claims", "plots", "tune", "diagnostics")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,199}")
"""What ``name`` and ``paper`` may be: report paths are built from them, so a plain file name (no ``/``,
``\\``, NUL or leading ``.``) that cannot point outside the report folder."""
MAX_ROUNDS = 2**31 - 1
"""The largest horizon: the engine counts rounds in int32 ranges."""
MAX_SEEDS = 2**32
"""The most repetitions: seeds 0..S−1 are uint32 (:func:`nlbandit.core.simulate.simulate`)."""
MAX_GRID = 10_000
"""The most configurations one table's grid (the product of its list values) or one file may expand to."""
SERIES_CHOICES = ("all", "claimed")
"""``[scales.X] series``: every series' runs, or only those the scale's claims read."""
_SCALE_KEYS = (
    Hyper("horizon", None, "number of rounds T", kind=int, low=1, optional=True),
    Hyper("seeds", None, "number of repetitions", kind=int, low=1, optional=True),
    Hyper("first_seed", None, "the first reported seed", kind=int, low=0, optional=True),
    Hyper("tune_seeds", None, "number of tuning seeds ([tune] seeds)", kind=int, low=1, optional=True),
    Hyper("tune", None, "false: no tuning at this scale, every series at its own hyperparameters", kind=bool,
          optional=True),
    Hyper("phase_processes", None, "the processes the runs timed apart are timed in, at this scale", kind=int, low=1,
          high=MAX_PHASE_PROCESSES, optional=True),
    Hyper("series", "all", "'claimed': run only the runs this scale's claims read (a check, not a figure)", kind=str,
          choices=SERIES_CHOICES),
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
    Hyper("unchecked", "", "why this file cannot check the claim as its paper means it (a documented deviation "
          "decides it by construction): the claim is reported NOT CHECKED with this reason and never evaluated",
          kind=str),
)


@dataclass(frozen=True)
class FileSpec:
    """An experiment file validated at one scale, before anything is built.

    Attributes:
      path, where: the file, and how errors name it.
      raw: the parsed TOML (its ``env`` and ``policies`` tables are resolved by the plan).
      top: the validated top-level fields (:data:`_TOP`).
      scales: the validated ``[scales.X]`` overrides by scale (with their ``cases``).
      scale: the scale read; horizon, n_seeds: its rounds and repetitions (``--seeds`` applied); first_seed: its
        first reported seed.
      tune: the validated ``[tune]`` table at this scale (seeds, objective, offset, default grid), or None.
      claims: each ``[[claims]]`` table validated, with the scales it is checked at.
    """

    path: Path
    where: str
    raw: dict[str, Any]
    top: dict[str, Any]
    scales: dict[str, dict[str, Any]]
    scale: str
    horizon: int
    n_seeds: int
    tune: dict[str, Any] | None
    claims: tuple[tuple[dict[str, Any], tuple[str, ...]], ...]
    first_seed: int = 0


def read_file(path: str | Path, scale: str = "quick", seeds: int | None = None) -> FileSpec:
    """Read experiment file ``path`` and validate its tables at ``scale`` (``seeds`` overrides its repetitions).

    Raises:
      ConfigError: naming the field and what is allowed; also when the path is not a regular UTF-8 TOML file or a
        size is beyond the engine's integer ranges.
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
    for s, overrides in as_table(raw.get("scales", {}), f"{where}: field 'scales'").items():
        if s not in SCALES:
            raise ConfigError(f"{where}: field 'scales.{s}' is not a scale; allowed: {', '.join(SCALES)}")
        overrides = dict(as_table(overrides, f"{where}: field 'scales.{s}'"))
        listed = overrides.pop("cases", None)
        if listed is not None and (not isinstance(listed, list) or not listed
                                   or not all(isinstance(c, str) for c in listed)):
            raise ConfigError(f"{where}: field 'scales.{s}.cases' must be a non-empty list of [[env]] case names, "
                              f"got {listed!r}")
        scales[s] = {**_resolve_also(_SCALE_KEYS, overrides, f"{where}: scales.{s}", "cases"), "cases": listed}
    chosen = scales.get(scale, {})
    horizon = chosen.get("horizon") or top["horizon"]
    n_seeds = seeds if seeds is not None else (chosen.get("seeds") or top["seeds"])
    if seeds is not None:
        Hyper("seeds", None, "", kind=int, low=1).validate(seeds, "--seeds")
    at_most(horizon, MAX_ROUNDS, "horizon", "the engine's int32 range of rounds", where)
    at_most(n_seeds, MAX_SEEDS, "seeds", "seeds 0..S-1 are uint32", where)
    first_seed = top["first_seed"] if chosen.get("first_seed") is None else chosen["first_seed"]
    at_most(first_seed + n_seeds, MAX_SEEDS, "first_seed + seeds", "seeds are uint32", where)
    if "env" not in raw:
        raise ConfigError(f"{where}: field 'env' is required (a table with the environment's name)")
    if raw["env"] == []:  # (computed its runs, then failed at the report's plot)
        raise ConfigError(f"{where}: field 'env' must be a table or a non-empty array of tables ([[env]]), got []")
    if not isinstance(raw.get("claims", []), list):
        raise ConfigError(f"{where}: field 'claims' must be an array of tables ([[claims]]), got {raw['claims']!r}")
    claims = []
    for i, c in enumerate(raw.get("claims", [])):
        cw = f"{where}: claims[{i}]"
        c = dict(as_table(c, cw))
        at = scales_field(c.pop("scales", None), cw)  # a claim on a series run at some scales is checked there only
        claims.append((resolve(_CLAIM_KEYS, c, cw), at))
        name = claims[-1][0]["name"]
        display_name(name, "name", cw)
        if name in [c["name"] for c, _ in claims[:-1]]:  # (verdicts and repeat shares are reported by name)
            raise ConfigError(f"{cw}: field 'name' = {name!r} is used by an earlier claim; claim names must differ")
    tune = _tune(raw, scales, scale, top, seeds, where)
    return FileSpec(path, where, raw, top, scales, scale, horizon, n_seeds, tune, tuple(claims), first_seed)


def _plugin_names(value: Any, field: str, kind: type, where: str) -> tuple[str, ...]:
    """A validated list of distinct names of report plug-ins of ``kind`` (:mod:`nlbandit.plugins`)."""
    from nlbandit.plugins import of_kind

    known = of_kind(kind)
    if value is None:
        return ()
    if not isinstance(value, list) or any(v not in known for v in value) or len(set(value)) < len(value):
        raise ConfigError(f"{where}: field {field!r} must be a list of distinct names from "
                          f"{', '.join(repr(p) for p in sorted(known))}, got {value!r}")
    return tuple(value)


def plots(value: Any, where: str) -> tuple[str, ...]:
    """The validated ``plots`` field: report panels beside the regret curves
    (:class:`~nlbandit.plugins.Panel`, e.g. ``anytime-constant``, ``regret-vs-d``)."""
    from nlbandit.plugins import Panel

    return _plugin_names(value, "plots", Panel, where)


def diagnostics(value: Any, loop: str, where: str) -> tuple[str, ...]:
    """The validated ``diagnostics`` field: report sections (:class:`~nlbandit.plugins.Diagnostic`, e.g.
    ``effective-dimension``) that ``loop`` reports."""
    from nlbandit.plugins import Diagnostic

    names = _plugin_names(value, "diagnostics", Diagnostic, where)
    other = [v for v in names if v not in LOOPS[loop].diagnostics]
    if other:
        raise ConfigError(f"{where}: diagnostic {other[0]!r} is not one that loop = {loop!r} reports")
    return names


def checkpoints(value: tuple[float, ...] | None, horizon: int, where: str) -> tuple[int, ...]:
    """The validated ``checkpoints`` field: increasing integer rounds in [1, horizon] (default: the horizon)."""
    if value is None:
        return (horizon,)
    if any(not v.is_integer() or not 1 <= v <= horizon for v in value) or list(value) != sorted(set(value)):
        raise ConfigError(f"{where}: field 'checkpoints' must be increasing integer rounds in [1, {horizon}], "
                          f"got {list(value)}")
    return tuple(int(v) for v in value)


def scales_field(value: Any, where: str) -> tuple[str, ...]:
    """The validated ``scales`` field of a series or claim: a non-empty list of scale names (default: all)."""
    if value is None:
        return SCALES
    if not isinstance(value, (list, tuple)) or not value or any(v not in SCALES for v in value):
        raise ConfigError(f"{where}: field 'scales' must be a non-empty list of scale names from "
                          f"{', '.join(repr(s) for s in SCALES)}, got {value!r}")
    return tuple(value)


def expand(table: dict[str, Any], fixed: tuple[str, ...], where: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Cartesian product over list-valued entries: [(config, {varying key: value})].

    Keys in ``fixed`` (the name, and array-valued fields such as ``arm_set``) are never grids. An empty
    list, or a product of more than :data:`MAX_GRID` configurations, is a :class:`ConfigError`.
    """
    grid_keys = [k for k, v in table.items() if isinstance(v, list) and k not in fixed]
    for k in grid_keys:
        if not table[k]:
            raise ConfigError(f"{where}: field '{k}' is an empty list; a grid needs at least one value")
        repeated = [v for i, v in enumerate(table[k]) if v in table[k][:i]]
        if repeated:  # (two equal cases or series: once "the [[env]] cases must have distinct names")
            raise ConfigError(f"{where}: field '{k}' = {table[k]!r} lists {repeated[0]!r} twice; a grid's values "
                              "must differ")
    size = math.prod(len(table[k]) for k in grid_keys)
    if size > MAX_GRID:
        raise ConfigError(f"{where}: the grid over {', '.join(grid_keys)} has {size} configurations, more than "
                          f"{MAX_GRID}")
    out = []
    for values in itertools.product(*(table[k] for k in grid_keys)):
        varying = dict(zip(grid_keys, values))
        out.append(({**table, **varying}, varying))
    return out


def _resolve_also(keys: tuple[Hyper, ...], table: dict[str, Any], where: str, apart: str) -> dict[str, Any]:
    """``resolve(keys, table, where)`` for a table whose field ``apart`` is read on its own (taken out of ``table``
    before), its refusal of an unknown field listing ``apart`` among the allowed ones too."""
    try:
        return resolve(keys, table, where)
    except ConfigError as e:
        raise ConfigError(str(e).replace("allowed fields: ", f"allowed fields: {apart}, ", 1)) from None


def tune_grid(value: Any, where: str) -> dict[str, list] | None:
    """A validated tuning grid (a table of field = [values], at least one field), or None for ``false``."""
    if value is False:
        return None
    table = as_table(value, where)
    if not table:
        raise ConfigError(f"{where} must name at least one field (field = [values]), or be false")
    for k, v in table.items():
        if k in ("name", "label"):  # (a grid over name swapped the algorithm under the series' label)
            raise ConfigError(f"{where}: field '{k}' cannot be tuned: a series is one policy; tune its hyperparameters")
        if not isinstance(v, list) or not v:
            raise ConfigError(f"{where}: field '{k}' must be a non-empty list of values to try, got {v!r}")
    expand(table, (), where)  # the size limit
    return table


def _tune(raw: dict[str, Any], scales: dict[str, dict], scale: str, top: dict[str, Any], seeds: int | None,
          where: str) -> dict[str, Any] | None:
    """The validated ``[tune]`` table at ``scale`` (None without one): seeds, objective, offset, the default grid
    and ``untuned`` (``[scales.<scale>] tune = false``), with tuning seeds disjoint from the reported seeds of every
    scale and of ``--seeds``."""
    for name, sc in scales.items():
        if sc.get("tune") is True:
            raise ConfigError(f"{where}: field 'scales.{name}.tune' may only be false (no tuning at that scale); a "
                              "scale without it tunes as [tune] says")
    if "tune" not in raw:
        for field in ("tune_seeds", "tune"):
            if any(sc.get(field) is not None for sc in scales.values()):
                raise ConfigError(f"{where}: field 'scales.*.{field}' needs a [tune] table")
        return None
    if not LOOPS[top["loop"]].tunable:
        raise ConfigError(f"{where}: field 'tune': loop = {top['loop']!r} has no tuning (loops with one: "
                          f"{', '.join(repr(n) for n, loop in LOOPS.items() if loop.tunable)})")
    table = dict(as_table(raw["tune"], f"{where}: field 'tune'"))
    grid = tune_grid(table.pop("grid"), f"{where}: field 'tune.grid'") if "grid" in table else None
    tune = _resolve_also(_TUNE_KEYS, table, f"{where}: tune", "grid")
    tune["seeds"] = scales.get(scale, {}).get("tune_seeds") or tune["seeds"]
    first = max([top["first_seed"]] + [sc.get("first_seed") or 0 for sc in scales.values()])
    reported = first + max([top["seeds"], seeds or 0] + [sc.get("seeds") or 0 for sc in scales.values()])
    if tune["offset"] < reported:
        raise ConfigError(f"{where}: field 'tune.offset' = {tune['offset']} must be at least {reported}, past the "
                          "last reported seed of any scale (tuning seeds never overlap reported seeds)")
    at_most(tune["offset"] + tune["seeds"], MAX_SEEDS, "tune.offset", "seeds are uint32", where)
    return {**tune, "grid": grid, "untuned": scales.get(scale, {}).get("tune") is False}


def as_table(raw: Any, where: str) -> dict[str, Any]:
    """``raw`` if it is a TOML table, else a :class:`ConfigError` naming ``where``."""
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


def registry_name(table: dict[str, Any], where: str) -> None:
    """Refuse a ``name`` that is not a string (a list or table) before a registry looks it up."""
    name = table.get("name")
    if name is not None and not isinstance(name, str):
        raise ConfigError(f"{where}: field 'name' must be a string (a registered name, see `nlbandit list`), "
                          f"got {name!r}")


def display_name(value: str, field: str, where: str) -> str:
    """``value``, a label or a claim's name as reports print it (in a Markdown table's cell, a plot's legend); a
    ConfigError naming ``field`` where it is blank or holds a line break, a control character or ``|``."""
    if not value.strip() or not value.isprintable() or "|" in value:
        raise ConfigError(f"{where}: field '{field}' must be printable text, not blank, without '|' or line breaks "
                          f"(reports print it in tables), got {value!r}")
    return value


def at_most(value: int, limit: int, name: str, why: str, where: str) -> None:
    """Refuse ``value`` above ``limit``, naming the field and ``why`` the limit."""
    if value > limit:
        raise ConfigError(f"{where}: field '{name}' = {value} is more than {limit} ({why})")


