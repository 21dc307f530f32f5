"""The data cache: ``$NLBANDIT_DATA`` (default ``~/.cache/nlbandit/data``), files written atomically and
checked against their recorded SHA-256."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class DataError(ValueError):
    """A data file that cannot be had or read: missing, corrupted, unfetchable or malformed."""


def cache_dir() -> Path:
    """The cache folder: ``$NLBANDIT_DATA``, else ``$XDG_CACHE_HOME/nlbandit/data`` (``~/.cache`` by default)."""
    if os.environ.get("NLBANDIT_DATA"):
        return Path(os.environ["NLBANDIT_DATA"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nlbandit" / "data"


def sha256(path: Path) -> str:
    """The hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(path: Path, expected: str) -> None:
    """Refuse a file whose SHA-256 is not ``expected``, naming both (a truncated or corrupted download)."""
    found = sha256(path)
    if found != expected:
        raise DataError(f"{path}: SHA-256 {found} does not match the recorded {expected}; the file is corrupted or "
                        "truncated: delete it and fetch it again")


def install(source: Path, target: Path, expected: str) -> Path:
    """Copy ``source`` to ``target`` atomically (a temporary file in the target's folder, checked, then
    renamed), so the cache never holds a partial or unverified file; return ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                out.write(block)
        verify(Path(tmp), expected)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
