"""The store keeps results per seed (:mod:`nlbandit.store`): raising an experiment's seeds computes only the new
ones and gives the numbers computing them all at once gives; a run whose time a claim reads is computed again
whole; a database of the previous layout (one row per run) is converted on opening, its runs reused."""

from __future__ import annotations

import json
from dataclasses import replace

import duckdb
import numpy as np
import pytest

from nlbandit.experiments.claims import timed_runs
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.runner import missing, run_experiment, seed_ranges
from nlbandit.experiments.spec import Claim
from nlbandit.loops import LOOPS
from nlbandit.store import Store

EXPERIMENT = """
horizon = 40
seeds = {seeds}
[env]
name = "linear"
d = 3
k = 4
[[policies]]
label = "UCB"
name = "lin-ucb"
[[policies]]
label = "TS"
name = "lin-ts"
v = [0.1, 0.3]
"""

V2_SCHEMA = """
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, experiment VARCHAR, label VARCHAR, config JSON, version VARCHAR,
    horizon BIGINT, n_seeds INTEGER, compile_s DOUBLE, run_s DOUBLE, chunk_size INTEGER,
    chunk_seconds DOUBLE[], batch_size INTEGER, finished TIMESTAMP DEFAULT current_timestamp);
CREATE TABLE curves (run_id VARCHAR, metric VARCHAR, seed INTEGER, t BIGINT, value DOUBLE);
CREATE TABLE arms (run_id VARCHAR, seed INTEGER, arms INTEGER[]);
CREATE TABLE phases (run_id VARCHAR, t BIGINT, select_s DOUBLE, update_s DOUBLE);
CREATE TABLE checkpoints (
    batch_id VARCHAR PRIMARY KEY, t_done BIGINT, progress BLOB, saved TIMESTAMP DEFAULT current_timestamp);
"""
"""The tables of the previous layout, as nlbandit 3e7f339 created them."""


def _quiet(_: str) -> None:
    pass


def _assert_same_numbers(a, b):
    """Per-seed results computed beside other seeds: arms bit for bit, curves to 1e-9 of their scale (XLA may
    sum a float64 over 2 seeds in another order than over 4)."""
    np.testing.assert_array_equal(a.arms, b.arms)
    np.testing.assert_array_equal(a.rounds, b.rounds)
    for m in b.curves:
        np.testing.assert_allclose(a.curves[m], b.curves[m], rtol=0, atol=1e-9 * np.abs(b.curves[m]).max())


def test_seed_ranges():
    assert seed_ranges([0, 1, 2, 5, 7, 8]) == [range(0, 3), range(5, 6), range(7, 9)]
    assert seed_ranges([]) == []


def test_raising_seeds_computes_only_the_new_ones(tmp_path, experiment_file, monkeypatch):
    two = load_experiment(experiment_file(EXPERIMENT.format(seeds=2), "two"))
    four = load_experiment(experiment_file(EXPERIMENT.format(seeds=4), "four"))
    loop, computed = LOOPS["bandit"], []
    compute = loop.compute
    monkeypatch.setattr(loop, "compute", lambda batch, seeds, **kw: computed.append((len(batch), list(seeds)))
                        or compute(batch, seeds, **kw))
    with Store(tmp_path / "grown.duckdb") as store:
        assert run_experiment(two, store, progress=False, log=_quiet) == 3
        computed.clear()
        logs: list[str] = []
        assert run_experiment(four, store, progress=False, log=logs.append) == 3
        assert sorted(computed) == [(1, [2, 3]), (2, [2, 3])]  # UCB alone, TS's grid of two side by side
        assert any("3 run(s) partly in" in m and "6 stored seed(s) reused" in m for m in logs), logs
        grown = {r.label: store.load(r.series_id, r.seeds, with_arms=True) for r in four.runs}
        assert {s.parts for s in grown.values()} == {2} and all(s.seeds == (0, 1, 2, 3) for s in grown.values())
        assert run_experiment(two, store, progress=False, log=_quiet) == 0  # its seeds are stored
        assert missing(store, four.runs).todo == []
    with Store(tmp_path / "whole.duckdb") as store:
        run_experiment(four, store, progress=False, log=_quiet)
        for r in four.runs:
            whole = store.load(r.series_id, r.seeds, with_arms=True)
            assert whole.parts == 1
            _assert_same_numbers(grown[r.label], whole)
            # Fewer seeds than their computation held: the run seconds attributable to them.
            assert store.load(r.series_id, [3]).run_s == pytest.approx(whole.run_s / 4, rel=1e-12)
        with pytest.raises(KeyError, match=four.runs[0].series_id):
            store.load(four.runs[0].series_id, range(5))


