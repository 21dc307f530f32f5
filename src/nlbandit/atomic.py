"""Atomic, durable ``.npz`` files: what a saved agent or an exported instance is written with."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np


def write_npz(path: Path, arrays: dict[str, np.ndarray], compress: bool = False) -> Path:
    """Write ``arrays`` to ``path`` as ``.npz`` atomically (a temporary file in the same folder, synced,
    then renamed, and the rename synced where the platform allows), so ``path`` is never half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            (np.savez_compressed if compress else np.savez)(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)
    return path


def _sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (where the platform can open folders)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
