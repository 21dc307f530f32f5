"""Bad input fails before any computation, with one message naming the field or the problem: experiment
files and paths, sizes beyond memory or range, rewards that would overflow, ``simulate`` arguments, results
databases and report folders; the CLI answers each with one line ``error: ...`` and exit status 2."""

import os
import re
import socket
import textwrap

import jax.numpy as jnp
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.cli import main
from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.plan import load_experiment

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
    full_only = GOOD + '[[policies]]\nlabel = "U"\nname = "uniform"\nscales = ["full"]\n'  # (once 'unknown label')
    with pytest.raises(ConfigError, match=r"series 'U' does not run at the quick scale \(its table's 'scales'\)"):
        load_experiment(write(tmp_path, full_only + base.removeprefix(GOOD).format("regret('U') < 1")))


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
    env = nb.make_env("linear", d=2, k=2)
    for bad in (-5, 0, 1.5, True):  # (accepted: the error came at simulate, for 0 saying it had no horizon)
        with pytest.raises(ConfigError, match=fr"horizon must be an integer >= 1 \(the rounds it will run\), got "
                                              fr"{bad}"):
            nb.make_policy("lin-es", env, horizon=bad, m=2)
    with pytest.raises(ConfigError, match="spec.k must be an integer >= 1"):
        nb.make_policy("lin-es", nb.ProblemSpec(2, 0, 10), m=2)


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


# --- Zero tracebacks on bad input -------------------------------------------------------------------

BIG_GRID = "\n".join(f"{key} = {list(range(1, n + 1))}" for key, n in [("m", 10), ("lam", 10), ("sigma_r", 10),
                                                                     ("prior_scale", 11)])


def test_sizes_beyond_memory_or_range_are_refused_at_load(tmp_path):
    # Each is refused before anything is built, with the range or the memory it would need.
    for old, new, expected in [
        ("horizon = 100", "horizon = 1e12", "field 'horizon' = 1000000000000 is more than 2147483647"),
        ("horizon = 100", "horizon = 1e30", "field 'horizon' = 1000000000000000019884624838656 is more than"),
        ("k = 4", "k = 5000000000", "field 'k' = 5000000000 is more than 2147483647 in magnitude (the engine's sizes"),
        ("d = 3", "d = 1e23", "field 'd' = 99999999999999991611392 is more than 2147483647"),
        ("d = 3", "d = 2e9", "environment arrays 119 GiB"),
        ("d = 3", "d = 100000000000000000000000", "field 'env.d' is an integer outside TOML's 64-bit range"),
        ("horizon = 100\nseeds = 2", "horizon = 2000000000\nseeds = 1000000000", "chosen arms S×T 4.47e+10 GiB"),
        ("seeds = 2", "seeds = 1e10", "field 'seeds' = 10000000000 is more than 4294967296"),
        ("seeds = 2", "seeds = 2\nfirst_seed = 4294967295", "field 'first_seed + seeds' = 4294967297 is more than"),
        ("seeds = 2", "seeds = 2\nfirst_seed = -1", "field 'first_seed' must be"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(expected)):
            load_experiment(write(tmp_path, GOOD.replace(old, new, 1)))


def test_memory_estimate_counts_history_buffers(tmp_path, monkeypatch):
    # lin-phe keeps a T×d history buffer in its state, lin-es does not: with a limit between their needs, only
    # lin-phe is refused (S = 2, T = 100_000, d = 3: arms 4.8 MB; the history 4.8 MB more, twice: the scan's
    # carry in and out).
    from nlbandit.core import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 6_000_000)
    text = GOOD.replace("horizon = 100", "horizon = 100000")
    load_experiment(write(tmp_path, text))
    phe = text.replace('name = "lin-es"\nm = 2', 'name = "lin-phe"')
    with pytest.raises(ConfigError, match=r"run 'ES' needs about .*policy states \(the scan's carry in and out\) "
                                          r"0.0089\d GiB"):
        load_experiment(write(tmp_path, phe))


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.mkdir(), "is a folder; expected an experiment file (TOML)"),
    (lambda p: os.mkfifo(p), "is not a regular file (a FIFO, socket or device)"),  # never opened: no hang
    (lambda p: (p.symlink_to(p.with_name("b.toml")), p.with_name("b.toml").symlink_to(p)),
     "cannot read the experiment file: Too many levels of symbolic links"),
    (lambda p: p.write_bytes(b'title = "caf\xe9"\n'), "not UTF-8 text (byte 0xe9 at offset 12)"),
    (lambda p: p.write_text("x = " + "[" * 100_000), "not valid TOML: arrays or tables nested too deeply"),
], ids=["folder", "fifo", "symlink-loop", "not-utf8", "deep-nesting"])
def test_unreadable_experiment_path_is_named(tmp_path, make, expected):
    path = tmp_path / "e.toml"
    make(path)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {expected}")):
        load_experiment(path)


