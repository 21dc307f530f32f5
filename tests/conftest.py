"""Shared test fixtures.

* ``experiment_file``: writes an experiment file (dedented TOML text) into a fresh folder named after
  its paper and returns its path, so that reports land in predictable places.
* a test module's ``RNG`` is restarted from its ``RNG_SEED`` before each of its tests (autouse).

The default suite skips tests marked ``slow`` (long statistical reproductions: a policy learns, beats
uniform play, has sublinear regret, a sampler has the right law); run them with ``pytest -m slow``.

The CLI computes in this process (``NLBANDIT_EXECUTOR=local``) unless a test asks for worker processes: the
suite already runs in one pytest-xdist worker per core, each pinned to its own core (before JAX starts), so
that the workers' XLA thread pools do not contend for the same cores. Pinning changes no number: the golden
fingerprints (tests/fingerprints.json, recorded with ``-n 0`` in one unpinned process) pass in pinned workers.

The suite compiles with the quick scale's XLA flags (:data:`nlbandit.compile_flags.QUICK_SCALE`; the suite in about
a third less time, docs/performance.md#the-test-suite), added in the session's first process before JAX starts, so
that every process of the session (the workers, and the CLI and executor processes the tests start) compiles alike,
a quick-scale command as it would for a user, unless ``XLA_FLAGS`` is set already: ``XLA_FLAGS= pytest`` runs the
suite with XLA's defaults, as full-scale runs and the committed reports compile. The golden fingerprints hold a set
of digests for each (tests/fingerprints.py). Each test process starts JAX's backend at once, so a test's in-process
command cannot change the flags.

The session's processes share one JAX compilation cache, a fresh folder removed at the end (unless
``JAX_COMPILATION_CACHE_DIR`` is set already): a program compiled by one of them is loaded by the others, the same
executable, so no number changes.
"""

from __future__ import annotations

import contextlib
import os
import textwrap
from pathlib import Path
from typing import Callable

import pytest

os.environ.setdefault("NLBANDIT_EXECUTOR", "local")


_CACHE = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config: pytest.Config) -> None:
    """In the session's first process, the quick scale's XLA flags unless ``XLA_FLAGS`` is set, and a fresh
    compilation cache, both inherited by every later one (:func:`nlbandit.compile_cache.command_cache`); in an
    xdist worker, a core of its own when there are at least as many cores as workers."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if worker is None:
        chosen = "XLA_FLAGS" in os.environ  # (before importing nlbandit, which adds its optimisation level)
        from nlbandit.compile_cache import command_cache
        from nlbandit.compile_flags import compile_quick_scale

        if not chosen:
            compile_quick_scale()
        config.stash[_CACHE] = stack = contextlib.ExitStack()
        stack.enter_context(command_cache())
    if worker and hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        if 1 < count <= len(cores):
            os.sched_setaffinity(0, {cores[int(worker.removeprefix("gw")) % len(cores)]})
    import jax

    jax.devices()  # JAX's backend starts with the session's XLA flags, whatever a test's in-process command may add


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the session's compilation cache."""
    if _CACHE in config.stash:
        config.stash[_CACHE].close()


@pytest.fixture()
def experiment_file(tmp_path: Path) -> Callable[..., Path]:
    """``experiment_file(text, name="e", paper="paper") -> Path`` of the written TOML file."""

    def write(text: str, name: str = "e", paper: str = "paper") -> Path:
        path = tmp_path / paper / f"{name}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    return write


@pytest.fixture(autouse=True)
def _module_rng_restarted(request: pytest.FixtureRequest) -> None:
    """A test module's generator ``RNG`` restarted from the module's ``RNG_SEED`` before each of its tests, so that a
    test's draws do not depend on which tests ran before it (``pytest -k NAME`` reproduces a failure)."""
    seed = getattr(request.module, "RNG_SEED", None)
    if seed is not None:
        import numpy as np

        request.module.RNG = np.random.default_rng(seed)
