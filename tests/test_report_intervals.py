"""The report's intervals of the mean: Student t, at 95% by default or at a file's ``ci`` level."""

from __future__ import annotations

import numpy as np
import pytest

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.plan import load_experiment
from nlbandit.report.build import ci_name, half_width

FILE = """
horizon = 10
seeds = 2
{ci}
[env]
name = "linear"
d = 2
k = 3
[[policies]]
label = "u"
name = "uniform"
"""


def test_half_width_is_student_t_at_the_level_or_at_95_percent():
    """Student t with n − 1 degrees of freedom, as the claims' intervals: with 2 seeds t_{0.975, 1} = 12.706, where the
    normal 1.96 (the default before 2026-11-29) gave about a sixth of that width."""
    values = np.random.default_rng(0).normal(5, 2, (10, 3))
    sd = values.std(axis=0, ddof=1) / np.sqrt(10)
    np.testing.assert_allclose(half_width(values, 0.96), 2.398 * sd, rtol=1e-3)  # t_{0.98, 9} of spec 001 §3.5
    np.testing.assert_allclose(half_width(values, None), 2.262 * sd, rtol=1e-3)  # t_{0.975, 9}
    two = values[:2]
    np.testing.assert_allclose(half_width(two, None), 12.706 * two.std(axis=0, ddof=1) / np.sqrt(2), rtol=1e-4)
    assert np.all(half_width(values[:1], 0.96) == 0)
    assert ci_name(None) == "95% CI (t)" and ci_name(0.96) == "96% CI (t)"


def test_the_ci_field_is_a_level_in_the_open_unit_interval(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text(FILE.format(ci="ci = 0.96"))
    assert load_experiment(path).ci == 0.96
    path.write_text(FILE.format(ci=""))
    assert load_experiment(path).ci is None
    path.write_text(FILE.format(ci="ci = 96"))
    with pytest.raises(ConfigError, match="ci"):
        load_experiment(path)
