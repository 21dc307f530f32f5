"""A classification data set as one table: raw feature columns (numeric or categorical) and class labels,
with where it came from. Encodings into bandit contexts (block one-hot, min–max, ordinal) work on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlbandit.data.cache import DataError

MISSING = ("", "?")
"""Cell texts read as a missing value: refused, or kept as a category level of their own where a source says
so (spec 001 §4.3: mushroom's '?' in stalk-root)."""


@dataclass(frozen=True)
class Dataset:
    """A classification data set.

    Attributes:
      name: its registry name.
      columns: one array per feature column, float64 for numeric columns, the category texts (``str``
        objects) for categorical ones.
      labels: (n,) int class indices into ``classes``.
      classes: the class texts, sorted.
      provenance: where the rows came from (source, file, SHA-256, version).
      image: (height, width) when the columns are the pixels of an image in row-major order, else None.
    """

    name: str
    columns: tuple[np.ndarray, ...]
    labels: np.ndarray
    classes: tuple[str, ...]
    provenance: dict[str, Any] = field(default_factory=dict)
    image: tuple[int, int] | None = None

    @property
    def n(self) -> int:
        """The number of rows."""
        return int(self.labels.size)

    @property
    def categorical(self) -> tuple[bool, ...]:
        """Whether each column is categorical."""
        return tuple(c.dtype == object for c in self.columns)

    def describe(self) -> str:
        """One paragraph: rows, columns by kind, classes and their counts, provenance."""
        counts = np.bincount(self.labels, minlength=len(self.classes))
        cats = sum(self.categorical)
        return (f"{self.name}: {self.n} rows, {len(self.columns)} feature columns ({len(self.columns) - cats} numeric, "
                f"{cats} categorical), {len(self.classes)} classes ("
                + ", ".join(f"{c}: {k}" for c, k in zip(self.classes, counts)) + "); "
                + ", ".join(f"{k} {v}" for k, v in self.provenance.items()))


def parse_delimited(text: str, name: str, where: str, delimiter: str | None = ",", label_column: int = -1,
                    missing: str = "refuse", provenance: dict[str, Any] | None = None) -> Dataset:
    """A :class:`Dataset` from delimited text, one row per line (``delimiter`` None: runs of whitespace), the
    class label in column ``label_column`` (−1: the last): a column is numeric when every cell parses as a
    number, else categorical. Lines starting with ``@`` (a KEEL header) and blank lines are skipped.
    ``missing = "category"`` keeps a missing cell (:data:`MISSING`) of a categorical column as a level of its
    own; ``"refuse"`` refuses every missing cell.

    Raises:
      DataError: naming ``where`` and the line: ragged rows, a missing value, fewer than two classes or two rows.
    """
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("@"):
            continue
        cells = [c.strip() for c in line.split(delimiter)]
        if rows and len(cells) != len(rows[0][1]):
            raise DataError(f"{where}: line {number} has {len(cells)} fields, the first row {len(rows[0][1])}: a "
                            "truncated or malformed file")
        rows.append((number, cells))
    if len(rows) < 2 or len(rows[0][1]) < 2:
        raise DataError(f"{where}: needs at least two rows of at least one feature and a label, got {len(rows)} row(s)")
    table = np.array([cells for _, cells in rows], dtype=object)
    label_column %= table.shape[1]
    blank = np.isin(table, MISSING)
    columns = []
    for j in range(table.shape[1]):
        col = _column(table[:, j], blank[:, j])
        holes = np.flatnonzero(blank[:, j])
        if holes.size and (missing != "category" or j == label_column or col.dtype != object):
            raise DataError(f"{where}: line {rows[holes[0]][0]}, column {j + 1}: missing value "
                            f"{table[holes[0], j]!r}; rows with missing values must be removed first")
        if col.dtype != object and not np.all(np.isfinite(col)):
            line = rows[int(np.argmin(np.isfinite(col)))][0]
            raise DataError(f"{where}: line {line}, column {j + 1}: a non-finite number")
        if j != label_column:
            columns.append(col)
    classes, labels = np.unique(table[:, label_column].astype(str), return_inverse=True)
    if classes.size < 2:
        raise DataError(f"{where}: the label column (column {label_column + 1}) holds one class, {classes[0]!r}; a "
                        "classification bandit needs at least two")
    return Dataset(name, tuple(columns), labels.astype(np.int64), tuple(str(c) for c in classes),
                   dict(provenance or {}))


def parse_idx(images: bytes, labels: bytes, name: str, where: str, provenance: dict[str, Any] | None = None) -> Dataset:
    """A :class:`Dataset` of images from the IDX format of MNIST and Fashion-MNIST: ``images`` an unsigned-byte
    array of n × height × width (magic 0x00000803), ``labels`` one of n class bytes (magic 0x00000801); the
    pixels become n·h·w numeric columns (row-major), the classes the label digits.

    Raises:
      DataError: naming ``where``: a wrong magic number, a size that does not match the header (a truncated
        file), or image and label counts that differ.
    """
    def array(data: bytes, magic: int, ndim: int, what: str) -> np.ndarray:
        if len(data) < 4 + 4 * ndim or int.from_bytes(data[:4], "big") != magic:
            raise DataError(f"{where}: the {what} file is not an IDX file of unsigned bytes with {ndim} dimension(s) "
                            f"(magic number {magic:#010x} expected)")
        shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
        body = data[4 + 4 * ndim:]
        if len(body) != int(np.prod(shape)):
            raise DataError(f"{where}: the {what} file holds {len(body)} bytes of data, its header promises "
                            f"{int(np.prod(shape))} ({' × '.join(map(str, shape))}): a truncated or corrupted file")
        return np.frombuffer(body, np.uint8).reshape(shape)

    x = array(images, 0x00000803, 3, "images")
    y = array(labels, 0x00000801, 1, "labels")
    if x.shape[0] != y.shape[0] or x.shape[0] < 2:
        raise DataError(f"{where}: {x.shape[0]} images but {y.shape[0]} labels; they must match (and be at least 2)")
    classes, codes = np.unique(y, return_inverse=True)
    if classes.size < 2:
        raise DataError(f"{where}: the labels hold one class, {int(classes[0])}; a classification bandit needs two")
    flat = x.reshape(x.shape[0], -1).astype(np.float64)
    return Dataset(name, tuple(flat.T.copy()), codes.astype(np.int64), tuple(str(int(c)) for c in classes),
                   dict(provenance or {}), image=(x.shape[1], x.shape[2]))


def _column(cells: np.ndarray, blank: np.ndarray) -> np.ndarray:
    """Float64 values when every cell that is not ``blank`` (missing) is a number (the missing ones NaN), else
    the cells as category texts."""
    try:
        return np.array([float("nan") if b else float(c) for c, b in zip(cells, blank)], dtype=np.float64)
    except ValueError:
        return np.array([str(c) for c in cells], dtype=object)
