"""Bad experiment files fail before any computation, with one message naming the field."""

import re
import textwrap

import pytest

import nlbandit as nb
from nlbandit.cli import main
from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.spec import load_experiment

GOOD = """
horizon = 100
seeds = 2

[env]
name = "linear"
d = 3
k = 4

[[policies]]
label = "ES"
name = "lin-es"
m = 2
lam = 1.0
"""


def write(tmp_path, text):
    p = tmp_path / "e.toml"
    p.write_text(textwrap.dedent(text))
    return p


def test_good_file_loads(tmp_path):
    exp = load_experiment(write(tmp_path, GOOD))
    assert [r.label for r in exp.runs] == ["ES"]


@pytest.mark.parametrize("old, new, expected", [
    ("seeds = 2", "seeds = 2\nbogus = 1", "unknown field 'bogus'"),
    ('k = 4', 'k = 4\ncolour = "red"', "unknown field 'colour'"),
    ("lam = 1.0", "lam = 1.0\nbeta = 2", "unknown field 'beta'"),
    ('name = "lin-es"', 'name = "lin-magic"', "field 'name' must be one of"),
    ('name = "linear"', 'name = "moon"', "field 'name' must be one of"),
    ("m = 2", 'm = "two"', "field 'm' must be an integer >= 1, got 'two'"),
    ("d = 3", "d = 2.5", "field 'd' must be an integer >= 1, got 2.5"),
    ("lam = 1.0", "lam = 0.0", "field 'lam' must be a number > 0, got 0.0"),
    ("lam = 1.0", "lam = -1.0", "field 'lam' must be a number > 0"),
    ("m = 2", "m = 0", "field 'm' must be an integer >= 1, got 0"),
    ("horizon = 100", "horizon = 0", "field 'horizon' must be an integer >= 1, got 0"),
    ("k = 4", "k = 0", "field 'k' must be an integer >= 1, got 0"),
    ("lam = 1.0", "lam = nan", "field 'lam' must be a number > 0, got nan"),
    ("k = 4", "k = 4\nnoise_std = inf", "field 'noise_std' must be a number >= 0, got inf"),
    ("k = 4", "k = 4\narm_set = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, nan]]", "field 'arm_set' must be a list"),
    ("k = 4", "k = 4\ntheta_star = [1, inf, 0]", "field 'theta_star' must be a list of finite numbers"),
    ("k = 4", "k = 4\ntheta_star = [1, 0]", "field 'theta_star' must have d = 3 entries"),
    ("seeds = 2", "seeds = 2\n[scales.huge]\nseeds = 3", "'scales.huge' is not a scale"),
])
def test_bad_field_is_named(tmp_path, old, new, expected):
    assert old in GOOD
    with pytest.raises(ConfigError, match=expected.replace("[", r"\[").replace("(", r"\(")):
        load_experiment(write(tmp_path, GOOD.replace(old, new, 1)))


def test_bad_claims_are_rejected_before_running(tmp_path):
    base = GOOD + '\n[[claims]]\nname = "c"\ntext = ""\ncheck = "{}"\n'
    for check, expected in [("regret('Nope') < 1", "unknown label 'Nope'"),
                            ("open('x')", "unknown function"),
                            ("regret('ES') <", "not a valid expression"),
                            ("__import__('os')", "unknown function"),
                            ("regret('ES', stat='mode') < 1", "stat must be")]:
        with pytest.raises(ConfigError, match=expected):
            load_experiment(write(tmp_path, base.format(check.replace('"', '\\"'))))


def test_cli_reports_bad_input_without_traceback_or_database(tmp_path, capsys):
    db = tmp_path / "db.duckdb"
    path = write(tmp_path, GOOD.replace("lam = 1.0", "lam = -1.0"))
    assert main(["run", str(path), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "'lam'" in err and "Traceback" not in err
    assert not db.exists()  # nothing computed, nothing written


def test_python_api_validates_too():
    with pytest.raises(ConfigError, match="field 'lam'"):
        nb.make_policy("lin-ucb", nb.ProblemSpec(2, 2, 10), lam=0.0)
    with pytest.raises(ConfigError, match="field 'name' must be one of"):
        nb.make_policy("lin-ucbb", nb.ProblemSpec(2, 2, 10))


GLM = """
horizon = 100
seeds = 2

[env]
name = "logistic"
d = 3
k = 4

[[policies]]
label = "TSL"
name = "glm-tsl"
"""


@pytest.mark.parametrize("old, new, expected", [
    # a link whose range excludes the rewards (Gaussian noise on a logistic mean), unless allowed explicitly
    ('k = 4', 'k = 4\nreward = "gaussian"', "gives rewards in [-inf, inf] but link 'logistic' models rewards in [0, 1]"),
    ('name = "glm-tsl"', 'name = "glm-tsl"\nlink = "poisson"\nscale = "theory"', "theory widths need a link with bounded"),
    # a singular design without regularisation
    ('name = "glm-tsl"', 'name = "glm-tsl"\nlam = 0.0', "field 'lam' is 0: the design matrix"),
    # exploration longer than the horizon
    ('name = "glm-tsl"', 'name = "glm-tsl"\nwarmup = "round-robin"\nwarmup_rounds = 101', "lasts at least 101 rounds"),
    ('name = "glm-tsl"', 'name = "glm-es"\nwarmup_rounds = 200', "lasts at least 200 rounds"),
    ('name = "glm-tsl"', 'name = "glm-tsl"\nwarmup = "g-optimal"', "field 'warmup_rounds' must be >= 1"),
    # per-arm statistics on an environment with fresh arms
    ('k = 4', 'k = 4\ncontexts = "fresh"', "needs a fixed arm set"),
    ('name = "glm-tsl"', 'name = "glm-es@anytime"\nt0 = 1\nb = 1.5', "must satisfy t0·(b − 1) > 1"),
    ('name = "glm-tsl"', 'name = "glm-ucb@anytime"\nschedule = "sun2025"', "needs an ensemble policy"),
    ('name = "glm-tsl"', 'name = "glm-tsl@anytime"\nwarmup_scope = "once"\nwarmup = "none"',
     "'warmup_scope' = 'once' needs"),
    ('name = "glm-tsl"', 'name = "glm-tsl@anytime"\nwarmup_scope = "once"', None),
    ('name = "glm-tsl"', 'name = "ada-ofu-ecolog"', None),
    ('k = 4', 'k = 4\nreward = "gaussian"\n[[policies]]\nlabel = "E"\nname = "ada-ofu-ecolog"', "policy 'ada-ofu-ecolog' models rewards in [0, 1]"),
])
def test_glm_cross_checks(tmp_path, old, new, expected):
    text = GLM.replace(old, new, 1)
    if expected is None:  # the control: a valid variant loads
        load_experiment(write(tmp_path, text))
        return
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_experiment(write(tmp_path, text))


def test_rewards_outside_link_can_be_allowed(tmp_path):
    text = GLM.replace('k = 4', 'k = 4\nreward = "gaussian"').replace('name = "glm-tsl"', 'name = "glm-tsl"\nrewards_outside_link = true')
    exp = load_experiment(write(tmp_path, text))
    assert exp.runs[0].policy["rewards_outside_link"] is True
