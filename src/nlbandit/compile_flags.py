"""XLA compiler flags that a command chooses for its whole process: the quick scale compiles for speed.

The quick scale's batches run for seconds, so XLA's compiler is most of their time (2026-11-27, AVX-512 VM: 624 of
the 1,117 s that the quick tier's batches took, summed over both workers). XLA's LLVM IR fusion emitters compile
the same programs in about 60% of the time of its default MLIR ones (``--xla_cpu_use_fusion_emitters=false``;
the quick tier's compilation 375 s against 624 s, its runs 494 s against 493 s; docs/performance.md), and one LLVM
module per program compiles in another 9% less (:data:`QUICK_SCALE`). A command whose runs are all at the quick
scale (``run``, ``report``, ``check``, ``seeds`` with ``--scale quick``) sets these flags in ``XLA_FLAGS`` before
JAX starts its backend, and the worker processes it starts inherit them.

``XLA_FLAGS`` is part of every run's code hash (:mod:`nlbandit.provenance`), except the flags of
:data:`IN_IDENTITY`: those are part of the run's identity instead (:attr:`nlbandit.experiments.spec.RunConfig.xla`,
:func:`identity_flags`). So a quick run is stored apart from the same configuration compiled with XLA's defaults
(most are bit-identical, but float32 networks and a few others round otherwise: 1,224 of the 1,252 quick-tier
runs were bit-identical), yet it stays *current* for a later command that does not set the flag (``nlbandit
results list`` would otherwise call it stale, and ``prune`` delete it). Full-scale runs, and so every committed
report, keep XLA's defaults and their keys.
"""

from __future__ import annotations

import os

QUICK_SCALE = ("--xla_cpu_use_fusion_emitters=false", "--xla_cpu_parallel_codegen_split_count=1")
"""The flags of :func:`compile_quick_scale`: the LLVM IR fusion emitters, and one LLVM module per program rather than
several compiled in parallel (each worker process has a core of its own; the quick tier's compilation 346 s
against 380 s, every one of its 1,252 runs bit-identical, 2026-11-27, docs/performance.md)."""

IN_IDENTITY = QUICK_SCALE
"""XLA flags recorded in a run's identity rather than in its code hash."""


def identity_flags() -> str:
    """The flags of :data:`IN_IDENTITY` in this process's ``XLA_FLAGS``, space-separated ('' for none): what a run
    planned here records as compiled with."""
    return " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if f in IN_IDENTITY)


def hashed_flags() -> str:
    """This process's ``XLA_FLAGS`` less the flags of :data:`IN_IDENTITY` (as it is where it names none): what a
    run's code hash includes."""
    flags = os.environ.get("XLA_FLAGS", "")
    if not any(f in IN_IDENTITY for f in flags.split()):
        return flags
    return " ".join(f for f in flags.split() if f not in IN_IDENTITY)


def compile_quick_scale() -> bool:
    """Add the flags of :data:`QUICK_SCALE` to ``XLA_FLAGS`` for this process and the processes it starts; return
    whether all are in effect. A flag is not added where ``XLA_FLAGS`` already names its option (the user's choice
    stands), and none once JAX has started its backend in this process (they would not take effect, yet a run's
    identity would say they had)."""
    flags = os.environ.get("XLA_FLAGS", "")
    adding = [f for f in QUICK_SCALE if f.split("=")[0] not in flags]
    if adding:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            return all(f in flags.split() for f in QUICK_SCALE)
        os.environ["XLA_FLAGS"] = " ".join([flags] + adding).strip()
    return all(f in os.environ["XLA_FLAGS"].split() for f in QUICK_SCALE)
