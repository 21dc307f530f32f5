"""The CLI end to end on a tiny experiment: run → database → report → check; skip; resume after a kill; a
folder of experiments; ``list`` names every registered policy and environment."""

import os
import re
import signal
import subprocess
import sys
import numpy as np
import pytest

from nlbandit import machine
from nlbandit.cli import main
from nlbandit.experiments.runner import missing, run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.provenance import package_hash
from nlbandit.store import Store

TINY = """
title = "tiny"
horizon = 400
seeds = 3

[scales.quick]
horizon = 300

[env]
name = "linear"
d = 4
k = 6

[[policies]]
label = "ES"
name = "lin-es"
m = 4
sigma_r = 0.5

[[policies]]
label = "TS"
name = "lin-ts"
v = [0.2, 0.5]

[[policies]]
label = "U"
name = "uniform"

[[claims]]
name = "learns"
text = "ES beats uniform"
check = "regret('ES') <= 0.8 * regret('U')"
"""


@pytest.fixture()
def tiny(tmp_path):
    path = tmp_path / "exp" / "tiny.toml"
    path.parent.mkdir()
    path.write_text(TINY)
    return path


def test_run_report_check(tiny, tmp_path, capsys):
    db, out = tmp_path / "r.duckdb", tmp_path / "rep"
    assert main(["run", str(tiny), "--db", str(db), "--out", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "TS [v=0.2]" in text and "PASS" in text
    md = (out / "tiny.md").read_text()
    assert "nlbandit report" in md and "| ES |" in md and "learns" in md
    assert f"source hash {package_hash()}" in md and f"(code {load_experiment(tiny).runs[0].code})" in md
    assert f"(CPU {machine.describe()}; source hash" in md
    assert (out / "tiny.png").read_bytes()[:4] == b"\x89PNG"
    with Store(db) as store:
        exp = load_experiment(tiny, "quick")
        assert missing(store, exp.runs).todo == []
        stored = store.load(exp.runs[0].series_id, exp.runs[0].seeds, with_arms=True)
        assert stored.cum_regret.shape[0] == 3 and stored.rounds[-1] == 300 and stored.arms.shape == (3, 300)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0  # all finished: skipped
        stored = [store.load(r.series_id, r.seeds) for r in exp.runs]
    # Each batch's time once: the runs of one batch share its (compile_s, run_s).
    minutes = sum(c + r for c, r in {(s.compile_s, s.run_s) for s in stored}) / 60
    assert f"3 seeds (repetitions; seeds 0..2, common random numbers across policies); {minutes:.1f} min" in md
    # Fewer repetitions than the full scale's: the report says so.
    assert main(["report", str(tiny), "--seeds", "2", "--db", str(db), "--out", str(out), "--no-progress"]) == 0
    assert "2 of the full scale's 3 seeds (repetitions; seeds 0..1" in (out / "tiny.md").read_text()
    assert main(["check", str(tiny), "--db", str(db), "--out", str(out), "--no-progress"]) == 0
    # A claim that does not hold makes `check` fail (exit 1):
    tiny.write_text(TINY.replace("0.8 * regret('U')", "0.001 * regret('U')"))
    assert main(["check", str(tiny), "--db", str(db), "--out", str(out), "--no-progress"]) == 1
    # --scale full is a different configuration (horizon 400): new runs, not the cached quick ones.
    with Store(db) as store:
        full = load_experiment(tiny, "full")
        assert missing(store, full.runs).todo == full.runs


KILLER = """
import os, signal, sys
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.store import Store

exp = load_experiment(sys.argv[1], "quick")
store = Store(sys.argv[2])

def die(progress):
    if progress.t_done >= 200:
        os.kill(os.getpid(), signal.SIGKILL)

run_experiment(exp, store, progress=False, chunk_size=100, on_checkpoint=die)
"""


def test_resume_after_killed_run(tiny, tmp_path):
    db = tmp_path / "k.duckdb"
    proc = subprocess.run([sys.executable, "-c", KILLER, str(tiny), str(db)], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    exp = load_experiment(tiny, "quick")
    logs = []
    with Store(db) as store:
        assert store.con.execute("SELECT max(t_done) FROM checkpoints").fetchone()[0] == 200
        # the checkpoint says which batch it is (the file, the batch's labels and seeds)
        whats = [what for *_, what in store.checkpoints()]
        labels = {r.label for r in exp.runs}
        assert whats and all(w.startswith(f"{exp.paper}/{exp.name}: ") and w.endswith(f"(seeds 0-{exp.n_seeds - 1})")
                             and set(w.split(": ", 1)[1].split(" (seeds")[0].split(", ")) <= labels for w in whats)
        run_experiment(exp, store, progress=False, chunk_size=100, log=logs.append)
        resumed = {r.run_id: store.load(r.series_id, r.seeds, with_arms=True) for r in exp.runs}
    assert any("resuming at round 200" in m for m in logs), logs
    with Store(tmp_path / "clean.duckdb") as store:
        run_experiment(exp, store, progress=False, chunk_size=100, log=lambda m: None)
        for r in exp.runs:
            clean = store.load(r.series_id, r.seeds, with_arms=True)
            np.testing.assert_array_equal(resumed[r.run_id].arms, clean.arms)
            np.testing.assert_array_equal(resumed[r.run_id].cum_regret, clean.cum_regret)


def test_list_names_every_registered_policy_and_env(capsys):
    from nlbandit.envs.registry import ENVS
    from nlbandit.policies.registry import POLICIES

    assert main(["list"]) == 0
    sections: dict[str, list[str]] = {}
    columns: dict[str, set[int]] = {}
    for line in capsys.readouterr().out.splitlines():
        if not line.startswith(" "):  # a section header: "policies (...):", "environments:", ...
            section = line.split(" ")[0].rstrip(":")
            current, column = sections.setdefault(section, []), columns.setdefault(section, set())
        elif line[2] != " ":  # "  <name>  <doc>"; the hyperparameter line below it is indented further
            current.append(line.split()[0])
            if section != "experiments":  # (a path a line)
                column.add(len(line) - len(line[2:].split(" ", 1)[1].lstrip()))  # where the doc starts
        else:
            column.add(len(line) - len(line.lstrip()))  # where the hyperparameters start
    assert sections["policies"] == list(POLICIES)
    assert sections["environments"] == list(ENVS)
    # each section in two aligned columns, however long its names (neurallog-ucb-1 pushed its doc out of line)
    assert all(len(found) == 1 for name, found in columns.items() if name != "experiments"), columns


def test_main_job_command_is_installed():
    # The README's main job uses the console script; it must exist in the environment.
    exe = os.path.join(os.path.dirname(sys.executable), "nlbandit")
    assert subprocess.run([exe, "list", "policies"], capture_output=True).returncode == 0


def test_version_names_the_package_jax_python_and_the_cpu(capsys):
    """``nlbandit --version``: one line, exit 0, with the versions the installed metadata gives and the CPU."""
    from importlib import metadata

    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out == (f"nlbandit {metadata.version('nlbandit')} (jax {metadata.version('jax')}, jaxlib "
                   f"{metadata.version('jaxlib')}, Python {sys.version.split()[0]}; {machine.describe()})\n")


def test_claim_statistics_match_numpy(tiny, tmp_path):
    # regret/std/increment with mean and median, against NumPy on the stored per-seed curves.
    from nlbandit.report.build import check_claims, load_rows

    exp = load_experiment(tiny, "quick")
    with Store(tmp_path / "s.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        rows = load_rows(exp, store)
    es = next(r.stored for r in rows if r.run.label == "ES")
    mid = np.searchsorted(es.rounds, 150)
    exp.claims[:] = [type(exp.claims[0])("x", "", "regret('ES') + std('ES') + increment('ES', 150, T, stat='median')"
                                        " + regret('ES', t=150, stat='median') > 0", "pass")]
    values = dict(check_claims(exp, rows)[0].values)
    final = es.cum_regret[:, -1]
    assert values["regret('ES')"] == pytest.approx(final.mean(), rel=1e-12)
    assert values["std('ES')"] == pytest.approx(final.std(ddof=1), rel=1e-12)
    assert values["increment('ES', 150, T, stat='median')"] == pytest.approx(np.median(final - es.cum_regret[:, mid]))
    assert values["regret('ES', t=150, stat='median')"] == pytest.approx(np.median(es.cum_regret[:, mid]))


def test_growth_stuck_se_runtime_match_numpy(tiny, tmp_path):
    # growth (ρ_late of the mean curve), stuck (per-seed ρ_late > threshold), se, runtime, sqrt and **.
    from nlbandit.report.build import check_claims, load_rows

    exp = load_experiment(tiny, "quick")
    with Store(tmp_path / "s.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        rows = load_rows(exp, store)
    row = next(r for r in rows if r.run.label == "ES")
    es = row.stored
    half = es.cum_regret[:, np.searchsorted(es.rounds, exp.horizon / 2, side="right") - 1]
    final = es.cum_regret[:, -1]
    ts = next(r.stored for r in rows if r.run.label == "TS [v=0.2]")  # (a batch of two: its time is shared)
    exp.claims[:] = [type(exp.claims[0])("x", "", "growth('ES') + stuck('ES', threshold=0.3) + se('ES') + "
                                        "runtime('ES') + runtime('TS [v=0.2]') + sqrt(4) ** 2 > 0", "pass")]
    values = dict(check_claims(exp, rows)[0].values)
    assert values["growth('ES')"] == pytest.approx((final.mean() - half.mean()) / half.mean(), rel=1e-12)
    assert values["stuck('ES', threshold=0.3)"] == pytest.approx(np.mean(final - half > 0.3 * half))
    assert values["se('ES')"] == pytest.approx(final.std(ddof=1) / np.sqrt(final.size), rel=1e-12)
    # runtime: the batch's run seconds per seed-round in µs, from the stored seconds (not the report's own helper)
    assert (exp.horizon, len(es.seeds), es.batch_size, ts.batch_size) == (300, 3, 1, 2) and es.run_s > 0
    assert values["runtime('ES')"] == pytest.approx(1e6 * es.run_s / (300 * 3), rel=1e-12)
    assert values["runtime('TS [v=0.2]')"] == pytest.approx(1e6 * ts.run_s / (300 * 3 * 2), rel=1e-12)


FOLDER_EXP = """
horizon = 30
seeds = 2
record_points = {points}

[env]
name = "linear"
d = 2
k = 3

[[policies]]
label = "U"
name = "uniform"

[[claims]]
name = "{claim}"
check = "{check}"
"""


def test_machine_describes_the_cpu_model_vector_extension_and_cores():
    """The timing's machine from /proc/cpuinfo's first model name, family, model and flags (fixed texts here), the
    widest of AVX-512 and AVX2, and the cores this process may use."""
    cores = len(os.sched_getaffinity(0))
    plural = "s" if cores != 1 else ""
    info = "processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: fpu sse2 avx2 avx512f\n\nmodel name\t: Other\n"
    assert machine.describe(info) == f"Some CPU, AVX-512, {cores} core{plural}"
    assert machine.describe(info.replace(" avx512f", "")) == f"Some CPU, AVX2, {cores} core{plural}"
    assert machine.describe(info.replace(" avx2 avx512f", "")) == f"Some CPU, no AVX2, {cores} core{plural}"
    assert machine.describe("model name: X\n").startswith("X, extensions unknown, ")
    numbered = "cpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nflags\t: avx2\nmodel\t\t: 1\n"
    assert machine.describe(numbered) == f"AMD EPYC (family 25, model 17), AVX2, {cores} core{plural}"


def test_check_a_folder(tmp_path, capsys):
    # Every *.toml below the folder (sorted, recursively), each with its name, claims and worker seconds, then a
    # summary of those and the verdicts with the total wall time; reports in <out>/<paper>/; exit 1 as a claim fails.
    folder = tmp_path / "exps"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.toml").write_text(FOLDER_EXP.format(points=10, claim="nonnegative", check="regret('U') >= 0"))
    b = folder / "sub" / "b.toml"  # another run (record_points), the same compiled program
    b.write_text(FOLDER_EXP.format(points=20, claim="negative", check="regret('U') < 0"))
    db, out = tmp_path / "r.duckdb", tmp_path / "rep"
    argv = ["check", str(folder), "--db", str(db), "--out", str(out), "--no-progress"]
    assert main(argv) == 1
    text = capsys.readouterr().out
    a = folder / "a.toml"
    order = [f"== {a}\n", "PASS         nonnegative", f"{a}: ", f"== {b}\n", "FAIL         negative", f"{b}: "]
    assert [text.index(s) for s in order] == sorted(text.index(s) for s in order), text
    per_file = [float(m) for m in re.findall(r": (\d+\.\d) s of worker time\n", text)]
    summary = re.findall(r"\n(\S+) +(\d+\.\d)  (.*)", text[text.index("\nexperiment "):])
    assert [(name, verdicts) for name, _, verdicts in summary] == [
        (str(a), "1 PASS"), (str(b), "1 FAIL"), ("TOTAL", f"wall time of 2 file(s) on {machine.describe()}")]
    assert [float(seconds) for _, seconds, _ in summary[:2]] == per_file and per_file[0] > 0  # (a compiles)
    assert float(summary[-1][1]) >= max(per_file)
    assert (out / "exps" / "a.md").is_file() and (out / "sub" / "b.md").is_file()
    # All claims hold: exit 0 (the runs are in the database already; nothing is simulated again).
    b.write_text(FOLDER_EXP.format(points=20, claim="nonnegative", check="regret('U') >= 0"))
    assert main(argv) == 0
    assert "run(s) already in" in capsys.readouterr().err
    # One invalid file anywhere: exit 2 before anything is simulated (no database is created).
    (folder / "z.toml").write_text("horizon = 0")
    fresh = tmp_path / "fresh.duckdb"
    assert main(["check", str(folder), "--db", str(fresh), "--out", str(out), "--no-progress"]) == 2
    assert "z.toml" in capsys.readouterr().err and not fresh.exists()


def test_runs_a_runtime_claim_reads_are_timed_alone(tiny, tmp_path):
    # Lin-TS's v grid is one batch of two; once a claim reads one point's time, that point is computed
    # again alone (same arms) and its stored time is its own; the other point keeps its batch.
    from nlbandit.experiments.claims import timed_runs

    exp = load_experiment(tiny, "quick")
    ts = [r for r in exp.runs if r.policy["name"] == "lin-ts"]
    with Store(tmp_path / "t.duckdb") as store:
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == len(exp.runs)
        before = {r.run_id: store.load(r.series_id, r.seeds, with_arms=True) for r in ts}
        assert {s.batch_size for s in before.values()} == {2}
        claim = type(exp.claims[0])("t", "", f"runtime({ts[0].label!r}) > 0\nand 1 > 0", "pass")  # two lines
        exp.claims[:] = [claim]
        assert timed_runs(exp) == {ts[0].run_id}
        logs: list[str] = []
        assert run_experiment(exp, store, progress=False, log=logs.append) == 1
        assert any("computed again in a batch of one" in m for m in logs)
        after = {r.run_id: store.load(r.series_id, r.seeds, with_arms=True) for r in ts}
        assert after[ts[0].run_id].batch_size == 1 and after[ts[1].run_id].batch_size == 2
        np.testing.assert_array_equal(after[ts[0].run_id].arms, before[ts[0].run_id].arms)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0  # now stored alone
    exp.claims[:] = [type(claim)("t", "", "runtime(label) > 0", "pass")]  # not a literal: every run
    assert timed_runs(exp) == {r.run_id for r in exp.runs}


@pytest.mark.parametrize("failure, status, message", [
    (OSError(28, "No space left on device"), 2, r"^error: \[Errno 28\] No space left on device; the runs stored"),
    (RuntimeError("Query interrupted"), 130, r"^interrupted: the runs stored so far are kept"),
])
def test_a_report_that_cannot_be_written_or_ctrl_c_inside_the_database_ends_in_one_line(tiny, tmp_path, capsys,
                                                                                        monkeypatch, failure, status,
                                                                                        message):
    """After the runs are stored: a full disk under the report folder is one line and status 2 (once a traceback and
    1, check's 'a claim failed'); Ctrl-C that DuckDB turned into its 'Query interrupted' is status 130 with the
    line a KeyboardInterrupt gets (once a traceback and 1)."""
    import nlbandit.report.build as build

    def fail(*args, **kwargs):
        raise failure

    monkeypatch.setattr(build, "write_report", fail)
    assert main(["run", str(tiny), "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "rep"),
                 "--no-progress", "--executor", "local"]) == status
    err = capsys.readouterr().err
    assert re.search(message, err.strip().splitlines()[-1]) and "Traceback" not in err, err


def test_a_worker_that_died_ends_in_one_line(tiny, tmp_path, capsys, monkeypatch):
    """A worker process killed while computing (the out-of-memory killer) is one line and status 2, what was stored
    kept (once a BrokenProcessPool traceback and status 1)."""
    from concurrent.futures.process import BrokenProcessPool

    import nlbandit.experiments.schedule as schedule

    def die(*args, **kwargs):
        raise BrokenProcessPool("A process in the process pool was terminated abruptly")

    monkeypatch.setattr(schedule, "run_experiments", die)
    assert main(["run", str(tiny), "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "rep"),
                 "--no-progress"]) == 2
    assert re.search(r"^error: a worker process died while computing", capsys.readouterr().err)


def test_out_a_dangling_link_and_db_a_duckdb_special_name_are_files(tiny, tmp_path, capsys, monkeypatch):
    """--out naming a link to nothing is refused before anything runs (once a FileExistsError after the runs);
    --db ':memory:' is a file of that name, kept, not DuckDB's in-memory database (whose runs were lost)."""
    (tmp_path / "out").symlink_to(tmp_path / "nowhere")
    assert main(["run", str(tiny), "--db", str(tmp_path / "r.duckdb"), "--out", str(tmp_path / "out")]) == 2
    assert "is a link to" in capsys.readouterr().err and not (tmp_path / "r.duckdb").exists()
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(tiny), "--db", ":memory:", "--out", str(tmp_path / "rep"), "--no-progress",
                 "--executor", "local"]) == 0
    with Store(tmp_path / ":memory:") as store:
        assert missing(store, load_experiment(tiny, "quick").runs).todo == []
