"""User-file data sets checked against their publisher's shape (nlbandit.data.published) before an environment or
`nlbandit data info` reads them: a header line, a stray NA, a truncated file and a corrupted .gz are refused with
what they most likely are, and a failed read leaves no checksum that would refuse the good copy."""

from __future__ import annotations

import gzip
import re

import pytest

from nlbandit.cli import main
from nlbandit.data import published, sources
from nlbandit.data.cache import DataError
from nlbandit.data.sources import FileSource, Reader
from nlbandit.envs.registry import resolve_env

ROWS = "".join(f"{i % 7},{i % 5}.5,{(i * 3) % 11},{'a' if i % 3 else 'b'}\n" for i in range(40))


@pytest.fixture
def usr(tmp_path, monkeypatch):
    """A user-file data set 'usr' published as 40 rows, 3 numeric columns and 2 classes; its (empty) folder."""
    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    src = FileSource(("usr.csv",), "the toy repository", Reader(), "a user-file toy")
    monkeypatch.setitem(sources.SOURCES, "usr", src)
    monkeypatch.setitem(published.PUBLISHED, "usr", published.Shape(40, 3, 0, 2))
    folder = src.folder("usr")
    folder.mkdir(parents=True)
    return folder


def test_every_user_file_data_set_has_its_publishers_shape_and_its_description_says_it():
    """The published shapes are the ones `nlbandit data list` describes (rows, features or pixels, classes)."""
    user = {name for name, src in sources.SOURCES.items() if isinstance(src, FileSource)}
    assert set(published.PUBLISHED) == user
    for name in user:
        doc, shape = sources.SOURCES[name].doc, published.PUBLISHED[name]
        pixels = re.search(r"(\d+) × (\d+) pixels", doc)
        features = int(pixels[1]) * int(pixels[2]) if pixels else int(re.search(r"(\d+) numeric features", doc)[1])
        assert (shape.numeric, shape.categorical) == (features, 0), name
        assert f"{shape.rows:,} " in doc and f"{shape.classes} classes" in doc, name


@pytest.mark.parametrize("text, hint", [
    ("f1,f2,f3,label\n" + ROWS, r"3 column\(s\) read as categorical.*a header line.*1 class\(es\) too many"),
    (ROWS.replace("3.5", "NA", 1), r"1 column\(s\) read as categorical.*a cell that is not a number \(NA\)"),
    ("".join(ROWS.splitlines(keepends=True)[:25]), r"15 rows missing: a truncated file"),
])
def test_files_that_are_not_the_publishers_are_refused_and_leave_no_checksum(usr, text, hint):
    (usr / "usr.csv").write_text(text)
    with pytest.raises(DataError, match=r"env 'classification': data set 'usr' read as .* where its publisher's "
                                        r"files hold 40, 3, 0 and 2: " + hint):
        resolve_env({"name": "classification", "dataset": "usr"}, "env 'classification'")
    assert not (usr / "SHA256SUMS.json").exists()  # (the good copy is not refused as a replaced file)
    assert main(["data", "info", "usr"]) == 2
    (usr / "usr.csv").write_text(ROWS)  # the publisher's file
    assert resolve_env({"name": "classification", "dataset": "usr"})["k"] == 2
    assert main(["data", "info", "usr"]) == 0 and (usr / "SHA256SUMS.json").is_file()


def test_a_corrupted_gzip_file_is_a_data_error_not_a_zlib_traceback(usr, capsys):
    blob = bytearray(gzip.compress(ROWS.encode()))
    blob[len(blob) // 2:len(blob) // 2 + 8] = b"\xff" * 8  # damaged inside the deflate stream
    (usr / "usr.csv.gz").write_bytes(bytes(blob))
    assert main(["data", "info", "usr"]) == 2
    assert "data info usr: data set 'usr': a file in" in capsys.readouterr().err
    with pytest.raises(DataError, match="is not a valid gzip stream .*download it again"):
        published.check("usr")
    assert not (usr / "SHA256SUMS.json").exists()


def test_a_checksum_recorded_before_is_kept_when_a_later_copy_fails(usr):
    """Only the failed read's own record is removed: a file replaced after a good read is refused as replaced."""
    (usr / "usr.csv").write_text(ROWS)
    published.check("usr")
    (usr / "usr.csv").write_text("f1,f2,f3,label\n" + ROWS)
    with pytest.raises(DataError, match="does not match the one recorded"):
        published.check("usr")
    assert (usr / "SHA256SUMS.json").is_file()
