"""Atomic writes (nlbandit.atomic): the file's mode is not the temporary file's 0600."""

from __future__ import annotations

import os

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
