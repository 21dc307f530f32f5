"""Results never outlive their code (issue 12 §1): runs are keyed by a hash of the source that computes
them, so an edited policy's runs are recomputed and the others are reused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

import nlbandit
from nlbandit.experiments.results import annotated_runs, prune_stale, revalidate
from nlbandit.experiments.spec import run_code
from nlbandit.provenance import module_closure, normalised_source
from nlbandit.store import Store

EXPERIMENT = """
horizon = 30
seeds = 2
[env]
name = "linear"
d = 3
k = 4
[[policies]]
label = "UCB"
name = "lin-ucb"
[[policies]]
label = "uniform"
name = "uniform"
"""

RUN = """
import sys
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.store import Store
exp = load_experiment(sys.argv[1])
with Store(sys.argv[2]) as store:
    print(run_experiment(exp, store, progress=False, log=lambda m: None))
"""


STORED = dict(experiment="p/e", label="L", rounds=np.array([1]), version="0",
              curves={"regret": np.zeros((1, 1)), "reward": np.zeros((1, 1))}, arms=np.zeros((1, 1), np.int32),
              compile_s=0.0, run_s=0.0, chunk_size=1, chunk_seconds=[0.0], batch_size=1)
"""A stored run's fields other than its id and identity."""
IDENTITY = {"env": {"name": "linear"}, "policy": {"name": "lin-ucb"}, "n_seeds": 1}