@pytest.mark.parametrize("old, new, expected", [
    ("lam = 1.0", "lam = []", "policies[0]: field 'lam' is an empty list; a grid needs at least one value"),
    ("d = 3", "d = []", "env: field 'd' is an empty list; a grid needs at least one value"),
    ("m = 2\nlam = 1.0", BIG_GRID, "the grid over m, lam, sigma_r, prior_scale has 11000 configurations, more than"),
    ('name = "lin-es"', 'name = ["lin-es", "lin-ts"]', "field 'name' must be a string (a registered name"),
    ('name = "linear"', "name = {x = 1}", "env: field 'name' must be a string (a registered name"),
    ("seeds = 2", "seeds = 2\nclaims = 3", "field 'claims' must be an array of tables ([[claims]]), got 3"),
    ("seeds = 2", 'seeds = 2\nname = "../../x"', "field 'name' must be a plain file name"),
    ("seeds = 2", 'seeds = 2\npaper = "../x"', "field 'paper' must be a plain file name"),
    ("seeds = 2", 'seeds = 2\nname = "a/b"', "field 'name' must be a plain file name"),
    ("seeds = 2", 'seeds = 2\nname = "a\\\\b"', "field 'name' must be a plain file name"),
    ("seeds = 2", 'seeds = 2\nname = "a\\u0000b"', "field 'name' must be a plain file name"),
    ("seeds = 2", 'seeds = 2\npaper = ".hidden"', "field 'paper' must be a plain file name"),
    ("seeds = 2", 'seeds = 2\nname = "fig-1_a.v2"', None),  # the control: a plain name loads
    ("seeds = 2", "seeds = 2\n[scales.quick]\nhorizon = 1e12", "field 'horizon' = 1000000000000 is more than"),
])
def test_bad_structure_is_named(tmp_path, old, new, expected):
    assert old in GOOD
    text = GOOD.replace(old, new, 1)
    if expected is None:
        assert load_experiment(write(tmp_path, text)).name == "fig-1_a.v2"
        return
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load_experiment(write(tmp_path, text))


def test_default_paper_of_a_relative_path_is_the_folder_name(tmp_path, monkeypatch):
    # '../e.toml' must not make the report folder reports/.. (outside reports/).
    (tmp_path / "sub").mkdir()
    write(tmp_path, GOOD)
    monkeypatch.chdir(tmp_path / "sub")
    assert load_experiment("../e.toml").paper == tmp_path.name


@pytest.mark.parametrize("old, new, field", [
    ("k = 4", "k = 4\ntheta_norm = 1e308", "theta_norm"),
    ("k = 4", "k = 4\nnoise_std = 1e300", "noise_std"),
    ("k = 4", "k = 4\ntheta_star = [1e200, 1e200, 0]", "theta_star"),
    ("k = 4", "k = 4\narm_set = [[1e300, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]]", "arm_set"),
    ('name = "linear"', 'name = "heteroscedastic"\nsigma_high = 1e300', "sigma_high"),
    ("k = 4", "k = 4\ntheta_norm = 1e80", None),  # the control: 1e80 per round, 2e89 over 2³¹ rounds
])
def test_rewards_that_would_overflow_are_refused(tmp_path, old, new, field):
    text = GOOD.replace(old, new, 1)
    if field is None:
        load_experiment(write(tmp_path, text))
        return
    with pytest.raises(ConfigError, match=f"env: field '{field}' makes rewards too large: .* must stay below 1e100"):
        load_experiment(write(tmp_path, text))


@pytest.fixture(scope="module")
def small_problem():
    env = nb.make_env("linear", d=2, k=3)
    policy, params = nb.make_policy("lin-ts", nb.ProblemSpec(2, 3, 10))  # its params record: (lam, v)
    return env, policy, params


