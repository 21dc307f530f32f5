"""Select and update timed apart (nlbandit.core.phases), stored, read by claims and shown in reports."""

from __future__ import annotations

import contextlib
import io
import itertools
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from nlbandit.core import phases
from nlbandit.core.phases import PhaseRows, PhaseTimer, time_phases
from nlbandit.core.simulate import simulate
from nlbandit.core.types import ProblemSpec
from nlbandit.envs.registry import make_env
from nlbandit.experiments.claims import phased_runs, runtime_runs, timed_runs
from nlbandit.experiments.executors import LocalExecutor, ProcessExecutor
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.plan import load_experiment
from nlbandit.policies.registry import make_policy
from nlbandit.report.build import check_claims, load_rows, write_report
from nlbandit.store import Store


def test_timer_replays_the_engines_rounds():
    # At every chunk boundary the timer builds round t + 1's inputs itself: the arms its act chooses
    # there must be the engine's choices of round t + 1, seed by seed; one sample per boundary before T, once timed.
    env = make_env("linear", d=3, k=5)
    policy, params = make_policy("lin-ts", ProblemSpec(3, 5, 60))
    timer = PhaseTimer(env, policy, params, [3, 4, 5], 60, repeats=2)
    chosen = {}
    res = simulate(env, policy, params, 60, [3, 4, 5], chunk_size=25,
                   on_chunk=lambda prog: chosen.setdefault(prog.t_done + 1, timer(prog)))
    assert timer.samples == [] and len(timer.kept) == 2
    time_phases([timer])
    assert [s.t for s in timer.samples] == [26, 51] and chosen[61] is None
    for t in (26, 51):
        np.testing.assert_array_equal(np.asarray(chosen[t]), res.arms[:, t - 1])
    assert all(s.select_s > 0 and s.update_s > 0 for s in timer.samples)


def test_timer_times_copies_of_a_few_seeds_rows(monkeypatch):
    # The fixed cost of a call is shared among at least min_rows rows per phase: 3 seeds are timed as 4 copies (12
    # rows) for act and 2 (6 rows) for update, the arms still come from the seeds' own 3 rows, and a call's time is
    # divided by its rows; the timed calls, and only they, run under heap_allocations.
    env = make_env("linear", d=3, k=5)
    policy, params = make_policy("lin-ts", ProblemSpec(3, 5, 60))
    timer = PhaseTimer(env, policy, params, [3, 4, 5], 60, repeats=2, min_rows=PhaseRows(select=12, update=4))
    assert timer.rows == (12, 6)
    rows = {"act": [], "update": []}
    heap = []

    @contextlib.contextmanager
    def recorded():
        heap.append(True)
        yield True
        heap.append(False)

    def spy(name, fn):
        def call(params, keys, *args):
            rows[name].append((keys.policy_act.shape[0], bool(heap) and heap[-1]))
            return fn(params, keys, *args)
        return call

    monkeypatch.setattr(phases, "heap_allocations", recorded)
    timer._act, timer._update = spy("act", timer._act), spy("update", timer._update)
    clock = itertools.count()
    monkeypatch.setattr(phases, "time", SimpleNamespace(perf_counter=lambda: float(next(clock))))  # each call: 1 s
    chosen = {}
    res = simulate(env, policy, params, 60, [3, 4, 5], chunk_size=25,
                   on_chunk=lambda prog: chosen.setdefault(prog.t_done + 1, timer(prog)))
    for t in (26, 51):
        np.testing.assert_array_equal(np.asarray(chosen[t]), res.arms[:, t - 1])
    time_phases([timer])
    # per kept round: act on the 3 rows (the arms) during the run; then, timed, 1 + 2 calls on 12 rows for act and
    # on 6 for update per round
    assert rows["act"] == [(3, False)] * 2 + [(12, True)] * 6
    assert rows["update"] == [(6, True)] * 6 and heap == [True, False]
    assert [(s.select_s, s.update_s) for s in timer.samples] == [(1 / 12, 1 / 6)] * 2


