"""The evaluate loop's claim functions (:class:`~nlbandit.plugins.ClaimFunction`): how an estimator's final
estimates compare with the truth of a simulated log (:mod:`nlbandit.loops.evaluate`), seed by seed. Not imported by
the loop's module, so in no run's code hash.

* ``bias(label, estimator)``: the per-seed error estimate − truth at the last event, as an interval: its mean and
  95% Student-t confidence interval over the seeds (independent logs), compared three-valued like ``paired``;
* ``coverage(label, estimator)``: the fraction of seeds whose bootstrap interval holds the truth;
* ``halfwidth(label, estimator)``: the mean half-width of the bootstrap interval, a margin a claim can compare the
  bias with (``-halfwidth('A', 'dr') < bias('A', 'dr') < halfwidth('A', 'dr')``).

``estimator`` is ``'ips'``, ``'snips'`` or ``'dr'``, one the run computed (its ``[env]`` table's ``estimators``);
``bias`` and ``coverage`` need a simulated log (a service's has no truth).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.claims import Interval, paired_interval
from nlbandit.plugins import ClaimFunction
from nlbandit.replay.estimators import ESTIMATORS

Final = Callable[[str], np.ndarray]
"""``final(metric)``: a run's per-seed values of one of its curves at the last recorded event."""


def _estimator(final: Final, name: object) -> str:
    """``name`` if it is the name of an estimator the run computed; a ConfigError saying why not otherwise."""
    if name not in ESTIMATORS:
        raise ConfigError(f"the estimator must be one of {', '.join(repr(e) for e in ESTIMATORS)}, got {name!r}")
    try:
        final(str(name))
    except KeyError:
        raise ConfigError(f"the run did not compute the estimator {name!r}: its [env] table's estimators leave it "
                          "out") from None
    return str(name)


def _truth(final: Final) -> np.ndarray:
    """The per-seed truth; a ConfigError for a run without one (a service's log)."""
    try:
        return final("truth")
    except KeyError:
        raise ConfigError("the run's log has no known truth: only a simulated log ([env] name = 'simulated') stores "
                          "the candidate's true value") from None


def bias(final: Final, estimator: str) -> Interval:
    """The per-seed error estimate − truth of ``estimator``: its mean with a 95% Student-t interval over seeds."""
    return paired_interval(final(_estimator(final, estimator)) - _truth(final))


def coverage(final: Final, estimator: str) -> float:
    """The fraction of seeds whose bootstrap interval of ``estimator`` holds the truth."""
    name, truth = _estimator(final, estimator), _truth(final)
    return float(np.mean((final(name + "_lo") <= truth) & (truth <= final(name + "_hi"))))


def halfwidth(final: Final, estimator: str) -> float:
    """The mean half-width over seeds of the bootstrap interval of ``estimator``."""
    name = _estimator(final, estimator)
    return float(np.mean(final(name + "_hi") - final(name + "_lo")) / 2)


REPORT_PLUGINS = (
    ClaimFunction("bias", "evaluate", "bias(label, estimator)", 1, bias,
                  lambda v: f"{v.mean:.4f} [{v.lo:.4f}, {v.hi:.4f}] (95% CI)"),
    ClaimFunction("coverage", "evaluate", "coverage(label, estimator)", 1, coverage, lambda v: f"{v:.2f}"),
    ClaimFunction("halfwidth", "evaluate", "halfwidth(label, estimator)", 1, halfwidth, lambda v: f"{v:.4f}"),
)
"""The loop's claim functions (:func:`nlbandit.plugins.claim_functions`)."""
