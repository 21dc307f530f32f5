"""Atomic writes (nlbandit.atomic): the file's mode is not the temporary file's 0600."""

from __future__ import annotations

import os

import pytest

from nlbandit.atomic import write_bytes


def test_an_atomic_write_keeps_the_replaced_files_mode_and_gives_a_new_one_the_umasks(tmp_path):
    """Re-saving an agent or a report turned its mode into mkstemp's 0600; a new file got 0600 whatever the umask."""
    before = os.umask(0o022)
    try:
        new = write_bytes(tmp_path / "new.bin", b"x")
        assert os.stat(new).st_mode & 0o777 == 0o644
        os.chmod(new, 0o640)
        write_bytes(new, b"y")
        assert os.stat(new).st_mode & 0o777 == 0o640 and new.read_bytes() == b"y"
        os.umask(0o077)
        assert os.stat(write_bytes(tmp_path / "private.bin", b"z")).st_mode & 0o777 == 0o600
    finally:
        os.umask(before)


def test_files_written_together_change_together_and_old_leftovers_go(tmp_path, monkeypatch):
    """write_files stages every file before renaming any: a failure while staging leaves all as they were and no
    temporary file; a temporary file an earlier killed write left (older than STALE_SECONDS) is removed, a
    younger one (a write in progress) kept."""
    import time

    from nlbandit import atomic

    a, b = tmp_path / "r.png", tmp_path / "r.md"
    atomic.write_files({a: b"old plot", b: b"old text"})
    assert (a.read_bytes(), b.read_bytes()) == (b"old plot", b"old text")
    real = atomic._staged

    def failing(path, write):
        if path == b:
            raise OSError(28, "No space left on device")
        return real(path, write)

    monkeypatch.setattr(atomic, "_staged", failing)
    with pytest.raises(OSError, match="No space left"):
        atomic.write_files({a: b"new plot", b: b"new text"})
    assert (a.read_bytes(), b.read_bytes()) == (b"old plot", b"old text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.md", "r.png"]
    monkeypatch.setattr(atomic, "_staged", real)
    old, young = tmp_path / ".r.png.abcd1234", tmp_path / ".r.md.wxyz5678"
    old.write_bytes(b"x"), young.write_bytes(b"y")
    os.utime(old, (time.time() - atomic.STALE_SECONDS - 60,) * 2)
    atomic.write_files({a: b"new plot", b: b"new text"})
    assert sorted(p.name for p in tmp_path.iterdir()) == [".r.md.wxyz5678", "r.md", "r.png"]
    assert (a.read_bytes(), b.read_bytes()) == (b"new plot", b"new text")
