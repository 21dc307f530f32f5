"""Bae & Lee's report diagnostic (:mod:`nlbandit.plugins`), ``diagnostics = ["effective-dimension"]``:
the realised effective dimension d̃ of each environment case (spec 001 §4.4). Not imported by the family module,
so in no run's code hash."""

from __future__ import annotations

from typing import Any

import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.models.mlp import MLP
from nlbandit.models.ntk import realized_effective_dimension
from nlbandit.policies.neurallog import lambda0
from nlbandit.plugins import Diagnostic

EFFECTIVE_DIMENSION_NETWORK = MLP(20, 20, 2)
"""The network of the realised d̃ diagnostic: Bae & Lee's experiments' L = 2, m = 20 (input d set per case)."""


def effective_dimensions(exp: Any) -> list[tuple[str, np.ndarray]]:
    """(case label, realised d̃ per reported seed) for every environment case of ``exp``: spec 001 §4.4's
    log det((R/λ₀)H̃ + I) over the T·K presented contexts, gradients at the symmetric θ₀ of the L = 2, m = 20
    network, λ₀ of δ = 0.05, S = 1, C1 = 1 (:func:`~nlbandit.models.ntk.realized_effective_dimension`)."""
    from nlbandit.experiments.strata import reported  # (both import the policy registry, which finds this module)
    from nlbandit.loops.bandit import BanditLoop

    lam0 = float(lambda0(EFFECTIVE_DIMENSION_NETWORK.depth, 1.0, 0.05, 1.0))
    out = []
    for case in exp.env_cases:
        run, parts = next((r, parts) for r, parts in reported(exp) if r.case == case)  # (a stratified case: its parts)
        values = []
        for part in parts:
            env = BanditLoop().build([part])[0]
            arch = EFFECTIVE_DIMENSION_NETWORK._replace(d=env.spec.d)
            values += [realized_effective_dimension(env, s, exp.horizon, arch, lam0) for s in part.seeds]
        out.append((run.case_label, np.array(values)))
    return out


def effective_dimension_lines(exp: Any) -> list[str]:
    """The report section: mean, min and max d̃ per case."""
    lines = ["", "## Realised effective dimension", "",
             f"d̃ = log det((R/λ₀)H̃ + I), H̃ = Σ g(x; θ₀)g(x; θ₀)ᵀ/m over the T·K context vectors (T = {exp.horizon}) "
             "each reported seed presents (repeats included), with the gradients of the L = 2, m = 20 network at its "
             "block-symmetric θ₀, R = 1/4 and λ₀ = 8√2·C1·√L·log(4/δ)/S with δ = 0.05, S = C1 = 1 (spec 001 §4.4). It "
             "depends on the environment and the seed only, not on the policy.", "",
             "| case | mean d̃ | min | max |", "|---|---:|---:|---:|"]
    for label, values in effective_dimensions(exp):
        lines.append(f"| {label or '—'} | {values.mean():.1f} | {values.min():.1f} | {values.max():.1f} |")
    return lines


def check_even_d(exp: Any, where: str) -> None:
    """The gradients at the block-symmetric θ₀ need an even d in every case."""
    if any(r.env["d"] % 2 for r in exp.runs):
        raise ConfigError(f"{where}: diagnostic 'effective-dimension' needs an even d in every case (its features "
                          "are gradients at the block-symmetric θ₀)")


REPORT_PLUGINS = (Diagnostic("effective-dimension", "per environment case, the realised d̃ = log det((R/λ₀)H̃ + I) "
                             "over the T·K contexts each reported seed presents (spec 001 §4.4)",
                             effective_dimension_lines, check_even_d),)
"""The family's report plug-ins (:func:`nlbandit.plugins.plugins`)."""
