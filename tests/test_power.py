"""Seeds from a pilot (:mod:`nlbandit.experiments.power`, ``nlbandit seeds``): the count against an independent
search with SciPy's t quantiles, its power by simulation, the command on a stored pilot; and a run on seeds the pilot
did not use (``first_seed``)."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats

from nlbandit.cli import main
from nlbandit.experiments.claims import paired_interval
from nlbandit.experiments.power import seeds_needed

PILOT = """
title = "pilot"
horizon = 300
seeds = 4

[env]
name = "linear"
d = 4
k = 6

[[policies]]
label = "TS"
name = "lin-ts"

[[policies]]
label = "U"
name = "uniform"

[[claims]]
name = "learns"
text = "TS beats uniform"
check = "upper(paired('TS', 'U')) < 0"

[[claims]]
name = "bounded"
text = "no paired comparison"
check = "regret('U') <= T"

[[claims]]
name = "near"
text = "TS within a quarter of uniform's median regret above it (a margin evaluated on the curves)"
check = "paired('TS', 'U') <= 0.25 * quantile('U', 0.5)"

[[claims]]
name = "within"
text = "TS within a quarter of uniform's regret above it (decided seed by seed)"
check = "paired('TS', 'U') <= 0.25 * regret('U')"
"""


@pytest.mark.parametrize("mean, sd, power", [(1.0, 1.0, 0.8), (-0.5, 1.0, 0.8), (0.1, 1.0, 0.9), (3.0, 1.0, 0.8),
                                             (40.0, 963.0, 0.8), (2.0, 1.0, 0.5)])
def test_the_smallest_count_whose_normal_power_reaches_the_target(mean, sd, power):
    def resolved(n):  # with SciPy's quantiles, not the module's table
        return abs(mean) * math.sqrt(n) / sd >= stats.t.ppf(0.975, n - 1) + stats.norm.ppf(power)

    n = seeds_needed(mean, sd, power)
    assert n >= 2 and resolved(n) and (n == 2 or not resolved(n - 1))


def test_degenerate_pilots():
    assert seeds_needed(0.0, 1.0) is None  # no effect: no count resolves it
    assert seeds_needed(1e-9, 1.0) is None  # beyond MAX_SEEDS
    assert seeds_needed(1.0, 0.0) == 2
    with pytest.raises(ValueError, match="power"):
        seeds_needed(1.0, 1.0, power=1.0)


@pytest.mark.parametrize("effect", [1.0, 0.5])
def test_runs_of_that_many_seeds_resolve_the_comparison_about_as_often_as_promised(effect):
    # 4,000 simulated runs of n Gaussian differences (mean effect, sd 1), each judged by the claims' own interval:
    # the share resolved is within 0.05 of the 0.8 asked (the normal approximation is a little optimistic at small
    # n; at n = 10 the exact noncentral-t power is 0.80).
    n = seeds_needed(effect, 1.0, 0.8)
    rng = np.random.default_rng(7)
    resolved = [paired_interval(rng.normal(effect, 1.0, n)).lo > 0 for _ in range(4000)]
    assert abs(np.mean(resolved) - 0.8) <= 0.05, (n, np.mean(resolved))


TUNED = PILOT.replace('name = "lin-ts"\n', 'name = "lin-ts"\ntune = { v = [5.0, 0.1] }\n') + """
[tune]
seeds = 1
"""


@pytest.mark.parametrize("text", [PILOT, TUNED], ids=["plain", "tuned"])
def test_the_command_reads_a_stored_pilot(tmp_path, capsys, text):
    path, db = tmp_path / "exp" / "pilot.toml", tmp_path / "r.duckdb"
    path.parent.mkdir()
    path.write_text(text)
    argv = ["seeds", str(path), "--db", str(db)]
    assert main(argv) == 2  # the pilot is not stored yet: nothing is computed
    assert "run the pilot first: nlbandit run" in capsys.readouterr().err
    assert main(["run", str(path), "--db", str(db), "--out", str(tmp_path / "rep"), "--no-progress",
                 "--executor", "local"]) == 0
    capsys.readouterr()
    assert main(argv) == 0
    text = capsys.readouterr().out
    line = re.search(r"paired\('TS', 'U'\): mean (\S+), sd (\S+) over 4 seeds -> (\d+) seeds", text)
    assert line, text
    mean, sd, needed = float(line.group(1)), float(line.group(2)), int(line.group(3))
    # (the printed values are rounded to 3 significant digits: the count lies between those of ±1% of them)
    assert mean < 0 and seeds_needed(mean * 1.01, sd * 0.99) <= needed <= seeds_needed(mean * 0.99, sd * 1.01)
    paired_part = text.split("\nverdicts on")[0]
    assert f"learns: {needed} seeds to resolve all 1" in paired_part and "bounded" not in paired_part
    near = re.search(r"near: .*\n  paired\('TS', 'U'\): mean (\S+), sd (\S+) over 4 seeds against the margin (\S+) -> "
                     r"(\d+) seeds", text)
    assert near, text  # counted against the margin d̄ − m, not the sign: far fewer seeds than the sign would need
    mean, sd, margin, needed = (float(near.group(i)) for i in range(1, 5))
    assert margin > 0 and seeds_needed((mean - margin) * 1.01, sd * 0.99) <= needed <= seeds_needed(
        (mean - margin) * 0.99, sd * 1.01)
    # a threshold on a mean of the same seeds is planned as the per-seed gap TS − 1.25 U against 0
    within = re.search(r"within: .*\n  paired\('TS', 'U'\) - 0.25 \* regret\('U'\): mean (\S+), sd (\S+) over 4 "
                       r"seeds -> (\d+) seeds\n", text)
    assert within, text
    mean, sd, needed = (float(within.group(i)) for i in range(1, 4))
    assert mean < 0 and seeds_needed(mean * 1.01, sd * 0.99) <= needed <= seeds_needed(mean * 0.99, sd * 1.01)
    # every claim resampled at the default counts and the pilot's 4; a bound that holds on every seed holds on any draw
    bounded = re.search(r"^bounded \(pilot: holds\): (.*) -> 3 seeds decide it as the pilot did$", text, re.M)
    assert bounded, text
    assert re.findall(r"n=(\d+) (\S+?),? ", bounded.group(1) + " ") == [
        (n, "1.00/0.00/0.00") for n in ("3", "4", "5", "10", "20", "50", "100")], bounded.group(1)
    for line in re.findall(r"^(?:learns|near|within|bounded) \(pilot: \w+\): .*$", text, re.M):
        for shares in re.findall(r"n=\d+ (\S+)/(\S+)/(\S+?)[,\s]", line + " "):
            assert abs(sum(map(float, shares)) - 1.0) <= 0.011, line
    assert main(argv + ["--power", "1.5"]) == 2 and "--power" in capsys.readouterr().err
    assert main(argv + ["--sizes", "5,x"]) == 2 and "--sizes must be seed counts" in capsys.readouterr().err
    assert main(argv + ["--sizes", "2,6"]) == 0 and re.search(r"^learns \(pilot: \w+\): n=2 .*, n=4 .*, n=6 ",
                                                            capsys.readouterr().out, re.M)


def test_a_run_on_later_seeds_is_those_seeds_of_a_longer_run(tmp_path, capsys):
    # first_seed = 3 with 2 seeds is seeds 3 and 4: the same numbers as those seeds of a 5-seed run (the store keeps
    # seeds one by one, so nothing is computed again), stated in the report; tuning seeds may not overlap them.
    db, out = tmp_path / "r.duckdb", tmp_path / "rep"
    folder = tmp_path / "exp"
    folder.mkdir()
    longer, later = folder / "longer.toml", folder / "later.toml"
    longer.write_text(PILOT.replace("seeds = 4", "seeds = 5"))
    later.write_text(PILOT.replace("seeds = 4", "seeds = 2\nfirst_seed = 3"))
    common = ["--db", str(db), "--out", str(out), "--no-progress", "--executor", "local"]
    assert main(["run", str(longer), *common]) == 0
    capsys.readouterr()
    assert main(["run", str(later), *common]) == 0
    assert "already in" in capsys.readouterr().err
    report = (out / "later.md").read_text()
    assert "seeds 3..4" in report
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.store import Store

    with Store(db) as store:
        for a, b in zip(load_experiment(longer, "quick").runs, load_experiment(later, "quick").runs):
            assert list(b.seeds) == [3, 4] and a.series_id == b.series_id
            np.testing.assert_array_equal(store.load(b.series_id, b.seeds).cum_regret,
                                          store.load(a.series_id, a.seeds).cum_regret[3:])
    tuned = later.read_text() + "\n[tune]\nseeds = 1\noffset = 4\n"
    later.write_text(tuned.replace('name = "lin-ts"\n', 'name = "lin-ts"\ntune = { v = [5.0, 0.1] }\n'))
    assert main(["check", str(later), *common]) == 2
    assert "'tune.offset' = 4 must be at least 5" in capsys.readouterr().err


RESAMPLED = PILOT.replace("seeds = 4", "seeds = 3").split("[[claims]]")[0] + """
[[claims]]
name = "order"
text = "uniform's mean regret above TS's (no interval)"
check = "regret('U') > regret('TS')"

