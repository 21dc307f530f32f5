"""What machine a timing or a report was computed on: the CPU's model, its vector extension and the cores this
process may use.

The CPU of a shared VM can change between days (this project's has been two AVX-512 AMD EPYC models, family 25
model 17 and family 26 model 2, and an AVX2-only one 2.2–2.6× slower per experiment file), so every wall time the
command line prints comes with it, and so does every report: a VM's model name can hide which CPU it is ("AMD
EPYC"), so the family and model numbers come with it."""

from __future__ import annotations

import os
import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")


def describe(cpuinfo: str | None = None) -> str:
    """The CPU as ``"<model> (family F, model M), AVX-512, 2 cores"``: the model name, family and model numbers
    and flags of ``cpuinfo`` (the text of ``/proc/cpuinfo``, read when None; elsewhere
    :func:`platform.processor`; the numbers only where it gives both), the widest of AVX-512 (``avx512f``) and
    AVX2 it has ("no AVX2" otherwise, "extensions unknown" without a flags line), and the cores this process may
    run on."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("model name", "cpu family", "model", "flags") and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    model = fields.get("model name") or platform.processor() or "unknown CPU"
    if fields.get("cpu family") and fields.get("model"):
        model += f" (family {fields['cpu family']}, model {fields['model']})"
    flags = set(fields.get("flags", "").split())
    vector = ("AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2") if flags else \
        "extensions unknown"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, {vector}, {cores} core{'s' if cores != 1 else ''}"


__all__ = ["describe"]
