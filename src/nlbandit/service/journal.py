"""The service's write-ahead journal: every accepted decision and reward, in the order the agent saw them.

One append-only file: a header line naming the format, the state folder that owns the journal and the number
of records before its first one (``nlbandit journal 2 <folder id> <base>``; a journal continues where the
segment compacted before it ended, :func:`compact`), then framed records. A frame is a 12-byte header (payload length,
CRC-32 of the payload, CRC-32 of those 8 bytes; little-endian uint32 each) and a JSON payload. A record is
written (``os.write`` on an ``O_APPEND`` descriptor) before the agent acts on it, and :meth:`Journal.durable`
returns once ``fdatasync`` has covered it; the service replies only after that, so an event a client saw
accepted is on disk. Concurrent requests share one sync (group commit): a sync started while others wait
covers every record written before it started.

Reading (:func:`read_journal`) tells a torn tail from damage:

* a **torn tail** is what a crash in the middle of appends leaves, writes that were never synced, so never
  acknowledged: a frame header cut short at the end of the file, a payload that runs past the end of the file,
  or a frame whose header is all NUL bytes or whose payload holds some (a file extended but not yet written,
  as an operating system that stops before writing back leaves it; JSON text has none: before the final
  payload, NUL bytes at its start or end, a block's edge, :func:`_never_written`). Group commit may leave
  several records unsynced, so everything from the first unwritten frame on is the tail, whatever follows it
  (a sync covers every write before it: had a later record been acknowledged, this one would have been
  written). :meth:`Journal.open` cuts it off and says so (:attr:`JournalContents.torn`);
* anything else that does not read back is **damage** (a frame header or a payload failing its checksum, a
  record that is not JSON, a file that is not a journal of this format or of this folder), and
  :class:`JournalDamaged` refuses it before anything is written: the file is left as it was, for the
  operator to inspect or restore.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import struct
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from nlbandit.atomic import sync_folder, write_bytes
from nlbandit.core.hyper import ConfigError

MAGIC = b"nlbandit journal 2 "
"""The start of a journal's header line; the folder id and a newline follow."""
_FRAME = struct.Struct("<III")


class JournalDamaged(ConfigError):
    """A journal that does not read back beyond a torn tail (module docstring)."""


class JournalContents(NamedTuple):
    """What :func:`read_journal` found.

    Attributes:
      records: the complete records, in order.
      end: the byte length they span (with the header line).
      torn: a description of the torn tail after ``end`` (None if the file ends at ``end``).
      base: the number of records before the first (0 for a journal never compacted; None for no file).
    """

    records: list[dict[str, Any]]
    end: int
    torn: str | None
    base: int | None = None


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """A NumPy array as a JSON value (dtype, shape, base64 bytes), read back bit for bit by :func:`decode_array`."""
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.str, "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def decode_array(value: dict[str, Any]) -> np.ndarray:
    """The array :func:`encode_array` wrote."""
    return np.frombuffer(base64.b64decode(value["data"]), np.dtype(value["dtype"])).reshape(value["shape"]).copy()


def header_line(owner: str, base: int = 0) -> bytes:
    """The header line of a journal of the state folder whose id is ``owner``, starting after ``base`` records."""
    return MAGIC + f"{owner} {base}\n".encode()


