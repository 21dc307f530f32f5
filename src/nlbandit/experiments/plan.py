"""Experiment files, stage 2 of 3: the plan. A validated file (:class:`~nlbandit.experiments.schema.FileSpec`) is
resolved once into what will be computed: its environment cases, each series' runs (grids expanded, tuning
grids beside them), the memory of every batch checked, and the claims with what they read: an
:class:`~nlbandit.experiments.spec.Experiment`, which the runner computes with its loop
(:mod:`nlbandit.experiments.runner`) and the report reads with the store (:mod:`nlbandit.report.build`).
"""

from __future__ import annotations

import difflib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from nlbandit.compile_flags import identity_flags
from nlbandit.core.hyper import ConfigError, Hyper
from nlbandit.core.memory import check_memory
from nlbandit.core.phases import PhaseRows
from nlbandit.data.cache import DataError
from nlbandit.experiments import strata as stratified
from nlbandit.experiments.claims import cases_read, claimed_runs, phased_runs, timed_runs, validate_claim
from nlbandit.experiments.schema import (
    MAX_GRID,
    FileSpec,
    as_table,
    checkpoints,
    diagnostics,
    display_name,
    expand,
    plots,
    read_file,
    registry_name,
    scales_field,
    tune_grid,
)
from nlbandit.experiments.spec import Claim, Experiment, RunConfig, Tuning
from nlbandit.loops import LOOPS
from nlbandit.loops.base import Loop
from nlbandit.loops.files import NamesPaths
from nlbandit.loops.phases import PHASE_TIMERS
from nlbandit.plugins import plugins
from nlbandit.policies.reads import READ_WHEN
from nlbandit.policies.registry import resolve_policy

Cases = list[tuple[dict[str, Any], tuple[tuple[str, Any], ...]]]
"""Environment cases: (resolved environment config, its case key)."""


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
    spec = read_file(path, scale, seeds)
    loop = LOOPS[spec.top["loop"]]
    env_cases, missing, scale_cases, shares = _cases(spec, loop, cases)
    runs, labels, elsewhere, tunings = _runs(spec, loop, env_cases, missing, scale_cases, shares)
    strata = {case: field for case, (_, _, field) in shares.items()}
    claims = [Claim(c["name"], c["text"], c["check"], c["expect"], c["kind"],
                    "; ".join(f"case {g!r}: {missing[g]}"
                              for g in sorted(_cases_read(c["check"], f"{spec.where}: claims[{i}] field 'check'")
                                              & set(missing))),
                    c["unchecked"])
              for i, (c, at) in enumerate(spec.claims) if scale in at]
    raw, top, where, horizon, n_seeds, path = spec.raw, spec.top, spec.where, spec.horizon, spec.n_seeds, spec.path
    if not top["title"].isprintable():
        raise ConfigError(f"{where}: field 'title' must be one line of printable text (a report's heading), got "
                          f"{top['title']!r}")
    exp = Experiment(
        path=path,
        name=top["name"] or path.stem,
        paper=top["paper"] or Path(os.path.abspath(path)).parent.name,  # '../x.toml': the folder's name, not '..'
        title=top["title"],
        description=top["description"],
        scale=scale,
        horizon=horizon,
        n_seeds=n_seeds,
        first_seed=spec.first_seed,
        runs=runs,
        claims=claims,
        labels=labels,
        labels_elsewhere=elsewhere,
        env_cases=list(dict.fromkeys(stratified.reduced_case(strata, case) for _, case in env_cases
                                     if scale_cases is None or dict(case).get("case") in scale_cases)),
        plots=plots(raw.get("plots"), where),
        diagnostics=diagnostics(raw.get("diagnostics"), top["loop"], where),
        loop=top["loop"],
        curves=top["curves"],
        checkpoints=checkpoints(top["checkpoints"], horizon, where),
        full_seeds=spec.scales.get("full", {}).get("seeds") or top["seeds"],
        tuning=tunings,
        untuned=bool(spec.tune and spec.tune["untuned"]),
        ci=top["ci"],
        phase_rows=PhaseRows(top["select_rows"] or top["phase_rows"], top["phase_rows"]),
        phase_processes=spec.scales.get(scale, {}).get("phase_processes") or top["phase_processes"],
        missing=missing,
        strata=strata,
    )
    for name in exp.plots + exp.diagnostics:
        plugins()[name].check(exp, where)
    if not exp.curves and not exp.plots:
        raise ConfigError(f"{where}: field 'curves' = false needs at least one panel in 'plots'")
    for i, claim in zip([i for i, (_, at) in enumerate(spec.claims) if scale in at], claims):  # (the file's index)
        if not claim.missing:
            validate_claim(claim.check, exp, f"{where}: claims[{i}] field 'check'")
    timed = timed_runs(exp) if strata else set()
    pooled_timed = [r for r in exp.runs if r.case in strata and r.run_id in timed]
    if pooled_timed:
        r = pooled_timed[0]
        raise ConfigError(f"{where}: a claim reads the measured time of {r.label!r} on case "
                          f"{stratified.reduced_case(strata, r.case)}, whose runs are pooled over the field 'strata' = "
                          f"{strata[r.case]!r} and have no time of their own; time it on a case of its own")
    if phased_runs(exp) and exp.loop not in PHASE_TIMERS:
        raise ConfigError(f"{where}: select_time/update_time/phase_diff claims need a loop whose rounds have an act "
                          f"and an update phase; loop '{exp.loop}' has not")
    if spec.scales.get(scale, {}).get("series") == "claimed":
        _keep_claimed(exp, f"{where}: field 'scales.{scale}.series'")
    return exp


