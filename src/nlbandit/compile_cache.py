"""One JAX compilation cache for the processes of one command.

An experiment compiles one program per batch of runs, and the batches of different files, scales, tuning
batches and worker processes often compile the very same program (same shapes, same policy code; the
hyperparameters are arguments, not constants). JAX's persistent compilation cache keys a compiled executable
by its program, so a program compiled once is loaded, not compiled again, by every later batch that needs it,
in this process or in a worker: the same executable, so no number changes. Measured with the quick scale of
bae2025/fig1_fig4_lr and fig1_fig4_sphere one after the other (one worker, 2026-11-26): 183.2 s without it,
93.4 s with a fresh cache (docs/performance.md).

:func:`command_cache` gives each command a fresh cache folder, removed when it ends, so that nothing outlives
the command and a measured time is that of a fresh machine. Where ``JAX_COMPILATION_CACHE_DIR`` is set
already, that cache is used instead, and kept (JAX reads it at import; a persistent cache across commands is
then the user's choice). The test suite does the same per session (tests/conftest.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from typing import Iterator

import jax
from jax.experimental.compilation_cache import compilation_cache

MIN_COMPILE_SECONDS = 0.1
"""Programs that compiled in less than this are not written to the cache (JAX's default is 1 s)."""

_VARIABLES = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS")


@contextlib.contextmanager
def command_cache() -> Iterator[str | None]:
    """A fresh compilation cache for the ``with`` block, in this process and in the worker processes it starts
    (they inherit its environment variables), removed at the end; yields its folder, or None where
    ``JAX_COMPILATION_CACHE_DIR`` names the user's own cache."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        yield None
        return
    before = {name: os.environ.get(name) for name in _VARIABLES}
    folder = tempfile.mkdtemp(prefix="nlbandit-xla-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(MIN_COMPILE_SECONDS))
    settings = {"jax_compilation_cache_dir": folder, "jax_persistent_cache_min_compile_time_secs":
                float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"])}
    previous = {name: getattr(jax.config, name) for name in settings}
    for name, value in settings.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()  # (JAX settles on a cache folder, or none, at its first compilation)
    try:
        yield folder
    finally:
        for name, value in previous.items():
            jax.config.update(name, value)
        compilation_cache.reset_cache()
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(folder, ignore_errors=True)
