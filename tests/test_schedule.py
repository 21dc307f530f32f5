"""Several experiments computed together (:mod:`nlbandit.experiments.schedule`): each file's next step as soon as its
previous one is stored, a file waits for an earlier one whose series it reads, the timed runs are computed alone, and
every stored number is the one that computing the files one at a time stores."""

from __future__ import annotations

import numpy as np

from nlbandit.experiments.executors import LocalExecutor
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.runner import run_experiment
from nlbandit.experiments.tuning import tune_experiment
from nlbandit.experiments.schedule import run_experiments
from nlbandit.store import Store

FILE = """
horizon = 60
seeds = 2
{extra}
[env]
name = "linear"
d = {d}
k = 4
[[policies]]
label = "UCB"
name = "lin-ucb"
{ucb}
[[policies]]
label = "other"
{other}
"""
TIMED_CLAIM = """[[claims]]
name = "t"
text = "a runtime claim: UCB's run is computed alone"
check = "runtime('UCB') > 0"
"""


class Recording:
    """This process's executor, as if it had two workers (so that batches are balanced for two), recording which
    file's jobs each call computes."""

    slots = 2

    def __init__(self):
        self.calls: list[tuple[str, list[str]]] = []

    def _record(self, how, jobs):
        self.calls.append((how, [job.kwargs["tag"][1:].split()[0] for job in jobs]))

    def run(self, jobs, store, *, log, progress, more=None, idle=None):
        self._record("run", jobs)

        def recorded(key, seconds):
            new = more(key, seconds)
            if new:
                self._record("more", new)
            return new

        return LocalExecutor().run(jobs, store, log=log, progress=progress, more=more and recorded)

    def run_alone(self, jobs, store, *, log, progress):
        self._record("alone", jobs)
        return LocalExecutor().run_alone(jobs, store, log=log, progress=progress)

    def close(self):
        pass


def _stored(store: Store) -> dict:
    """Every stored series' file (the one that stored it first), parts and numbers."""
    out = {}
    for series_id, experiment, seeds in store.con.execute(
            "SELECT series_id, experiment, list(seed ORDER BY seed) FROM series JOIN seeds USING (series_id) "
            "GROUP BY ALL").fetchall():
        run = store.load(series_id, seeds, with_arms=True)
        out[series_id] = (experiment, run.parts, run.batch_size, run.arms, run.rounds, run.curves)
    return out


def test_files_computed_together_store_what_one_at_a_time_stores(tmp_path, experiment_file):
    a = experiment_file(FILE.format(extra="", d=3, ucb="", other='name = "lin-ts"\nv = [0.1, 0.3]') + TIMED_CLAIM,
                        "a")
    b = experiment_file(FILE.format(extra="", d=3, ucb="", other='name = "eps-greedy"'), "b")  # reads a's UCB
    c = experiment_file(FILE.format(extra="[tune]\nseeds = 2", d=4, other='name = "lin-ts"',
                                    ucb='width = "constant"\ntune = { alpha = [0.1, 1.0] }'), "c")
    exps = [load_experiment(path) for path in (a, b, c)]
    recording, lines, handed = Recording(), [], []
    with Store(tmp_path / "together.duckdb") as store:
        tuned, seconds = run_experiments(exps, store, recording, progress=False, log=lines.append,
                                         done=lambda i, exp, took: handed.append((i, exp, took)))
        together = _stored(store)
    # each file handed back once, tuned, with its final seconds (this executor computes here: at the end, c first)
    assert [(i, took) for i, _, took in handed] == [(2, seconds[2]), (0, seconds[0]), (1, seconds[1])]
    assert [exp for _, exp, _ in sorted(handed, key=lambda h: h[0])] == tuned
    assert [line for line in lines if "to start with" in line] == [
        f"{len(files)} batch(es) of {len(set(files))} file(s) to start with" for how, files in recording.calls
        if how == "run"]
    # First a's side-by-side runs and c's tuning (b reads a's UCB series: it waits for a); c's runs, chosen by its
    # tuning, as soon as that is stored, in the same call; then a's timed UCB alone, which b then finds stored: b
    # computes its other policy only.
    assert [(how, sorted(set(files))) for how, files in recording.calls] == [
        ("run", ["paper/a", "paper/c"]), ("more", ["paper/c"]), ("alone", ["paper/a"]), ("run", ["paper/b"])]
    assert recording.calls[-1][1] == ["paper/b"] and all(s > 0 for s in seconds) and tuned[2].tuned
    one_at_a_time = Recording()
    with Store(tmp_path / "sequential.duckdb") as store:
        for exp in exps:
            run_experiment(tune_experiment(exp, store, progress=False, log=lambda line: None, executor=one_at_a_time),
                           store, progress=False, log=lambda line: None, executor=one_at_a_time)
        alone = _stored(store)
    # a: UCB and TS's two points; b: ε-greedy; c: UCB's two points (the chosen one on tuning and reported seeds), TS
    assert together.keys() == alone.keys() and len(together) == 3 + 1 + 3
    for series_id, (experiment, parts, batch_size, *numbers) in alone.items():
        assert together[series_id][:3] == (experiment, parts, batch_size), series_id
        for x, y in zip(together[series_id][3:5], numbers[:2]):
            np.testing.assert_array_equal(x, y)
        for metric, curve in numbers[2].items():
            np.testing.assert_array_equal(together[series_id][5][metric], curve)
