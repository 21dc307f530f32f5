"""The claim grammar's paired comparisons and three-valued verdicts (issue 12 §8), and its limits."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from nlbandit.cli import main
from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.claims import (
    ClaimResult,
    MissingCase,
    Timing,
    _median_rank,
    evaluate_claim,
    t_quantile_975,
    traced_text,
)
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.strata import reported_runs
from nlbandit.report.build import claim_verdict

ROUNDS = np.array([50, 100])


def curves_of(final: dict[str, np.ndarray]):
    """A ``curves`` callable whose series end at the given per-seed regrets (half of it at round 50)."""
    return lambda label, case: (ROUNDS, np.stack([final[label] / 2, final[label]], axis=1), Timing(1.0))


def evaluate(check: str, final: dict[str, np.ndarray]):
    return evaluate_claim(check, curves_of(final), 100)


@pytest.mark.parametrize("df", [1, 2, 5, 9, 29, 30, 31, 32, 49, 100, 1000, 10**6])
def test_t_quantile_matches_scipy(df):
    assert t_quantile_975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=1e-7)


def test_t_quantile_refuses_zero_degrees_of_freedom():
    with pytest.raises(ValueError, match="df must be an integer >= 1, got 0"):
        t_quantile_975(0)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
@pytest.mark.parametrize("check", ["paired('A', 'B') > 0", "not paired('A', 'B') > 0", "paired('A', 'B') <= 0",
                                   "regret('A') > regret('B')", "stuck('A') < 0.5"])
def test_a_curve_that_is_not_finite_is_refused_by_every_claim(check, bad):
    """A NaN seed made paired('A', 'B') > 0 and <= 0 both false (so its negation a PASS); an infinite one made
    regret('A') > regret('B') true and paired('A', 'B') > 0 false; stuck() counted a NaN seed as not stuck."""
    with pytest.raises(ConfigError, match=r"'A': its regret curve is not finite \(NaN or infinite\) in 1 of its 5"):
        evaluate(check, {"A": np.array([1.0, 2.0, bad, 4.0, 5.0]), "B": np.ones(5)})


@pytest.mark.parametrize("s", [*range(1, 41), 99, 500])
def test_median_rank_is_the_95_percent_order_statistic(s):
    # [d_(k), d_(s-k+1)] covers the median with probability 1 − 2 P(Bin(s, ½) ≤ k − 1) ≥ 95%, k the largest so.
    k = _median_rank(s)
    assert stats.binom.cdf(k - 1, s, 0.5) <= 0.025 < stats.binom.cdf(k, s, 0.5)
    assert (k == 0) == (s <= 5)


def test_paired_median_interval_and_too_few_seeds():
    a = np.arange(10.0)
    holds, trace = evaluate("paired('A', 'B', stat='median') < 0", {"A": a, "B": np.zeros(10)})
    assert holds is False and trace[0][0].startswith("paired('A', 'B', stat='median') = 4.50 [1.00, 8.00]")
    # Too few seeds for any 95% interval: unbounded, hence inconclusive rather than an error.
    assert evaluate("paired('A', 'B', stat='median') < 0", {"A": a[:5] - 9, "B": np.zeros(5)})[0] is None
    holds, trace = evaluate("paired('A', 'B') < 0", {"A": np.array([-5.0]), "B": np.zeros(1)})
    assert holds is None and "[-inf, inf]" in trace[0][0]
    assert evaluate("0 * paired('A', 'B') <= 0", {"A": np.array([-5.0]), "B": np.zeros(1)})[0] is True


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
    assert evaluate("-2 * paired('A', 'C') > 30", final)[0] is False  # a negative factor swaps the bounds
    assert evaluate("paired('A', 'B') / 5 < -0.9", final)[0] is True
    assert evaluate("paired('A', 'B') <= -0.01 * regret('B')", final)[0] is True  # a ratio claim
    assert evaluate("paired('A', 'C') <= -0.01 * regret('C')", final)[0] is None
    assert evaluate("-10 < paired('A', 'B') < 0", final)[0] is True  # chained: both ends
    assert evaluate("regret('A') < regret('C')", final)[0] in (True, False)  # ordinary comparisons: two-valued
    with pytest.raises(ConfigError, match="not a truth value"):
        evaluate("paired('A', 'B')", final)


def _t_interval(x: np.ndarray) -> tuple[float, float, float]:
    """The mean of ``x`` with its 95% Student-t interval, by SciPy (not the module's table)."""
    half = stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return x.mean(), x.mean() - half, x.mean() + half


def test_a_threshold_on_the_same_seeds_is_decided_seed_by_seed():
    """``paired('A', 'B') <= 0.25 * regret('B')`` is decided by the interval of the per-seed gap A − 1.25·B against 0,
    not by A − B's interval against B's point mean: B's own spread counts. Two cases where the two rules disagree."""
    rng = np.random.default_rng(3)
    z = rng.normal(0, 1, 20)
    b = 100 + 60 * (z - z.mean()) / z.std(ddof=1)  # B's mean exactly 100 (a threshold of 25), its spread large
    final = {"A": b + 20 + rng.normal(0, 2, 20), "B": b}  # A − B ≈ 20 with little spread
    check = "paired('A', 'B') <= 0.25 * regret('B')"
    lo_hi = _t_interval(final["A"] - final["B"])[1:]
    assert lo_hi[1] < 0.25 * final["B"].mean()  # the point rule would PASS
    holds, trace = evaluate(check, final)
    mean, lo, hi = _t_interval(final["A"] - 1.25 * final["B"])
    assert lo < 0 < hi and holds is None
    assert trace[-1][0] == (f"seed by seed, paired('A', 'B') - 0.25 * regret('B') = {mean:.2f} [{lo:.2f}, {hi:.2f}] "
                            "(95% CI), against 0") and trace[-1][1] == pytest.approx(mean, rel=1e-12)
    # A = 1.25·B on every seed, up to a little noise: A − B's interval is as wide as B's spread, the gap's is narrow
    final = {"A": 1.25 * b - 3 + rng.normal(0, 1, 20), "B": b}
    lo, hi = _t_interval(final["A"] - final["B"])[1:]
    assert lo < 0.25 * final["B"].mean() < hi  # the point rule: INCONCLUSIVE
    assert _t_interval(final["A"] - 1.25 * final["B"])[2] < 0 and evaluate(check, final)[0] is True
    assert evaluate("paired('A', 'B') > 0.25 * regret('B')", final)[0] is False
    # a chained range reads two gaps; an increment() is read seed by seed too
    holds, trace = evaluate("-0.5 * regret('B') <= paired('A', 'B') <= 0.25 * regret('B')", final)
    assert holds is True and sum(t.startswith("seed by seed, ") for t, _ in trace) == 2
    holds, trace = evaluate("paired('A', 'B') <= 0.5 * increment('B', 50, 100)", final)  # B's second half: B / 2
    assert holds is True and trace[-1][1] == pytest.approx(np.mean(final["A"] - 1.25 * final["B"]), rel=1e-12)
    trace = evaluate("paired('A', 'B') >= -0.5 * regret('B')", final)[1]  # (not "- -0.5 * regret('B')")
    assert trace[-1][0].startswith("seed by seed, paired('A', 'B') + 0.5 * regret('B') = ")
    assert trace[-1][1] == pytest.approx(np.mean(final["A"] - 0.5 * final["B"]), rel=1e-12)


@pytest.mark.parametrize("check", [
    "paired('A', 'B') <= 0.25 * regret('B', stat='median')",  # a median is not a mean of per-seed values
    "paired('A', 'B', stat='median') <= 0.25 * regret('B')",
    "upper(paired('A', 'B')) <= 0.25 * regret('B')",  # the interval's end, as written
    "paired('A', 'B') <= 0.25 * max(regret('B'), 1)",  # not affine
    "paired('A', 'B') / regret('B') <= 0.25",  # a ratio of per-seed values: not affine
    "paired('A', 'B') <= 0.25 * regret('C')",  # C has other seeds
    "paired('A', 'B') <= 0.25 * quantile('B', 0.5)",  # no mean of a run
])
def test_a_threshold_that_is_not_a_mean_of_the_same_seeds_is_read_as_a_number(check):
    rng = np.random.default_rng(4)
    final = {"A": rng.normal(110, 5, 12), "B": rng.normal(100, 5, 12), "C": rng.normal(100, 5, 7)}
    holds, trace = evaluate(check, final)
    assert holds is not None and not any(t.startswith("seed by seed") for t, _ in trace)


def test_seed_by_seed_verdicts_err_at_their_nominal_rate_at_the_margin():
    """2,000 simulated experiments of 20 seeds whose gap A − 1.25·B has population mean exactly 0 (B's spread 15 times
    the difference's): the seed-by-seed verdict PASSes and FAILs each in about 2.5% of them; both must be below 5%
    (the binomial standard error of 2.5% at 2,000 is 0.35%). Comparing A − B's interval with 0.25 × B's mean, the
    former rule, errs in far more: at least 20% each way here."""
    rng = np.random.default_rng(5)
    verdicts, point = [], []
    for _ in range(2000):
        b = rng.normal(100, 15, 20)
        final = {"A": 1.25 * 100 + (b - 100) + rng.normal(0, 1, 20), "B": b}  # E[A − 1.25 B] = 125 − 125 = 0
        verdicts.append(evaluate("paired('A', 'B') <= 0.25 * regret('B')", final)[0])
        lo, hi = _t_interval(final["A"] - final["B"])[1:]
        point.append(True if hi <= 0.25 * b.mean() else False if lo > 0.25 * b.mean() else None)
    assert verdicts.count(True) < 100 and verdicts.count(False) < 100, (verdicts.count(True), verdicts.count(False))
    assert point.count(True) > 400 and point.count(False) > 400  # (the setting discriminates the two rules)


def test_verdicts():
    def verdict(holds, expect):
        return claim_verdict(ClaimResult("c", "", "", expect, holds, []))

    assert [verdict(True, "pass"), verdict(False, "pass"), verdict(None, "pass")] == ["PASS", "FAIL", "INCONCLUSIVE"]
    assert verdict(False, "fail").startswith("fails, as documented") and verdict(True, "fail") == "UNEXPECTEDLY HOLDS"
    assert verdict(None, "fail") == "INCONCLUSIVE"
    ok = {(holds, expect): ClaimResult("c", "", "", expect, holds, []).ok
          for holds in (True, False, None) for expect in ("pass", "fail")}
    assert [k for k, v in ok.items() if not v] == [(True, "fail"), (False, "pass")]  # inconclusive is no failure


@pytest.mark.parametrize("check, message", [
    ("10 ** 10 ** 10 > 0", "overflow"),
    ("1e308 * 1e308 > 0", "overflow"),
    ("paired('A', 'A') + 1e308 * 10 > 0", "overflow"),
    ("1e309 > 0", "overflow"),
    ("+".join(["1"] * 20_001) + " > 0", "characters long"),
    ("+".join(["1"] * 900) + " > 0", "nested 90[0-9] levels deep"),
    ("abs(" * 200 + "1" + ")" * 200 + " > 0", "nested"),
    ("-" * 500 + "1 > 0", "nested"),
    ("regret('A')", "not a truth value"),
    ("not regret('A')", "not a truth value"),
    ("'a' * 1000000000 > 0", "needs numbers"),
    ("min(paired('A', 'A'), 1) < 0", "needs numbers, got a paired"),
    ("regret('A', t='A') > 0", "t must be a round in"),
    ("paired('A', 'A') == 0", "only be compared with"),
    ("paired('A', 'A') / -1 < 0", "positive number"),
    ("paired('A', 'A', stat='max') < 0", "stat must be"),
    ("basis_regret(5, 10 ** 12, 1, 1) > 0", "at most 10,000,000"),
    # NaN decided a verdict by the claim's phrasing (sqrt(-x) <= 0 FAIL, not (0 * x / 0 > 1) PASS)
    ("sqrt(-regret('A')) <= 0", "comparison with NaN"),
    ("not (0 * regret('A') / 0 > 1)", "comparison with NaN"),
    # impossible rounds read a value of nothing (increment over a window run backwards: -1.76, PASS)
    ("increment('A', 150, 50) < 0", r"t0 must be a round in \[0, T = 100\]"),
    ("increment('A', 80, 50) < 0", "the window must run forward, t0 <= t1"),
    ("regret('A', t=-5) < 1", r"t must be a round in \[0, T = 100\], got -5"),
    ("paired('A', 'A', t=T + 1) < 1", "t must be a round"),
    ("regret() < 100", r"these arguments do not fit: regret takes regret\(label\) \(a label is a string"),
    ("lower(regret('A')) < 1", r"lower takes lower\(paired\(...\)\)"),  # (it said 'unknown function')
])
def test_absurd_claims_are_clear_errors(check, message):
    with pytest.raises(ConfigError, match=message) as info:
        evaluate(check, {"A": np.ones(3)})
    assert "\n" not in str(info.value) and len(str(info.value)) < 300


TINY = """
title = "tiny"
horizon = 120
seeds = 4

[env]
name = "linear"
d = 3
k = 4

[[policies]]
label = "ES"
name = "lin-es"
m = 4
sigma_r = 0.5

[[policies]]
label = "U"
name = "uniform"

[[claims]]
name = "nonnegative"
text = "pseudo-regret is never negative"
check = "regret('ES') >= 0 and regret('U') >= 0"
kind = "sanity"

[[claims]]
name = "median-gap"
text = "ES beats uniform on the median instance"
check = "paired('ES', 'U', stat='median') < 0"
"""


def test_kinds_and_inconclusive_in_report_and_check(tmp_path, capsys):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    assert [c.kind for c in load_experiment(path).claims] == ["sanity", "paper"]
    out = tmp_path / "rep"
    # Four seeds are too few for a 95% interval on the median: INCONCLUSIVE, which does not fail `check`.
    assert main(["check", str(path), "--db", str(tmp_path / "r.duckdb"), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "INCONCLUSIVE" in printed and "1 of 2 claims as declared, 1 INCONCLUSIVE\n" in printed  # (not 2 of 2)
    md = (out / "tiny.md").read_text()
    assert "| claim | kind | check | measured | result |" in md
    sanity, paper = (line for line in md.splitlines() if line.startswith("| **"))
    assert "| sanity |" in sanity and sanity.endswith("| PASS |")
    assert "| paper |" in paper and "[-inf, inf]" in paper and paper.endswith("| INCONCLUSIVE |")


def test_an_unchecked_claim_is_reported_not_checked_with_its_reason_and_never_evaluated(tmp_path, capsys):
    # a claim the file's setup decides by construction: NOT CHECKED with the file's reason, even though its
    # check (true by construction here, as the sanity claim's) would evaluate
    path = tmp_path / "tiny.toml"
    path.write_text(TINY + 'unchecked = "decided by the shared schedule"\n')
    (claim,) = [c for c in load_experiment(path).claims if c.name == "median-gap"]
    assert claim.unchecked == "decided by the shared schedule"
    out = tmp_path / "rep"
    assert main(["check", str(path), "--db", str(tmp_path / "r.duckdb"), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "NOT CHECKED  median-gap" in printed and "1 of 2 claims as declared, 1 NOT CHECKED\n" in printed
    line = next(line for line in (out / "tiny.md").read_text().splitlines() if line.startswith("| **median-gap"))
    assert line.endswith("| NOT CHECKED |") and "decided by the shared schedule" in line


@pytest.mark.parametrize("old, new, message", [
    ("stat='median') < 0", "stat='median') < 10 ** 10 ** 10", "claims\\[1\\] field 'check'.*overflow"),
    ('kind = "sanity"', 'kind = "obvious"', "kind"),
    # a syntax error named neither the file nor the claim
    ("stat='median') < 0", "stat='median') < ", r"tiny.toml: claims\[1\] field 'check': claim .* is not a valid"),
    # a misspelt keyword was read as a case key ('... matches 0 runs; ... (cases: )')
    ("regret('ES') >= 0", "regret('ES', tt=5) >= 0",
     "keyword 'tt' is neither one this function takes .* single environment"),
    ("regret('ES') >= 0", "stuck('ES', threshold='x') >= 0", "threshold needs numbers, got 'x'"),  # (a NumPy error)
    ("regret('ES') >= 0", "stuck('ES', threshold=-1) >= 0", "threshold must be a number >= 0, got -1"),
    ("seeds = 4\n", 'seeds = 4\n[scales.quick]\ncases = ["nope"]\n', "'nope', not an .* the file has no named cases"),
    ("seeds = 4\n", "seeds = 4\n[scales.quick]\nhorizn = 5\n", "unknown field 'horizn'; allowed fields: cases, "),
])
def test_bad_claims_are_refused_when_the_file_loads(tmp_path, old, new, message):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY.replace(old, new))
    with pytest.raises(ConfigError, match=message):
        load_experiment(path)


def test_an_unknown_function_lists_every_function_a_claim_may_call():
    with pytest.raises(ConfigError, match=r"unknown function; allowed: .*lower\(paired\(...\)\), upper.*at_least"):
        evaluate("bogus('A') < 1", {"A": np.ones(3)})


def test_traced_values_are_shown_even_when_a_label_holds_an_equals_sign():
    final = {"ES (σ = 0.5)": np.array([1.0, 3.0]), "TS": np.array([2.0, 2.0])}
    _, trace = evaluate("regret('ES (σ = 0.5)') <= 10 and paired('ES (σ = 0.5)', 'TS') < 5", final)
    shown = [traced_text(t, v) for t, v in trace]
    assert shown[0] == "regret('ES (σ = 0.5)') = 2.00"
    assert shown[1].startswith("paired('ES (σ = 0.5)', 'TS') = 0.00 [") and shown[1].count(" = ") == 2


def test_at_least_counts_three_valued_truths():
    rng = np.random.default_rng(1)
    base = rng.normal(100, 30, 10)
    final = {"A": base, "B": base + 5 + rng.normal(0, 0.5, 10), "C": base + rng.normal(0, 5, 10), "Z": base * 0}
    # A < B is resolved true, A < C is undetermined, A < Z (= 0 everywhere) is false.
    checks = "paired('A', 'B') < 0, paired('A', 'C') < 0, regret('A') < regret('Z')"
    assert evaluate(f"at_least(1, {checks})", final)[0] is True
    assert evaluate(f"at_least(2, {checks})", final)[0] is None
    assert evaluate(f"at_least(3, {checks})", final)[0] is False
    holds, trace = evaluate(f"at_least(2, {checks})", final)
    assert traced_text(*trace[-1]) == "at_least(2, …): 1 of 3 hold, 1 undetermined"
    for bad in (f"at_least(0, {checks})", f"at_least(4, {checks})", f"at_least(1.5, {checks})",
                "at_least(1, regret('A'))"):
        with pytest.raises(ConfigError):
            evaluate(bad, final)


def test_a_claim_over_a_case_not_run_is_decided_only_when_the_other_cases_decide_it():
    rng = np.random.default_rng(3)
    base = rng.normal(100, 30, 10)
    final = {"A": base, "B": base + 5 + rng.normal(0, 0.5, 10)}  # A < B resolved

    def curves(label, case):
        if case.get("case") == "gone":
            raise MissingCase("gone")
        return curves_of(final)(label, case)

    def judge(check):
        return evaluate_claim(check, curves, 100)[0]

    gone_true = "paired('A', 'B', case='gone') < 0"
    assert judge(f"at_least(2, paired('B', 'A') < 0, {gone_true}, regret('A') > 10 ** 6)") is False
    assert judge(f"at_least(2, paired('A', 'B') < 0, {gone_true}, regret('A') > 10 ** 6)") is None
    assert judge(f"at_least(1, paired('A', 'B') < 0, {gone_true})") is True
    assert judge(f"paired('A', 'B') < 0 or {gone_true}") is True
    assert judge("paired('B', 'A') < 0 and lower(paired('A', 'B', case='gone')) <= 0") is False
    assert judge("regret('A', case='gone') <= 2 * regret('B') + 1") is None
    assert judge("-regret('A', case='gone') < 0 or not regret('B', case='gone') > 1") is None


def test_lower_and_upper_read_a_paired_interval():
    rng = np.random.default_rng(2)
    base = rng.normal(100, 30, 10)
    final = {"A": base, "B": base + rng.normal(0, 5, 10)}
    diff = final["A"] - final["B"]
    half = stats.t.ppf(0.975, 9) * diff.std(ddof=1) / np.sqrt(10)
    assert evaluate(f"abs(lower(paired('A', 'B')) - {float(diff.mean() - half)!r}) < 1e-9", final)[0] is True
    assert evaluate(f"abs(upper(paired('A', 'B')) - {float(diff.mean() + half)!r}) < 1e-9", final)[0] is True
    with pytest.raises(ConfigError):
        evaluate("lower(regret('A')) < 0", final)


def test_reward_is_the_average_realised_reward_per_round():
    rounds = np.array([50, 100])
    rewards = {"A": np.array([[20.0, 45.0], [30.0, 55.0]])}  # two seeds: 0.45 and 0.55 per round at t = 100

    def curves(label, case, metric="regret"):
        return rounds, rewards[label] if metric == "reward" else np.zeros((2, 2)), Timing(1.0)

    holds, values = evaluate_claim("reward('A') >= 0.5 and reward('A', t=60) <= 0.5", curves, 100)
    assert holds is True and values[0][1] == pytest.approx(0.5) and values[1][1] == pytest.approx(25 / 50)


def test_a_report_interrupted_while_rendering_leaves_the_previous_report_whole(tmp_path, monkeypatch, capsys):
    """The plot was renamed into place before the markdown and the run list were rendered: a kill in between left the
    new plot beside the old text (and n_seeds of one run in runs.json, of the other in the markdown)."""
    from nlbandit.report import build

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out, db = tmp_path / "rep", tmp_path / "r.duckdb"
    assert main(["report", str(path), "--db", str(db), "--out", str(out), "--no-progress", "--seeds", "2"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def killed(*args, **kwargs):
        raise RuntimeError("killed while rendering")

    monkeypatch.setattr(build, "run_list", killed)
    with pytest.raises(RuntimeError, match="killed while rendering"):
        main(["report", str(path), "--db", str(db), "--out", str(out), "--no-progress"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


GRID = """
title = "grid"
horizon = 50
seeds = 3

[scales.quick]
series = "claimed"

[env]
name = "linear"
d = [2, 3, 4]
k = 4

[[policies]]
label = "A"
name = "lin-ts"

[[policies]]
label = "B"
name = "lin-ucb"

[[policies]]
label = "C"
name = "uniform"

[[policies]]
label = "D"
name = "greedy"

[[claims]]
name = "second-label"
text = "the second label of paired is read too"
check = "paired('B', 'A', d=2) < 0 or slope('C', 'd', t=20) > 0"
"""


def test_a_scale_of_claimed_series_runs_what_its_claims_read_and_nothing_else(tmp_path, capsys):
    # paired's second label, and every grid value of slope's line; D, which no claim reads, is left out
    path = tmp_path / "grid.toml"
    path.write_text(GRID)
    quick, full = load_experiment(path, "quick"), load_experiment(path, "full")
    assert sorted((r.label, r.case_label) for r in quick.runs) == [
        ("A", "d=2"), ("B", "d=2"), ("C", "d=2"), ("C", "d=3"), ("C", "d=4")]
    assert quick.labels == ["A", "B", "C"] and len(full.runs) == 12 and full.left_out == ()
    assert quick.left_out == ("A (d=3)", "A (d=4)", "B (d=3)", "B (d=4)", "D (d=2)", "D (d=3)", "D (d=4)")
    out = tmp_path / "rep"
    assert main(["check", str(path), "--db", str(tmp_path / "r.duckdb"), "--out", str(out), "--no-progress"]) in (0, 1)
    md = (out / "grid.md").read_text()
    assert ("Only the runs this scale's claims read were run (`[scales.quick] series = \"claimed\"`); left out: "
            "A (d=3), A (d=4), B (d=3)") in md
    assert "| D |" not in md and "| C | d=4 |" in md


@pytest.mark.parametrize("old, new, message", [
    ('series = "claimed"', 'series = "read"', r"scales.quick: field 'series' must be one of 'all', 'claimed'"),
    ('check = "paired', 'check = "l(100, 2.0) > 0 or paired', None),  # (still reads runs: accepted)
    ("check = \"paired('B', 'A', d=2) < 0 or slope('C', 'd', t=20) > 0\"", 'check = "l(100, 2.0) > 0"',
     r"field 'scales.quick.series' = 'claimed': no claim checked at scale 'quick' reads a run"),
])
def test_a_scale_of_claimed_series_is_refused_where_it_cannot_mean_anything(tmp_path, old, new, message):
    path = tmp_path / "grid.toml"
    assert old in GRID
    path.write_text(GRID.replace(old, new))
    if message is None:
        assert len(load_experiment(path).runs) == 5
        return
    with pytest.raises(ConfigError, match=message):
        load_experiment(path)


STRATA = """
title = "strata"
horizon = 40
seeds = 4

[[env]]
case = "mixed"
name = "linear"
d = 3
k = 4
noise_std = [0.1, 2.0]
strata = "noise_std"

[[policies]]
label = "TS"
name = "lin-ts"

[[policies]]
label = "U"
name = "uniform"

[[claims]]
name = "ts-learns"
text = "TS beats uniform play over both noise levels"
check = "paired('TS', 'U', case='mixed') < 1e9"
"""


def test_a_stratified_field_shares_out_the_seeds_and_its_runs_are_read_as_one(tmp_path):
    from nlbandit.report.build import load_rows
    from nlbandit.store import Store

    path = tmp_path / "strata.toml"
    path.write_text(STRATA)
    exp = load_experiment(path)
    assert [(r.label, r.case_label, list(r.seeds)) for r in exp.runs] == [
        ("TS", "case=mixed, noise_std=0.1", [0, 1]), ("TS", "case=mixed, noise_std=2.0", [2, 3]),
        ("U", "case=mixed, noise_std=0.1", [0, 1]), ("U", "case=mixed, noise_std=2.0", [2, 3])]
    assert exp.env_cases == [(("case", "mixed"),)] and set(exp.strata.values()) == {"noise_std"}
    out, db = tmp_path / "rep", tmp_path / "r.duckdb"
    assert main(["check", str(path), "--db", str(db), "--out", str(out), "--no-progress"]) == 0
    # the same runs, each value a file of its own on its share of the seeds: the pooled curves are theirs
    alone = []
    for first, noise in ((0, 0.1), (2, 2.0)):
        one = tmp_path / f"alone{first}.toml"
        one.write_text(STRATA.replace("seeds = 4", f"seeds = 2\nfirst_seed = {first}").replace(
            "noise_std = [0.1, 2.0]\nstrata = \"noise_std\"", f"noise_std = {noise}"))
        assert main(["run", str(one), "--db", str(tmp_path / f"a{first}.duckdb"), "--out", str(out),
                     "--no-progress"]) == 0
        with Store(tmp_path / f"a{first}.duckdb") as store:
            alone.append({r.run.label: r.stored.cum_regret for r in load_rows(load_experiment(one), store)})
    with Store(db) as store:
        rows = load_rows(exp, store)
    assert [(r.run.label, r.run.case_label, r.run.n_seeds, len(r.parts)) for r in rows] == [
        ("TS", "case=mixed", 4, 2), ("U", "case=mixed", 4, 2)]
    for r in rows:
        np.testing.assert_array_equal(r.stored.cum_regret, np.concatenate([a[r.run.label] for a in alone]))
        assert r.run.env["noise_std"] == [0.1, 2.0] and r.stored.seeds == (0, 1, 2, 3)
    md = (out / "strata.md").read_text()
    assert md.count("| TS | case=mixed |") == 1 and "noise_std=0.1 |" not in md
    listed = json.loads((out / "strata.runs.json").read_text())
    assert [(e["label"], e["identity"]["env"]["noise_std"], e["sample_seeds"]) for e in listed] == [
        ("TS", 0.1, [0, 1]), ("TS", 2.0, [2, 3]), ("U", 0.1, [0, 1]), ("U", 2.0, [2, 3])]


@pytest.mark.parametrize("old, new, message", [
    ('strata = "noise_std"', 'strata = "d"', r"env\[0\]: field 'strata' = 'd' must name a list-valued field"),
    ("seeds = 4", "seeds = 3", r"field 'strata' = 'noise_std': seeds = 3 at scale 'quick' is not a multiple of its 2"),
    ('name = "lin-ts"', 'name = "lin-ts"\ntune = { alpha = [0.5, 1.0] }\n[tune]\nseeds = 2\n[[policies]]\nlabel = "X"\n'
     'name = "uniform"', "'TS' is tuned, which a stratified case does not take"),
    ("check = \"paired('TS', 'U', case='mixed') < 1e9\"", "check = \"runtime('TS', case='mixed') > 0\"",
     r"a claim reads the measured time of 'TS' on case \(\('case', 'mixed'\),\), whose runs are pooled over the "
     "field 'strata' = 'noise_std'"),
])
def test_a_stratified_field_is_refused_where_its_seeds_cannot_be_shared_out(tmp_path, old, new, message):
    path = tmp_path / "strata.toml"
    assert old in STRATA
    path.write_text(STRATA.replace(old, new))
    with pytest.raises(ConfigError, match=message):
        load_experiment(path)


def test_a_scale_of_claimed_series_keeps_every_stratum_of_a_series_it_reads(tmp_path):
    path = tmp_path / "strata.toml"
    path.write_text(STRATA.replace("seeds = 4\n", 'seeds = 4\n[scales.quick]\nseries = "claimed"\n')
                    + '\n[[policies]]\nlabel = "G"\nname = "greedy"\n')
    exp = load_experiment(path)
    assert sorted((r.label, r.case_label) for r in exp.runs) == [
        ("TS", "case=mixed, noise_std=0.1"), ("TS", "case=mixed, noise_std=2.0"),
        ("U", "case=mixed, noise_std=0.1"), ("U", "case=mixed, noise_std=2.0")]
    assert exp.left_out == ("G (case=mixed)",) and exp.labels == ["TS", "U"]


PLAIN = """
[[env]]
case = "plain"
name = "linear"
d = 3
k = 4
noise_std = [0.1, 2.0]
"""


def test_a_stratified_field_pools_its_own_table_only(tmp_path):
    # another table's grid over the same field stays a grid of cases (it was pooled too, its seeds counted twice)
    path = tmp_path / "strata.toml"
    path.write_text(STRATA.replace("[[policies]]", PLAIN + "\n[[policies]]", 1))
    exp = load_experiment(path)
    shown = [(r.label, r.case_label, r.n_seeds) for r in reported_runs(exp)]
    assert shown[:3] == [("TS", "case=mixed", 4), ("TS", "case=plain, noise_std=0.1", 4),
                         ("TS", "case=plain, noise_std=2.0", 4)]
    assert exp.env_cases == [(("case", "mixed"),), (("case", "plain"), ("noise_std", 0.1)),
                             (("case", "plain"), ("noise_std", 2.0))]
    # a time read on the plain case is a time of its own
    path.write_text(path.read_text() + "\n[[claims]]\nname = \"t\"\ntext = \"t\"\n"
                    "check = \"runtime('TS', case='plain', noise_std=0.1) > 0\"\n")
    assert load_experiment(path).strata == {(("case", "mixed"), ("noise_std", 0.1)): "noise_std",
                                            (("case", "mixed"), ("noise_std", 2.0)): "noise_std"}


def test_a_series_on_some_values_of_a_stratified_field_is_refused(tmp_path):
    # one stratum's runs were shown as the whole case: 2 seeds of noise 2.0 against TS's 4 (a broadcast error)
    path = tmp_path / "strata.toml"
    path.write_text(STRATA.replace('name = "uniform"', 'name = "uniform"\nonly = { noise_std = 2.0 }'))
    with pytest.raises(ConfigError, match=r"policies\[1\]: field 'only' keeps 1 of the 2 values of the stratified "
                                          r"field 'noise_std'"):
        load_experiment(path)


def test_a_scale_of_claimed_series_reads_the_cases_that_run_of_a_claim_that_also_reads_one_that_does_not(tmp_path):
    # (a claim reading a case not run was skipped: U's run on 'mixed' was left out, and the check stopped with
    # "unknown label 'U'")
    path = tmp_path / "strata.toml"
    two = STRATA.replace("seeds = 4\n", 'seeds = 4\n[scales.quick]\nseries = "claimed"\n').replace(
        "[[policies]]", PLAIN + "\n[[policies]]", 1).replace(
        "check = \"paired('TS', 'U', case='mixed') < 1e9\"",
        "check = \"paired('TS', 'U', case='mixed') < 1e9 or regret('TS', case='plain', noise_std=0.1) > 0\"")
    path.write_text(two)
    exp = load_experiment(path, cases=["mixed"])
    assert exp.claims[0].missing and sorted({r.label for r in exp.runs}) == ["TS", "U"]
    assert exp.env_cases == [(("case", "mixed"),)]
    path.write_text(two.replace("< 1e9 or regret('TS', case='plain', noise_std=0.1) > 0", "< 1e9"))
    with pytest.raises(ConfigError, match=r"no claim checked at scale 'quick' reads a run this command runs \(not "
                                          r"run: case 'mixed'\)"):
        load_experiment(path, cases=["plain"])


def test_a_line_across_a_stratified_field_is_refused_naming_it(tmp_path):
    path = tmp_path / "strata.toml"
    path.write_text(STRATA.replace("check = \"paired('TS', 'U', case='mixed') < 1e9\"",
                                   "check = \"slope('TS', 'noise_std', case='mixed') > 0\""))
    with pytest.raises(ConfigError, match="'noise_std' is a stratified field .*not a grid"):
        load_experiment(path)


def test_one_configuration_under_two_labels_is_shown_under_each(tmp_path):
    # (rows were looked up by run id, which the two share: both rows read 'U2')
    from nlbandit.report.build import load_rows
    from nlbandit.store import Store

    path = tmp_path / "tiny.toml"
    path.write_text(TINY + '\n[[policies]]\nlabel = "U2"\nname = "uniform"\n')
    db = tmp_path / "r.duckdb"
    assert main(["run", str(path), "--db", str(db), "--out", str(tmp_path / "rep"), "--no-progress"]) == 0
    with Store(db) as store:
        rows = load_rows(load_experiment(path), store)
    assert [r.run.label for r in rows] == ["ES", "U", "U2"]
    np.testing.assert_array_equal(rows[1].stored.cum_regret, rows[2].stored.cum_regret)
