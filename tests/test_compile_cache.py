"""The per-command compilation cache (:mod:`nlbandit.compile_cache`)."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.compile_cache import command_cache


def _program():
    """A fresh function object each call (so JAX's in-memory cache cannot serve it), the same program."""
    return jax.jit(lambda x: jnp.tanh(x @ x.T).sum(axis=0) * jnp.arange(x.shape[0]))


def test_a_fresh_folder_per_command_loaded_by_the_next_compilation_and_removed(monkeypatch):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")  # (cache even this small program)
    x = np.linspace(-1.0, 1.0, 64).reshape(8, 8)
    with command_cache() as folder:
        assert os.environ["JAX_COMPILATION_CACHE_DIR"] == folder and Path(folder).is_dir()
        first = np.asarray(_program()(x))
        entries = sorted(Path(folder).iterdir())
        assert entries, "the compiled program was not written to the cache"
        again = np.asarray(_program()(x))  # loaded from the cache: no new entry, the same numbers
        assert sorted(Path(folder).iterdir()) == entries
        np.testing.assert_array_equal(again, first)
    assert not Path(folder).exists()
    assert "JAX_COMPILATION_CACHE_DIR" not in os.environ


def test_the_users_own_cache_is_used_and_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path))
    with command_cache() as folder:
        assert folder is None and os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)
    assert tmp_path.is_dir() and os.environ["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path)
