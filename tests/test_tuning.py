"""The ``[tune]`` protocol: grid points on tuning seeds disjoint from the reported ones, the best point chosen
per (series, case), its run reported, the tuning runs reused and tabulated."""

from __future__ import annotations

import numpy as np
import pytest

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.loops import bandit as bandit_loop
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.tuning import tune_experiment, tuning_results
from nlbandit.report.build import grid_edges, load_rows, write_report
from nlbandit.store import Store

TOY = """
title = "toy"
horizon = 200
seeds = 3
[tune]
seeds = 2
{tune_extra}
[[env]]
case = "a"
name = "linear"
d = 3
k = 5
[[env]]
case = "b"
name = "linear"
d = 4
k = 5
[[policies]]
label = "LinUCB"
name = "lin-ucb"
width = "constant"
tune = {{ alpha = [1000.0, 0.5] }}
[[policies]]
label = "fixed"
name = "lin-ucb"
width = "constant"
alpha = 2.0
"""


def _write(tmp_path, text):
    path = tmp_path / "toy.toml"
    path.write_text(text)
    return path


def test_picks_the_best_point_on_tuning_seeds_only_and_reports_it(tmp_path, monkeypatch):
    exp = load_experiment(_write(tmp_path, TOY.format(tune_extra="")))
    seen = []
    simulate = bandit_loop.simulate  # tuning computes with the experiment's loop

    def spy(env, policy, params, horizon, seeds, **kw):
        seen.append(list(seeds))
        return simulate(env, policy, params, horizon, seeds, **kw)

    monkeypatch.setattr(bandit_loop, "simulate", spy)
    with Store(tmp_path / "db.duckdb") as store:
        tuned = tune_experiment(exp, store, progress=False, log=lambda m: None)
        assert seen and all(s == [10**9, 10**9 + 1] for s in seen)  # never a reported seed 0..2
        results = tuning_results(tuned, store)
        assert tuned.tuned == tuple(results)  # the results it chose by, read once
        assert [(r.tuning.label, r.tuning.case_label) for r in results] == [("LinUCB", "case=a"), ("LinUCB", "case=b")]
        for r in results:
            # α = 1000 explores almost uniformly: the known worse point on both cases.
            assert r.chosen == 1 and r.means[0] > r.means[1]
            # The means are those of the same configuration simulated directly on the tuning seeds.
            cand = r.tuning.candidates[0]
            env = nb.make_env(**cand.env)
            pol, params = nb.make_policy("lin-ucb", nb.ProblemSpec(env.spec.d, env.spec.k, 200), width="constant",
                                         alpha=1000.0)
            direct = nb.simulate(env, pol, params, 200, [10**9, 10**9 + 1], progress=False)
            assert r.means[0] == pytest.approx(float(np.mean(direct.cum_regret[:, -1])), rel=1e-6)
        runs = {(r.label, r.case_label): r for r in tuned.runs}
        assert runs[("LinUCB", "case=a")].policy["alpha"] == 0.5 and runs[("LinUCB", "case=a")].n_seeds == 3
        assert runs[("LinUCB", "case=a")].seeds == range(3) and runs[("fixed", "case=b")].policy["alpha"] == 2.0
        run_experiment(tuned, store, progress=False, log=lambda m: None)
        md, _ = write_report(tuned, load_rows(tuned, store), tmp_path, "test", results)
        text = md.read_text()
        assert "## Tuning" in text and "| LinUCB | case=a | **alpha=0.5** |" in text
        assert "| LinUCB | case=a | alpha=0.5 | alpha floor |" in text  # 0.5 is the grid's smallest α
        assert "alpha was chosen at the grid's floor in 2 and at its ceiling in 0 of the 2 tunings." in text
        seen.clear()  # a second call reuses the stored tuning runs
        assert tune_experiment(exp, store, progress=False, log=lambda m: None).runs == tuned.runs and not seen


def test_one_tuning_seed_has_no_interval_rather_than_a_zero_one(tmp_path):
    """With one tuning seed (docs: [scales.quick] tune_seeds = 1) the table read '± 0.0', as if certain."""
    exp = load_experiment(_write(tmp_path, TOY.format(tune_extra="").replace("[tune]\nseeds = 2", "[tune]\nseeds = 1")))
    with Store(tmp_path / "db.duckdb") as store:
        tuned = tune_experiment(exp, store, progress=False, log=lambda m: None)
        results = tuning_results(tuned, store)
        assert all(np.isnan(c) for r in results for c in r.ci95)
        run_experiment(tuned, store, progress=False, log=lambda m: None)
        md, _ = write_report(tuned, load_rows(tuned, store), tmp_path, "test", results)
    rows = [line for line in md.read_text().splitlines()
            if line.startswith(("| LinUCB | case=a | alpha=1000.0 |", "| LinUCB | case=a | **alpha=0.5** |"))]
    assert len(rows) == 2 and all(line.endswith("| — (one seed) |") for line in rows), rows


