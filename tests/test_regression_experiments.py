"""Online-regression experiment files (``loop = "regression"``): run → store → report → check end to end,
the claim functions r2/slope/quantile and the theory values against NumPy, and bad input named by field."""

import re
import textwrap

import numpy as np
import pytest

from nlbandit import theory
from nlbandit.cli import main
from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.plan import load_experiment
from nlbandit.report.build import check_claims, load_rows
from nlbandit.store import Store

REG = """
title = "tiny regression"
loop = "regression"
horizon = 300
seeds = 4
record_points = 50
plots = ["regret-vs-d"]
checkpoints = [100, 300]

[env]
name = "stochastic"
d = [2, 4, 6]
y_max = 5.0

[[policies]]
label = "FTRL"
name = "ftrl"

[[policies]]
label = "FTRL adv"
name = "ftrl"
lam = [1.0, 4.0]
regret = "adversarial"
env = { sigma = 2.0, clip = "label" }

[[claims]]
name = "grows-with-d"
text = "the regret grows with d"
check = "regret('FTRL', d=6) > regret('FTRL', d=2)"
"""


def write(tmp_path, text, name="reg.toml"):
    path = tmp_path / "zhao" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """REG run once through ``nlbandit check``: (file, database, report folder, exit code)."""
    tmp = tmp_path_factory.mktemp("reg")
    path, db, out = write(tmp, REG), tmp / "r.duckdb", tmp / "rep"
    return path, db, out, main(["check", str(path), "--db", str(db), "--out", str(out), "--no-progress"])


def test_regression_file_runs_reports_and_checks(checked, capsys):
    path, db, out, code = checked
    exp = load_experiment(path)
    assert [(r.label, r.policy["lam"], r.env["sigma"]) for r in exp.runs if r.case == (("d", 2),)] == [
        ("FTRL", 4.0, 1.0), ("FTRL adv [lam=1.0]", 1.0, 2.0), ("FTRL adv [lam=4.0]", 4.0, 2.0)]
    assert code == 0
    report = (out / "reg.md").read_text()
    assert "| FTRL adv [lam=1.0] | d=2 | adversarial |" in report and (out / "reg.png").stat().st_size > 0
    assert "grows-with-d" in report and "| PASS |" in report
    assert main(["run", str(path), "--db", str(db), "--out", str(out), "--no-progress"]) == 0
    assert "9 run(s) already in" in capsys.readouterr().err  # nothing recomputed


def test_regression_claim_functions_match_numpy(checked):
    path, db, _, _ = checked
    exp = load_experiment(path)
    with Store(db) as store:
        rows = load_rows(exp, store)
    exp.claims[:] = [type(exp.claims[0])("x", "", "r2('FTRL', 'd', t=100) + slope('FTRL', 'd') + "
                                        "quantile('FTRL', 0.9, d=4) + basis_regret(5, 5000, 1, 4) + "
                                        "mean_field(10, 5000, 1, 4) + ftrl_bound(10, 5000, 1, 0.05) > 0", "pass")]
    values = dict(check_claims(exp, rows)[0].values)
    curves = {dict(r.run.case)["d"]: r.stored for r in rows if r.run.label == "FTRL"}
    ds = np.array([2.0, 4.0, 6.0])
    last_before = {d: np.searchsorted(curves[d].rounds, 100, side="right") - 1 for d in (2, 4, 6)}  # ≤ t
    at100 = np.array([curves[d].cum_regret[:, last_before[d]].mean() for d in (2, 4, 6)])
    fit = np.polyfit(ds, at100, 1)
    r2 = 1 - np.sum((at100 - np.polyval(fit, ds)) ** 2) / np.sum((at100 - at100.mean()) ** 2)
    final = np.array([curves[d].cum_regret[:, -1].mean() for d in (2, 4, 6)])
    assert values["r2('FTRL', 'd', t=100)"] == pytest.approx(r2, rel=1e-10)
    assert values["slope('FTRL', 'd')"] == pytest.approx(np.polyfit(ds, final, 1)[0], rel=1e-10)
    assert values["quantile('FTRL', 0.9, d=4)"] == pytest.approx(np.quantile(curves[4].cum_regret[:, -1], 0.9))
    assert values["basis_regret(5, 5000, 1, 4)"] == pytest.approx(theory.ftrl_basis_regret(5, 5000, 1.0, 4.0))
    # spec 000 §6.2/§6.3 reference values: 11.02 (exact), 17.1 (mean field), 1682 (Theorem 4.1)
    assert values["basis_regret(5, 5000, 1, 4)"] == pytest.approx(11.02, abs=0.01)
    assert values["mean_field(10, 5000, 1, 4)"] == pytest.approx(17.1, abs=0.05)
    assert values["ftrl_bound(10, 5000, 1, 0.05)"] == pytest.approx(1682, abs=0.5)