def test_time_phases_takes_turns_rotating_the_first_run():
    # One session for two timers: at each kept round the selections of both, then their updates, each timer's calls
    # together (1 + repeats), the first timer rotating by one per round; each timer gets one sample per round.
    env = make_env("linear", d=3, k=5)
    timers = {}
    for name in ("lin-ts", "lin-ucb"):
        policy, params = make_policy(name, ProblemSpec(3, 5, 60))
        timers[name] = timer = PhaseTimer(env, policy, params, [3, 4], 60, repeats=2)
        simulate(env, policy, params, 60, [3, 4], chunk_size=25, on_chunk=timer)
    calls = []

    def spy(name, phase, fn):
        def call(*args):
            calls.append((name, phase))
            return fn(*args)
        return call

    for name, timer in timers.items():
        timer._act, timer._update = spy(name, "act", timer._act), spy(name, "update", timer._update)
    time_phases(list(timers.values()))
    turn = [("lin-ts", "act")] * 3 + [("lin-ucb", "act")] * 3 + [("lin-ts", "update")] * 3 + [("lin-ucb", "update")] * 3
    assert calls == turn + turn[3:6] + turn[:3] + turn[9:] + turn[6:9]
    assert all([s.t for s in timer.samples] == [26, 51] for timer in timers.values())


FAULTS = """
import resource, sys
import numpy as np
from nlbandit.core import phases

def faults(cycles=50):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(cycles):
        blocks = [np.ones(2**17) for _ in range(4)]
        del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

fresh = faults()
with phases.heap_allocations() as took:
    kept = faults()
print(took, fresh, kept, faults())
"""


def test_heap_allocations_keep_freed_blocks_mapped():
    # Allocating, writing and freeing four 1 MiB blocks (numpy's data: malloc; below the 4 MiB from which numpy asks
    # for huge pages) 50 times, in a fresh process: glibc's adapted thresholds serve the blocks from its heap but
    # return the freed 4 MiB to the system (more than twice the largest block), so each cycle faults on ~1,024 pages
    # again; under heap_allocations the freed blocks are kept and reused, and after it too (64 MiB kept).
    took, fresh, kept, after = subprocess.run([sys.executable, "-c", FAULTS], capture_output=True, text=True,
                                              check=True).stdout.split()
    if took != "True":
        pytest.skip("no mallopt in this C library")
    assert int(fresh) >= 50 * 800 and int(kept) <= 2 * 1024 and int(after) <= 2 * 1024, (fresh, kept, after)


PHASED = """
horizon = 120
seeds = 2

[env]
name = "linear"
d = 3
k = 5

[[policies]]
label = "UCB"
name = "lin-ucb"

[[policies]]
label = "PHE"
name = "lin-phe"

[[claims]]
name = "split"
text = "select and update times are read"
check = "select_time('PHE') > 0 and update_time('PHE') > 0 and runtime('UCB') > 0"
"""


@pytest.mark.parametrize("workers", [0, 2])  # 2: computed one at a time on a worker, stored by this process
def test_phase_claims_compute_their_runs_alone_and_report_them(experiment_file, tmp_path, workers):
    exp = load_experiment(experiment_file(PHASED), "full")
    phe, ucb = (next(r for r in exp.runs if r.label == label) for label in ("PHE", "UCB"))
    assert phased_runs(exp) == {phe.run_id} and timed_runs(exp) == {phe.run_id, ucb.run_id}
    with Store(tmp_path / "p.duckdb") as store, contextlib.closing(
            ProcessExecutor(workers) if workers else LocalExecutor()) as executor:
        logs: list[str] = []
        assert run_experiment(exp, store, progress=False, log=logs.append, executor=executor) == len(exp.runs)
        parts = store.parts(r.series_id for r in exp.runs)
        assert {r.run_id for r in exp.runs
                if any(p.phase_rows is not None for p in parts[r.series_id])} == {phe.run_id}
        stored = store.load(phe.series_id, phe.seeds)
        t, select, update = stored.phases
        # PHASE_SAMPLES rounds, evenly spaced: chunks of ⌈120/11⌉ = 11 rounds.
        np.testing.assert_array_equal(t, 11 * np.arange(1, 11) + 1)
        assert (select > 0).all() and (update > 0).all() and stored.batch_size == 1
        assert any("phases timed apart at 10 rounds" in m for m in logs)
        rows = load_rows(exp, store)
        (claim,) = check_claims(exp, rows)
        values = dict(claim.values)
        assert claim.holds is True
        assert values["select_time('PHE')"] == pytest.approx(1e6 * select.mean(), rel=1e-12)
        assert values["update_time('PHE')"] == pytest.approx(1e6 * update.mean(), rel=1e-12)
        md, _ = write_report(exp, rows, tmp_path / "out", "test")
        text = md.read_text()
        assert "## Select and update time" in text and (tmp_path / "out" / "e_phases.png").stat().st_size > 0
        assert text.count("| PHE | — | 12..111 (10) |") == 1 and "| UCB | — | 12" not in text