def test_max_reward_objective_picks_the_highest_reward(tmp_path):
    exp = load_experiment(_write(tmp_path, TOY.format(tune_extra='objective = "max-reward"')))
    with Store(tmp_path / "db.duckdb") as store:
        results = tuning_results(tune_experiment(exp, store, progress=False, log=lambda m: None), store)
    for r in results:
        assert r.chosen == int(np.argmax(r.means)) and r.means[1] > r.means[0]


def test_untuned_experiment_is_refused_by_the_runner_and_the_report(tmp_path):
    exp = load_experiment(_write(tmp_path, TOY.format(tune_extra="")))
    with Store(tmp_path / "db.duckdb") as store:
        with pytest.raises(ValueError, match="tune the experiment first"):
            run_experiment(exp, store, progress=False, log=lambda m: None)
        with pytest.raises(ValueError, match="tune the experiment first"):
            load_rows(exp, store)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("seeds = 2", "seeds = 2\noffset = 10").replace("seeds = 3",
                                                                        "seeds = 3\n[scales.full]\nseeds = 20"),
     "'tune.offset' = 10 must be at least 20"),
    (lambda t: t.replace("[tune]\nseeds = 2\n", ""), "field 'tune' needs a \\[tune\\] table"),
    (lambda t: t.replace("alpha = 2.0", "alpha = [1.0, 2.0]\ntune = { alpha = [1.0] }"),
     "'alpha' is both a series grid and tuned"),
    (lambda t: t.replace("[1000.0, 0.5]", "0.5"), "field 'alpha' must be a non-empty list"),
    (lambda t: t.replace("tune = { alpha = [1000.0, 0.5] }", "tune = { nope = [1.0] }"), "nope"),
    (lambda t: t.replace("seeds = 2", "seeds = 0"), "seeds"),
    (lambda t: t.replace("seeds = 2", 'seeds = 2\nobjective = "fast"'), "objective"),
    (lambda t: t.replace("[tune]\nseeds = 2\n", "[scales.quick]\ntune_seeds = 1\n").replace(
        "tune = { alpha = [1000.0, 0.5] }", ""), "tune_seeds' needs a \\[tune\\] table"),
    (lambda t: t.replace("[tune]\nseeds = 2\n", "[scales.quick]\ntune = false\n").replace(
        "tune = { alpha = [1000.0, 0.5] }", ""), "'scales.\\*.tune' needs a \\[tune\\] table"),
    (lambda t: t.replace("[tune]", "[scales.quick]\ntune = true\n[tune]"), "'scales.quick.tune' may only be false"),
    (lambda t: t.replace("[tune]", "[scales.quick]\ntune = 0\n[tune]"),
     "scales.quick: field 'tune' must be true or false"),
    (lambda t: t.replace("[tune]", "[scales.quick]\ntune = false\n[tune]").replace(
        "tune = { alpha = [1000.0, 0.5] }", "tune = { nope = [1.0] }"), "nope"),  # a grid is checked where unused
    # a grid over the algorithm put Lin-UCB under another series' label
    (lambda t: t.replace("tune = { alpha = [1000.0, 0.5] }", 'tune = { name = ["uniform", "lin-ts"] }'),
     "field 'name' cannot be tuned: a series is one policy"),
    (lambda t: t.replace("seeds = 2", "seeds = 2\ngrids = { alpha = [1.0] }", 1), "allowed fields: grid, "),
])
def test_bad_tuning_tables_are_refused(tmp_path, edit, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(_write(tmp_path, edit(TOY.format(tune_extra=""))))


def test_a_scale_without_tuning_runs_each_series_at_its_own_values_and_says_so(tmp_path):
    """``[scales.quick] tune = false``: no tuning runs at that scale, the tuned series run at their own (here the
    registry's) hyperparameters and the report says so; the full scale still tunes."""
    path = _write(tmp_path, TOY.format(tune_extra="").replace("[tune]", "[scales.quick]\ntune = false\n[tune]"))
    default = nb.make_policy("lin-ucb", nb.ProblemSpec(3, 5, 200), width="constant")[1]["alpha"]
    quick, full = load_experiment(path, "quick"), load_experiment(path, "full")
    assert quick.untuned and not quick.tuning and not full.untuned and len(full.tuning) == 2
    alphas = {(r.label, r.case_label): r.policy["alpha"] for r in quick.runs}
    assert alphas == {("LinUCB", "case=a"): default, ("LinUCB", "case=b"): default, ("fixed", "case=a"): 2.0,
                      ("fixed", "case=b"): 2.0} and default not in (1000.0, 0.5)
    with Store(tmp_path / "db.duckdb") as store:
        run_experiment(quick, store, progress=False, log=lambda m: None)  # nothing to tune first
        md, _ = write_report(quick, load_rows(quick, store), tmp_path, "test")
        assert len(store.index()) == 4  # the four series, no tuning run
    text = md.read_text()
    assert "Not tuned at this scale (`[scales.quick] tune = false`)" in text and "## Tuning" not in text


def test_tuning_and_diagnostics_are_refused_where_the_loop_has_none(tmp_path):
    text = """
horizon = 50
seeds = 2
loop = "regression"
[tune]
seeds = 1
[env]
name = "adversarial"
d = 3
[[policies]]
label = "ftrl"
name = "ftrl"
"""
    with pytest.raises(ConfigError, match="loop = 'regression' has no tuning \\(loops with one: 'bandit'\\)"):
        load_experiment(_write(tmp_path, text))
    diagnosed = (text.replace("[tune]\nseeds = 1\n", "diagnostics = [\"effective-dimension\"]\n")
                 + 'regret = "adversarial"\n')
    with pytest.raises(ConfigError, match="diagnostic 'effective-dimension' is not one that loop = 'regression' "
                                          "reports"):
        load_experiment(_write(tmp_path, diagnosed))


DIVERGING = """
horizon = 30
seeds = 2
[tune]
seeds = 2
[env]
name = "latent"
d = 4
k = 3
[[policies]]
label = "UCB-2"
name = "neurallog-ucb-2"
width = 8
train_every = 10
reduction = "sum"
tune = {{ lr = {grid} }}
"""


def test_a_diverging_stand_in_is_found_through_its_slot(tmp_path):
    # lr = 1e6 (point 0) diverges at the first training (round 10), lr = 0.7 only at the second (round 20): in
    # chunks of 10 rounds the batch stops after the first chunk naming point 0 alone, and on the rerun it is the
    # stand-in, point 1, that diverges in 1e6's slot as well: slots [0, 1] must be read as point 1 (else the loop
    # would set point 0 aside forever)
    exp = load_experiment(_write(tmp_path, DIVERGING.format(grid="[1e6, 0.7, 0.01]")))
    messages = []
    with Store(tmp_path / "db.duckdb") as store:
        tuned = tune_experiment(exp, store, progress=False, log=messages.append, chunk_size=10)
        (result,) = tuning_results(tuned, store)
    assert result.means[0] == result.means[1] == np.inf and np.isfinite(result.means[2]) and result.chosen == 2
    assert [m.split("] ")[-1] for m in messages if "run again" in m] == [
        "run again with a stand-in for the 1 diverged point(s)", "run again with a stand-in for the 2 diverged "
        "point(s)"]
    assert "grid points [0, 1]" in [m for m in messages if "diverged, never chosen" in m][1]


def test_a_diverging_point_is_never_chosen(tmp_path):
    exp = load_experiment(_write(tmp_path, DIVERGING.format(grid="[1e6, 0.01, 1e7, 0.02]")))
    messages = []
    with Store(tmp_path / "db.duckdb") as store:
        tuned = tune_experiment(exp, store, progress=False, log=messages.append)
        (result,) = tuning_results(tuned, store)
        assert result.means[0] == result.means[2] == np.inf and np.all(np.isfinite(result.means[1::2]))
        assert result.chosen in (1, 3) and tuned.runs[0].policy["lr"] in (0.01, 0.02)
        # both diverge at the first training, in the same chunk: both are stored so at once, and the batch reruns
        # once, with a healthy point standing in for each
        (failed,) = [m for m in messages if "diverged, never chosen" in m]
        assert "grid points [0, 2]" in failed
        assert [m.split("] ")[-1] for m in messages if "run again" in m] == [
            "run again with a stand-in for the 2 diverged point(s)"]
        run_experiment(tuned, store, progress=False, log=lambda m: None)
        md, _ = write_report(tuned, load_rows(tuned, store), tmp_path, "test", [result])
        assert "| UCB-2 | — | lr=1000000.0 | diverged | — |" in md.read_text()


def test_grid_edges_name_the_fields_at_the_grid_floor_or_ceiling():
    grid = [{"nu": nu, "lam": lam, "flag": flag}
            for nu in (0.01, 0.1, 1.0) for lam in (1.0, 10.0) for flag in (True, False)]
    assert grid_edges(grid, grid.index({"nu": 0.1, "lam": 10.0, "flag": True})) == [("lam", "ceiling")]
    assert grid_edges(grid, grid.index({"nu": 0.01, "lam": 1.0, "flag": False})) == [("nu", "floor"),
                                                                                      ("lam", "floor")]
    assert grid_edges([{"nu": 0.1, "lam": 1.0}, {"nu": 0.1, "lam": 2.0}], 1) == [("lam", "ceiling")]  # ν not varied
