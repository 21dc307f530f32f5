"""Experiment files: the records a file is resolved into, :class:`RunConfig` (one run and its key),
:class:`Tuning`, :class:`Claim` and :class:`Experiment`, and :func:`run_code`, the hash of the code behind a run.

A file goes through three stages: :mod:`nlbandit.experiments.schema` reads and validates it,
:mod:`nlbandit.experiments.plan` resolves it into these records (:func:`~nlbandit.experiments.plan.load_experiment`),
and :mod:`nlbandit.experiments.runner` computes the runs with their loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlbandit.core.phases import PhaseRows
from nlbandit.loops import DEFAULT_LOOP, LOOPS
from nlbandit.provenance import code_hash
from nlbandit.store import key, series_of


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
      seed_offset: the first seed (the file's ``first_seed`` for reported runs, 0 by default; ``[tune] offset``
        for tuning runs).
      xla: the XLA flags of :data:`nlbandit.compile_flags.IN_IDENTITY` it is compiled with (space-separated; empty:
        none), part of its identity when not empty, as they are not part of its code hash: the quick scale's
        :data:`~nlbandit.compile_flags.QUICK_SCALE` where the command set them.
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
    xla: str = ""

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
        if self.xla:
            ident["xla"] = self.xla
        return ident if self.loop == DEFAULT_LOOP else {**ident, "loop": self.loop}

    @classmethod
    def from_identity(cls, identity: dict[str, Any], label: str = "") -> "RunConfig":
        """The run a stored :meth:`identity` describes, under the current code (its ``code`` is recomputed)."""
        return cls(label, (), identity["env"], identity["policy"], identity["horizon"], identity["n_seeds"],
                   identity["record_points"], identity.get("loop", DEFAULT_LOOP), identity.get("seed_offset", 0),
                   identity.get("xla", ""))

    @property
    def run_id(self) -> str:
        """Hash of :meth:`identity` (:func:`nlbandit.store.key`): names the run and its batch's checkpoint."""
        return key(self.identity())

    @property
    def series_id(self) -> str:
        """The store's key of the run's results (:func:`nlbandit.store.series_of`): its identity less its seeds,
        which the store keeps one by one."""
        return series_of(self.identity())[0]

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
      objective: one of :data:`~nlbandit.experiments.schema.OBJECTIVES`.
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
    unchecked: str = ""  # why the file does not check it at all (its ``unchecked`` field)


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
    first_seed: int = 0  # the reported seeds are first_seed..first_seed + n_seeds - 1
    labels: list[str] = field(default_factory=list)
    labels_elsewhere: list[str] = field(default_factory=list)  # the series' labels run at other scales only
    env_cases: list[tuple[tuple[str, Any], ...]] = field(default_factory=list)
    plots: tuple[str, ...] = ()
    loop: str = DEFAULT_LOOP
    curves: bool = True
    checkpoints: tuple[int, ...] = ()
    full_seeds: int = 0  # the file's full-scale repetition count, which a report run below it states
    diagnostics: tuple[str, ...] = ()
    ci: float | None = None  # the report's interval level (Student t); None: 95%
    phase_rows: PhaseRows = PhaseRows()  # the fewest rows of a timed call per phase (nlbandit.core.phases)
    phase_processes: int = 1  # the processes a session of runs timed apart is timed in (runner.time_sessions)
    tuning: list[Tuning] = field(default_factory=list)  # a tuned series' run in ``runs`` stands in for the chosen
    tuned: tuple = ()  # once ``runs`` holds the chosen runs, the TuningResults they were chosen by
    # (:func:`nlbandit.experiments.tuning.tune_experiment`)
    untuned: bool = False  # the file tunes, but not at this scale ([scales.<scale>] tune = false)
    missing: dict[str, str] = field(default_factory=dict)  # [[env]] case name -> why its data set is unavailable
    strata: dict[tuple, str] = field(default_factory=dict)  # a stratified table's case -> its field, whose values
    # share out the seeds ([[env]] strata; nlbandit.experiments.strata)
    left_out: tuple[str, ...] = ()  # the runs no claim reads, not run at this scale ([scales.<scale>] series =
    # "claimed"), as "label (case)"