@pytest.mark.parametrize("kwargs, expected", [
    (dict(seeds=[2**32]), "seeds must be integers in [0, 2**32 - 1], got 4294967296"),
    (dict(seeds=[-1]), "seeds must be integers in [0, 2**32 - 1], got -1"),
    (dict(seeds=[0.7]), "seeds must be integers in [0, 2**32 - 1], got 0.7"),
    (dict(seeds=np.array([0.0, 1.0])), "seeds must be integers in [0, 2**32 - 1], got 0.0"),
    (dict(seeds=[True]), "seeds must be integers in [0, 2**32 - 1], got True"),
    (dict(seeds=["0"]), "seeds must be integers in [0, 2**32 - 1], got '0'"),
    (dict(seeds=[0, 1, 0]), "seeds must be distinct, got [0] more than once"),
    (dict(seeds=3), "seeds must be a sequence of integers, got 3"),
    (dict(seeds=[]), "seeds must contain at least one seed"),
    (dict(horizon=10.5), "horizon must be an integer in [1, 2**31 - 1]"),
    (dict(horizon=2**31), "horizon must be an integer in [1, 2**31 - 1]"),
    (dict(max_points=0), "max_points must be an integer >= 1, got 0"),
    (dict(max_points=-5), "max_points must be an integer >= 1, got -5"),
    (dict(chunk_size=0), "chunk_size must be an integer >= 1, got 0"),
    (dict(chunk_size=2.5), "chunk_size must be an integer >= 1, got 2.5"),
    (dict(grid=True, params={"lam": 1.0, "v": 1.0}), "params: grid=True needs every leaf to have the same leading "
                                                      "grid length"),
    (dict(grid=True, params={"lam": np.ones(2), "v": np.ones(3)}), "got leaf shapes [(2,), (3,)]"),
    (dict(params={}), "params must have exactly the fields lam, v; missing lam, v"),
    (dict(params={"lam": 1.0, "v": 1.0, "alpha": 1.0}), "params must have exactly the fields lam, v; unknown alpha"),
    (dict(params=[1.0, 1.0]), "params must be a mapping with the fields lam, v, got list"),
])
def test_simulate_arguments_are_validated(small_problem, kwargs, expected):
    env, policy, params = small_problem
    args = dict(params=params, horizon=10, seeds=[0, 1]) | kwargs
    with pytest.raises(ValueError, match=re.escape(expected)):
        nb.simulate(env, policy, args.pop("params"), args.pop("horizon"), args.pop("seeds"), **args)


def test_simulate_refuses_a_resume_of_another_shape(small_problem):
    from nlbandit.core.simulate import SimProgress, recorded_rounds

    env, policy, params = small_problem
    points = recorded_rounds(10, 2000).size

    def progress(n_seeds, horizon):
        return SimProgress(0, [], np.zeros((n_seeds, points)), np.zeros((n_seeds, points)),
                           np.zeros((n_seeds, horizon), np.int32), np.zeros(n_seeds), np.zeros(n_seeds))

    for saved, expected in [(progress(3, 10), "arms of shape (3, 10)"), (progress(2, 20), "arms of shape (2, 20)")]:
        with pytest.raises(ValueError, match=re.escape(f"resume: the progress has {expected}") + ".*needs \\(2, 10\\)"):
            nb.simulate(env, policy, params, 10, [0, 1], resume=saved)


@pytest.mark.parametrize("broken, expected", [
    ("mask", "seed 7, round 3: regret -inf"),  # no arm available in round 3
    ("reward", "seed 7, round 4: regret 0.0, reward nan"),  # a NaN reward in round 4
])
def test_non_finite_rounds_are_reported_after_the_chunk(small_problem, broken, expected):
    env, policy, params = small_problem
    if broken == "mask":
        env = env._replace(observe=lambda state, key, t: (state.arms, jnp.full(3, t != 3)),
                           mean=lambda state, ctx: jnp.zeros(3))
    else:
        env = env._replace(pull=lambda state, key, t, ctx, arm: nb.Feedback(jnp.where(t == 4, jnp.nan, 0.0)),
                           mean=lambda state, ctx: jnp.zeros(3))
    with pytest.raises(ValueError, match=re.escape(expected) + ".*no available arm .*non-finite mean or reward"):
        nb.simulate(env, policy, params, 5, [7], chunk_size=5)


def _database(tmp_path, kind):
    """A results database path of the given ``kind`` of unusable (or, for 'good', usable)."""
    import duckdb
    from nlbandit.store import Store

    folder = tmp_path / "db"
    folder.mkdir()
    path = folder / "r.duckdb"
    if kind == "garbage":
        path.write_bytes(b"not a database\x00\xff" * 100)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind in ("read-only file", "read-only folder", "good"):
        Store(path).close()
        if kind == "read-only file":
            path.chmod(0o444)
        elif kind == "read-only folder":
            folder.chmod(0o555)
    elif kind in ("other schema", "other runs", "other tables"):
        con = duckdb.connect(str(path))
        con.execute({"other schema": "CREATE TABLE series (a INTEGER)", "other runs": "CREATE TABLE runs (a INTEGER)",
                     "other tables": "CREATE TABLE people (a INTEGER)"}[kind])
        con.close()
    elif kind == "below a file":
        (folder / "f").write_text("x")
        path = folder / "f" / "r.duckdb"
    return path