def test_a_run_timed_apart_saves_no_checkpoint_and_is_not_resumed_from_one(experiment_file, tmp_path):
    # Stopped after 55 of its 120 rounds, a run timed apart has saved no checkpoint (its timer must see every chunk:
    # nothing resumes it); where one of its batch is stored (computed without the claim, in chunks of 55 rounds) it
    # starts again from its first round (its ten sampled rounds, not the five after the checkpoint), which drops it.
    from nlbandit.loops.base import batch_id

    exp = load_experiment(experiment_file(PHASED), "full")
    phe = next(r for r in exp.runs if r.label == "PHE")

    class Stop(Exception):
        pass

    def stop(progress):
        if progress.t_done == 55:  # only the run timed apart has chunks of 11 rounds
            raise Stop

    with Store(tmp_path / "p.duckdb") as store:
        with pytest.raises(Stop):
            run_experiment(exp, store, progress=False, log=lambda m: None, on_checkpoint=stop)
        assert store.con.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
        claims, seen = list(exp.claims), []
        exp.claims[:] = []

        def second(progress):  # UCB's batch comes first and is stored whole; PHE's stops at 55
            seen.append(progress.t_done)
            if seen.count(55) == 2:
                raise Stop

        with pytest.raises(Stop):
            run_experiment(exp, store, progress=False, log=lambda m: None, chunk_size=55, on_checkpoint=second)
        assert store.con.execute("SELECT batch_id, t_done FROM checkpoints").fetchall() == [(batch_id([phe]), 55)]
        exp.claims[:] = claims
        logs: list[str] = []
        run_experiment(exp, store, progress=False, log=logs.append)
        assert not any("resuming" in m for m in logs), logs
        np.testing.assert_array_equal(store.load(phe.series_id, phe.seeds).phases[0], 11 * np.arange(1, 11) + 1)
        assert store.con.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def test_rounds_kept_where_a_run_was_simulated_rebuild_its_timers_inputs_exactly():
    # A run's rounds kept as KeptRound (npz bytes, no pickles) and handed to a timer built elsewhere give that timer
    # the same inputs, bit for bit and dtype for dtype, as a timer handed the simulation's own progress.
    import jax

    env = make_env("linear", d=3, k=5)
    policy, params = make_policy("lin-ts", ProblemSpec(3, 5, 60))
    live, rounds = PhaseTimer(env, policy, params, [3, 4, 5], 60), []

    def chunk(prog):
        live(prog)
        if prog.t_done < 60:
            rounds.append(phases.KeptRound.of(prog))

    simulate(env, policy, params, 60, [3, 4, 5], chunk_size=25, on_chunk=chunk)
    data = phases.rounds_to_bytes(rounds)
    assert np.load(io.BytesIO(data), allow_pickle=False)["t_done"].tolist() == [25, 50]
    again = PhaseTimer(env, policy, params, [3, 4, 5], 60)
    for kept in phases.rounds_from_bytes(data):
        again(kept)
    assert len(again.kept) == len(live.kept) == 2
    for ours, theirs in zip(jax.tree.leaves(live.kept), jax.tree.leaves(again.kept), strict=True):
        assert np.asarray(ours).dtype == np.asarray(theirs).dtype
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))
    assert phases.rounds_from_bytes(phases.rounds_to_bytes([])) == []


def _on_workers(executor, jobs, store):
    """``jobs`` computed by the processes executor's workers (more=: even a single job), or on a BatchStore (as a
    Ray worker does) and replayed into ``store``."""
    from nlbandit.experiments.executors import replay, run_on_worker, sent_checkpoints

    if executor is None:
        for job in jobs:
            replay(run_on_worker(job, sent_checkpoints(job, store))[0], store)
    else:
        executor.run(jobs, store, log=lambda m: None, progress=False, more=lambda key, seconds: [])


