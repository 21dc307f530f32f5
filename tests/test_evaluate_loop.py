"""Off-policy evaluation from an experiment file (``loop = "evaluate"``, nlbandit.loops.evaluate): on a log the loop
simulates, it writes the log the HTTP service writes and recovers the candidate's known value; on a service's
folder it gives ``nlbandit evaluate``'s numbers; bad logs and candidates are refused naming the field; a log that
changed is a new run."""

from __future__ import annotations

import math
import os
import re
import shutil
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("starlette", reason="the service needs the test extra's starlette")
from service_log import D, K, NOISE, write_log  # noqa: E402

from nlbandit.cli import main  # noqa: E402
from nlbandit.core.hyper import ConfigError  # noqa: E402
from nlbandit.experiments.claims import Timing, evaluate_claim  # noqa: E402
from nlbandit.experiments.plan import load_experiment  # noqa: E402
from nlbandit.experiments.runner import balance, experiment_jobs, run_experiment  # noqa: E402
from nlbandit.experiments.spec import Claim  # noqa: E402
from nlbandit.loops import evaluate  # noqa: E402
from nlbandit.plugins import claim_functions  # noqa: E402
from nlbandit.replay.estimators import ESTIMATORS  # noqa: E402
from nlbandit.report.build import check_claims, load_rows, write_report  # noqa: E402
from nlbandit.service.evaluate import evaluate_log  # noqa: E402
from nlbandit.store import Store  # noqa: E402

ROUNDS = 400


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """(service folder, (ROUNDS, K) means) of the log a uniform logger with seed 0 writes over HTTP on the instance
    of seed 0: the log the loop simulates for seed 0."""
    folder = tmp_path_factory.mktemp("log") / "service"
    return folder, write_log(folder, ROUNDS, env_seed=0, logger_seed=0)


SIMULATED = f"""
loop = "evaluate"
horizon = {ROUNDS}
seeds = 2
record_points = 4

[env]
name = "simulated"
environment = {{ name = "linear", d = {D}, k = {K}, contexts = "fresh", noise_std = {NOISE} }}
logger = {{ name = "uniform" }}

[[policies]]
label = "Lin-UCB"
name = "lin-ucb"
alpha = 0.5

[[claims]]
name = "dr-unbiased"
check = "-halfwidth('Lin-UCB', 'dr') < bias('Lin-UCB', 'dr') < halfwidth('Lin-UCB', 'dr')"
"""


def _run(path, db):
    """The experiment file at ``path`` loaded and run into the store ``db``; its rows and the number of runs
    computed."""
    exp = load_experiment(path)
    with Store(db) as store:
        computed = run_experiment(exp, store, progress=False, log=lambda m: None)
        return exp, load_rows(exp, store), computed


def _service_file(folder, path_of, horizon=ROUNDS, extra=""):
    """An evaluate file on the service folder ``folder`` (named relative to the file) with an ε-greedy candidate."""
    return f"""
loop = "evaluate"
horizon = {horizon}
seeds = 1
record_points = 3

[env]
name = "service"
folder = "{os.path.relpath(folder, path_of.parent)}"
{extra}

[[policies]]
label = "eps"
name = "eps-greedy"
epsilon = 0.2
"""


def test_a_simulated_log_is_the_services_own_and_recovers_the_candidates_value(log, experiment_file, tmp_path):
    """Seed 0's simulated log is the one the HTTP service writes (same instance, logger and seed), so the loop's
    estimates are ``evaluate_log``'s on it and its truth is (1/n) Σ_t Σ_a π_t(a) μ_t(a) from the environment's
    means; on both seeds every estimate lies within its 95% bootstrap interval's half-width, widened by half (a
    stated margin for the interval's own sampling error), of the truth."""
    exp, rows, _ = _run(experiment_file(SIMULATED), tmp_path / "r.duckdb")
    stored = rows[0].stored
    final = {m: c[:, -1] for m, c in stored.curves.items()}
    folder, means = log
    direct = evaluate_log(folder, "lin-ucb", {k: v for k, v in exp.runs[0].policy.items() if k != "name"}, seed=0)
    for e in direct.estimates:
        got = [final[e.name][0], final[e.name + "_lo"][0], final[e.name + "_hi"][0]]
        np.testing.assert_allclose(got, [e.value, e.lo, e.hi], rtol=1e-9)
    truth = float(np.mean((direct.target * means).sum(axis=1)))
    assert final["truth"][0] == pytest.approx(truth, rel=1e-9)
    assert truth > float(means.mean()) + 0.1, "the candidate must be distinguishable from the logger"
    for name in ESTIMATORS:
        half = (final[name + "_hi"] - final[name + "_lo"]) / 2
        assert np.all(np.abs(final[name] - final["truth"]) <= 1.5 * half), (name, final)
    assert stored.rounds[-1] == ROUNDS and stored.curves["truth"].shape == (2, 4)
    np.testing.assert_allclose(stored.cum_regret[:, -1], ROUNDS * final["dr"])
    md, claims = write_report(exp, rows, tmp_path / "out", "test")
    assert claims[0].holds is not False
    assert "| Lin-UCB | — |" in md.read_text() and "of 2 seeds |" in md.read_text()


