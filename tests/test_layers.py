"""The package's layering (issue 12 §3): the engine does not depend on environments, and experiment
definitions do not depend on reports. Checked on the import closure read from the source."""

from pathlib import Path

import pytest

import nlbandit
from nlbandit.provenance import module_closure

ROOT = Path(nlbandit.__file__).parent


def _modules(package: str) -> list[str]:
    return [f"nlbandit.{package}.{p.stem}" for p in sorted((ROOT / package).glob("*.py")) if p.stem != "__init__"]


@pytest.mark.parametrize("package, forbidden", [("core", "nlbandit.envs"), ("experiments", "nlbandit.report")])
def test_layer_does_not_import(package, forbidden):
    for module in _modules(package):
        bad = [m for m in module_closure([module]) if m == forbidden or m.startswith(forbidden + ".")]
        assert not bad, f"{module} imports {bad}"