@pytest.mark.parametrize("where", ["local", "processes", "batch store"])
def test_a_phased_run_is_simulated_beside_others_and_timed_alone_on_the_rounds_it_kept(experiment_file, tmp_path,
                                                                                      where):
    # PHE (its phases read) is simulated by a job among those computed side by side, which stores the run and then
    # its ten kept rounds (under kept_key); UCB (its runtime read) is computed alone. Planned again then, PHE needs
    # only its timing session: it goes alone, is sent the kept rounds, stores the phases and removes them.
    from nlbandit.experiments import runner

    exp = load_experiment(experiment_file(PHASED), "full")
    phe, ucb = (next(r for r in exp.runs if r.label == label) for label in ("PHE", "UCB"))
    assert runtime_runs(exp) == {ucb.run_id}
    with Store(tmp_path / "p.duckdb") as store, contextlib.closing(
            ProcessExecutor(2) if where == "processes" else LocalExecutor()) as executor:
        side, alone = runner.experiment_jobs(exp, store)
        assert [(job.compute, job.kwargs["batch"], job.late) for job in side] == [(runner.run_kept_job, [phe], True)]
        assert [(job.compute, job.kwargs["batch"], job.reads) for job in alone] == [
            (runner.run_batch_job, [ucb], ()), (runner.run_phased_job, [phe], (runner.kept_key(phe),))]
        if where == "local":
            executor.run(side, store, log=lambda m: None, progress=False)
        else:
            _on_workers(executor if where == "processes" else None, side, store)
        kept = phases.rounds_from_bytes(store.load_checkpoint(runner.kept_key(phe)))
        assert [r.t_done for r in kept] == (11 * np.arange(1, 11)).tolist()
        assert {key: what for key, *_, what in store.checkpoints()} == {runner.kept_key(phe): (
            f"{exp.paper}/{exp.name}: PHE (seeds {runner.seeds_text(phe.seeds)}), rounds kept for its timing session")}
        (part,) = store.parts([phe.series_id])[phe.series_id]
        assert part.is_whole(phe.seeds) and part.batch_size == 1 and part.session is None
        side, alone = runner.experiment_jobs(exp, store)
        assert side == [] and [job.kwargs["batch"] for job in alone] == [[ucb], [phe]]
        logs: list[str] = []
        if where == "local":
            executor.run_alone(alone, store, log=logs.append, progress=False)
        else:
            _on_workers(executor if where == "processes" else None, alone, store)
        assert store.load_checkpoint(runner.kept_key(phe)) is None
        assert store.con.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)
        np.testing.assert_array_equal(store.load(phe.series_id, phe.seeds).phases[0], 11 * np.arange(1, 11) + 1)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0
        if where == "local":
            assert not any(f"{phe.label}: 2 seeds" in m for m in logs)  # not simulated again


