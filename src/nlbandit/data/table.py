"""A classification data set as one table: raw feature columns (numeric or categorical) and class labels,
with where it came from. Encodings into bandit contexts (block one-hot, min–max, ordinal) work on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nlbandit.data.cache import DataError

MISSING = ("", "?")
"""Cell texts read as a missing value (refused: no data set here is used with imputation)."""


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
    """

    name: str
    columns: tuple[np.ndarray, ...]
    labels: np.ndarray
    classes: tuple[str, ...]
    provenance: dict[str, Any] = field(default_factory=dict)

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


def parse_delimited(text: str, name: str, where: str, delimiter: str = ",",
                    provenance: dict[str, Any] | None = None) -> Dataset:
    """A :class:`Dataset` from delimited text, one row per line, the class label in the last column: a
    column is numeric when every cell parses as a number, else categorical. Lines starting with ``@`` (a
    KEEL header) and blank lines are skipped.

    Raises:
      DataError: naming ``where`` and the line: ragged rows, a missing value (:data:`MISSING`), fewer than
        two classes or two rows.
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
        for column, cell in enumerate(cells):
            if cell in MISSING:
                raise DataError(f"{where}: line {number}, column {column + 1}: missing value {cell!r}; rows with "
                                "missing values must be removed first")
        rows.append((number, cells))
    if len(rows) < 2 or len(rows[0][1]) < 2:
        raise DataError(f"{where}: needs at least two rows of at least one feature and a label, got {len(rows)} row(s)")
    table = np.array([cells for _, cells in rows], dtype=object)
    columns = tuple(_column(table[:, j]) for j in range(table.shape[1] - 1))
    for j, col in enumerate(columns):
        if col.dtype != object and not np.all(np.isfinite(col)):
            line = rows[int(np.argmin(np.isfinite(col)))][0]
            raise DataError(f"{where}: line {line}, column {j + 1}: a non-finite number")
    classes, labels = np.unique(table[:, -1].astype(str), return_inverse=True)
    if classes.size < 2:
        raise DataError(f"{where}: the label column (the last) holds one class, {classes[0]!r}; a classification "
                        "bandit needs at least two")
    return Dataset(name, columns, labels.astype(np.int64), tuple(str(c) for c in classes), dict(provenance or {}))


def _column(cells: np.ndarray) -> np.ndarray:
    """Float64 values when every cell is a number, else the cells as category texts."""
    try:
        return np.array([float(c) for c in cells], dtype=np.float64)
    except ValueError:
        return np.array([str(c) for c in cells], dtype=object)
