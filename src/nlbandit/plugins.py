"""Report plug-ins: the sections and panels an experiment file asks for by name (``diagnostics = [...]``,
``plots = [...]``), and the claim functions a loop adds to its files' claims (:class:`ClaimFunction`), each declared
by the module that owns what it computes.

A module declares ``REPORT_PLUGINS``, a tuple of :class:`Diagnostic`, :class:`Panel` and :class:`ClaimFunction`
records; :func:`plugins` collects them from the policy families' and the loops' ``<name>_report.py`` modules (Bae &
Lee's realised effective dimension beside ``neurallog``, the doubling trick's constant beside ``anytime``, Zhao et
al.'s regret against d beside the regression loop, the off-policy estimates' bias and coverage beside the evaluate
loop). The module they report on does not import them, so a report plug-in is
in no run's code hash (:mod:`nlbandit.provenance`). The experiment loader validates the names against
:func:`plugins` and calls each chosen plug-in's ``check`` on the resolved experiment; the report calls ``lines``
or ``panels`` and ``draw``; the claims of a loop's files may call its claim functions (:func:`claim_functions`).
This module sits outside both (the experiment layer does not import the report).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from nlbandit.discovery import declaring_modules

if TYPE_CHECKING:
    from nlbandit.experiments.spec import Experiment


def _accept(exp: "Experiment", where: str) -> None:
    """A plug-in's ``check`` that accepts every experiment."""


@dataclass(frozen=True)
class Diagnostic:
    """A report section computed from the experiment (``diagnostics = [name]``).

    Attributes:
      name: its name in experiment files; doc: one line on what it shows.
      lines: the section's markdown lines for an experiment.
      check: raises :class:`~nlbandit.core.hyper.ConfigError` (message starting with ``where``) when the
        experiment cannot have the section.
    """

    name: str
    doc: str
    lines: Callable[["Experiment"], list[str]]
    check: Callable[["Experiment", str], None] = _accept


@dataclass(frozen=True)
class Panel:
    """Panels of the report's figure beside the regret curves (``plots = [name]``).

    Attributes:
      name, doc, check: as :class:`Diagnostic`'s.
      panels: the panels an experiment gets, one argument of ``draw`` each.
      draw: ``draw(ax, exp, rows, panel)`` draws one on a Matplotlib axis (``rows``: the report's
        :class:`~nlbandit.report.build.Row` s).
    """

    name: str
    doc: str
    panels: Callable[["Experiment"], list[Any]]
    draw: Callable[[Any, "Experiment", list[Any], Any], None]
    check: Callable[["Experiment", str], None] = _accept


@dataclass(frozen=True)
class ClaimFunction:
    """A function that the claims of one loop's experiment files may call beside the common ones
    (:mod:`nlbandit.experiments.claims`), as ``name(label, arg, ..., **case)``: ``value(final, *args)`` computes it
    from ``final(metric)``, the run's per-seed values (S,) of one of its stored curves at its last recorded round,
    as a number or an :class:`~nlbandit.experiments.claims.Interval` (compared three-valued, as ``paired``).

    Attributes:
      name: its name in claims; loop: the loop whose files may call it; usage: how it is called (for messages),
        e.g. ``bias(label, estimator)``; args: how many arguments follow the label.
      value: computes it; raises :class:`~nlbandit.core.hyper.ConfigError` for arguments it refuses.
      text: its value as a report shows it (an interval ending with `` (95% CI)``).
    """

    name: str
    loop: str
    usage: str
    args: int
    value: Callable[..., Any]
    text: Callable[[Any], str]


@functools.cache
def plugins() -> dict[str, Diagnostic | Panel | ClaimFunction]:
    """Every declared plug-in by name (``ValueError`` when two share one)."""
    out: dict[str, Diagnostic | Panel | ClaimFunction] = {}
    for package in ("nlbandit.policies", "nlbandit.loops"):
        for module in declaring_modules(package, "REPORT_PLUGINS"):
            for plugin in module.REPORT_PLUGINS:
                if out.setdefault(plugin.name, plugin) is not plugin:
                    raise ValueError(f"report plug-in {plugin.name!r} is declared twice ({module.__name__})")
    return out


def of_kind(kind: type) -> dict[str, Any]:
    """The plug-ins of one kind (:class:`Diagnostic`, :class:`Panel` or :class:`ClaimFunction`) by name."""
    return {name: p for name, p in plugins().items() if isinstance(p, kind)}


def claim_functions(loop: str) -> tuple[ClaimFunction, ...]:
    """The claim functions that the experiment files of ``loop`` may call beside the common ones."""
    return tuple(p for p in of_kind(ClaimFunction).values() if p.loop == loop)