@pytest.mark.parametrize("old, new, expected", [
    ('name = "stochastic"', 'name = "stochastic"\nsigma = -1.0', "field 'sigma' must be a number >= 0"),
    ('name = "stochastic"', 'name = "stochastic"\nnoise = "bounded"\nsigma = 2.0', "must be <= noise_bound = 1"),
    ('name = "stochastic"', 'name = "stochastic"\nnoise = "bounded"\nnoise_bound = 4.5',
     "field 'y_max': bounded noise promises labels in [−Y, Y] = [-5, 5], but max|φ(xᵀμ*)| + R = 1 + 4.5 exceeds Y"),
    ('name = "stochastic"', 'name = "stochastic"\nnoise = "bounded"\nnoise_bound = 4.0', None),
    ('name = "stochastic"', 'name = "stochastic"\nnoise = "bounded"\nnoise_bound = 4.5\nclip = "label"', None),
    ('y_max = 5.0', 'y_max = 1.0\nclip = "noise"', "field 'y_max' must exceed A·B"),
    ('y_max = 5.0', 'y_max = 5.0\nlink = "logistic"', "field 'regret' 'adversarial' is computed for the identity link"),
    ('name = "ftrl"\n\n', 'name = "ftrl"\nsolver = "closed-form"\nunits = "square"\n\n', None),
    ('env = { sigma = 2.0, clip = "label" }', 'env = { name = "adversarial" }\n[[policies]]\nlabel = "S"\n'
     'name = "ftrl"\nenv = { name = "adversarial", d = 2 }', "needs a stream with a true μ*"),
    ('env = { sigma = 2.0, clip = "label" }', 'env = { sigma = [1.0, 2.0] }',
     "field 'env.sigma' must be a single value"),
    ('env = { sigma = 2.0, clip = "label" }', 'env = { name = "adversarial" }', None),
    ('env = { sigma = 2.0, clip = "label" }', 'env = { name = "adversarial", clip = "label" }',
     "unknown field 'clip'"),
    ('d = [2, 4, 6]', 'd = 2', "plot 'regret-vs-d' needs a grid over env field 'd'"),
    ('checkpoints = [100, 300]', 'checkpoints = [100, 400]', "field 'checkpoints' must be increasing integer rounds"),
    ('loop = "regression"', 'loop = "online"', "field 'loop' must be one of 'bandit', 'regression'"),
    ('name = "stochastic"', 'name = "linear"', "field 'name' must be one of adversarial, stochastic"),
    ('name = "ftrl"', 'name = "lin-ucb"', "field 'name' must be one of ftrl"),
    ('name = "ftrl"\n\n', 'name = "ftrl"\nlam = 0.0\n\n', "field 'lam' must be a number > 0"),
])
def test_regression_bad_input_is_named(tmp_path, old, new, expected):
    assert old in REG
    path = write(tmp_path, REG.replace(old, new, 1))
    if expected is None:  # the control: a valid variant loads
        load_experiment(path)
        return
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_experiment(path)


def test_adversarial_stream_needs_a_full_rank_design(tmp_path):
    text = REG.replace('checkpoints = [100, 300]', 'checkpoints = [3]').replace('horizon = 300', 'horizon = 3')
    text = text.replace('env = { sigma = 2.0, clip = "label" }', 'env = { name = "adversarial" }')
    with pytest.raises(ConfigError, match=re.escape("need a full-rank design, so horizon >= d = 4, got horizon = 3")):
        load_experiment(write(tmp_path, text))


def test_series_env_only_in_regression_files(tmp_path):
    text = """
    horizon = 10
    seeds = 1
    [env]
    name = "linear"
    d = 2
    k = 2
    [[policies]]
    label = "U"
    name = "uniform"
    env = { d = 3 }
    """
    with pytest.raises(ConfigError, match=re.escape("field 'env' is allowed only with loop = 'regression'")):
        load_experiment(write(tmp_path, text))


def test_a_stratified_field_makes_no_panels_of_its_own(tmp_path):
    # one 'regret-vs-d' panel per series and case, a stratified field's values pooled (a panel per value, each
    # matching no pooled row, before)
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.loops.regression_report import d_groups

    path = write(tmp_path, REG.replace("y_max = 5.0", 'y_max = 5.0\nsigma = [1.0, 2.0]\nstrata = "sigma"'))
    exp = load_experiment(path)
    assert [list(r.seeds) for r in exp.runs if r.label == "FTRL" and dict(r.case)["d"] == 2] == [[0, 1], [2, 3]]
    assert d_groups(exp) == [("FTRL", ()), ("FTRL adv [lam=1.0]", ()), ("FTRL adv [lam=4.0]", ())]
