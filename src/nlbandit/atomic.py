"""Atomic, durable files: what a saved agent, an exported instance and a report are written with."""

from __future__ import annotations

import contextlib
import glob
import os
import tempfile
import time
from pathlib import Path
from typing import BinaryIO, Callable

import numpy as np


def write_with(path: Path, write: Callable[[BinaryIO], None]) -> Path:
    """Write ``path`` atomically with ``write(file)``: into a temporary file in the same folder (created with
    its parents), synced, then renamed over ``path``, and the rename synced where the platform allows, so
    ``path`` is never half-written; the temporary file is removed if ``write`` fails. The file gets the mode of
    the one it replaces, or that of a new file under the process's umask (not the temporary file's 0600)."""
    path = Path(path)
    tmp = _staged(path, write)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)
    return path


def write_files(files: dict[Path, bytes]) -> None:
    """Write several files that belong together (a report's markdown, plots and run list) so that they change
    together: each is written to a synced temporary file first, and only then are they renamed into place, one
    right after the other (a process killed before the renames leaves every file as it was). Temporary files that
    an earlier write killed before its renames left beside them (older than :data:`STALE_SECONDS`) are removed."""
    staged: list[tuple[Path, Path]] = []
    try:
        for path, data in files.items():
            path = Path(path)
            remove_leftovers(path)
            staged.append((_staged(path, lambda f, data=data: f.write(data)), path))
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)
        raise
    for folder in {path.parent for _, path in staged}:
        sync_folder(folder)


STALE_SECONDS = 3600
"""How old a temporary file of an atomic write must be before :func:`write_files` takes it for a leftover of a
process killed while writing (younger ones may belong to a command writing the same file now)."""


def _staged(path: Path, write: Callable[[BinaryIO], None]) -> Path:
    """A synced temporary file beside ``path`` (its folder created) holding what ``write`` wrote, with the mode
    ``path`` is to have; removed if ``write`` fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def remove_leftovers(path: Path, older_than: float = STALE_SECONDS) -> int:
    """Remove the temporary files of ``path`` (``.<name>.<8 characters>``, :func:`_staged`'s) older than
    ``older_than`` seconds (0: all, for a folder no other process writes in, e.g. a service's locked one); return
    how many were removed."""
    if not path.parent.is_dir():
        return 0
    now, removed = time.time(), 0
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.????????"):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime >= older_than:
                tmp.unlink()
                removed += 1
    return removed


def _mode_for(path: Path) -> int:
    """The permission bits ``path`` has, or those ``open`` gives a new file (0o666 less the umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask() -> int:
    """The process's umask: from ``/proc/self/status`` (Linux), else read by setting it and setting it back (a
    moment in which another thread's new file would get 0o022)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def write_bytes(path: Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`write_with`)."""
    return write_with(path, lambda f: f.write(data))


def write_npz(path: Path, arrays: dict[str, np.ndarray], compress: bool = False) -> Path:
    """Write ``arrays`` to ``path`` as ``.npz`` atomically (:func:`write_with`)."""
    return write_with(path, lambda f: (np.savez_compressed if compress else np.savez)(f, **arrays))


def sync_folder(folder: Path) -> None:
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