EPS_GREEDY = """
[[policies]]
label = "ε-greedy"
name = "eps-greedy"
epsilon = 0.1
"""


def test_the_candidates_share_each_seeds_log(experiment_file, tmp_path, monkeypatch):
    """A file's candidates replay on the same logs: one batch computes them all and writes each seed's log once
    (cut between its seeds, not its candidates, for two workers: runner.balance), with each candidate's numbers
    those of a file holding it alone."""
    path = experiment_file(SIMULATED.replace("[[claims]]", EPS_GREEDY + "\n[[claims]]"), "both")
    both = load_experiment(path)
    with Store(tmp_path / "jobs.duckdb") as store:
        jobs, _ = experiment_jobs(both, store, slots=2, log=lambda m: None)
    assert [[(r.label, list(r.seeds)) for r in job.kwargs["batch"]] for job in jobs] == [
        [("Lin-UCB", [0]), ("ε-greedy", [0])], [("Lin-UCB", [1]), ("ε-greedy", [1])]]
    seeds_3_to_7 = [replace(r, seed_offset=3, n_seeds=5) for r in both.runs]  # halves until none is over its share
    assert [[list(r.seeds) for r in b] for b in balance([seeds_3_to_7], 2)] == [[[3, 4]] * 2, [[5]] * 2, [[6, 7]] * 2]
    written, write = [], evaluate._write_log
    monkeypatch.setattr(evaluate, "_write_log", lambda folder, logger, instance, seed: written.append(seed) or
                        write(folder, logger, instance, seed))
    _, rows, _ = _run(path, tmp_path / "both.duckdb")
    assert written == [0, 1]  # one batch (one worker), each seed's log written once for both candidates
    eps_alone = SIMULATED.replace('label = "Lin-UCB"\nname = "lin-ucb"\nalpha = 0.5', EPS_GREEDY.split("\n", 2)[2]
                                  .strip()).replace("'Lin-UCB'", "'ε-greedy'")
    alone = [_run(experiment_file(SIMULATED, "ucb"), tmp_path / "ucb.duckdb")[1][0],
             _run(experiment_file(eps_alone, "eps"), tmp_path / "eps.duckdb")[1][0]]
    for row, single in zip(rows, alone):
        assert row.run.label == single.run.label and row.run.series_id == single.run.series_id
        assert row.stored.curves.keys() == single.stored.curves.keys()
        for metric, curve in row.stored.curves.items():
            np.testing.assert_array_equal(curve, single.stored.curves[metric], err_msg=metric)


def test_a_service_folder_gives_the_numbers_of_nlbandit_evaluate(log, experiment_file, tmp_path):
    folder, _ = log
    path = tmp_path / "paper" / "e.toml"
    exp, rows, _ = _run(experiment_file(_service_file(folder, path)), tmp_path / "r.duckdb")
    env = exp.runs[0].env
    assert (env["d"], env["k"], env["events"], env["logger"]) == (D, K, ROUNDS, {"name": "uniform"})
    final = {m: c[:, -1] for m, c in rows[0].stored.curves.items()}
    direct = evaluate_log(folder, "eps-greedy", {"epsilon": 0.2}, seed=0)
    for e in direct.estimates:
        assert [final[e.name][0], final[e.name + "_lo"][0], final[e.name + "_hi"][0]] == [e.value, e.lo, e.hi]
    assert "truth" not in final
    claim = Claim("truth", "", "coverage('eps', 'dr') >= 0.5", "pass")
    with pytest.raises(ConfigError, match="no known truth"):
        check_claims(replace(exp, claims=[claim]), rows)