def _package_copy(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    shutil.copytree(Path(nlbandit.__file__).parent, src / "nlbandit", ignore=shutil.ignore_patterns("__pycache__"))
    return src


def _run(src: Path, exp: Path, db: Path) -> int:
    out = subprocess.run([sys.executable, "-c", RUN, str(exp), str(db)], env={"PYTHONPATH": str(src)},
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


def test_closure_follows_imports_but_not_package_reexports():
    closure = module_closure(["nlbandit.policies.linear"])
    assert {"nlbandit.models.ridge", "nlbandit.policies.exploration", "nlbandit.core.keys", "nlbandit"} <= set(closure)
    assert "nlbandit.policies.glm" not in closure  # the package root re-exports it, but is not followed
    assert "nlbandit.report.build" not in closure


def test_editing_one_policy_recomputes_its_runs_only(tmp_path, experiment_file):
    src = _package_copy(tmp_path)
    exp, db = experiment_file(EXPERIMENT), tmp_path / "r.duckdb"
    assert _run(src, exp, db) == 2
    assert _run(src, exp, db) == 0  # unchanged code: every run reused
    linear = src / "nlbandit" / "policies" / "linear.py"
    linear.write_text(linear.read_text() + "\n_EDITED = 1\n")
    assert _run(src, exp, db) == 1  # only LinUCB's run is recomputed (uniform play is in baselines.py)


MODULE = '''"""A module."""
import math

SCALE = 2.0
"""The scale."""


def f(x):
    """Twice x."""
    if x < 0:
        raise ValueError(f"x must be >= 0, got {x}")
    assert math.isfinite(x), "x must be finite"
    return SCALE * x
'''


def test_hash_ignores_docstrings_comments_formatting_and_messages(tmp_path):
    """What cannot change a number (docstrings, comments, line breaks, the text of an error) keeps the key; a
    changed statement, constant or name changes it, and so does a changed exception type."""
    def normalised(text: str) -> bytes:
        path = tmp_path / "m.py"
        path.write_text(text)
        return normalised_source(path)

    base = normalised(MODULE)
    cosmetic = (MODULE.replace('"""A module."""', '"""A module, described at length."""')
                .replace('"""The scale."""', "")
                .replace('"""Twice x."""', "# twice x")
                .replace("return SCALE * x", "return (SCALE\n            * x)  # the result")
                .replace("x must be >= 0, got {x}", "x must not be negative (got {x})")
                .replace('"x must be finite"', '"x is not finite"'))
    assert cosmetic != MODULE and normalised(cosmetic) == base
    for edit in (("SCALE = 2.0", "SCALE = 2.5"), ("SCALE * x", "x * SCALE"), ("x < 0", "x <= 0"),
                 ("raise ValueError", "raise TypeError"), ("math.isfinite(x)", "x == x")):
        assert normalised(MODULE.replace(*edit)) != base, edit


def test_package_reexports_are_not_hashed_but_its_other_statements_are(tmp_path, experiment_file):
    """Exporting another name from the package root (an import, ``__all__``, the docstring) recomputes nothing;
    a statement that runs on import (here a configuration call) recomputes every run."""
    src = _package_copy(tmp_path)
    exp, db = experiment_file(EXPERIMENT), tmp_path / "r.duckdb"
    assert _run(src, exp, db) == 2
    root = src / "nlbandit" / "__init__.py"
    text = root.read_text()
    root.write_text(text.replace('"""nlbandit:', '"""nlbandit (edited):', 1).replace(
        "__all__ = [", "from nlbandit.store import Store  # noqa: E402\n\n__all__ = [\n    \"Store\","))
    assert _run(src, exp, db) == 0
    root.write_text(root.read_text() + "\n_jax.config.update(\"jax_default_matmul_precision\", \"highest\")\n")
    assert _run(src, exp, db) == 2


def test_stale_runs_are_listed_and_pruned(tmp_path):
    with Store(tmp_path / "r.duckdb") as store:
        rows, ident = STORED, IDENTITY
        store.save_runs("b", [
            {**rows, "label": "current", "config": {**ident, "code": run_code("lin-ucb", "linear")}},
            {**rows, "label": "old-code", "config": {**ident, "code": "0" * 16}},
            {**rows, "label": "no-code", "config": ident},
            {**rows, "label": "gone", "config": {**ident, "policy": {"name": "removed"}, "code": "1" * 16}},
        ])
        assert {r["label"]: r["current"] for r in annotated_runs(store)} == {
            "current": True, "old-code": False, "no-code": False, "gone": False}
        assert sorted(r["label"] for r in prune_stale(store)) == ["gone", "no-code", "old-code"]
        assert [r["label"] for r in store.index()] == ["current"]


def test_results_command_lists_and_prunes(tmp_path, capsys):
    from nlbandit.cli import main

    db = tmp_path / "r.duckdb"
    assert main(["results", "--db", str(db)]) == 2  # no database yet: a clear error
    with Store(db) as store:
        rows, ident = STORED, IDENTITY
        store.save_runs("b", [{**rows, "label": "fresh", "config": {**ident, "code": run_code("lin-ucb", "linear")}},
                              {**rows, "label": "old", "config": {**ident, "code": "0" * 16}}])
    capsys.readouterr()
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "fresh (1 seeds [0] x 1 rounds)" in out and "old (1" in out and "1 current, 1 stale" in out
    assert main(["results", "prune", "--db", str(db)]) == 0
    assert "pruned 1 stale series" in capsys.readouterr().out
    with Store(db) as store:
        assert [r["label"] for r in store.index()] == ["fresh"]
        for noise in (0.1, 0.5):  # one label on two environment cases: told apart (they read the same)
            env = {"name": "linear", "noise_std": noise}
            store.save_runs(f"c{noise}", [{**rows, "label": "cased", "config": {**ident, "env": env, "code": "0"}}])
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "p/e: cased [noise_std=0.1] (1 seeds" in out and "p/e: cased [noise_std=0.5] (1 seeds" in out
    assert "p/e: fresh (1 seeds" in out
    with Store(db) as store:  # and a file edited since (a hyperparameter), and quick against full scale
        for label, policy, xla in (("edited", {"name": "lin-ts", "v": 0.3}, ""),
                                   ("edited", {"name": "lin-ts", "v": 0.5}, ""),
                                   ("scaled", {"name": "lin-ts"}, ""), ("scaled", {"name": "lin-ts"}, "--flag")):
            store.save_runs(f"{label}{policy.get('v')}{xla}", [{**rows, "label": label, "config": {
                **ident, "policy": policy, "xla": xla, "code": "0"}}])
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "p/e: edited [v=0.3] (1" in out and "p/e: edited [v=0.5] (1" in out
    assert "p/e: scaled [xla=''] (1" in out and "p/e: scaled [xla='--flag'] (1" in out
    with Store(db) as store:  # an interrupted batch's progress: shown, and deleted by prune --checkpoints only
        store.save_checkpoint("unfinished", 6000, b"x" * 2_000_000)  # (its batch not named: as before names)
        store.name_batches({"named": "p/e: A, B (seeds 0-4)"})
        store.save_checkpoint("named", 300, b"y" * 500_000)
    assert main(["results", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "2 checkpoint(s) of batches that never finished (2.5 MB; the command that started each resumes it" in out
    assert "\n  p/e: A, B (seeds 0-4) at round 300\n" in out
    assert "\n  a batch (saved before checkpoints named their batch) at round 6000\n" in out
    assert main(["results", "prune", "--db", str(db)]) == 0 and main(["results", "--db", str(db)]) == 0
    assert "2 checkpoint(s)" in capsys.readouterr().out
    assert main(["results", "--checkpoints", "--db", str(db)]) == 2
    assert main(["results", "prune", "--checkpoints", "--db", str(db)]) == 0
    assert "and 2 checkpoint(s) of unfinished batches" in capsys.readouterr().out
    with Store(db) as store:
        assert store.checkpoints() == []


def test_revalidate_compiles_with_the_quick_flags_when_every_stale_run_recorded_them(tmp_path, monkeypatch):
    """Runs made at the quick scale (the default) record its XLA flags and can be recomputed only under them:
    revalidate set them itself where every stale run has them (it left each stale, asking for XLA_FLAGS)."""
    import nlbandit.cli as cli
    from nlbandit.compile_flags import QUICK_SCALE

    calls = []
    monkeypatch.setattr(cli, "compile_quick_scale", lambda: calls.append(1) or True)
    quick = {**IDENTITY, "code": "0" * 16, "xla": " ".join(reversed(QUICK_SCALE))}
    with Store(tmp_path / "r.duckdb") as store:
        store.save_runs("a", [{**STORED, "config": quick}])
        cli._compile_as_stored(annotated_runs(store), None)
        assert calls == [1]
        store.save_runs("b", [{**STORED, "label": "M", "config": {**quick, "xla": ""}}])
        cli._compile_as_stored(annotated_runs(store), None)  # mixed: each is left to its own flags (the message says)
        cli._compile_as_stored(annotated_runs(store), ["p/other"])  # none selected
        assert calls == [1]


def test_revalidate_adopts_runs_whose_sampled_seeds_match_and_leaves_others_stale(tmp_path, experiment_file, capsys):
    """Runs stored under an older code hash: those whose first and last seed compute the same arms and curves now
    are re-keyed (and not recomputed by the next run of the experiment); one whose stored arms differ stays stale."""
    from nlbandit.cli import main
    from nlbandit.experiments.runner import run_experiment
    from nlbandit.experiments.plan import load_experiment

    exp = load_experiment(experiment_file(EXPERIMENT.replace("seeds = 2", "seeds = 3")))
    db = tmp_path / "r.duckdb"
    with Store(db) as store:
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        current = {r.label: r.series_id for r in exp.runs}
        for row in store.index():  # as if computed by an older version of the code
            assert store.adopt(row["series_id"], "old-" + row["series_id"], {**row["config"], "code": "0" * 16})
        store.con.execute("UPDATE seeds SET arms = list_transform(arms, lambda a: (a + 1) % 4) WHERE series_id = ? "
                          "AND seed = 2", ["old-" + current["uniform"]])  # the last seed's stored arms differ
    capsys.readouterr()
    assert main(["results", "revalidate", "--db", str(db), "--experiment", "paper/ee"]) == 2  # (a typo did nothing)
    err = capsys.readouterr().err
    assert "--experiment 'paper/ee': " in err and "holds no runs of it; it holds paper/e" in err
    assert main(["results", "prune", "--db", str(db), "--experiment", "paper/e"]) == 2
    assert "'prune' takes the whole database" in capsys.readouterr().err
    assert main(["results", "revalidate", "--db", str(db), "--experiment", "paper/e"]) == 0
    out = capsys.readouterr().out
    assert "1 stale series adopted under the current code, 1 left stale" in out
    assert "uniform" in out and "differ from the stored ones" in out
    with Store(db) as store:
        runs = {r["series_id"]: r for r in annotated_runs(store)}
        assert {current["UCB"], "old-" + current["uniform"]} == set(runs)
        assert runs[current["UCB"]]["current"] and not runs["old-" + current["uniform"]]["current"]
        assert runs[current["UCB"]]["config"]["adopted_from"] == {"series_id": "old-" + current["UCB"],
                                                                  "code": "0" * 16}
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 1  # only the stale one


def test_revalidate_keys_a_run_stored_before_a_hyperparameter_existed_as_the_file_does(tmp_path, experiment_file):
    """A run stored before its policy had a hyperparameter (its stored configuration lacks ``lam``, whose default
    keeps the former numbers) is adopted under the series id the experiment file computes now, so the next run
    of the file finds it (before, it was recomputed from its configuration as stored: left stale where the policy
    needs the new field, here; re-keyed without it where the policy reads a default, Sun's MLP biases, 2026-11-26;
    either way the file computed it again)."""
    from nlbandit.experiments.runner import run_experiment
    from nlbandit.experiments.plan import load_experiment

    exp = load_experiment(experiment_file(EXPERIMENT))
    with Store(tmp_path / "r.duckdb") as store:
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        for row in store.index():
            policy = {k: v for k, v in row["config"]["policy"].items() if k != "lam"}
            assert store.adopt(row["series_id"], "old-" + row["series_id"],
                               {**row["config"], "policy": policy, "code": "0" * 16})
        adopted, stale = revalidate(store, log=lambda m: None)
        assert len(adopted) == 2 and not stale
        assert {r["series_id"] for r in store.index()} == {r.series_id for r in exp.runs}
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0


def test_revalidate_recomputes_a_grid_as_one_batch(tmp_path, experiment_file, monkeypatch):
    """The stale points of a policy's grid are recomputed side by side, one batch (one compilation), and each is
    adopted: a grid of three α values of LinUCB and uniform play make two batches."""
    from nlbandit.experiments.runner import run_experiment
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.loops import LOOPS

    text = EXPERIMENT.replace('name = "lin-ucb"\n', 'name = "lin-ucb"\nwidth = "constant"\nalpha = [0.5, 1.0, 2.0]\n')
    exp = load_experiment(experiment_file(text))
    with Store(tmp_path / "r.duckdb") as store:
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 4
        for row in store.index():
            assert store.adopt(row["series_id"], "old-" + row["series_id"], {**row["config"], "code": "0" * 16})
        loop, batches = LOOPS["bandit"], []
        compute = loop.compute
        monkeypatch.setattr(loop, "compute", lambda batch, seeds, **kw: batches.append(len(batch))
                            or compute(batch, seeds, **kw))
        adopted, stale = revalidate(store, log=lambda m: None)
    assert sorted(batches) == [1, 3] and len(adopted) == 4 and not stale


def test_revalidate_recomputes_beside_the_other_seeds_where_the_two_alone_differ(tmp_path, experiment_file,
                                                                                 monkeypatch):
    """A float32 network can round otherwise over 2 seeds than over S and choose another arm at a near-tie: a
    series whose first and last seed differ computed alone (an arm moved here) but not beside its other seeds is
    adopted; one that differs both ways stays stale."""
    from nlbandit.experiments.plan import load_experiment
    from nlbandit.experiments.runner import run_experiment
    from nlbandit.loops.bandit import BanditLoop
    from test_runlist import rounding

    exp = load_experiment(experiment_file(EXPERIMENT.replace("seeds = 2", "seeds = 3")))
    real = BanditLoop.compute
    for alone_only, adopted_count in ((True, 2), (False, 0)):
        with Store(tmp_path / f"{alone_only}.duckdb") as store:
            assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
            for row in store.index():
                assert store.adopt(row["series_id"], "old-" + row["series_id"], {**row["config"], "code": "0" * 16})
            monkeypatch.setattr(BanditLoop, "compute", rounding(alone_only))
            adopted, stale = revalidate(store, log=lambda m: None)
            monkeypatch.setattr(BanditLoop, "compute", real)
        assert len(adopted) == adopted_count and len(stale) == 2 - adopted_count


def test_revalidate_recomputes_beside_a_series_own_seeds_where_they_are_not_contiguous(tmp_path, experiment_file,
                                                                                     monkeypatch):
    """A series whose stored seeds are not contiguous (a tuned series' 0-2 and 1000000000..., or 0-2 and 10-12
    here) is recomputed beside exactly those seeds where its first and last differ computed alone: adopted (it
    once computed seeds 0-5, never stored, and left the series stale: '10 is not in list')."""
    from dataclasses import replace

    from nlbandit.experiments.plan import load_experiment
    from nlbandit.experiments.runner import run_experiment
    from nlbandit.loops.bandit import BanditLoop
    from test_runlist import rounding

    exp = load_experiment(experiment_file(EXPERIMENT.replace("seeds = 2", "seeds = 3")))
    later = replace(exp, runs=[replace(r, seed_offset=10) for r in exp.runs])
    with Store(tmp_path / "r.duckdb") as store:
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        assert run_experiment(later, store, progress=False, log=lambda m: None) == 2
        for row in store.index():
            assert row["seeds"] == [0, 1, 2, 10, 11, 12]
            assert store.adopt(row["series_id"], "old-" + row["series_id"], {**row["config"], "code": "0" * 16})
        seen = []
        real = rounding(alone_only=True)
        monkeypatch.setattr(BanditLoop, "compute", lambda self, batch, seeds, **kw: (
            seen.append(list(seeds)), real(self, batch, seeds, **kw))[1])
        adopted, stale = revalidate(store, log=lambda m: None)
    assert (len(adopted), stale) == (2, [])
    assert [0, 1, 2, 10, 11, 12] in seen and all(s in ([0, 12], [0, 1, 2, 10, 11, 12]) for s in seen), seen