def read_journal(path: Path, owner: str) -> JournalContents:
    """The records of the journal at ``path`` (none if it does not exist), which must belong to the folder
    whose id is ``owner``.

    Raises:
      JournalDamaged: the file is not a journal of this format, belongs to another folder, or is damaged
        before its final record (module docstring), with the offset and what was found there.
    """
    if not path.exists():
        return JournalContents([], 0, None)
    data, mine = path.read_bytes(), MAGIC + owner.encode() + b" "
    newline = data.find(b"\n", 0, len(mine) + 21)
    if newline < 0 and len(data) < len(mine) + 21 and (data.startswith(mine) or mine.startswith(data)):
        return JournalContents([], 0, f"a header line cut short ({len(data)} bytes)" if data else None)
    line = data[:newline] if newline >= 0 else data[:len(mine) + 21]
    if not line.startswith(mine) or not line[len(mine):].isdigit():
        what = (f"the journal of another state folder ({line[len(MAGIC):].decode(errors='replace')!r}), copied here?"
                if line.startswith(MAGIC) else f"not an nlbandit journal of format 2 (it starts with {line[:40]!r})")
        raise JournalDamaged(f"{path}: {what}; it is left as it is. Restore this folder's own journal, or move "
                             "the file away to start the folder from its snapshot alone")
    base, header = int(line[len(mine):]), line + b"\n"
    records, at = [], len(header)
    while at < len(data):
        if len(data) - at < _FRAME.size:
            return JournalContents(records, at, f"a frame header cut short ({len(data) - at} bytes at offset {at})",
                                   base)
        length, crc, header_crc = _FRAME.unpack_from(data, at)
        if zlib.crc32(data[at:at + 8]) != header_crc:
            if not any(data[at:at + _FRAME.size]):
                return JournalContents(records, at, _unwritten(data, at), base)
            _damaged(path, at, len(records), "a frame header that fails its checksum")
        start, stop = at + _FRAME.size, at + _FRAME.size + length
        if stop > len(data):
            return JournalContents(records, at, f"a record of {length} bytes cut short at {len(data) - start} "
                                                f"(offset {at})", base)
        payload = data[start:stop]
        if zlib.crc32(payload) != crc:
            if _never_written(payload, stop == len(data)):
                return JournalContents(records, at, _unwritten(data, at), base)
            _damaged(path, at, len(records), "a record that fails its checksum")
        try:
            records.append(json.loads(payload))
        except ValueError:
            _damaged(path, at, len(records), "a record that is not JSON")
        at = stop
    return JournalContents(records, at, None, base)


def _never_written(payload: bytes, final: bool) -> bool:
    """Whether ``payload``, failing its checksum, is one the system never wrote back: NUL bytes anywhere in the
    file's final payload; elsewhere NUL bytes at its start or its end, 8 or all of them (blocks never written,
    the payload running across a block's edge), where a byte flipped to NUL inside is damage."""
    if final:
        return b"\x00" in payload
    run = bytes(min(len(payload), 8))
    return payload.startswith(run) or payload.endswith(run)


def _unwritten(data: bytes, at: int) -> str:
    """What the torn tail of ``data`` from a frame never written at offset ``at`` holds (module docstring)."""
    return (f"{len(data) - at} bytes from offset {at} never written back (NUL bytes where a frame should be: appends "
            "never synced when the system stopped, so never acknowledged)")


def _damaged(path: Path, at: int, good: int, what: str) -> None:
    raise JournalDamaged(f"{path} is damaged: {what} at byte {at}, after {good} good records; a crash leaves only "
                         "a torn tail (cut short, or not yet written: NUL bytes), so this is damage to acknowledged "
                         "records. The file is left as it is: restore it from a backup (the service will not start "
                         "on it)")


class Journal:
    """An append-only journal file with group-committed ``fdatasync`` (module docstring)."""

    def __init__(self, path: Path, fd: int, records: int, base: int):
        self.path, self._fd, self.records, self.base = path, fd, records, base  # records: counted from the first
        # ever (base included), so that a snapshot's count stays valid across compactions
        self._written = self._synced = 0  # counts of records written and known durable in this process
        self._sync: asyncio.Future | None = None

    @classmethod
    def open(cls, path: Path, owner: str, base: int = 0) -> tuple["Journal", JournalContents]:
        """Open the journal at ``path`` of the folder whose id is ``owner`` (created after ``base`` records, with
        its header line synced, if missing), cutting off a torn tail; return it with what
        :func:`read_journal` found.

        Raises:
          JournalDamaged: :func:`read_journal` refused the file; nothing was changed.
        """
        contents = read_journal(path, owner)
        if contents.end == 0:
            write_bytes(path, header_line(owner, base))
            contents = contents._replace(end=len(header_line(owner, base)), base=base)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        if os.fstat(fd).st_size != contents.end:
            os.ftruncate(fd, contents.end)
            os.fsync(fd)
        return cls(path, fd, contents.base + len(contents.records), contents.base), contents

    def append(self, record: dict[str, Any]) -> None:
        """Write one record (durable only once :meth:`durable` returns)."""
        payload = json.dumps(record, separators=(",", ":")).encode()
        head = struct.pack("<II", len(payload), zlib.crc32(payload))
        frame = head + struct.pack("<I", zlib.crc32(head)) + payload
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

    def syncing(self) -> bool:
        """Whether a group-committed sync is still running (the file must stay open until it ends)."""
        return self._sync is not None and not self._sync.done()

    def close(self) -> None:
        """Sync and close the file."""
        os.fsync(self._fd)
        os.close(self._fd)