def _keep_claimed(exp: Experiment, where: str) -> None:
    """Leave out of ``exp`` the runs its claims do not read (with their tunings, and the labels and environment
    cases left without a run), naming them in ``exp.left_out``; refused where the claims read no run."""
    read = claimed_runs(exp)
    if not read:
        raise ConfigError(f"{where} = 'claimed': no claim checked at scale {exp.scale!r} reads a run this command "
                          "runs" + (f" (not run: case {', case '.join(map(repr, exp.missing))})" if exp.missing else "")
                          + "; leave the field out (every series runs)")
    shown = stratified.reported(exp)
    kept_ids = {part.run_id for run, parts in shown if run.run_id in read for part in parts}
    kept = [r for r in exp.runs if r.run_id in kept_ids]
    exp.left_out = tuple(f"{r.label} ({r.case_label})" if r.case_label else r.label
                         for r, _ in shown if r.run_id not in read)
    exp.runs = kept
    exp.tuning = [t for t in exp.tuning if any(r.run_id in read for r in t.reported)]
    exp.labels = [label for label in exp.labels if any(r.label == label for r in kept)]
    exp.env_cases = [c for c in exp.env_cases if any(stratified.reduced_case(exp.strata, r.case) == c for r in kept)]


def _cases(spec: FileSpec, loop: Loop, cases: list[str] | None
           ) -> tuple[Cases, dict[str, str], list[str] | None, dict[tuple, tuple[int, int, str]]]:
    """The file's environment cases, built by ``loop``; the cases left out, by name, with why (a data set not in
    the cache, or not among ``--cases``); the case names this scale runs (None: all); and for each case of a
    stratified table (``strata``, :mod:`nlbandit.experiments.strata`) its share of the seeds: (the value's
    position i, the count G of values, the field)."""
    raw, top, where, horizon, n_seeds = spec.raw, spec.top, spec.where, spec.horizon, spec.n_seeds
    scales, chosen = spec.scales, spec.scales.get(spec.scale, {})
    env_cases, every_case = [], []
    missing: dict[str, str] = {}  # case name -> why its data set is not available
    shares: dict[tuple, tuple[int, int, str]] = {}
    for i, env_raw in enumerate(raw["env"] if isinstance(raw["env"], list) else [raw["env"]]):
        ewhere = f"{where}: env" + (f"[{i}]" if isinstance(raw["env"], list) else "")
        env_raw = dict(as_table(env_raw, f"{ewhere}"))
        registry_name(env_raw, ewhere)
        name = Hyper("case", None, "case name", kind=str, optional=True).validate(env_raw.pop("case", None), ewhere)
        if name is not None and "," in display_name(name, "case", ewhere):
            raise ConfigError(f"{ewhere}: field 'case' must be a name without ',' (--cases separates names with "
                              f"commas), got {name!r}")
        if isinstance(raw["env"], list) and name is None:
            raise ConfigError(f"{ewhere}: field 'case' is required when [[env]] lists several cases (a short name)")
        strata = Hyper("strata", None, "the grid field whose values share out the seeds", kind=str,
                       optional=True).validate(env_raw.pop("strata", None), ewhere)
        fixed = loop.fixed_env_fields(env_raw, ewhere)
        if strata is not None and (strata in fixed or not isinstance(env_raw.get(strata), list)):
            raise ConfigError(f"{ewhere}: field 'strata' = {strata!r} must name a list-valued field of this table "
                              "(a grid whose values share out the seeds)")
        start = len(env_cases)
        for env_cfg, varying in expand(env_raw, fixed, ewhere):
            case = (("case", name),) * (name is not None) + tuple(sorted(varying.items()))
            every_case.append(case)
            if strata is not None:
                shares[case] = (env_raw[strata].index(varying[strata]), len(env_raw[strata]), strata)
            if isinstance(loop, NamesPaths):  # paths relative to the experiment file's folder
                env_cfg = loop.locate(env_cfg, Path(os.path.abspath(spec.path)).parent)
            try:
                env_cases.append((loop.case_env(env_cfg, horizon, n_seeds, top["record_points"], ewhere), case))
            except DataError as e:  # a real data set that is not in the cache: the other cases still run
                if name is None or set(varying) - {strata}:
                    raise ConfigError(str(e)) from None
                missing[name] = f"data set not available: {e}"
        if strata is not None and name in missing:  # a stratified case runs all its values or none
            del env_cases[start:]
    if len(set(every_case)) < len(every_case):
        raise ConfigError(f"{where}: field 'case': the [[env]] cases must have distinct names")
    names = {dict(case).get("case") for _, case in env_cases} | set(missing)
    for s, sc in scales.items():
        unknown = [c for c in sc["cases"] or () if c not in names]
        if unknown:
            named = sorted(n for n in names if n is not None)
            raise ConfigError(f"{where}: field 'scales.{s}.cases' names {unknown[0]!r}, not an [[env]] case; "
                              + (f"cases: {', '.join(named)}" if named else "the file has no named cases ([[env]] "
                                 "tables with case = \"...\")"))
    scale_cases = chosen.get("cases")  # the cases run at this scale (all when None)
    if cases is not None:
        unknown = [c for c in cases if c not in names]
        if unknown or not cases:
            named = sorted(n for n in names if n is not None)
            raise ConfigError(f"--cases must name [[env]] cases of {where}, got "
                              + (repr(unknown[0]) if unknown else "no name") + "; "
                              + (f"cases: {', '.join(named)}" if named else "the file has no named cases ([[env]] "
                                 "tables with case = \"...\")"))
        scale_cases = list(cases)
        for name in sorted(n for n in names - set(cases) - set(missing) if n is not None):
            missing[name] = f"not selected: --cases {','.join(cases)} ran the others only"
    return env_cases, missing, scale_cases, shares