DATABASES = [
    ("garbage", "cannot be opened (IO Error: The file"),
    ("empty", "is an empty file (0 bytes), not a DuckDB database"),
    ("folder", "is a folder; expected a DuckDB file"),
    ("fifo", "is not a regular file; expected a DuckDB file"),
    ("read-only file", "is read-only; make it writable or pass another --db"),
    ("read-only folder", "is read-only (DuckDB writes the database and its .wal file there)"),
    ("other schema", "has a table 'series' with columns (a), not nlbandit's (series_id, experiment"),
    ("other runs", "has a table 'runs' with columns (a), neither nlbandit's layout nor its previous one (run_id, "),
    ("other tables", "holds other tables (people), not nlbandit results"),
    ("below a file", "Not a directory"),
]


@pytest.mark.parametrize("kind, expected", DATABASES + [("good", None)])
def test_unusable_database_is_named_and_left_alone(tmp_path, kind, expected):
    from nlbandit.store import Store, StoreError

    path = _database(tmp_path, kind)
    if expected is None:  # the control: a usable database opens
        Store(path).close()
        return
    content, listing = path.read_bytes() if path.is_file() else None, sorted(tmp_path.rglob("*"))
    with pytest.raises(StoreError, match=re.escape(expected)) as e:
        Store(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    assert (path.read_bytes() if path.is_file() else None) == content
    assert sorted(tmp_path.rglob("*")) == listing  # no .wal file or folder left behind


def _cli_cases():
    """(id, setup, expected): setup(tmp_path) returns the argv of one malformed invocation of ``nlbandit``,
    whose one-line error must contain ``expected``."""

    def exp(text, *extra):
        def setup(tmp):
            path = write(tmp, text)
            return ["run", str(path), "--db", str(tmp / "r.duckdb"), "--out", str(tmp / "out"), *extra]
        return setup

    def edit(old, new, *extra):
        assert old in GOOD
        return exp(GOOD.replace(old, new, 1), *extra)

    def path(make):
        def setup(tmp):
            target = tmp / "x.toml"
            make(target)
            return ["check", str(target), "--db", str(tmp / "r.duckdb"), "--out", str(tmp / "out")]
        return setup

    def db(kind, command="run"):
        def setup(tmp):
            database = _database(tmp, kind)
            if command == "results":
                return ["results", "--db", str(database)]
            return [command, str(write(tmp, GOOD)), "--db", str(database), "--out", str(tmp / "out")]
        return setup

    def same_report(tmp):  # exps/p/e.toml and exps/q/p/e.toml: both report to <out>/p/e.md
        for sub in ("p", "q/p"):
            (tmp / "exps" / sub).mkdir(parents=True)
            (tmp / "exps" / sub / "e.toml").write_text(GOOD)
        return ["check", str(tmp / "exps"), "--db", str(tmp / "r.duckdb"), "--out", str(tmp / "out")]

    held = []  # (a listening socket, kept open while the command runs)

    def port_in_use(tmp):
        held.append(socket.create_server(("127.0.0.1", 0)))
        return ["serve", str(tmp / "s"), "--port", str(held[-1].getsockname()[1])]

    def out(make):
        def setup(tmp):
            return ["run", str(write(tmp, GOOD)), "--db", str(tmp / "r.duckdb"), "--out", str(make(tmp))]
        return setup

    return [
        # experiment files
        ("toml-syntax", edit("horizon = 100", "horizon = = 100"), "not valid TOML: Invalid value"),
        ("toml-deep-nesting", exp("x = " + "[" * 100_000), "not valid TOML: arrays or tables nested too deeply"),
        ("string-for-number", edit("horizon = 100", 'horizon = "100"'), "'horizon' must be an integer >= 1, got '100'"),
        ("nan", edit("lam = 1.0", "lam = nan"), "field 'lam' must be a number > 0, got nan"),
        ("inf", edit("k = 4", "k = 4\nnoise_std = inf"), "field 'noise_std' must be a number >= 0, got inf"),
        ("negative", edit("lam = 1.0", "lam = -1.0"), "field 'lam' must be a number > 0, got -1.0"),
        ("float-for-int", edit("d = 3", "d = 2.5"), "field 'd' must be an integer >= 1, got 2.5"),
        ("date-for-int", edit("seeds = 2", "seeds = 2024-01-01"), "field 'seeds' must be an integer >= 1, got date"),
        ("bool-for-number", edit("lam = 1.0", "lam = true"), "field 'lam' must be a number > 0, got True"),
        ("table-for-scalar", edit("d = 3", "d = {a = 1}"), "field 'd' must be an integer >= 1, got {'a': 1}"),
        ("table-for-string", edit("seeds = 2", "seeds = 2\ntitle = {a = 1}"), "field 'title' must be a string"),
        ("list-for-bool", edit("seeds = 2", "seeds = 2\ncurves = [true]"), "field 'curves' must be true or false"),
        ("unknown-top-key", edit("seeds = 2", "seeds = 2\nbogus = 1"), "unknown field 'bogus'; allowed fields:"),
        ("unknown-env-key", edit("k = 4", 'k = 4\ncolour = "red"'), "env: unknown field 'colour'"),
        ("unknown-policy-key", edit("lam = 1.0", "lam = 1.0\nbeta = 2"), "(ES): unknown field 'beta'"),
        ("unknown-policy", edit('name = "lin-es"', 'name = "lin-magic"'), "field 'name' must be one of ada-ofu-ecolog"),
        ("unknown-env", edit('name = "linear"', 'name = "moon"'),
         "field 'name' must be one of classification, distance, heteroscedastic, latent, linear, logistic, poisson, "
         "probit, quadratic, target-class, got 'moon'"),
        ("policy-name-list", edit('name = "lin-es"', 'name = ["lin-es"]'), "[0]: field 'name' must be a string"),
        ("env-name-table", edit('name = "linear"', "name = {x = 1}"), "env: field 'name' must be a string"),
        ("env-not-table", exp('horizon = 10\nseeds = 1\nenv = 3\n[[policies]]\nlabel = "U"\nname = "uniform"\n'),
         "env must be a table"),
        ("no-policies", exp('horizon = 10\nseeds = 1\n[env]\nname = "linear"\nd = 2\nk = 2\n'),
         "field 'policies' must be a non-empty array of tables"),
        ("policies-not-tables", exp('horizon = 10\nseeds = 1\npolicies = [1]\n[env]\nname = "linear"\nd = 2\nk = 2\n'),
         "policies[0] must be a table"),
        ("claims-not-array", edit("seeds = 2", "seeds = 2\nclaims = 3"), "field 'claims' must be an array of tables"),
        ("claim-unknown-label", exp(GOOD + '[[claims]]\nname = "c"\ncheck = "regret(\'Nope\') < 1"\n'),
         "unknown label 'Nope'"),
        ("claim-bad-expression", exp(GOOD + '[[claims]]\nname = "c"\ncheck = "regret(\'ES\') <"\n'),
         "is not a valid expression"),
        ("scale-unknown", edit("seeds = 2", "seeds = 2\n[scales.huge]\nseeds = 3"), "'scales.huge' is not a scale"),
        ("empty-grid-policy", edit("lam = 1.0", "lam = []"), "field 'lam' is an empty list"),
        ("empty-grid-env", edit("d = 3", "d = []"), "env: field 'd' is an empty list"),
        ("grid-explosion", edit("m = 2\nlam = 1.0", BIG_GRID), "has 11000 configurations, more than 10000"),
        ("horizon-1e12", edit("horizon = 100", "horizon = 1e12"), "field 'horizon' = 1000000000000 is more than"),
        ("horizon-1e30", edit("horizon = 100", "horizon = 1e30"), "is more than 2147483647 (the engine's int32"),
        ("horizon-and-seeds-memory", edit("horizon = 100\nseeds = 2", "horizon = 2000000000\nseeds = 1000000000"),
         "needs about 4.47e+10 GiB of memory (chosen arms S×T 4.47e+10 GiB"),
        ("d-1e23", edit("d = 3", "d = 1e23"), "field 'd' = 99999999999999991611392 is more than 2147483647"),
        ("d-beyond-int64", edit("d = 3", "d = 100000000000000000000000"), "field 'env.d' is an integer outside TOML"),
        ("k-beyond-int32", edit("k = 4", "k = 5000000000"), "field 'k' = 5000000000 is more than 2147483647"),
        ("theta-norm-overflow", edit("k = 4", "k = 4\ntheta_norm = 1e308"), "'theta_norm' makes rewards too large"),
        ("noise-overflow", edit("k = 4", "k = 4\nnoise_std = 1e300"), "field 'noise_std' makes rewards too large"),
        ("name-traversal", edit("seeds = 2", 'seeds = 2\nname = "../../x"'), "field 'name' must be a plain file name"),
        ("paper-traversal", edit("seeds = 2", 'seeds = 2\npaper = "../x"'), "field 'paper' must be a plain file name"),
        ("name-slash", edit("seeds = 2", 'seeds = 2\nname = "a/b"'), "field 'name' must be a plain file name"),
        ("name-nul", edit("seeds = 2", 'seeds = 2\nname = "a\\u0000b"'), "field 'name' must be a plain file name"),
        # experiment paths
        ("path-missing", path(lambda p: None), "x.toml: no such experiment file"),
        ("path-empty-folder", path(lambda p: p.mkdir()), "x.toml: the folder holds no experiment file"),
        ("path-fifo", path(os.mkfifo), "x.toml: is not a regular file (a FIFO, socket or device)"),
        ("path-symlink-loop", path(lambda p: (p.symlink_to(p.with_name("y.toml")),
                                              p.with_name("y.toml").symlink_to(p))),
         "x.toml: cannot read the experiment file: Too many levels of symbolic links"),
        ("path-not-utf8", path(lambda p: p.write_bytes(b'title = "\xff"\n')), "x.toml: not UTF-8 text (byte 0xff"),
        # arguments
        ("seeds-0", edit("seeds = 2", "seeds = 2", "--seeds", "0"), "--seeds: field 'seeds' must be an integer >= 1"),
        ("seeds-negative", edit("seeds = 2", "seeds = 2", "--seeds", "-1"), "must be an integer >= 1, got -1"),
        ("seeds-not-int", edit("seeds = 2", "seeds = 2", "--seeds", "two"), "argument --seeds: invalid int value"),
        ("seeds-huge", edit("seeds = 2", "seeds = 2", "--seeds", "99999999999"), "is more than 4294967296"),
        ("chunk-size-0", edit("seeds = 2", "seeds = 2", "--chunk-size", "0"), "--chunk-size must be an integer >= 1"),
        ("chunk-size-not-int", edit("seeds = 2", "seeds = 2", "--chunk-size", "1e3"), "argument --chunk-size: invalid"),
        ("scale-not-a-scale", edit("seeds = 2", "seeds = 2", "--scale", "huge"), "argument --scale: invalid choice"),
        ("unknown-option", edit("seeds = 2", "seeds = 2", "--fast"), "unrecognized arguments: --fast"),
        ("no-file", lambda tmp: ["run"], "the following arguments are required: file"),
        ("unknown-command", lambda tmp: ["simulate", "x.toml"], "argument command: invalid choice: 'simulate'"),
        ("list-unknown", lambda tmp: ["list", "everything"], "argument what: invalid choice: 'everything'"),
        # report folder
        ("out-is-a-file", out(lambda tmp: (tmp / "o.txt", (tmp / "o.txt").write_text("x"))[0]),
         "o.txt is an existing file, not a folder"),
        ("out-below-a-file", out(lambda tmp: (tmp / "o.txt", (tmp / "o.txt").write_text("x"))[0] / "sub"),
         "o.txt is an existing file, not a folder"),
        ("out-report-is-a-folder", out(lambda tmp: ((tmp / "o" / "e.md").mkdir(parents=True), tmp / "o")[1]),
         "e.md exists and is not a file"),
        # (it was found after every run was simulated: a traceback and half a report)
        ("out-run-list-is-a-folder", out(lambda tmp: ((tmp / "o" / "e.runs.json").mkdir(parents=True), tmp / "o")[1]),
         "e.runs.json exists and is not a file"),
        ("folder-same-report-twice", same_report, "both write the report"),
        # results database
        *[(f"db-{kind.replace(' ', '-')}", db(kind), expected) for kind, expected in DATABASES],
        ("results-db-garbage", db("garbage", "results"), "not a valid DuckDB database file"),
        ("results-db-other-schema", db("other schema", "results"), "has a table 'series' with columns (a)"),
        ("results-db-missing", lambda tmp: ["results", "--db", str(tmp / "none.duckdb")], "no results database at"),
        # found by an audit (2026-11-29), each once a traceback, a crash after the runs, or a silent surprise
        ("env-empty", edit('[env]\nname = "linear"\nd = 3\nk = 4', "env = []"),
         "field 'env' must be a table or a non-empty array of tables ([[env]]), got []"),
        ("claim-name-twice", edit("lam = 1.0", 'lam = 1.0\n[[claims]]\nname = "c"\ncheck = "regret(\'ES\') > 0"\n'
                                               '[[claims]]\nname = "c"\ncheck = "regret(\'ES\') < 0"'),
         "claims[1]: field 'name' = 'c' is used by an earlier claim"),
        ("label-line-break", edit('label = "ES"', 'label = "E\\nS"'), "field 'label' must be printable text"),
        ("label-pipe", edit('label = "ES"', 'label = "E | S"'), "field 'label' must be printable text"),
        ("label-blank", edit('label = "ES"', 'label = "  "'), "field 'label' must be printable text"),
        # a case or title a report prints in a table row or a heading (once accepted, the report's table split)
        ("case-pipe-line-break", edit('[env]\nname = "linear"', '[[env]]\ncase = "a|b\\nc"\nname = "linear"'),
         "env[0]: field 'case' must be printable text"),
        ("case-blank", edit('[env]\nname = "linear"', '[[env]]\ncase = "  "\nname = "linear"'),
         "env[0]: field 'case' must be printable text"),
        ("case-comma", edit('[env]\nname = "linear"', '[[env]]\ncase = "a,b"\nname = "linear"'),
         "env[0]: field 'case' must be a name without ','"),
        ("title-line-break", edit("horizon = 100", 'title = "one\\ntwo"\nhorizon = 100'),
         "field 'title' must be one line of printable text"),
        ("grid-value-twice", edit("d = 3", "d = [3, 3]"), "field 'd' = [3, 3] lists 3 twice; a grid's values must "
                                                          "differ"),
        ("scales-misspelt", edit("lam = 1.0", 'lam = 1.0\nscale = ["full"]'),
         "sigma_r; is it 'scales', a field of the [[policies]] table, misspelt?"),  # (once a grid of 'scale')
        ("label-misspelt", edit('label = "ES"', 'lable = "ES"'), "field 'label' is required (the series' display "
                                                                 "label); is 'lable' it, misspelt?"),
        ("unread-not-set", edit("lam = 1.0", 'lam = 1.0\nunread = ["kappa"]'),
         "field 'unread' names ['kappa'], which this table does not set"),
        ("path-empty", lambda tmp: ["check", "", "--db", str(tmp / "r.duckdb")],
         "argument file: an empty path (did a variable go unset?)"),
        ("out-empty", edit("seeds = 2", "seeds = 2", "--out", ""), "argument --out: an empty path"),
        ("resample-huge", edit("seeds = 2", "seeds = 2", "--resample", "1000000000000"),
         "--resample must be a number of draws in [0, 100000]"),
        ("seeds-no-database", lambda tmp: ["seeds", str(write(tmp, GOOD)), "--db", str(tmp / "sd" / "new.duckdb")],
         "no results database at"),
        ("seeds-sizes-huge", lambda tmp: ["seeds", str(write(tmp, GOOD)), "--sizes", "100000000000"],
         "--sizes must be seed counts in [1, 100000]"),
        ("serve-port-out-of-range", lambda tmp: ["serve", str(tmp / "s"), "--port", "70000"],
         "serve: the port must be in 0..65535, got 70000"),
        ("cases-empty", edit("seeds = 2", "seeds = 2", "--cases", ","),
         "got no name; the file has no named cases"),  # (once "got 'none'; cases: " and nothing)
        ("data-list-with-a-name", lambda tmp: ["data", "list", "extra"], "data list takes no data set name"),
        ("evaluate-estimator-twice", lambda tmp: ["evaluate", str(tmp / "s"), "--policy", "lin-ucb", "--estimators",
                                                  "ips", "ips"], "--estimators names 'ips' more than once"),
        ("serve-port-in-use", port_in_use, "serve: cannot listen on 127.0.0.1:"),  # (after creating the folder)
        ("evaluate-set-agent-argument", lambda tmp: ["evaluate", str(tmp / "s"), "--policy", "lin-ucb", "--set",
                                                     "seed=5"], "evaluate: the candidate's hyperparameters must not hold ['seed']"),
    ]


@pytest.mark.parametrize("setup, expected", [c[1:] for c in _cli_cases()], ids=[c[0] for c in _cli_cases()])
def test_cli_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, setup, expected):
    argv = setup(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ") and captured.err.count("\n") == 1, captured.err
    assert expected in captured.err and "Traceback" not in captured.err
    assert sorted(tmp_path.rglob("*")) == before  # nothing simulated, no database, no report


def test_a_data_cache_that_is_a_file_and_a_closed_pipe_are_one_line_or_quiet(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("NLBANDIT_DATA", str(write(tmp_path, GOOD)))
    assert main(["data", "fetch", "banknote"]) == 2  # (once a NotADirectoryError traceback)
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Not a directory" in err and err.count("\n") == 1

    def closed(*args, **kwargs):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr("nlbandit.cli._list", closed)  # as `nlbandit list | head` once the reader is gone
    monkeypatch.setattr("os.dup2", lambda *args: None)  # (the test's own stdout stays)
    assert main(["list"]) == 1 and capsys.readouterr().err == ""


def test_a_database_damaged_after_it_opened_and_an_interruption_are_one_line(tmp_path, capsys, monkeypatch):
    """A truncated database gave a 19-line DuckDB traceback and exit 1 (cli.md: one line, exit 2); Ctrl-C a
    40-line KeyboardInterrupt traceback."""
    import nlbandit.cli as cli

    db = tmp_path / "r.duckdb"
    assert main(["run", str(write(tmp_path, GOOD)), "--db", str(db), "--out", str(tmp_path / "out")]) == 0
    db.write_bytes(db.read_bytes()[: db.stat().st_size // 2])
    damaged = db.read_bytes()
    capsys.readouterr()
    assert main(["results", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err and str(db) in err, err
    assert db.read_bytes() == damaged

    def interrupted(argv):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_command", interrupted)
    assert main(["results", "--db", str(db)]) == 130
    assert "interrupted: the runs stored so far are kept" in capsys.readouterr().err


def test_simulate_refuses_a_run_that_does_not_fit_before_compiling(monkeypatch):
    """The engine measures the states it will hold (jax.eval_shape of reset and init) and refuses a run beyond
    the machine's memory with the parts named, whichever door the run came in by (here: nb.simulate)."""
    from nlbandit.core import memory

    monkeypatch.setattr(memory, "physical_memory", lambda: 10_000_000)
    env = nb.make_env("linear", d=100, k=4)
    policy, params = nb.make_policy("lin-ucb", env, horizon=5)
    nb.simulate(env, policy, params, 5, range(10))  # 10 seeds: 2 × 10 × 100² × 8 bytes of state, 1.6 MB
    with pytest.raises(ConfigError, match=r"simulate: simulating policy 'lin-ucb' .* needs about 0.01[0-9]+ GiB of "
                                          r"memory \(.*policy states \(the scan's carry in and out\) 0.01"):
        nb.simulate(env, policy, params, 5, range(100))


def test_nlbandit_refuses_to_build_inside_a_32_bit_block():
    """Inside `with jax.enable_x64(False):` (concepts.md's way to keep one's own code 32-bit) make_env, make_policy
    and the agent computed in float32 silently: another instance for the same seed, other arms from round 1."""
    import jax

    env = nb.make_env("linear", d=3, k=4)
    with jax.enable_x64(False):
        for build in (lambda: nb.make_env("linear", d=3, k=4), lambda: nb.make_policy("lin-ucb", env, horizon=20),
                      lambda: nb.Agent("lin-ucb", d=3, k=4)):
            with pytest.raises(ConfigError, match="JAX's 64-bit mode is off here"):
                build()
    nb.make_policy("lin-ucb", env, horizon=20)  # outside it, as before


def test_a_run_whose_training_diverges_is_one_line_exit_2(tmp_path, capsys):
    """A neural step size that diverges ended in a 12-frame traceback with exit 1, the status of a failed claim."""
    text = GOOD.split("[[policies]]")[0] + '[[policies]]\nlabel = "NG"\nname = "neural-greedy"\nlr = 1000000.0\n'
    argv = ["run", str(write(tmp_path, text)), "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "out"),
            "--executor", "local", "--no-progress"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "error: policy 'neural-greedy', seed " in err and "its state became non-finite" in err
    assert "Traceback" not in err


def test_numpy_scalars_are_the_values_they_hold_and_numpy_booleans_are_still_refused():
    """Values taken from NumPy arrays (np.int64 sizes, np.float32 scales) build the environment, policy and agent that
    the Python values build (they were refused as 'must be an integer' / 'a number'); np.bool_ is refused as True is."""
    env = nb.make_env("linear", d=np.int64(4), k=np.int32(6), noise_std=np.float32(0.5))
    assert env is nb.make_env("linear", d=4, k=6, noise_std=0.5)  # (the same cached environment)
    _, params = nb.make_policy("lin-es", env, horizon=np.int64(30), m=np.int64(5), sigma_r=np.array(0.25))
    _, expected = nb.make_policy("lin-es", env, horizon=30, m=5, sigma_r=0.25)
    assert params == expected
    agent = nb.Agent("lin-es", d=4, k=6, m=np.int64(5), sigma_r=np.float32(0.25))
    assert agent.config == nb.Agent("lin-es", d=4, k=6, m=5, sigma_r=0.25).config
    with pytest.raises(ConfigError, match="field 'd' must be an integer >= 1, got True"):
        nb.make_env("linear", d=np.bool_(True), k=6)


@pytest.mark.parametrize("build, message", [
    (lambda: nb.Agent("lin-ucb", d=3_037_000_500, k=4), "Agent: field 'd' = 3037000500 is more than 2147483647"),
    (lambda: nb.Agent("lin-phe", d=3, k=4, horizon=4 * 10**18), "Agent: field 'horizon' = 4000000000000000000 is more"),
    (lambda: nb.Agent("glm-es", d=3, k=4, m=4 * 10**18), "Agent policy 'glm-es': field 'm' = 4000000000000000000 is"),
    (lambda: nb.make_policy("lin-ucb", nb.ProblemSpec(3_037_000_500, 4, 100)), "field 'spec.d' = 3037000500 is more"),
    (lambda: nb.make_env("linear", d=3_037_000_500, k=4), "env 'linear': field 'd' = 3037000500 is more than"),
])
def test_sizes_beyond_int32_are_refused_before_xla_traces_them(build, message):
    """A d × d matrix of d = 3,037,000,500 (or an ensemble of m = 4e18) overflowed XLA's shape arithmetic in the
    memory check, which aborted the process with no Python error; every surface now bounds sizes by 2**31 - 1."""
    with pytest.raises(ConfigError, match=message):
        build()