def test_loading_many_runs_at_once_reads_each_as_alone(tmp_path, experiment_file):
    """``load_many`` reads every request (several series, seeds across two parts, a series asked for twice) as it is
    read alone, and as the database holds it; one request for a seed not stored fails the call, naming its series."""
    two = load_experiment(experiment_file(EXPERIMENT.format(seeds=2), "two"))
    four = load_experiment(experiment_file(EXPERIMENT.format(seeds=4), "four"))
    with Store(tmp_path / "m.duckdb") as store:
        run_experiment(two, store, progress=False, log=_quiet)
        run_experiment(four, store, progress=False, log=_quiet)  # each series in two parts: seeds 0-1 and 2-3
        requests = [(r.series_id, seeds) for r in four.runs for seeds in (range(4), [3, 1], [2])]
        together = store.load_many(requests, with_arms=True)
        assert [run.parts for run in together] == [2, 2, 1] * len(four.runs)
        for (series_id, seeds), run in zip(requests, together):
            alone = store.load_many([(series_id, seeds)], with_arms=True)[0]
            assert (run.series_id, run.seeds) == (series_id, tuple(sorted(seeds)))
            assert (run.label, run.config, run.compile_s, run.run_s, run.batch_size, run.phases) == (
                alone.label, alone.config, alone.compile_s, alone.run_s, alone.batch_size, alone.phases)
            for a, b in [(run.rounds, alone.rounds), (run.arms, alone.arms)] + [
                    (run.curves[m], alone.curves[m]) for m in alone.curves]:
                np.testing.assert_array_equal(a, b)
            for i, seed in enumerate(run.seeds):
                held = store.con.execute("SELECT t, value FROM curves WHERE series_id = ? AND seed = ? AND metric = "
                                         "'regret' ORDER BY t", [series_id, seed]).fetchall()
                np.testing.assert_array_equal(run.rounds, [t for t, _ in held])
                np.testing.assert_array_equal(run.cum_regret[i], [v for _, v in held])
                np.testing.assert_array_equal(run.arms[i], store.con.execute(
                    "SELECT arms FROM seeds WHERE series_id = ? AND seed = ?", [series_id, seed]).fetchone()[0])
        with pytest.raises(KeyError, match=four.runs[1].series_id):
            store.load_many([requests[0], (four.runs[1].series_id, range(5))])


def test_a_timed_run_stored_in_pieces_is_computed_again_whole(tmp_path, experiment_file):
    two = load_experiment(experiment_file(EXPERIMENT.format(seeds=2), "two"))
    four = load_experiment(experiment_file(EXPERIMENT.format(seeds=4), "four"))
    ucb = next(r for r in four.runs if r.label == "UCB")
    with Store(tmp_path / "t.duckdb") as store:
        run_experiment(two, store, progress=False, log=_quiet)
        run_experiment(four, store, progress=False, log=_quiet)
        before = store.load(ucb.series_id, ucb.seeds, with_arms=True)
        four.claims[:] = [Claim("t", "", "runtime('UCB') > 0", "pass")]
        assert timed_runs(four) == {ucb.run_id}
        logs: list[str] = []
        assert run_experiment(four, store, progress=False, log=logs.append) == 1
        assert any("1 run(s) computed again in a batch of one on all their seeds" in m for m in logs), logs
        after = store.load(ucb.series_id, ucb.seeds, with_arms=True)
        assert after.parts == 1 and after.batch_size == 1
        _assert_same_numbers(after, before)
        assert run_experiment(four, store, progress=False, log=_quiet) == 0


def _write_v2(path, runs: list[tuple], phases: dict[str, list[tuple]]) -> None:
    """A database of the previous layout holding ``runs``: (run, stored run, finished time) each."""
    con = duckdb.connect(str(path))
    con.execute(V2_SCHEMA)
    for run, stored, finished in runs:
        s = len(stored.seeds)
        con.execute("INSERT INTO runs VALUES (?, 'p/e', ?, ?, '0', ?, ?, 1.5, ?, 10, [1.0], 2, ?)",
                    [run.run_id, run.label, json.dumps(run.identity()), run.horizon, s, stored.run_s, finished])
        for i in range(s):
            con.execute("INSERT INTO arms VALUES (?, ?, ?)", [run.run_id, i, stored.arms[i].tolist()])
            for m, curve in stored.curves.items():
                con.executemany("INSERT INTO curves VALUES (?, ?, ?, ?, ?)",
                                [[run.run_id, m, i, int(t), float(v)] for t, v in zip(stored.rounds, curve[i])])
        for sample in phases.get(run.run_id, []):
            con.execute("INSERT INTO phases VALUES (?, ?, ?, ?)", [run.run_id, *sample])
    con.close()


