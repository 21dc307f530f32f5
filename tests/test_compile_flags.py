"""The quick scale's XLA flag (nlbandit.compile_flags): a quick-scale command sets it before JAX starts its
backend, never after nor over the user's own choice; its runs carry it in their identity, not in their code hash,
so they are stored apart from default-compiled runs yet stay current for a command without it."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import pytest

from nlbandit.compile_flags import QUICK_SCALE, compile_quick_scale, hashed_flags, identity_flags
from nlbandit.experiments.plan import load_experiment
from nlbandit.experiments.results import annotated_runs, recompute_sample
from nlbandit.experiments.runner import batch_key, batches
from nlbandit.experiments.spec import RunConfig, run_code
from nlbandit.store import Store

QUICK = " ".join(QUICK_SCALE)

TINY = """
title = "tiny"
horizon = 40
seeds = 2
[tune]
seeds = 1
[env]
name = "logistic"
d = 3
k = 4
[[policies]]
label = "UCB"
name = "glm-ucb"
[[policies]]
label = "TS"
name = "glm-tsl"
tune = { a = [0.5, 2.0] }
"""


def test_a_fresh_process_gets_the_flags_before_its_backend_starts():
    code = ("import os, jax.numpy as jnp, nlbandit; from nlbandit.compile_flags import compile_quick_scale as q; "
            "print(q(), os.environ['XLA_FLAGS']); jnp.ones(2).block_until_ready(); print(q())")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env).stdout.split("\n")
    assert out[0].startswith("True ") and set(QUICK_SCALE) <= set(out[0].split()) and out[1] == "True"
    # an option the user names keeps the user's value; the others are added
    mine = "--xla_cpu_parallel_codegen_split_count=4"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "XLA_FLAGS": mine}).stdout.split("\n")
    assert out[0].split()[0] == "False" and mine in out[0].split() and QUICK_SCALE[0] in out[0].split()


def test_the_flag_is_not_added_once_the_backend_runs_nor_over_the_users_choice(monkeypatch):
    jax.devices()  # (the test session starts the backend: tests/conftest.py)
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    assert compile_quick_scale() is False and os.environ["XLA_FLAGS"] == "--xla_backend_optimization_level=1"
    mine = "--xla_cpu_use_fusion_emitters=true"
    monkeypatch.setenv("XLA_FLAGS", mine)
    assert compile_quick_scale() is False and os.environ["XLA_FLAGS"] == mine
    monkeypatch.setenv("XLA_FLAGS", f"{mine} {QUICK}")
    assert compile_quick_scale() is True and identity_flags() == QUICK


def test_the_flag_is_in_the_identity_and_other_flags_in_the_code_hash(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    plain = run_code("glm-ucb", "logistic")
    monkeypatch.setenv("XLA_FLAGS", f"--xla_backend_optimization_level=1 {QUICK}")
    assert hashed_flags() == "--xla_backend_optimization_level=1" and run_code("glm-ucb", "logistic") == plain
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1 --xla_cpu_enable_fast_math=false")
    assert run_code("glm-ucb", "logistic") != plain  # (read as the flags are now, not as first hashed)


def test_runs_planned_under_the_flag_carry_it_and_are_stored_and_batched_apart(monkeypatch, experiment_file):
    path = experiment_file(TINY)
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    plain = load_experiment(path, "quick")
    monkeypatch.setenv("XLA_FLAGS", f"--xla_backend_optimization_level=1 {QUICK}")
    quick = load_experiment(path, "quick")
    runs = quick.runs + [c for t in quick.tuning for c in t.candidates]
    assert runs and all(r.xla == QUICK and r.identity()["xla"] == QUICK for r in runs)
    assert all("xla" not in r.identity() for r in plain.runs + [c for t in plain.tuning for c in t.candidates])
    assert all(RunConfig.from_identity(r.identity()).identity() == r.identity() for r in runs + plain.runs)
    q, p = quick.runs[0], plain.runs[0]
    assert q.code == p.code and q.series_id != p.series_id and batch_key(q) != batch_key(p)
    assert len(batches([q, p])) == 2


def test_a_quick_command_stores_runs_that_a_command_without_the_flag_finds_current(tmp_path, experiment_file,
                                                                                  monkeypatch):
    path, db = experiment_file(TINY), tmp_path / "r.duckdb"
    monkeypatch.setenv("XLA_FLAGS", hashed_flags())  # (this process as one without them: the suite sets them)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    subprocess.run([sys.executable, "-m", "nlbandit.cli", "run", str(path), "--scale", "quick", "--db", str(db),
                    "--out", str(tmp_path / "out"), "--no-progress", "--executor", "processes", "--workers", "2"],
                   check=True, capture_output=True, env=env)
    with Store(db) as store:
        runs = annotated_runs(store)
    assert runs and all(r["config"]["xla"] == QUICK and r["current"] for r in runs)
    pilot = subprocess.run([sys.executable, "-m", "nlbandit.cli", "seeds", str(path), "--scale", "quick", "--db",
                            str(db)], capture_output=True, text=True, env=env)
    assert pilot.returncode == 0 and "pilot:" in pilot.stdout, pilot.stderr  # (it plans the quick runs as stored)


def test_a_run_compiled_with_the_flag_is_not_recomputed_without_it(monkeypatch, experiment_file):
    monkeypatch.setenv("XLA_FLAGS", f"--xla_backend_optimization_level=1 {QUICK}")
    run = load_experiment(experiment_file(TINY), "quick").runs[0]
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=1")
    with pytest.raises(ValueError, match=f"compiled with XLA flags {QUICK}, which this process does not set"):
        recompute_sample([run], [0, 1], lambda out: True)