[[claims]]
name = "resolved"
text = "TS below uniform, paired"
check = "paired('TS', 'U') < 0"
"""


def test_resampled_verdicts_match_an_exact_enumeration(tmp_path):
    # Pilot of 3 seeds with final regrets TS = (1, 5, 2), U = (3, 2, 6): on n seeds drawn with replacement the claims
    # see the same draw for both runs, so each verdict is a function of the drawn differences TS − U = (−2, 3, −4).
    # The shares over all 3ⁿ equally likely draws, computed here by enumeration (the interval by the claims' own
    # paired_interval), must match the 4,000 random draws within 0.03 (3 standard errors of a share near 0.5).
    from itertools import product

    from nlbandit.experiments.plan import load_experiment
    from nlbandit.experiments.power import verdict_rates

    path = tmp_path / "resampled.toml"
    path.write_text(RESAMPLED)
    exp = load_experiment(path, "full")
    final = {"TS": np.array([1.0, 5.0, 2.0]), "U": np.array([3.0, 2.0, 6.0])}

    def curves(label, case, metric="regret"):
        return np.array([exp.horizon]), final[label][:, None], None

    found = {name: (holds, rates) for name, holds, rates in verdict_rates(exp, curves, (2, 3), resamples=4000)}
    diff = final["TS"] - final["U"]
    assert found["order"][0] is True and found["resolved"][0] is None  # on the pilot itself
    for i, n in enumerate((2, 3)):
        draws = [diff[list(rows)] for rows in product(range(3), repeat=n)]
        order = np.mean([d.mean() < 0 for d in draws])
        intervals = [paired_interval(d) for d in draws]  # an interval below 0 holds, one at or above 0 fails
        resolved_true = np.mean([iv.hi < 0 for iv in intervals])
        resolved_false = np.mean([iv.lo >= 0 for iv in intervals])
        rates = found["order"][1][i]
        assert rates.n == n and abs(rates.holds - order) <= 0.03 and abs(rates.fails - (1 - order)) <= 0.03
        assert rates.undetermined == 0.0  # a comparison of means is always decided
        rates = found["resolved"][1][i]
        assert abs(rates.holds - resolved_true) <= 0.03 and abs(rates.fails - resolved_false) <= 0.03, (n, rates)
        assert abs(rates.holds + rates.fails + rates.undetermined - 1.0) < 1e-12


def test_a_full_scale_report_gives_each_claims_repeat_share(tmp_path, capsys):
    # At --scale full a report evaluates every claim again on 400 draws of its seeds (with replacement) and gives the
    # share that read as the claim does. Checked against an exact enumeration of all 4⁴ equally likely draws of the
    # 4 stored seeds (the claims' own paired_interval on the drawn differences; a point comparison that holds on about
    # half of them): within 0.075, three standard errors of a share of 400 draws. A bound true on every seed repeats
    # in all draws; a claim on times is not resampled.
    from itertools import product

    from nlbandit.experiments.plan import load_experiment
    from nlbandit.report.build import load_rows
    from nlbandit.store import Store

    path, db, out = tmp_path / "exp" / "pilot.toml", tmp_path / "r.duckdb", tmp_path / "rep"
    path.parent.mkdir()
    path.write_text(PILOT + '\n[[claims]]\nname = "timed"\ntext = "a time"\ncheck = "runtime(\'TS\') < 1e9"\n')
    argv = ["run", str(path), "--db", str(db), "--out", str(out), "--no-progress", "--executor", "local"]
    assert main(argv + ["--resample", "-1"]) == 2 and "--resample must be" in capsys.readouterr().err
    assert main(argv + ["--scale", "full"]) == 0
    printed = capsys.readouterr().out
    md = (out / "pilot.md").read_text()
    assert "| result | repeats |" in md and "*Repeats*: the share of 400 draws of 4 seeds" in md
    cells = {m.group(1): (m.group(2), m.group(3)) for m in
             re.finditer(r"^\| \*\*(\w+)\*\*:.*\| (PASS|FAIL|INCONCLUSIVE) \| ([^|]+) \|$", md, re.M)}
    assert set(cells) == {"learns", "bounded", "near", "within", "timed"}, md
    assert cells["bounded"] == ("PASS", "1.00") and cells["timed"][1] == "— (times)"
    assert "bounded: regret('U') <= T" in printed and "(repeats in 1.00 of 400 draws of the seeds)" in printed
    exp = load_experiment(path, "full")
    with Store(db) as store:
        final = {r.run.label: r.final for r in load_rows(exp, store)}
    diff, rows = final["TS"] - final["U"], [list(r) for r in product(range(4), repeat=4)]
    draws = [paired_interval(diff[r]) for r in rows]
    share = {"PASS": np.mean([d.hi < 0 for d in draws]), "FAIL": np.mean([d.hi >= 0 for d in draws])}[
        cells["learns"][0]]  # (upper(...) < 0 compares the interval's upper end: always decided)
    assert abs(float(cells["learns"][1]) - share) <= 0.075, (cells["learns"], share)
    # a point comparison at the pilot's own mean difference holds on about half the draws: its share, exactly (the
    # 1e-9 keeps a draw whose mean equals the pilot's off the tie, whatever order each side sums in)
    mid = float(diff.mean()) + 1e-9
    check = f"regret('TS') < regret('U') + {mid!r}"
    path.write_text(path.read_text() + f'\n[[claims]]\nname = "mid"\ntext = "t"\ncheck = "{check}"\n')
    assert main(["report", str(path), "--scale", "full", "--db", str(db), "--out", str(out)]) == 0
    row = re.search(r"^\| \*\*mid\*\*:.*\| (PASS|FAIL) \| ([^|]+) \|$", (out / "pilot.md").read_text(), re.M)
    below = np.mean([diff[r].mean() < mid for r in rows])
    assert 0.2 < below < 0.8 and abs(float(row.group(2)) - (below if row.group(1) == "PASS" else 1 - below)) <= 0.075
    assert main(argv + ["--scale", "full", "--resample", "0"]) == 0 and "repeats" not in (out / "pilot.md").read_text()
    assert main(argv) == 0 and "repeats" not in (out / "pilot.md").read_text()  # the quick scale: none by default


@pytest.mark.parametrize("check, margin", [
    ("paired('TS', 'G') <= 0", 0.0),
    ("paired('TS', 'G') / regret('G') <= -0.5", "-0.5 * G"),  # (was 0: every wrapped paired() lost its margin)
    ("-paired('TS', 'G') >= 20", -20.0),
    ("paired('TS', 'G') + 20 <= 0", -20.0),
    ("2 * paired('TS', 'G') <= -40", -20.0),
    ("-20 >= paired('TS', 'G') >= -1000", -20.0),  # the nearer bound (the last one read won)
    ("lower(paired('TS', 'G')) > -60", -60.0),
    ("0 * paired('TS', 'G') <= 1", None),  # the comparison does not turn with it: not estimated
])
def test_the_margin_is_where_the_comparison_turns_for_the_paired_mean(check, margin):
    from nlbandit.experiments.claims import paired_differences

    rng = np.random.default_rng(0)
    final = {"TS": rng.normal(100, 20, 12), "G": rng.normal(145, 30, 12)}
    curves = lambda label, case, metric="regret": (np.array([500]), final[label][:, None], None)  # noqa: E731
    expected = -0.5 * final["G"].mean() if margin == "-0.5 * G" else margin
    found = [m for *_, m in paired_differences(check, curves, 500)]
    assert found == [None] if expected is None else found == [pytest.approx(expected, rel=1e-12, abs=1e-12)]


def test_a_comparison_decided_seed_by_seed_is_planned_as_its_gap():
    from nlbandit.experiments.claims import paired_differences

    rng = np.random.default_rng(0)
    final = {"TS": rng.normal(100, 20, 12), "G": rng.normal(145, 30, 12)}
    curves = lambda label, case, metric="regret": (np.array([500]), final[label][:, None], None)  # noqa: E731
    [(call, stat, gap, margin)] = paired_differences("paired('TS', 'G') <= 0.25 * regret('G')", curves, 500)
    assert (call, stat, margin) == ("paired('TS', 'G') - 0.25 * regret('G')", "mean", 0.0)
    np.testing.assert_allclose(gap, final["TS"] - 1.25 * final["G"], rtol=1e-12)


def test_two_comparisons_of_one_pair_keep_their_own_margins():
    from nlbandit.experiments.claims import paired_differences

    final = {"A": np.arange(5.0), "B": np.arange(5.0) + 1}
    curves = lambda label, case, metric="regret": (np.array([10]), final[label][:, None], None)  # noqa: E731
    found = paired_differences("paired('A', 'B') <= -20 or paired('A', 'B') >= 100", curves, 10)
    assert [m for *_, m in found] == [-20.0, 100.0]  # (both read 100 before)


def test_the_command_says_which_seed_counts_a_stratified_file_takes(tmp_path, capsys):
    # (it suggested counts the file then refused: the draws do not keep the strata)
    from test_claims import STRATA  # (tests/test_claims.py)

    # (two cases stratified by one field named it twice)
    path, db = tmp_path / "strata.toml", tmp_path / "r.duckdb"
    second = '[[env]]\ncase = "other"\nname = "linear"\nd = 2\nk = 4\nnoise_std = [0.1, 2.0]\nstrata = "noise_std"\n\n'
    path.write_text(STRATA.replace("[[policies]]", second + "[[policies]]", 1))
    assert main(["run", str(path), "--db", str(db), "--out", str(tmp_path / "rep"), "--no-progress",
                 "--executor", "local"]) == 0
    capsys.readouterr()
    assert main(["seeds", str(path), "--db", str(db)]) == 0
    assert ("its stratified cases share out the seeds among the values of 'noise_std' (2 values): the file takes only "
            "seed counts that are multiples of 2; the draws below take any of the pilot's seeds") in (
                capsys.readouterr().out)