def segment_path(folder: Path, base: int, end: int) -> Path:
    """Where :func:`compact` moves the records ``base + 1 .. end`` of ``folder``'s journal."""
    return folder / "segments" / f"journal-{base:012d}-{end:012d}.log"


def compact(journal: Journal, owner: str) -> Journal:
    """Move ``journal``'s file (every record synced, none being synced) to its segment (:func:`segment_path`,
    renamed: atomic) and return a new, empty journal at its path starting after its records. If the new
    journal cannot be created, the file is moved back and ``journal`` stays in use (the error is raised); a
    crash between the steps leaves no journal file beside the segment, from which a restart continues."""
    folder, base, end = journal.path.parent, journal.base, journal.records
    journal.sync()
    target = segment_path(folder, base, end)
    target.parent.mkdir(exist_ok=True)
    os.replace(journal.path, target)  # the open descriptor follows the file
    try:
        fresh = Journal.open(journal.path, owner, end)[0]
    except BaseException:
        os.replace(target, journal.path)
        raise
    sync_folder(folder)
    journal.close()
    return fresh


_SEGMENT = re.compile(r"journal-(\d{12})-(\d{12})\.log")


def segment_files(folder: Path) -> list[tuple[int, int, Path]]:
    """``(base, end, path)`` of each compacted segment of ``folder``'s journal (records ``base + 1 .. end``, as
    its name says: :func:`segment_path`), in order; the files are not read."""
    found = []
    for path in sorted((folder / "segments").glob("journal-*.log")):
        match = _SEGMENT.fullmatch(path.name)
        if match is None:
            raise JournalDamaged(f"{path}: not a segment's name (journal-<first>-<last>.log, 12 digits each); move it "
                                 "out of segments/")
        found.append((int(match[1]), int(match[2]), path))
    return found


def segments(folder: Path, owner: str, after: int = 0) -> list[JournalContents]:
    """The compacted segments of ``folder``'s journal that hold the records after record ``after``, in order,
    each checked (:func:`read_journal`) and continuing the one before; the segments of earlier records are not
    read (they may have been deleted to reclaim space).

    Raises:
      JournalDamaged: a damaged segment; a gap or overlap between two; records after ``after`` that no segment
        holds (the first segment kept starts later: deleted).
    """
    found, end = [], None
    for base, last, path in segment_files(folder):
        if last <= after:
            continue
        contents = read_journal(path, owner)
        expected = f"after record {end}" if end is not None else f"at or before record {after + 1}"
        if contents.torn or contents.base != base or len(contents.records) != last - base or (
                base > after if end is None else base != end):
            raise JournalDamaged(f"{path}: a compacted segment must be complete and start {expected} (it holds "
                                 f"{len(contents.records)} records after record {contents.base}"
                                 f"{'; ' + contents.torn if contents.torn else ''}); "
                                 + ("the segments of the records before it were deleted?" if end is None else
                                    "a segment between them is missing?"))
        found.append(contents)
        end = last
    return found


def records_after(compacted: list[JournalContents], after: int) -> list[dict[str, Any]]:
    """The records after record ``after`` of the segments :func:`segments` returned for ``after``."""
    records = [r for segment in compacted for r in segment.records]
    return records[after - compacted[0].base:] if compacted else []

__all__ = ["Journal", "JournalContents", "JournalDamaged", "MAGIC", "compact", "decode_array", "encode_array",
           "header_line", "read_journal", "records_after", "segment_files", "segment_path", "segments"]
