"""Code provenance: a hash of exactly the source that computes a result, so a stored run never outlives it.

A stored run is keyed by its resolved configuration *and* :func:`code_hash` of the modules that compute
it (the loop, the policy's family, the environment): the transitive closure of their imports inside the
``nlbandit`` package, read from the source files with :mod:`ast` (nothing is imported or executed). What is
hashed is each module's *normalised* syntax tree (:func:`normalised_source`): docstrings, comments,
formatting and the messages of ``raise`` and ``assert`` statements do not count, so fixing a typo in an
error message or rewrapping a line keeps every stored run, while any change to what the code computes (a
statement, a constant, a name) changes the key and the run is recomputed; an edit elsewhere (reports, the
command line, another family) leaves the run valid. Each family module and the engine also declare a
``NUMERICS`` version, bumped when their numbers change on purpose (the golden-fingerprint test,
``tests/test_fingerprints.py``, fails until it is): being a statement, it is part of the hash.

Rules of the closure:

* ``import nlbandit.a.b`` and ``from nlbandit.a import b`` (``b`` a module or a name) add ``nlbandit.a.b``
  or ``nlbandit.a``, recursively; imports inside functions count as well;
* a package's ``__init__.py`` is hashed whenever a module inside it is (importing the module runs it,
  e.g. the package root turns on 64-bit JAX), but its own imports are *not* followed: they are
  re-exports, and following them would pull the whole package into every closure. For the same reason
  its re-exports are not hashed either: the file is hashed without its imports of ``nlbandit`` modules
  and its ``__all__`` (:func:`normalised_source`), so exporting a new name recomputes nothing, while every
  other statement (a flag, a configuration call) counts;
* the versions of ``jax`` and ``jaxlib``, and the ``XLA_FLAGS`` in effect, are part of the hash: the same
  source can compile to different floating-point results under another XLA or other compiler options (the
  flags of :data:`nlbandit.compile_flags.IN_IDENTITY` excepted: a run's identity records those).
"""

from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Iterable

from nlbandit.compile_flags import hashed_flags

PACKAGE = "nlbandit"
_ROOT = Path(__file__).resolve().parent


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` inside the package (a package's ``__init__.py``), or None."""
    parts = name.split(".")[1:]
    base = _ROOT.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


@lru_cache(maxsize=None)
def _imports(name: str) -> tuple[str, ...]:
    """The ``nlbandit`` modules that module ``name`` imports (module docstring's rules)."""
    path = _module_file(name)
    if path is None or path.name == "__init__.py":
        return ()
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == PACKAGE:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if _module_file(sub) is not None else node.module)
    return tuple(sorted(m for m in found if _module_file(m) is not None))


def module_closure(roots: Iterable[str]) -> tuple[str, ...]:
    """The sorted modules whose source determines ``roots``: their import closure plus every enclosing
    package's ``__init__``."""
    todo, seen = list(roots), set()
    while todo:
        name = todo.pop()
        if name in seen or _module_file(name) is None:
            continue
        seen.add(name)
        todo.extend(_imports(name))
        parts = name.split(".")
        seen.update(".".join(parts[:i]) for i in range(1, len(parts)))
    return tuple(sorted(seen))


@lru_cache(maxsize=None)
def _versions() -> tuple[str, ...]:
    versions = []
    for dist in ("jax", "jaxlib"):
        try:
            versions.append(f"{dist}={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{dist}=none")
    return tuple(versions)


def _toolchain() -> str:
    return ";".join(_versions() + (f"XLA_FLAGS={hashed_flags()}",))


def _is_text(node: ast.AST) -> bool:
    """Whether ``node`` is a bare string statement (a docstring, or an attribute's docstring below it)."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


class _Normalise(ast.NodeTransformer):
    """Drops what cannot change a computed number: bare string statements, and the messages of ``raise``
    (its exception's arguments) and ``assert``."""

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [s for s in stmts if not _is_text(s)]
                setattr(node, field, kept or [ast.Pass()])
        return super().generic_visit(node)

    def visit_Raise(self, node: ast.Raise) -> ast.Raise:
        if isinstance(node.exc, ast.Call):
            node.exc = ast.Call(func=node.exc.func, args=[], keywords=[])
        return node

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        node.msg = None
        return self.generic_visit(node)


def normalised_source(path: Path) -> bytes:
    """What of file ``path`` is hashed: its syntax tree without docstrings, comments, formatting and the
    messages of ``raise`` and ``assert`` (:class:`_Normalise`); for a package ``__init__``, also without its
    imports of ``nlbandit`` modules and its ``__all__`` (module docstring). Parsed once per content of the file
    in a process: the code hashes of different runs share most of their modules."""
    return _normalised(path.read_bytes(), path.name == "__init__.py")


@lru_cache(maxsize=None)
def _normalised(source: bytes, package_init: bool) -> bytes:
    tree = ast.parse(source)
    if package_init:

        def kept(node: ast.stmt) -> bool:
            if isinstance(node, ast.ImportFrom):
                return node.level == 0 and (node.module or "").split(".")[0] != PACKAGE
            if isinstance(node, ast.Import):
                return not all(a.name.split(".")[0] == PACKAGE for a in node.names)
            targets = node.targets if isinstance(node, ast.Assign) else []
            return not (len(targets) == 1 and isinstance(targets[0], ast.Name) and targets[0].id == "__all__")

        tree.body = [node for node in tree.body if kept(node)]
    return ast.dump(_Normalise().visit(tree)).encode()


@lru_cache(maxsize=None)
def _code_hash(toolchain: str, roots: tuple[str, ...], shallow: tuple[str, ...]) -> str:
    h = hashlib.sha256(toolchain.encode())
    for name in sorted(set(module_closure(roots)) | {m for m in shallow if _module_file(m) is not None}):
        h.update(b"\0" + name.encode() + b"\0" + normalised_source(_module_file(name)))
    return h.hexdigest()[:16]


def code_hash(roots: Iterable[str], shallow: Iterable[str] = ()) -> str:
    """16 hex digits of SHA-256 over the toolchain versions and the source of :func:`module_closure` of
    ``roots`` (module names such as ``"nlbandit.policies.glm"``), and of the ``shallow`` modules' own files
    without their imports (an experiment loop, which imports every registry to dispatch but computes a run
    only with the ``roots`` it names); unknown names are ignored."""
    return _code_hash(_toolchain(), tuple(sorted(set(roots))), tuple(sorted(set(shallow))))  # (XLA_FLAGS: as now)


def package_hash() -> str:
    """:func:`code_hash` of every module of the package (what a report's header states)."""
    modules = ["nlbandit." + ".".join(p.relative_to(_ROOT).with_suffix("").parts) for p in _ROOT.rglob("*.py")]
    return code_hash(m.removesuffix(".__init__") for m in modules)
