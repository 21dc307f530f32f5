"""Stratified series: an environment grid whose values share out a series' seeds instead of making cases.

``strata = "target"`` in an ``[[env]]`` table names one of its list-valued fields (Kveton et al. 2020 §5.2: "500
bandit instances for each dataset, 50 for each class"). The S seeds of a scale are split evenly among its G
values in order, value i running seeds first_seed + i·S/G .. first_seed + (i + 1)·S/G − 1 (S must be a multiple of
G), so the instances are balanced across the values by design, where a field drawn per instance would be balanced
only on average. Each value's runs are computed and stored as any run (:attr:`Experiment.runs`, the run list of
the report); claims, tables and plots read one run per series and case, the stratified runs pooled: S seeds, each
seed's curves as computed (:func:`reported`, :func:`pooled`). Their intervals treat the S instances as one sample
(Student t over S − 1 degrees of freedom), which errs wide for a stratified design.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from nlbandit.experiments.spec import Experiment, RunConfig
from nlbandit.store import StoredRun


def reduced_case(strata: dict[tuple, str], case: tuple) -> tuple:
    """Environment case ``case`` as claims and reports name it: less its table's stratified field (``strata``: a
    stratified case's field, :attr:`Experiment.strata`)."""
    field = strata.get(case)
    return case if field is None else tuple((k, v) for k, v in case if k != field)


def value_counts(exp: Experiment) -> dict[tuple, tuple[str, int]]:
    """Each stratified case that ``exp`` runs, as :func:`reduced_case` names it: (its field, G, the number of
    values it runs)."""
    out: dict[tuple, set] = {}
    for run in exp.runs:
        if run.case in exp.strata:
            out.setdefault(reduced_case(exp.strata, run.case), set()).add(run.case)
    return {case: (exp.strata[next(iter(full))], len(full)) for case, full in out.items()}


def reported(exp: Experiment) -> list[tuple[RunConfig, tuple[RunConfig, ...]]]:
    """Each run as claims and reports read it, in the order of :attr:`Experiment.runs`, with the runs computed
    for it: a run stands for itself; the runs of a stratified case (one per value of its table's ``strata`` field,
    all of them: :mod:`~nlbandit.experiments.plan` refuses fewer) stand for one run over all their seeds, its
    environment holding the list of values."""
    if not exp.strata:
        return [(run, (run,)) for run in exp.runs]
    groups: dict[tuple, list[RunConfig]] = {}
    for run in exp.runs:
        groups.setdefault((run.label, reduced_case(exp.strata, run.case)), []).append(run)
    out = []
    for (_, case), parts in groups.items():
        first = parts[0]
        field = exp.strata.get(first.case)
        if field is None:
            out.append((first, (first,)))
            continue
        env = {**first.env, field: [dict(p.case)[field] for p in parts]}
        out.append((replace(first, case=case, env=env, n_seeds=sum(p.n_seeds for p in parts),
                            seed_offset=first.seed_offset), tuple(parts)))
    return out


def reported_runs(exp: Experiment) -> list[RunConfig]:
    """The runs as claims and reports read them (:func:`reported`)."""
    return [run for run, _ in reported(exp)]


def pooled(run: RunConfig, parts: list[StoredRun]) -> StoredRun:
    """The stored results of the stratified runs ``parts`` as one run of ``run``'s label: their seeds' curves (and
    arms) one after another, each part's compilation and run time counted at its own share of its batch
    (``batch_size`` 1), so that µs per seed-round is the parts' mean weighted by their seeds."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    for p in parts[1:]:
        if not np.array_equal(p.rounds, first.rounds):
            raise ValueError(f"{run.label}: the stratified runs were recorded at different rounds")
    arms = None if any(p.arms is None for p in parts) else np.concatenate([p.arms for p in parts])
    return StoredRun("+".join(p.series_id for p in parts), run.label, first.config,
                     tuple(s for p in parts for s in p.seeds), first.rounds,
                     {m: np.concatenate([p.curves[m] for p in parts]) for m in first.curves},
                     sum(p.compile_s / p.batch_size for p in parts), sum(p.run_s / p.batch_size for p in parts), 1,
                     sum(p.parts for p in parts), arms, None)