def test_a_run_whose_runtime_and_phases_are_read_is_simulated_by_its_timing_job(experiment_file, tmp_path):
    # Its simulation's time is read too: no job simulates it beside others; its timing job, alone, simulates it
    # first (keeping its rounds in the timer, nothing in the store) and then times it.
    from nlbandit.experiments import runner

    exp = load_experiment(experiment_file(PHASED.replace("runtime('UCB')", "runtime('PHE')")), "full")
    (phe,) = [r for r in exp.runs if r.label == "PHE"]
    assert runtime_runs(exp) == phased_runs(exp) == {phe.run_id}
    with Store(tmp_path / "p.duckdb") as store:
        side, alone = runner.experiment_jobs(exp, store)
        assert runner.run_kept_job not in [job.compute for job in side]
        assert [(job.compute, job.kwargs["batch"]) for job in alone] == [(runner.run_phased_job, [phe])]
        logs: list[str] = []
        assert run_experiment(exp, store, progress=False, log=logs.append) == 2
        assert [m for m in logs if "PHE" in m][0].startswith("[2/2] PHE: 2 seeds x 120 rounds")
        assert [m for m in logs if "PHE" in m][-1].startswith("[2/2] PHE: phases timed apart at 10 rounds")
        assert store.load(phe.series_id, phe.seeds).phases[0].size == 10
        assert store.con.execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def test_a_run_stored_without_its_phases_is_computed_again(experiment_file, tmp_path):
    exp = load_experiment(experiment_file(PHASED), "full")
    claims = list(exp.claims)
    exp.claims[:] = []
    with Store(tmp_path / "p.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        assert all(p.phase_rows is None for parts in store.parts(r.series_id for r in exp.runs).values() for p in parts)
        exp.claims[:] = claims
        logs: list[str] = []
        assert run_experiment(exp, store, progress=False, log=logs.append) == 1
        assert any("without their phases timed" in m for m in logs)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0


ROWS = "SELECT DISTINCT select_rows, update_rows FROM phases"


def test_timings_stored_without_their_call_rows_are_taken_again(experiment_file, tmp_path):
    # A database whose phases table predates the rows of a call (timed on the part's seeds alone): opening it adds
    # the columns, its timings are neither read nor count as timed, and a claim reading them has the run timed again.
    exp = load_experiment(experiment_file(PHASED), "full")
    phe = next(r for r in exp.runs if r.label == "PHE")
    with Store(tmp_path / "p.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        assert store.con.execute(ROWS).fetchall() == [(8, 8)]  # 2 seeds, 4 copies
        store.con.execute("ALTER TABLE phases DROP COLUMN process")
        store.con.execute("ALTER TABLE phases DROP COLUMN session")
        store.con.execute("ALTER TABLE phases DROP COLUMN select_rows")
        store.con.execute("ALTER TABLE phases DROP COLUMN update_rows")
    with Store(tmp_path / "p.duckdb") as store:
        assert store.con.execute("SELECT count(*) FROM phases WHERE select_rows IS NULL AND update_rows IS NULL"
                                 ).fetchone() == (10,)
        assert store.load(phe.series_id, phe.seeds).phases is None
        assert store.parts([phe.series_id])[phe.series_id][0].phase_rows is None
        logs: list[str] = []
        assert run_experiment(exp, store, progress=False, log=logs.append) == 1
        assert any("without their phases timed" in m for m in logs)
        assert store.load(phe.series_id, phe.seeds).phases[0].size == 10


def test_timings_stored_with_one_count_of_rows_are_taken_again(experiment_file, tmp_path):
    # A database whose phases table counted one call_rows for both phases (timed before the calls kept their buffers
    # on malloc's heap): opening it drops the count, and the timings are neither read nor count as timed.
    exp = load_experiment(experiment_file(PHASED), "full")
    phe = next(r for r in exp.runs if r.label == "PHE")
    with Store(tmp_path / "p.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        store.con.execute("ALTER TABLE phases DROP COLUMN process")
        store.con.execute("ALTER TABLE phases DROP COLUMN session")
        store.con.execute("ALTER TABLE phases DROP COLUMN select_rows")
        store.con.execute("ALTER TABLE phases RENAME COLUMN update_rows TO call_rows")
    with Store(tmp_path / "p.duckdb") as store:
        assert store.con.execute(ROWS).fetchall() == [(None, None)]
        assert store.parts([phe.series_id])[phe.series_id][0].phase_rows is None
        assert store.load(phe.series_id, phe.seeds).phases is None
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 1
        assert store.con.execute(ROWS).fetchall() == [(8, 8)]


def test_phase_claims_need_a_loop_with_phases(experiment_file):
    from nlbandit.core.hyper import ConfigError

    text = """
    loop = "regression"
    horizon = 50
    seeds = 2

    [env]
    d = 3
    y_max = 1.0

    [[policies]]
    label = "FTRL"
    name = "ftrl"
    env = { name = "stochastic", sigma = 1.0 }

    [[claims]]
    name = "x"
    text = "x"
    check = "select_time('FTRL') > 0"
    """
    with pytest.raises(ConfigError, match="select_time/update_time/phase_diff claims need a loop"):
        load_experiment(experiment_file(text), "full")


PAIR = (PHASED.replace("select_time('PHE') > 0 and update_time('PHE') > 0 and runtime('UCB') > 0",
                       "phase_diff('PHE', 'UCB', spread=0.1) < 1e9")
        .replace("seeds = 2", "seeds = 2\nphase_rows = 6"))


def test_phase_diff_times_both_runs_on_the_rows_asked_and_reads_their_rounds_paired(experiment_file, tmp_path):
    # phase_diff('PHE', 'UCB') has both runs timed apart, each call on phase_rows = 6 rows (2 seeds, 3 copies);
    # its interval is the Student-t one of the per-round differences of select + update, widened by spread times
    # the mean of the two runs' costs; asking for other rows times both again.
    from scipy import stats

    exp = load_experiment(experiment_file(PAIR), "full")
    assert exp.phase_rows == (6, 6) and phased_runs(exp) == timed_runs(exp) == {r.run_id for r in exp.runs}
    with Store(tmp_path / "p.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        assert store.con.execute(ROWS).fetchall() == [(6, 6)]
        own = {}
        for run in exp.runs:
            t, select, update = store.load(run.series_id, run.seeds).phases
            own[run.label] = (t, 1e6 * (np.asarray(select, np.float64) + np.asarray(update, np.float64)))
        np.testing.assert_array_equal(own["PHE"][0], own["UCB"][0])
        diff = own["PHE"][1] - own["UCB"][1]
        half = stats.t.ppf(0.975, diff.size - 1) * diff.std(ddof=1) / np.sqrt(diff.size)
        widen = 0.1 * (own["PHE"][1].mean() + own["UCB"][1].mean()) / 2
        (claim,) = check_claims(exp, load_rows(exp, store))
        assert claim.holds is True
        (text, mean), = [(k, v) for k, v in claim.values if k.startswith("phase_diff")]
        assert mean == pytest.approx(diff.mean(), rel=1e-9)
        lo, hi = (float(x) for x in text.split("[")[1].split("]")[0].split(", "))
        assert lo == pytest.approx(diff.mean() - half - widen, abs=0.006)  # the text's two decimals
        assert hi == pytest.approx(diff.mean() + half + widen, abs=0.006)
        assert f"widened by ±{widen:.2f}" in text
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0
        exp.phase_rows = PhaseRows(8, 8)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        assert store.con.execute(ROWS).fetchall() == [(8, 8)]


def test_runs_compared_are_timed_in_one_session_and_again_together(experiment_file, tmp_path):
    # phase_diff's two runs (same horizon and seeds) are timed by one job in one session, whose key both
    # store; when one of them lacks its timings (or has those of another session), both are computed and timed again.
    from nlbandit.loops.base import batch_id

    exp = load_experiment(experiment_file(PAIR), "full")
    with Store(tmp_path / "p.duckdb") as store:
        logs: list[str] = []
        run_experiment(exp, store, progress=False, log=logs.append)
        assert sum("in one session with 1 other run(s)" in m for m in logs) == 2
        sessions = store.con.execute("SELECT DISTINCT session FROM phases").fetchall()
        assert sessions == [(batch_id(exp.runs),)]
        phe = next(r for r in exp.runs if r.label == "PHE")
        store.con.execute("UPDATE phases SET session = 'another' WHERE series_id = ?", [phe.series_id])
        assert store.parts([phe.series_id])[phe.series_id][0].session == "another"
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        store.con.execute("DELETE FROM phases WHERE series_id = ?", [phe.series_id])
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        assert store.con.execute("SELECT DISTINCT session FROM phases").fetchall() == sessions
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0


def test_timings_stored_one_run_per_process_are_taken_again(experiment_file, tmp_path):
    # A database whose phases table has no session (each run timed in its own process, between its chunks): opening
    # adds the column, NULL; its timings are neither read nor count as timed, and the runs are timed again together.
    exp = load_experiment(experiment_file(PAIR), "full")
    with Store(tmp_path / "p.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        store.con.execute("ALTER TABLE phases DROP COLUMN process")
        store.con.execute("ALTER TABLE phases DROP COLUMN session")
    with Store(tmp_path / "p.duckdb") as store:
        assert store.con.execute("SELECT DISTINCT select_rows, update_rows, session, process FROM phases"
                                 ).fetchall() == [(6, 6, None, None)]
        assert all(store.load(r.series_id, r.seeds).phases is None for r in exp.runs)
        assert all(p.phase_rows is None and p.session is None
                   for parts in store.parts(r.series_id for r in exp.runs).values() for p in parts)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        assert all(store.load(r.series_id, r.seeds).phases[0].size == 10 for r in exp.runs)


@pytest.mark.parametrize("check, match", [
    ("phase_diff('A', 'B', spread=1.5) < 0", "spread must be a number in"),
    ("phase_diff('A', 'C') < 0", "timed at different rounds"),
    ("phase_diff('A', 'D') < 0", "'D' has no phases timed apart"),
    ("phase_diff('A', 'E') < 0", "timed in 1 and 2 processes"),
    ("phase_diff('E', 'F', spread=0.1) < 0", "these runs were timed in 2, whose interval measures it: drop spread"),
])
def test_phase_diff_refuses_what_it_cannot_read(check, match):
    from nlbandit.core.hyper import ConfigError
    from nlbandit.experiments.claims import Timing, evaluate_claim

    sampled = {"A": (np.array([2, 4]), np.array([[1.0, 2.0]])), "B": (np.array([2, 4]), np.array([[1.5, 2.5]])),
               "C": (np.array([3, 5]), np.array([[1.0, 2.0]])), "D": None,
               "E": (np.array([2, 4]), np.ones((2, 2))), "F": (np.array([2, 4]), np.ones((2, 2)))}

    def curves(label, case, metric="regret"):
        return np.array([10]), np.ones((2, 1)), Timing(1.0, 1.0, 1.0, sampled[label])

    with pytest.raises(ConfigError, match=match):
        evaluate_claim(check, curves, 10)


def test_select_rows_times_the_selection_on_its_own_rows(experiment_file, tmp_path):
    # select_rows = 10 (2 seeds: 5 copies) beside phase_rows = 6 (3 copies): each phase timed and stored on its
    # rows, the report says both; asking for other selection rows times both runs again.
    exp = load_experiment(experiment_file(PAIR.replace("phase_rows = 6", "phase_rows = 6\nselect_rows = 9")), "full")
    assert exp.phase_rows == PhaseRows(select=9, update=6) and exp.phase_rows.of_seeds(2) == (10, 6)
    with Store(tmp_path / "p.duckdb") as store:
        logs: list[str] = []
        run_experiment(exp, store, progress=False, log=logs.append)
        assert store.con.execute(ROWS).fetchall() == [(10, 6)]
        assert sum("(calls of 10 and 6 rows)" in m for m in logs) == 2
        md, _ = write_report(exp, load_rows(exp, store), tmp_path / "out", "test")
        assert "repeated to 10 rows per call of `act` and 6 per call of `update`" in md.read_text()
        exp.phase_rows = PhaseRows(select=12, update=6)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        assert store.con.execute(ROWS).fetchall() == [(12, 6)]


@pytest.mark.parametrize("field", ["phase_rows", "select_rows"])
@pytest.mark.parametrize("value", ["0", "4097", "2.5", '"many"'])
def test_phase_rows_out_of_its_range_is_refused_naming_the_field(experiment_file, field, value):
    from nlbandit.core.hyper import ConfigError

    with pytest.raises(ConfigError, match=field):
        load_experiment(experiment_file(PAIR.replace("phase_rows = 6", f"{field} = {value}")), "full")


def test_process_interval_against_a_float64_reference():
    # The grand mean of a (P, Q) table of differences, its standard error from the variance of the P process means
    # over P plus that of the Q round means over Q, times Student t's 97.5% quantile at P - 1 degrees of freedom.
    from scipy import stats

    from nlbandit.experiments.claims import process_interval

    rng = np.random.default_rng(7)
    for n_processes, n_rounds in ((2, 10), (5, 10), (8, 3)):
        diff = rng.normal(0.5, 0.3, (n_processes, 1)) + rng.normal(0.0, 1.0, (n_processes, n_rounds))
        se = np.sqrt(diff.mean(axis=1).var(ddof=1) / n_processes + diff.mean(axis=0).var(ddof=1) / n_rounds)
        half = stats.t.ppf(0.975, n_processes - 1) * se
        value = process_interval(diff)
        assert value.mean == pytest.approx(diff.mean(), rel=1e-12)
        assert (value.lo, value.hi) == pytest.approx((diff.mean() - half, diff.mean() + half), rel=1e-7)
    assert process_interval(np.ones((1, 10))).lo == -np.inf and process_interval(np.ones((3, 1))).hi == np.inf


@pytest.mark.parametrize("process_sd, round_sd, residual_sd", [(1.0, 0.0, 0.3), (0.0, 1.0, 0.3), (0.5, 0.5, 0.5),
                                                               (0.1, 0.1, 1.0)])
def test_process_interval_covers_a_crossed_design_at_its_level(process_sd, round_sd, residual_sd):
    # Differences of 5 processes x 10 rounds with a process effect, a round effect shared by the processes (the same
    # kept inputs) and a residual, all of mean 0: the interval holds 0 in at least 93% of 2,000 draws whichever effect
    # dominates (at the nominal 95% the binomial sd is 0.5%; the interval is exact when the process effect dominates
    # and wide otherwise). Fixed seed.
    from nlbandit.experiments.claims import process_interval

    rng = np.random.default_rng(11)
    held = 0
    for _ in range(2000):
        diff = (rng.normal(0.0, process_sd, (5, 1)) + rng.normal(0.0, round_sd, (1, 10))
                + rng.normal(0.0, residual_sd, (5, 10)))
        value = process_interval(diff)
        held += value.lo <= 0.0 <= value.hi
    assert held / 2000 >= 0.93


PROCESSES = PAIR.replace(", spread=0.1", "").replace("phase_rows = 6", "phase_rows = 6\nphase_processes = 2")


def test_runs_compared_are_timed_in_each_of_several_fresh_processes(experiment_file, tmp_path, monkeypatch):
    # With phase_processes = 2 the pair's session is timed in two fresh processes, not in the timing job's own
    # (its time_phases is never called), and stored as processes 0 and 1 at the same rounds under the session
    # key counting them; phase_diff reads the interval over processes and rounds; timed again in one process when
    # the file asks for one.
    from scipy import stats

    from nlbandit.experiments import runner
    from nlbandit.loops.base import batch_id

    exp = load_experiment(experiment_file(PROCESSES), "full")
    assert exp.phase_processes == 2

    def here(timers):
        raise AssertionError("timed in the timing job's process")

    monkeypatch.setattr(runner, "time_phases", here)
    with Store(tmp_path / "p.duckdb") as store:
        logs: list[str] = []
        assert run_experiment(exp, store, progress=False, log=logs.append) == 2
        assert sum("in one session with 1 other run(s) in each of 2 fresh processes" in m for m in logs) == 2
        assert store.con.execute("SELECT DISTINCT session FROM phases").fetchall() == [(batch_id(exp.runs) + "x2",)]
        assert store.con.execute("SELECT process, count(*) FROM phases GROUP BY process ORDER BY process"
                                 ).fetchall() == [(0, 20), (1, 20)]
        own = {}
        for run in exp.runs:
            t, select, update = store.load(run.series_id, run.seeds).phases
            np.testing.assert_array_equal(t, 11 * np.arange(1, 11) + 1)
            assert select.shape == update.shape == (2, 10) and (select > 0).all() and (update > 0).all()
            own[run.label] = 1e6 * (np.asarray(select, np.float64) + np.asarray(update, np.float64))
        diff = own["PHE"] - own["UCB"]
        se = np.sqrt(diff.mean(axis=1).var(ddof=1) / 2 + diff.mean(axis=0).var(ddof=1) / 10)
        (claim,) = check_claims(exp, load_rows(exp, store))
        (text, mean), = [(k, v) for k, v in claim.values if k.startswith("phase_diff")]
        assert mean == pytest.approx(diff.mean(), rel=1e-9) and "over 2 processes × 10 sampled rounds" in text
        lo, hi = (float(x) for x in text.split("[")[1].split("]")[0].split(", "))
        assert (lo, hi) == pytest.approx((diff.mean() - stats.t.ppf(0.975, 1) * se,
                                          diff.mean() + stats.t.ppf(0.975, 1) * se), abs=0.006)
        md, _ = write_report(exp, load_rows(exp, store), tmp_path / "out", "test")
        assert "repeated in each of 2 fresh processes, one after another" in md.read_text()
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0
        monkeypatch.undo()
        exp.phase_processes = 1
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 2
        assert store.con.execute("SELECT DISTINCT session, process FROM phases").fetchall() == [(batch_id(exp.runs), 0)]


def test_several_timing_processes_start_from_an_executors_worker(experiment_file, tmp_path):
    # The processes executor computes a phase group on one of its (spawned) workers, which starts the timing
    # processes itself; their samples come back through the driver like the runs'.
    exp = load_experiment(experiment_file(PROCESSES), "full")
    with Store(tmp_path / "p.duckdb") as store, contextlib.closing(ProcessExecutor(2)) as executor:
        assert run_experiment(exp, store, progress=False, log=lambda m: None, executor=executor) == 2
        assert store.con.execute("SELECT process, count(DISTINCT series_id), count(*) FROM phases GROUP BY process "
                                 "ORDER BY process").fetchall() == [(0, 2, 20), (1, 2, 20)]


def test_timings_of_one_process_per_session_stay_read_as_its_process_0(experiment_file, tmp_path):
    # A database whose phases table predates the process column (each session timed in one process): opening adds
    # it, 0 where there is a session; the timings are read as before and the runs are not timed again.
    exp = load_experiment(experiment_file(PAIR), "full")
    with Store(tmp_path / "p.duckdb") as store:
        run_experiment(exp, store, progress=False, log=lambda m: None)
        before = [store.load(r.series_id, r.seeds).phases for r in exp.runs]
        store.con.execute("ALTER TABLE phases DROP COLUMN process")
    with Store(tmp_path / "p.duckdb") as store:
        assert store.con.execute("SELECT DISTINCT process FROM phases").fetchall() == [(0,)]
        for run, (t, select, update) in zip(exp.runs, before):
            after = store.load(run.series_id, run.seeds).phases
            for a, b in zip(after, (t, select, update)):
                np.testing.assert_array_equal(a, b)
        assert run_experiment(exp, store, progress=False, log=lambda m: None) == 0


def test_phase_processes_by_scale_and_refused_out_of_range_or_beside_spread(experiment_file):
    from nlbandit.core.hyper import ConfigError

    text = PROCESSES + "\n[scales.quick]\nphase_processes = 1\n"
    assert [load_experiment(experiment_file(text), scale).phase_processes for scale in ("quick", "full")] == [1, 2]
    for value in ("0", "33", "1.5"):
        with pytest.raises(ConfigError, match="phase_processes"):
            load_experiment(experiment_file(PROCESSES.replace("phase_processes = 2", f"phase_processes = {value}")),
                            "full")
    with pytest.raises(ConfigError, match="drop spread"):
        load_experiment(experiment_file(PAIR.replace("phase_rows = 6", "phase_rows = 6\nphase_processes = 3")),
                        "full")
