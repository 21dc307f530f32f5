"""What each user-file data set holds as its publishers distribute it, checked before an environment reads it.

A data set that no package ships (:class:`~nlbandit.data.sources.FileSource`: MNIST, Fashion-MNIST, shuttle,
covertype) is read from files the user downloads. The reader takes what it is given: a header line (Kaggle's
covertype CSV has one) makes every column categorical and adds a class of its own, a stray ``NA`` cell makes its
column categorical, a file cut at a line end loses rows, and a corrupted ``.gz`` fails deep inside zlib. So the
table read from the files is compared with the one its publisher describes (rows, numeric and categorical
feature columns, classes), and a difference is refused with what it most likely means, before any environment is
built on the data (:func:`nlbandit.envs.registry.resolve_env`, ``nlbandit data info``). A check that fails leaves
no checksum recorded by its own read (:meth:`~nlbandit.data.sources.FileSource.version` records the files'
SHA-256 at their first read, and would refuse the good copy downloaded next as a replaced file).

This module is outside every run's code hash (no module that computes a run imports it, :mod:`nlbandit.provenance`):
it refuses data, and never changes what is computed from data it accepts.
"""

from __future__ import annotations

import functools
import zlib
from typing import NamedTuple

from nlbandit.data import sources
from nlbandit.data.cache import DataError
from nlbandit.data.table import Dataset


class Shape(NamedTuple):
    """A data set as published: its rows, numeric and categorical feature columns, and classes."""

    rows: int
    numeric: int
    categorical: int
    classes: int


_IDX = Shape(60_000, 784, 0, 10)
PUBLISHED: dict[str, Shape] = {
    "mnist": _IDX,  # the training set's IDX files (train-images-idx3-ubyte, train-labels-idx1-ubyte)
    "fashion-mnist": _IDX,
    "shuttle": Shape(58_000, 9, 0, 7),  # shuttle.trn (43,500 rows) and shuttle.tst (14,500)
    "covertype": Shape(581_012, 54, 0, 7),  # covtype.data: 10 quantitative columns and 44 binary ones
}
"""Every user-file data set's published shape, by name (UCI's and the IDX pages' descriptions)."""


def shape(data: Dataset) -> Shape:
    """The shape of a data set as read."""
    categorical = sum(data.categorical)
    return Shape(data.n, len(data.columns) - categorical, categorical, len(data.classes))


def check(name: str, where: str = "data") -> None:
    """Refuse user-file data set ``name`` (a :class:`DataError` starting with ``where``) when its files do not read
    as :data:`PUBLISHED` says, or do not read at all; nothing for another data set. Each version of the files is
    read and checked once per process (the read is the one :func:`nlbandit.data.sources.load` keeps)."""
    if name not in PUBLISHED:
        return
    src = sources.source(name)
    record = src.folder(name) / "SHA256SUMS.json"
    recorded = record.is_file()
    try:
        _checked(name, sources.version(name))
    except DataError as e:
        if not recorded:  # (the checksums this failed read recorded would refuse the next, good copy)
            record.unlink(missing_ok=True)
        raise DataError(f"{where}: {e}") from None


@functools.lru_cache(maxsize=8)
def _checked(name: str, version: str) -> None:
    try:
        data = sources.load(name)
    except (zlib.error, EOFError) as e:
        raise DataError(f"data set {name!r}: a file in {sources.source(name).folder(name)} is not a valid gzip "
                        f"stream ({e}): download it again") from None
    read, published = shape(data), PUBLISHED[name]
    if read == published:
        return
    hints = []
    if read.categorical:
        hints.append(f"{read.categorical} column(s) read as categorical, where every one is numeric: a header line "
                     "or a cell that is not a number (NA); remove it")
    if read.classes > published.classes:
        hints.append(f"{read.classes - published.classes} class(es) too many ({', '.join(data.classes)}): a header "
                     "line read as a row")
    if read.rows < published.rows:
        hints.append(f"{published.rows - read.rows} rows missing: a truncated file, or another file than the "
                     "publisher's (e.g. the test set)")
    raise DataError(f"data set {name!r} read as {read.rows} rows, {read.numeric} numeric and {read.categorical} "
                    f"categorical feature columns and {read.classes} classes, where its publisher's files hold "
                    f"{published.rows}, {published.numeric}, {published.categorical} and {published.classes}"
                    + (": " + "; ".join(hints) if hints else "") + f" (files in {sources.source(name).folder(name)})")
