"""Classification data sets as bandits (nlbandit.envs.classification): the registry's derived sizes, the disjoint
arms, rewards, means and regret (spec 001 §4.3, spec 003 §4.8), and experiments whose data set is missing."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import nlbandit as nb
from nlbandit.cli import main
from nlbandit.core.hyper import ConfigError
from nlbandit.data import sources
from nlbandit.data.cache import DataError
from nlbandit.data.sources import FileSource, Reader
from nlbandit.envs.registry import make_env, resolve_env
from nlbandit.experiments.plan import load_experiment
from nlbandit.policies.registry import make_policy

RNG = np.random.default_rng(0)
ROWS = 40
FEATURES = RNG.uniform(-5, 5, (ROWS, 3)).round(3)
LABELS = RNG.integers(0, 3, ROWS)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """Data sets in a fresh cache: 'toy3' (40 rows, 3 numeric features, 3 classes), 'cats' (categorical), and
    'absent' (a user file nobody put there)."""
    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    for name, text in {
        "toy3": "\n".join(",".join(map(str, f)) + f",c{y}" for f, y in zip(FEATURES, LABELS)),
        "cats": "x,u,1.0,a\ny,u,2.0,b\nx,v,3.0,a\ny,v,4.0,b\n",
        "twins": "1,2,a\n1,2,b\n1,2,b\n3,4,a\n",
    }.items():
        src = FileSource((f"{name}.csv",), "nowhere", Reader(), name)
        monkeypatch.setitem(sources.SOURCES, name, src)
        src.folder(name).mkdir(parents=True)
        (src.folder(name) / f"{name}.csv").write_text(text)
    monkeypatch.setitem(sources.SOURCES, "absent", FileSource(("absent.csv",), "the moon", Reader(), "absent"))
    return tmp_path


def test_registry_derives_sizes_and_refuses_what_does_not_fit(toy):
    c = resolve_env({"name": "classification", "dataset": "toy3"})
    assert (c["d"], c["k"], c["pool"]) == (9, 3, ROWS) and len(c["data_sha256"]) == 64
    assert resolve_env({"name": "classification", "dataset": "toy3", "pool": 10, "d": 9})["pool"] == 10
    with pytest.raises(ConfigError, match="field 'd' = 8 does not match: data set 'toy3' gives 9"):
        resolve_env({"name": "classification", "dataset": "toy3", "d": 8})
    with pytest.raises(ConfigError, match="field 'pool' = 41 is more than the 40 rows of data set 'toy3'"):
        resolve_env({"name": "classification", "dataset": "toy3", "pool": 41})
    with pytest.raises(ConfigError, match="field 'data_sha256'.*files changed"):
        resolve_env({"name": "classification", "dataset": "toy3", "data_sha256": "0" * 64})
    with pytest.raises(DataError, match="download absent.csv from the moon"):
        resolve_env({"name": "classification", "dataset": "absent"})
    with pytest.raises(ConfigError, match="field 'dataset' must be one of"):
        resolve_env({"name": "classification", "dataset": "nope"})


def test_rounds_show_a_pool_row_as_disjoint_arms_and_pay_its_label(toy):
    env = make_env("classification", dataset="toy3", pool=25, draw="sequential")
    scaled = 2 * (FEATURES - FEATURES.min(0)) / (FEATURES.max(0) - FEATURES.min(0)) - 1  # per-column min–max
    state = env.reset(jax.random.PRNGKey(3))
    pool, labels = np.asarray(state.pool), np.asarray(state.labels)
    rows = [int(np.flatnonzero((scaled == r).all(1))[0]) for r in pool]
    assert len(set(rows)) == 25 and labels.tolist() == LABELS[rows].tolist()  # 25 distinct rows, their labels
    for t in (1, 2, 25, 26):
        ctx, mask = env.observe(state, jax.random.PRNGKey(t), t)
        x = pool[(t - 1) % 25]  # sequential: row t of the pool, from the start after the last
        assert ctx.shape == (3, 9) and bool(mask.all())
        for arm in range(3):
            assert np.flatnonzero(np.asarray(ctx[arm])).tolist() == [3 * arm + j for j in range(3) if x[j] != 0]
            np.testing.assert_array_equal(ctx[arm, 3 * arm:3 * arm + 3], x)
            assert float(env.pull(state, jax.random.PRNGKey(9), t, ctx, arm).reward) == (labels[(t - 1) % 25] == arm)
        np.testing.assert_array_equal(env.mean(state, ctx), np.eye(3)[labels[(t - 1) % 25]])


def test_uniform_draws_cover_the_pool_and_levels_are_fixed_per_seed(toy):
    env = make_env("classification", dataset="toy3", pool=5)
    state = env.reset(jax.random.PRNGKey(0))
    seen = {tuple(np.asarray(env.observe(state, None, t)[0][0, :3])) for t in range(1, 200)}
    assert seen == {tuple(r) for r in np.asarray(state.pool)}
    cats = make_env("classification", dataset="cats")
    a, b = (np.asarray(cats.reset(jax.random.PRNGKey(s)).pool) for s in (0, 1))
    for pool in (a, b):  # a level's value is drawn in [−1, 1] once per seed: equal levels, equal values
        order = np.argsort(pool[:, 0])  # the numeric column (1, 2, 3, 4 scaled) identifies the row
        by_row = pool[order]
        assert by_row[0, 1] == by_row[2, 1] and by_row[1, 1] == by_row[3, 1] and by_row[0, 1] != by_row[1, 1]
        assert by_row[0, 2] == by_row[1, 2] and by_row[2, 2] == by_row[3, 2]
        assert np.all(np.abs(by_row[:, 1:]) <= 1)
    assert not np.array_equal(np.sort(a[:, 1]), np.sort(b[:, 1]))


def test_shared_features_give_class_frequencies_as_means(toy):
    env = make_env("classification", dataset="twins", draw="sequential")  # rows (1, 2) labelled a, b, b
    state = env.reset(jax.random.PRNGKey(0))
    t = 1 + int(np.flatnonzero(np.asarray(state.pool)[:, 0] == -1)[0])  # a round that shows (1, 2)
    ctx, _ = env.observe(state, None, t)
    np.testing.assert_allclose(env.mean(state, ctx), [1 / 3, 2 / 3])


def test_regret_counts_mistakes_and_uniform_play_errs_at_rate_1_minus_1_over_k(toy):
    env = make_env("classification", dataset="toy3")
    policy, params = make_policy("uniform", nb.ProblemSpec(9, 3, 300))
    res = nb.simulate(env, policy, params, 300, range(20))
    # unique rows: a round's pseudo-regret is 1 − reward exactly
    np.testing.assert_allclose(res.cum_regret + res.cum_reward, np.broadcast_to(res.rounds, res.cum_regret.shape))
    final = res.cum_regret[:, -1]
    se = final.std(ddof=1) / np.sqrt(final.size)
    assert abs(final.mean() - 300 * 2 / 3) < 4 * se + 1e-9  # E = T(1 − 1/K); 4 SE


EXPERIMENT = """
title = "two data sets, one absent"
horizon = 20
seeds = 2
[[env]]
case = "here"
name = "classification"
dataset = "toy3"
[[env]]
case = "gone"
name = "classification"
dataset = "absent"
[[policies]]
label = "uniform"
name = "uniform"
[[policies]]
label = "greedy"
name = "greedy"
only = { case = "gone" }
[[claims]]
name = "fine"
text = "runs on the data set that is there"
check = "regret('uniform', case='here') <= T"
[[claims]]
name = "needs-absent"
text = "reads the absent one"
check = "regret('uniform', case='gone') <= T and regret('uniform', case='here') <= T"
[[claims]]
name = "decided-without"
text = "false on the case that ran, whatever the absent one gives"
check = "regret('uniform', case='here') > T and regret('uniform', case='gone') <= T"
expect = "fail"
"""


def test_a_case_whose_data_set_is_absent_is_reported_and_the_others_run(toy, capsys):
    path = toy / "exp.toml"
    path.write_text(EXPERIMENT)
    exp = load_experiment(path)
    assert list(exp.missing) == ["gone"] and "download absent.csv" in exp.missing["gone"]
    assert [(r.label, dict(r.case)["case"]) for r in exp.runs] == [("uniform", "here")]
    assert [bool(c.missing) for c in exp.claims] == [False, True, True]
    code = main(["check", str(path), "--scale", "full", "--db", str(toy / "r.duckdb"), "--out", str(toy / "rep"),
                 "--no-progress"])
    out = capsys.readouterr()
    assert code == 0 and "not run: case 'gone'" in out.err
    assert "PASS         fine" in out.out and "NOT CHECKED  needs-absent" in out.out
    assert "fails, as documented (expected) decided-without" in out.out and "decided without the cases not run" in out.out
    report = (toy / "rep" / "exp.md").read_text()
    assert "**Not run:** case `gone`: data set not available" in report and "toy3: 40 rows" in report


def test_cases_option_runs_the_named_cases_only_and_leaves_the_claims_on_the_others_unchecked(toy, capsys):
    path = toy / "exp.toml"
    path.write_text(EXPERIMENT.replace('dataset = "absent"', 'dataset = "cats"')
                    + '[scales.full]\ncases = ["gone"]\n')  # --cases overrides the scale's own list
    code = main(["check", str(path), "--scale", "full", "--cases", "here", "--db", str(toy / "r.duckdb"), "--out",
                 str(toy / "rep"), "--no-progress"])
    out = capsys.readouterr()
    assert code == 0 and "not run: case 'gone': not selected: --cases here" in out.err
    assert "PASS         fine" in out.out and "NOT CHECKED  needs-absent" in out.out
    assert "**Not run:** case `gone`: not selected" in (toy / "rep" / "exp.md").read_text()
    assert main(["check", str(path), "--cases", "here,nope", "--db", str(toy / "r.duckdb")]) == 2
    assert "--cases must name [[env]] cases" in capsys.readouterr().err


@pytest.fixture
def images(tmp_path, monkeypatch):
    """'img': 300 random 4 × 4 images in IDX files, classes 0, 1, 2 with frequencies 0.2, 0.3, 0.5, two of them
    identical with different classes."""
    from test_data import _idx

    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (300, 4, 4))
    labels = np.repeat([0, 1, 2], [60, 90, 150])
    pixels[1] = pixels[0]
    labels[1] = 2  # rows 0 and 1 share their pixels: classes 0 and 2
    src = FileSource(("img-images", "img-labels"), "nowhere", Reader("idx"), "images")
    monkeypatch.setitem(sources.SOURCES, "img", src)
    src.folder("img").mkdir(parents=True)
    x, y = _idx(pixels, labels)
    (src.folder("img") / "img-images").write_bytes(x)
    (src.folder("img") / "img-labels").write_bytes(y)
    return pixels.reshape(300, 16) / 255.0, labels


def test_target_class_means_follow_the_labels_of_the_shown_examples(images):
    x, labels = images
    c = resolve_env({"name": "target-class", "dataset": "img", "k": 4, "target": 2})
    assert c["d"] == 16
    env = make_env(**c)
    state = env.reset(jax.random.PRNGKey(0))
    twin = np.array([0.5 * 0.25 + 0.5 * 0.75])  # pixels of rows 0 and 1: one of class 0, one of class 2
    for t in range(1, 40):
        ctx, _ = env.observe(state, None, t)
        rows = [int(np.flatnonzero((x == r).all(1))[0]) for r in np.asarray(ctx)]
        assert len(set(rows)) == 4  # distinct within the round
        want = np.where(labels[rows] == 2, 0.75, 0.25)
        want[np.isin(rows, [0, 1])] = twin
        np.testing.assert_allclose(env.mean(state, ctx), want)
    with pytest.raises(ConfigError, match="field 'target' = 3 is not a class index"):
        resolve_env({"name": "target-class", "dataset": "img", "target": 3})
    with pytest.raises(ConfigError, match="field 'k' = 301 is more than the 300 rows"):
        resolve_env({"name": "target-class", "dataset": "img", "k": 301})


def test_target_class_uniform_and_oracle_values_match_spec_002(images):
    # Spec 002 §6.3 item 17: uniform play earns p_miss + (p_hit − p_miss)·p_c; the best arm's mean averages
    # p_hit − (p_hit − p_miss)·P(no class-c example among the K) (hypergeometric: K distinct of n).
    from math import comb

    env = make_env("target-class", dataset="img", k=4, target=0)
    policy, params = make_policy("uniform", nb.ProblemSpec(16, 4, 400))
    res = nb.simulate(env, policy, params, 400, range(30))
    reward = res.cum_reward[:, -1] / 400
    assert abs(reward.mean() - (0.25 + 0.5 * 0.2)) < 4 * reward.std(ddof=1) / np.sqrt(30)
    state = env.reset(jax.random.PRNGKey(5))
    best = jax.vmap(lambda t: env.mean(state, env.observe(state, None, t)[0]).max())(jax.numpy.arange(1, 4001))
    expected_best = 0.75 - 0.5 * comb(240, 4) / comb(300, 4)  # ± 0.5·sd(Bernoulli)/√4000 ≈ 0.004
    assert abs(float(best.mean()) - expected_best) < 0.016


def test_row_hashes_agree_between_numpy_and_jax():
    from nlbandit.envs.target import row_hashes

    x = np.random.default_rng(2).normal(size=(50, 33))
    np.testing.assert_array_equal(np.asarray(row_hashes(jax.numpy.asarray(x))), row_hashes(x))
    assert np.unique(row_hashes(x)).size == 50


STRATIFIED_DATA = """
title = "data sets as strata"
horizon = 20
seeds = 4
[[env]]
case = "both"
name = "classification"
dataset = ["toy3", "twins"]
strata = "dataset"
[[policies]]
label = "uniform"
name = "uniform"
[[claims]]
name = "bounded"
text = "regret at most T"
check = "regret('uniform', case='both') <= T"
"""


def test_data_sets_as_strata_are_reported_as_one_case_and_refused_together_when_one_is_absent(toy, capsys):
    # a pooled run's environment holds the list of data sets: the report's data lines read its parts' (it crashed)
    path = toy / "exp.toml"
    path.write_text(STRATIFIED_DATA)
    assert [(dict(r.case)["dataset"], list(r.seeds)) for r in load_experiment(path).runs] == [
        ("toy3", [0, 1]), ("twins", [2, 3])]
    assert main(["check", str(path), "--db", str(toy / "r.duckdb"), "--out", str(toy / "rep"), "--no-progress"]) == 0
    report = (toy / "rep" / "exp.md").read_text()
    assert "toy3: 40 rows" in report and "twins: 4 rows" in report and "(2 computations)" in report
    assert "dataset=toy3 |" not in report and "dataset=['toy3', 'twins']" in report
    # half a stratified case is not run: the whole case is missing (its present half ran as 'case=both' on 2 seeds)
    path.write_text(STRATIFIED_DATA.replace('"twins"]', '"absent"]'))
    exp = load_experiment(path)
    assert exp.runs == [] and list(exp.missing) == ["both"] and exp.claims[0].missing