def _runs(spec: FileSpec, loop: Loop, env_cases: Cases, missing: dict[str, str], scale_cases: list[str] | None,
          shares: dict[tuple, tuple[int, int, str]]) -> tuple[list[RunConfig], list[str], list[str], list[Tuning]]:
    """Every series' runs on its cases at this scale (a tuned series' stand-in run, its grid as a :class:`Tuning`;
    on a stratified case, its share of the seeds), the series' labels, those of the series run at other scales
    only, and the tunings; refuses a batch of runs that would not fit in memory."""
    raw, top, where, horizon, n_seeds, scale = spec.raw, spec.top, spec.where, spec.horizon, spec.n_seeds, spec.scale
    tune = spec.tune
    xla = identity_flags()  # (the quick scale's, where the command set them)
    tunings: list[Tuning] = []
    pol_raw = raw.get("policies")
    if not isinstance(pol_raw, list) or not pol_raw:
        raise ConfigError(f"{where}: field 'policies' must be a non-empty array of tables ([[policies]])")
    runs, labels, elsewhere = [], [], []
    batch_memory: dict[str, tuple[list[str], dict[str, int]]] = {}  # the arrays of runs simulated side by side

    def account(tag: str, label: str, run_env: dict, resolved: dict, size: int) -> None:
        """Add a run of ``size`` seeds to the memory of the batch it is simulated in."""
        key = json.dumps([tag, run_env, resolved["name"], loop.split(resolved)[0]], sort_keys=True)
        names, parts = batch_memory.setdefault(key, ([], {}))
        names.append(label)
        for part, need in loop.memory(run_env, resolved, horizon, size, top["record_points"]).items():
            parts[part] = parts.get(part, 0) + need

    for i, p in enumerate(pol_raw):
        p = dict(as_table(p, f"{where}: policies[{i}]"))
        pwhere = f"{where}: policies[{i}]"
        registry_name(p, pwhere)
        if "label" not in p:  # (a misspelt one was "must be a string, got nothing")
            near = difflib.get_close_matches("label", [k for k in p if isinstance(k, str)], n=1)
            raise ConfigError(f"{pwhere}: field 'label' is required (the series' display label)"
                              + (f"; is {near[0]!r} it, misspelt?" if near else ""))
        label = display_name(Hyper("label", None, "display label", kind=str).validate(p.pop("label"), pwhere),
                             "label", pwhere)
        series_env = _series_env(p.pop("env", None), top["loop"], pwhere)
        series_cases = [(cfg, case) for cfg, case in _series_cases(p.pop("only", None), env_cases, missing, pwhere)
                        if scale_cases is None or dict(case).get("case") in scale_cases]
        _all_strata(series_cases, env_cases, shares, pwhere)
        here = scale in scales_field(p.pop("scales", None), pwhere)  # validated at every scale, run at its own
        unread = _unread_field(p.pop("unread", None), pwhere)
        stray = [u for u in unread if u not in p and u not in (p.get("tune") or {})]
        if stray:
            raise ConfigError(f"{pwhere}: field 'unread' names {stray}, which this table does not set (it lists "
                              "hyperparameters set knowingly where the configuration does not read them)")
        grid = tune and tune["grid"]
        if "tune" in p:
            if tune is None:
                raise ConfigError(f"{pwhere}: field 'tune' needs a [tune] table (its seeds and objective)")
            grid = tune_grid(p.pop("tune"), f"{pwhere}: field 'tune'")
        both = [k for k in grid or () if isinstance(p.get(k), list)]
        if both:
            raise ConfigError(f"{pwhere}: field '{both[0]}' is both a series grid and tuned; keep one")
        untuned = bool(grid) and tune["untuned"]  # the grid validated below, the series run at its own values
        for pol_cfg, varying in expand(p, ("name",), pwhere):
            full_label = label + (" [" + ", ".join(f"{k}={v}" for k, v in varying.items()) + "]" if varying else "")
            if full_label in labels or full_label in elsewhere:
                raise ConfigError(f"{pwhere}: field 'label' {full_label!r} is used twice; labels must be unique")
            (labels if here else elsewhere).append(full_label)
            for env_cfg, case in series_cases:
                first, size = spec.first_seed, n_seeds
                if case in shares:
                    i, count, field = shares[case]
                    if n_seeds % count or (grid and not untuned):
                        raise ConfigError(f"{where}: field 'strata' = {field!r}: " + (
                            f"seeds = {n_seeds} at scale {scale!r} is not a multiple of its {count} values" if
                            n_seeds % count else f"{full_label!r} is tuned, which a stratified case does not take"))
                    size = n_seeds // count
                    first += i * size
                grid_points = [point for _, point in expand(grid, (), pwhere)] if grid else []
                points = grid_points if grid and not untuned else [{}] + grid_points  # [0]: the series' run
                try:
                    configs = [loop.resolve_series(_reads_checked({**pol_cfg, **point}, top["loop"], unread, at),
                                                   env_cfg, series_env, horizon, at)
                               for point in points
                               for at in [f"{pwhere} ({full_label}" + (f", tuning {point})" if point else ")")]]
                except ConfigError as e:
                    raise ConfigError(_misspelt_series_field(str(e), p)) from None
                if not here:
                    continue
                reported = [RunConfig(full_label, case, e, r, horizon, size, top["record_points"], top["loop"],
                                      first, xla) for e, r in configs]
                runs.append(reported[0])  # a tuned series' stand-in until its point is chosen
                if len(runs) > MAX_GRID:
                    raise ConfigError(f"{where}: the file expands to more than {MAX_GRID} runs")
                account("", full_label, *configs[0], size)
                if grid and not untuned:
                    tunings.append(Tuning(full_label, case, tuple(points), tuple(
                        RunConfig(full_label, case, e, r, horizon, tune["seeds"], top["record_points"], top["loop"],
                                  tune["offset"], xla) for e, r in configs), tuple(reported), tune["objective"]))
                    for config in configs:
                        account("tune", full_label, *config, tune["seeds"])
    for names, parts in batch_memory.values():
        check_memory(parts, f"run {names[0]!r}" + (f" with the {len(names) - 1} other(s) simulated side by side"
                                                    if len(names) > 1 else ""), where)
    return runs, labels, elsewhere, tunings