@pytest.mark.parametrize("change, message", [
    ({"folder": "nowhere"}, r"env: field 'folder': .*nowhere holds no agent: no such folder"),
    ({"folder": "empty"}, r"env: field 'folder': .*empty holds no agent: it is neither a service's state folder"),
    ({"agent": "other"}, r"env: field 'agent': the service of .* holds no agent 'other'; its agents: default"),
    ({"agent": "../default"}, r"env: field 'agent': '../default' is not an agent name"),
    ({"horizon": ROUNDS + 1}, rf"holds {ROUNDS} rewarded decisions with a logged probability, fewer than the horizon"),
    ({"candidate": "lin-ucbb"}, r"policies\[0\] \(eps\): field 'name' must be one of .*lin-ucb, .*got 'lin-ucbb'"),
    ({"candidate": "eps-greedy\"\nalpha = \"x"}, r"policies\[0\] \(eps\): unknown field 'alpha'"),
    ({"record_points": 101}, r"field 'record_points' = 101 is more than 100"),
    ({"estimators": "ips snips"}, r"env: field 'estimators' = 'ips snips' leaves out 'dr', whose estimate the table"),
    ({"estimators": "dr dr"}, r"env: field 'estimators' names 'dr' more than once"),
    ({"estimators": "dr mse"}, r"env: field 'estimators' must be one or more of ips, snips, dr, got \['dr', 'mse'\]"),
    ({"estimators": ""}, r"env: field 'estimators' must be one or more of ips, snips, dr, got \[\]"),
])
def test_bad_logs_and_candidates_are_refused_naming_the_field(log, experiment_file, tmp_path, capsys, change,
                                                              message):
    folder, _ = log
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "empty").mkdir()
    path = tmp_path / "paper" / "e.toml"
    text = _service_file(folder, path, change.get("horizon", ROUNDS), f'agent = "{change.get("agent", "default")}"'
                         + (f'\nestimators = "{change["estimators"]}"' if "estimators" in change else ""))
    if "folder" in change:
        text = text.replace(os.path.relpath(folder, path.parent), change["folder"])
    text = text.replace('name = "eps-greedy"', f'name = "{change.get("candidate", "eps-greedy")}"')
    text = text.replace("record_points = 3", f"record_points = {change.get('record_points', 3)}")
    path.write_text(text)
    assert main(["run", str(path), "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "out")]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / "r.duckdb").exists()


def test_a_deterministic_loggers_log_is_refused_to_ips_in_one_line(tmp_path, capsys):
    """A greedy logger logs its arm with probability 1 once its estimates untie: IPS and SNIPS cannot reweight the
    arms it never plays, and the run is refused as bad input (one line naming the candidate, seed and log; exit 2),
    not a traceback."""
    path = tmp_path / "e.toml"
    path.write_text(SIMULATED.replace('name = "uniform"', 'name = "greedy"').replace("seeds = 2", "seeds = 1")
                    .replace(f"horizon = {ROUNDS}", "horizon = 100"))
    assert main(["run", str(path), "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "out")]) == 2
    assert re.search(r"^error: Lin-UCB, seed 0, on the simulated log of greedy: ips and snips: on \d+ of the \d+ "
                     r"events the logged arm had probability 1 .* use 'dr' .*; the runs stored so far are kept$",
                     capsys.readouterr().err.strip().splitlines()[-1])


def test_dr_alone_evaluates_a_deterministic_loggers_log(experiment_file, tmp_path):
    """``estimators = "dr"`` computes DR alone: on the uniform logger's log its curves are, bit for bit, those of the
    run of all three (one draw of resamples serves them all); on a greedy logger's log, which IPS and SNIPS refuse,
    it runs, the report shows — for them, and a claim reading one is refused naming the field."""
    def dr_only(text):
        return text.replace('logger = { name = "uniform" }', 'logger = { name = "uniform" }\nestimators = "dr"')

    _, (full,), _ = _run(experiment_file(SIMULATED, "all"), tmp_path / "all.duckdb")
    _, (alone,), _ = _run(experiment_file(dr_only(SIMULATED), "dr"), tmp_path / "dr.duckdb")
    assert sorted(alone.stored.curves) == ["dr", "dr_hi", "dr_lo", "regret", "truth"]
    for metric in alone.stored.curves:
        np.testing.assert_array_equal(alone.stored.curves[metric], full.stored.curves[metric], err_msg=metric)
    greedy = dr_only(SIMULATED).replace('name = "uniform"', 'name = "greedy"').replace(f"horizon = {ROUNDS}",
                                                                                       "horizon = 100")
    exp, rows, _ = _run(experiment_file(greedy, "greedy"), tmp_path / "greedy.duckdb")
    md, claims = write_report(exp, rows, tmp_path / "out", "test")
    assert [text.split(" = ")[0] for text, _ in claims[0].values] == [  # dr-unbiased reads DR, evaluated
        "halfwidth('Lin-UCB', 'dr')", "bias('Lin-UCB', 'dr')", "halfwidth('Lin-UCB', 'dr')"]
    assert re.search(r"\| Lin-UCB \| .*\| — \| — \| \d\.\d{4} \| \d, —, — of 2 seeds \|", md.read_text())
    for check in ("coverage('Lin-UCB', 'ips') >= 0.5", "halfwidth('Lin-UCB', 'snips') < 1"):
        with pytest.raises(ConfigError, match=r"did not compute the estimator '(ips|snips)': its \[env\] table's "
                                              "estimators leave it out"):
            check_claims(replace(exp, claims=[Claim("x", "", check, "pass")]), rows)


def test_a_simulated_log_needs_its_environment_and_a_logger_that_records_what_it_reads(experiment_file):
    with pytest.raises(ConfigError, match=r"env: unknown field 'environments'; allowed fields: .*environment, .*lo"):
        load_experiment(experiment_file(SIMULATED.replace("environment = {", "environments = {")))
    with pytest.raises(ConfigError, match=r"env: field 'environment' must be a table naming a registered environment"):
        load_experiment(experiment_file(re.sub("environment = {.*}", 'environment = "linear"', SIMULATED)))
    with pytest.raises(ConfigError, match=r"env: logger: field 'name' must be one of"):
        load_experiment(experiment_file(SIMULATED.replace('{ name = "uniform" }', '{ name = "nope" }')))
    revealing = re.sub("environment = {.*}", f'environment = {{ name = "heteroscedastic", d = {D}, k = {K} }}',
                       SIMULATED)  # an environment that reveals a noise level, which a simulated log drops
    with pytest.raises(ConfigError, match=r"env: logger: field 'name': policy 'mor-ucb' reads a noise level"):
        load_experiment(experiment_file(revealing.replace('{ name = "uniform" }', '{ name = "mor-ucb" }')))
    load_experiment(experiment_file(revealing))


def test_a_log_that_changed_is_a_new_run_and_one_changing_under_a_run_is_refused(log, experiment_file, tmp_path):
    folder = tmp_path / "service"
    shutil.copytree(log[0], folder)
    path = tmp_path / "paper" / "e.toml"
    path = experiment_file(_service_file(folder, path, horizon=100))
    db = tmp_path / "r.duckdb"
    exp, _, computed = _run(path, db)
    assert computed == 1 and _run(path, db)[2] == 0  # the same log: the stored run
    write_log(folder, 10, env_seed=0, logger_seed=0, start=ROUNDS + 1)  # the service serves 10 more rounds
    grown, _, computed = _run(path, db)
    assert grown.runs[0].env["log_sha256"] != exp.runs[0].env["log_sha256"]
    assert grown.runs[0].series_id != exp.runs[0].series_id and computed == 1  # computed afresh, not reused
    write_log(folder, 1, env_seed=0, logger_seed=0, start=ROUNDS + 11)
    with Store(tmp_path / "other.duckdb") as store, pytest.raises(ConfigError, match="has changed since"):
        run_experiment(grown, store, progress=False, log=lambda m: None)


def test_claim_functions_read_the_estimates_against_the_truth(experiment_file):
    """bias, coverage and halfwidth against an independent computation on given per-seed finals."""
    truth = np.array([0.50, 0.60, 0.70, 0.80, 0.55])
    dr = truth + np.array([0.01, -0.02, 0.03, -0.01, 0.005])
    lo, hi = dr - 0.04, dr + np.array([0.04, 0.04, 0.04, 0.04, -0.01])  # the last seed's interval misses the truth
    finals = {"truth": truth, "dr": dr, "dr_lo": lo, "dr_hi": hi}

    def curves(label, case, metric="regret"):
        return np.array([100]), finals[metric][:, None], Timing(1.0)

    def value(check):
        return evaluate_claim(check, curves, 100, functions=claim_functions("evaluate"))

    error = dr - truth
    half = stats.t.ppf(0.975, 4) * error.std(ddof=1) / math.sqrt(5)
    holds, trace = value(f"bias('A', 'dr') > {error.mean() - half - 1e-9}")
    assert holds is True and trace[0][1] == pytest.approx(error.mean())
    assert value(f"bias('A', 'dr') > {error.mean() - half + 1e-9}")[0] is None  # straddles: undetermined
    assert value("coverage('A', 'dr') >= 0.8")[0] is True and value("coverage('A', 'dr') > 0.8")[0] is False
    assert value(f"halfwidth('A', 'dr') == {np.mean(hi - lo) / 2}")[0] is True
    with pytest.raises(ConfigError, match="the estimator must be one of 'ips', 'snips', 'dr', got 'mse'"):
        value("coverage('A', 'mse') >= 0.8")
    with pytest.raises(ConfigError, match="halfwidth\\(label, estimator\\)"):
        value("halfwidth('A') >= 0")
    with pytest.raises(ConfigError, match="the estimator must be one of"):
        load_experiment(experiment_file(SIMULATED.replace("bias('Lin-UCB', 'dr')", "bias('Lin-UCB', 'DR')")))
