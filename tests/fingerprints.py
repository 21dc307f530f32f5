"""Golden fingerprints: a digest of the numbers each registered policy and environment computes, checked
against ``tests/fingerprints.json`` so that a change of numbers is never silent.

A stored run is keyed by its code's normalised syntax tree (:mod:`nlbandit.provenance`), which changes with
every edit that could change a number, whether it does or not. The fingerprint tells which edits did: the
contract test (``tests/test_contract.py``) digests every policy's chosen arms, regret and final state on
its stressed environment, and ``tests/test_fingerprints.py`` every environment's under uniform play, and compares each
digest with the table. A mismatch fails with the module whose ``NUMERICS`` to bump; bumping it re-keys the
stored runs of that module, and the table is re-recorded in the same commit::

    NLBANDIT_FINGERPRINTS=record .venv/bin/python -m pytest -n 0 tests/test_contract.py tests/test_fingerprints.py -k fingerprint

XLA compiles for the host's CPU (its vector width decides the order of float sums), a new ``jax`` may compile
differently, and so may the quick scale's XLA flags (:mod:`nlbandit.compile_flags`), with which the default suite
compiles (``tests/conftest.py``), so the same code gives other last bits on another CPU, toolchain or set of flags:
the table holds one set of digests per platform (:func:`platform`), and a platform without one skips the check,
saying how to record it. Re-record both sets, the suite's and XLA's defaults (as full-scale runs compile): the
command above, then again with ``XLA_FLAGS=`` before it. Floats (regrets, a policy's final state) enter the digest
rounded to 10 significant digits, arms exactly.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from pathlib import Path

import jax
import jaxlib
import numpy as np
import pytest

from nlbandit.compile_flags import identity_flags

TABLE = Path(__file__).with_name("fingerprints.json")
RECORD = os.environ.get("NLBANDIT_FINGERPRINTS") == "record"


def platform() -> str:
    """The toolchain, CPU class and compiler flags the digests hold for, e.g. ``jax 0.8.1 / jaxlib 0.8.1 / cpu
    avx512`` under XLA's defaults, followed by `` / `` and the flags of a run's identity where ``XLA_FLAGS`` sets
    any (:func:`nlbandit.compile_flags.identity_flags`: the quick scale's)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        flags = []
    cpu = next((f for f in ("avx512f", "avx2", "neon") if f in flags), "other").removesuffix("f")
    compiled = identity_flags()
    return (f"jax {jax.__version__} / jaxlib {jaxlib.__version__} / {jax.default_backend()} {cpu}"
            + (f" / {compiled}" if compiled else ""))


def digest(arms: np.ndarray, *values: np.ndarray) -> str:
    """16 hex digits of SHA-256 over the chosen arms (int32) and ``values`` (the regret, a final state's
    leaves): integers exactly, floats to 10 significant digits."""
    h = hashlib.sha256(np.ascontiguousarray(arms, np.int32).tobytes())
    for value in values:
        value = np.asarray(value)
        if np.issubdtype(value.dtype, np.floating):
            h.update(" ".join(f"{v:.9e}" for v in value.astype(np.float64).ravel()).encode())
        else:
            h.update(np.ascontiguousarray(value, np.int64).tobytes())
    return h.hexdigest()[:16]


def numerics(modules: tuple[str, ...]) -> dict[str, int]:
    """The ``NUMERICS`` version of each of ``modules`` that declares one."""
    found = {m: getattr(importlib.import_module(m), "NUMERICS", None) for m in modules}
    return {m: v for m, v in found.items() if v is not None}


def check(kind: str, name: str, value: str, modules: tuple[str, ...]) -> None:
    """Compare ``value`` (a :func:`digest`) of ``kind`` (``policies`` or ``envs``) ``name`` with the table, whose
    entry also records the ``NUMERICS`` of ``modules`` it was taken under; with ``NLBANDIT_FINGERPRINTS=record``,
    write it into the table instead."""
    versions, what = numerics(modules), {"policies": "policy", "envs": "environment"}[kind]
    table = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    here = table.setdefault(platform(), {}).setdefault(kind, {})
    if RECORD:
        here[name] = {"digest": value, "numerics": versions}
        tmp = TABLE.with_suffix(".tmp")
        tmp.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        tmp.replace(TABLE)
        return
    if name not in here:
        pytest.skip(f"no fingerprint of {what} {name!r} recorded for {platform()} (record the table: "
                    "NLBANDIT_FINGERPRINTS=record, tests/fingerprints.py)")
    recorded = here[name]
    owner = " or ".join(m.replace(".", "/") + ".py" for m in versions) or "its module"
    if recorded["numerics"] != versions:
        pytest.fail(f"{what} {name!r}: NUMERICS is now {versions}, the table was recorded under "
                    f"{recorded['numerics']}: re-record the table (NLBANDIT_FINGERPRINTS=record, tests/fingerprints.py)")
    if recorded["digest"] != value:
        pytest.fail(f"the numbers of {what} {name!r} changed (digest {value}, table {recorded['digest']}): if "
                    f"on purpose, bump NUMERICS in {owner} and re-record the table (NLBANDIT_FINGERPRINTS=record, "
                    "tests/fingerprints.py); otherwise the edit changed numbers it should not have")