def _all_strata(series_cases: Cases, env_cases: Cases, shares: dict[tuple, tuple[int, int, str]], where: str) -> None:
    """Refuse a series (``only = {...}``) that runs some but not all values of a stratified table's field."""
    strata = {case: field for case, (_, _, field) in shares.items()}

    def counts(cases: Cases) -> Counter:
        return Counter((stratified.reduced_case(strata, case), strata[case]) for _, case in cases if case in strata)

    whole = counts(env_cases)
    for (case, field), n in counts(series_cases).items():
        if n < whole[case, field]:
            raise ConfigError(f"{where}: field 'only' keeps {n} of the {whole[case, field]} values of the stratified "
                              f"field {field!r} (case {case}); a series on a stratified case runs all of them")


def _cases_read(check: str, where: str) -> set[str]:
    """:func:`~nlbandit.experiments.claims.cases_read`, its refusal of a claim that does not parse prefixed with
    ``where`` (the file and the claim)."""
    try:
        return cases_read(check)
    except ConfigError as e:
        raise ConfigError(f"{where}: {e}") from None


def _unread_field(value: Any, where: str) -> tuple[str, ...]:
    """A series' ``unread = ["field", ...]``: hyperparameters it sets knowingly where its configuration does not
    read them (a paper's table row; :mod:`nlbandit.policies.reads`)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: field 'unread' must be a list of hyperparameter names, got {value!r}")
    return tuple(value)


SERIES_FIELDS = ("label", "scales", "only", "unread", "tune", "env")
"""The fields a ``[[policies]]`` table takes beside its policy's (or learner's) name and hyperparameters."""


def _misspelt_series_field(message: str, table: dict[str, Any]) -> str:
    """``message`` (a refusal of ``table``'s fields), with a hint where the field it refuses is a close misspelling of
    one of :data:`SERIES_FIELDS` (``scale = ["full"]`` was read as a grid of an unknown hyperparameter)."""
    for key in table:
        near = difflib.get_close_matches(key, SERIES_FIELDS, n=1, cutoff=0.8)
        if near and f"unknown field '{key}'" in message:
            return f"{message}; is it {near[0]!r}, a field of the [[policies]] table, misspelt?"
    return message


def _reads_checked(config: dict[str, Any], loop: str, unread: tuple[str, ...], where: str) -> dict[str, Any]:
    """``config``, after refusing a hyperparameter it sets to no effect (but those of ``unread``), for a registered
    policy whose switches decide what it reads (:data:`~nlbandit.policies.reads.READ_WHEN`) in a loop that runs
    it as registered (the evaluate loop's candidates are agents, which check it with the agent's defaults)."""
    if loop in ("bandit", "replay") and str(config.get("name")).removesuffix("@anytime") in READ_WHEN:
        resolve_policy(config, where, reads=True, unread=unread)
    return config


def _series_env(value: Any, loop: str, where: str) -> dict[str, Any]:
    """A series' own environment fields (``env = {...}`` in a ``[[policies]]`` table, where its loop allows
    them: a regression file's streams)."""
    if value is None:
        return {}
    if not LOOPS[loop].series_env:
        allowed = " or ".join(repr(name) for name, lp in LOOPS.items() if lp.series_env)
        raise ConfigError(f"{where}: field 'env' is allowed only with loop = {allowed}")
    table = as_table(value, f"{where}: field 'env'")
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
    table = as_table(value, f"{where}: field 'only'")
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