def test_checkpoints_saved_before_they_named_their_batch_are_kept(tmp_path):
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE checkpoints (batch_id VARCHAR PRIMARY KEY, t_done BIGINT, progress BLOB, "
                "saved TIMESTAMP DEFAULT current_timestamp)")
    con.execute("INSERT INTO checkpoints (batch_id, t_done, progress) VALUES ('old', 400, 'abc'::BLOB)")
    con.close()
    with Store(path) as store:
        assert store.checkpoints() == [("old", 400, 3, None)] and store.load_checkpoint("old") == b"abc"
        store.name_batches({"new": "p/e: UCB (seeds 0-3)"})
        store.save_checkpoint("new", 200, b"de")
    with Store(path) as store:  # (named in the database: another process reads it)
        assert store.checkpoints() == [("new", 200, 2, "p/e: UCB (seeds 0-3)"), ("old", 400, 3, None)]


def test_a_database_of_the_previous_layout_is_converted_and_its_runs_reused(tmp_path, experiment_file):
    four = load_experiment(experiment_file(EXPERIMENT.format(seeds=4), "four"))
    with Store(tmp_path / "ref.duckdb") as store:
        run_experiment(four, store, progress=False, log=_quiet)
        ref = {r.label: store.load(r.series_id, r.seeds, with_arms=True) for r in four.runs}
    ucb = next(r for r in four.runs if r.label == "UCB")
    # UCB stored twice: on seeds 0..2 (finished first; its seed 2 has other arms) and on 0..3, with phases; a
    # tuning-style run of UCB on seeds 2..3 (seed_offset 2); the TS runs on their four seeds.
    early, tuning = replace(ucb, n_seeds=3), replace(ucb, n_seeds=2, seed_offset=2)
    stale_seed2 = replace(ref["UCB"], seeds=(0, 1, 2), arms=ref["UCB"].arms[:3].copy(),
                          curves={m: c[:3] for m, c in ref["UCB"].curves.items()})
    stale_seed2.arms[2] = (stale_seed2.arms[2] + 1) % 4
    tail = replace(ref["UCB"], seeds=(2, 3), arms=ref["UCB"].arms[2:],
                   curves={m: c[2:] for m, c in ref["UCB"].curves.items()})
    runs = [(early, stale_seed2, "2026-01-01 00:00:00"), (ucb, ref["UCB"], "2026-01-02 00:00:00"),
            (tuning, tail, "2026-01-03 00:00:00")]
    runs += [(r, ref[r.label], "2026-01-02 00:00:00") for r in four.runs if r.label != "UCB"]
    path, ts = tmp_path / "v2.duckdb", next(r for r in four.runs if r.label.startswith("TS"))
    _write_v2(path, runs, {ucb.run_id: [(5, 0.25, 0.5)], ts.run_id: [(5, 0.25, 0.5), (9, 0.5, 1.0)]})
    with Store(path) as store:
        tables = {t for (t,) in store.con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        assert tables == {"series", "parts", "seeds", "curves", "phases", "checkpoints"}
        assert missing(store, four.runs).todo == []
        for r in four.runs:
            _assert_same_numbers(store.load(r.series_id, r.seeds, with_arms=True), ref[r.label])
        # Each seed from the run that stored it last: 0..1 from the 0..3 run (with its phases), 2..3 from the
        # tuning-style run; the 0..2 run (first, with other arms on seed 2) lost all its seeds and is gone.
        parts = store.parts([ucb.series_id])[ucb.series_id]
        assert [(p.first_seed, p.n_seeds, p.holds) for p in parts] == [(0, 4, (0, 1)), (2, 2, (2, 3))]
        assert store.load(tuning.series_id, tuning.seeds).run_s == pytest.approx(ref["UCB"].run_s)
        # The phase timings are kept, without the rows of their timed calls: neither read nor counted as timed.
        assert store.con.execute("SELECT series_id, t, select_rows, update_rows FROM phases ORDER BY series_id, t"
                                 ).fetchall() == sorted([(ucb.series_id, 5, None, None), (ts.series_id, 5, None, None),
                                                         (ts.series_id, 9, None, None)])
        assert all(p.phase_rows is None for p in parts) and store.load(ts.series_id, ts.seeds).phases is None
    with Store(path) as store:  # opened again: nothing left to convert
        assert missing(store, four.runs).todo == []
