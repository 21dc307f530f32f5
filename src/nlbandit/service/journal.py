"""The service's write-ahead journal: every accepted decision and reward, in the order the agent saw them.

One append-only file of framed records: an 8-byte header (payload length and CRC-32, little-endian
uint32 each) and a JSON payload. A record is written (``os.write`` on an ``O_APPEND`` descriptor) before the
agent acts on it, and :meth:`Journal.durable` returns once ``fdatasync`` has covered it; the service replies
only after that, so an event a client saw accepted is on disk. Concurrent requests share one sync (group
commit): a sync started while others wait covers every record written before it started.

Reading (:func:`read_records`) stops at the first record that is incomplete or fails its checksum — the
tail a crash cut short, which no client saw accepted — and :meth:`Journal.open` truncates the file there
before appending again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

_HEADER = struct.Struct("<II")


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """A NumPy array as a JSON value (dtype, shape, base64 bytes), read back bit for bit by :func:`decode_array`."""
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def decode_array(value: dict[str, Any]) -> np.ndarray:
    """The array :func:`encode_array` wrote."""
    return np.frombuffer(base64.b64decode(value["data"]), np.dtype(value["dtype"])).reshape(value["shape"]).copy()


def read_records(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The journal's complete records and the byte length they span (where a cut-short tail begins)."""
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    records, at = [], 0
    while at + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, at)
        payload = data[at + _HEADER.size: at + _HEADER.size + length]
        if len(payload) < length or zlib.crc32(payload) != crc:
            break
        records.append(json.loads(payload))
        at += _HEADER.size + length
    return records, at


class Journal:
    """An append-only journal file with group-committed ``fdatasync`` (module docstring)."""

    def __init__(self, path: Path, fd: int, records: int):
        self.path, self._fd, self.records = path, fd, records
        self._written = self._synced = 0  # counts of records written and known durable in this process
        self._sync: asyncio.Future | None = None

    @classmethod
    def open(cls, path: Path) -> tuple["Journal", list[dict[str, Any]]]:
        """Open (or create) the journal at ``path``, cutting off an incomplete tail; return it with the
        complete records already in it."""
        records, end = read_records(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        if os.fstat(fd).st_size != end:
            os.ftruncate(fd, end)
            os.fsync(fd)
        return cls(path, fd, len(records)), records

    def append(self, record: dict[str, Any]) -> None:
        """Write one record (durable only once :meth:`durable` returns)."""
        payload = json.dumps(record, separators=(",", ":")).encode()
        frame = _HEADER.pack(len(payload), zlib.crc32(payload)) + payload
        if os.write(self._fd, frame) != len(frame):
            raise OSError(f"short write to the journal {self.path}")
        self.records += 1
        self._written += 1

    async def durable(self) -> None:
        """Return once every record written so far is on disk (one ``fdatasync`` shared by the waiters).

        Raises:
          OSError: the sync covering these records failed (every waiter on it gets the error).
        """
        target = self._written
        while self._synced < target:
            if self._sync is None or self._sync.done():
                # A finished sync has already advanced ``_synced`` (or failed: raised below, to every waiter);
                # records written after it started need a new one. Never re-await a finished sync in this
                # loop: awaiting a done future does not yield, and the loop would spin with the event loop held.
                self._sync = asyncio.ensure_future(self._sync_upto(self._written))
            await asyncio.shield(self._sync)

    async def _sync_upto(self, upto: int) -> None:
        await asyncio.get_running_loop().run_in_executor(None, os.fdatasync, self._fd)
        self._synced = max(self._synced, upto)

    def sync(self) -> None:
        """Put every record written so far on disk now (blocking)."""
        os.fdatasync(self._fd)
        self._synced = self._written

    def close(self) -> None:
        """Sync and close the file."""
        os.fsync(self._fd)
        os.close(self._fd)
