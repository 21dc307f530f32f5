"""The claim grammar's paired comparisons and three-valued verdicts (issue 12 §8), and its limits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from nlbandit.core.hyper import ConfigError
from nlbandit.report.build import claim_verdict
from nlbandit.report.claims import ClaimResult, evaluate_claim, t_quantile_975

ROUNDS = np.array([50, 100])


def curves_of(final: dict[str, np.ndarray]):
    """A ``curves`` callable whose series end at the given per-seed regrets (half of it at round 50)."""
    return lambda label, case: (ROUNDS, np.stack([final[label] / 2, final[label]], axis=1), 1.0)


def evaluate(check: str, final: dict[str, np.ndarray]):
    return evaluate_claim(check, curves_of(final), 100)


@pytest.mark.parametrize("df", [1, 2, 5, 9, 29, 30, 31, 49, 100, 1000])
def test_t_quantile_matches_scipy(df):
    assert t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-4)


def test_paired_interval_is_sharp_where_unpaired_means_overlap():
    rng = np.random.default_rng(0)
    base = rng.normal(100, 30, 20)  # instance-to-instance spread dominates
    final = {"A": base, "B": base + 2 + rng.normal(0, 0.5, 20)}  # B costs 2 more on every instance
    holds, trace = evaluate("paired('A', 'B') < 0", final)
    assert holds is True
    diff = final["A"] - final["B"]
    half = stats.t.ppf(0.975, 19) * diff.std(ddof=1) / np.sqrt(20)
    assert "paired('A', 'B')" in trace[0][0] and f"[{diff.mean() - half:.2f}, {diff.mean() + half:.2f}]" in trace[0][0]
    se = np.hypot(final["A"].std(ddof=1), final["B"].std(ddof=1)) / np.sqrt(20)
    assert abs(final["A"].mean() - final["B"].mean()) < 1.96 * se  # unpaired, the seeds could not tell


def test_three_valued_comparisons_and_kleene_logic():
    rng = np.random.default_rng(1)
    base = rng.normal(100, 30, 10)
    final = {"A": base, "B": base + 5 + rng.normal(0, 0.1, 10), "C": base + rng.normal(0, 5, 10)}
    assert evaluate("paired('A', 'B') < 0", final)[0] is True
    assert evaluate("paired('A', 'B') > 0", final)[0] is False
    assert evaluate("paired('A', 'C') < 0", final)[0] is None  # straddles 0
    assert evaluate("paired('A', 'C') < 0 and 1 > 2", final)[0] is False
    assert evaluate("paired('A', 'C') < 0 or 1 < 2", final)[0] is True
    assert evaluate("paired('A', 'C') < 0 and 1 < 2", final)[0] is None
    assert evaluate("not paired('A', 'C') < 0", final)[0] is None
    assert evaluate("paired('A', 'B') + 10 > 0", final)[0] is True  # shifted interval
    assert evaluate("2 * paired('A', 'B') < -9", final)[0] is True  # scaled interval (mean −10)
    assert evaluate("-paired('A', 'B') > 0", final)[0] is True
    assert evaluate("paired('A', 'B') <= -0.01 * regret('B')", final)[0] is True
    with pytest.raises(ConfigError, match="not a truth value"):
        evaluate("paired('A', 'B')", final)


def test_verdicts():
    def verdict(holds, expect):
        return claim_verdict(ClaimResult("c", "", "", expect, holds, []))

    assert [verdict(True, "pass"), verdict(False, "pass"), verdict(None, "pass")] == ["PASS", "FAIL", "INCONCLUSIVE"]
    assert verdict(False, "fail").startswith("fails, as documented") and verdict(True, "fail") == "UNEXPECTEDLY HOLDS"
    assert verdict(None, "fail") == "INCONCLUSIVE"
    assert ClaimResult("c", "", "", "pass", None, []).ok and not ClaimResult("c", "", "", "pass", False, []).ok


@pytest.mark.parametrize("check, message", [
    ("10 ** 10 ** 10 > 0", "overflow"),
    ("+".join(["1"] * 20_001) + " > 0", "characters long"),
    ("abs(" * 200 + "1" + ")" * 200 + " > 0", "nested"),
    ("-" * 500 + "1 > 0", "nested"),
])
def test_absurd_claims_are_clear_errors(check, message):
    with pytest.raises(ConfigError, match=message):
        evaluate(check, {"A": np.ones(3)})
