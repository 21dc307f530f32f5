"""How many numba specializations the host round's functions (nlbandit.host) hold in this process: a test that
feeds an agent something new asserts that this count does not move (nothing compiled again)."""

from __future__ import annotations

import nlbandit.host.checks
import nlbandit.host.exploration
import nlbandit.host.glm
import nlbandit.host.normals
import nlbandit.host.propensity
import nlbandit.host.ridge

MODULES = (nlbandit.host.checks, nlbandit.host.exploration, nlbandit.host.glm, nlbandit.host.normals,
           nlbandit.host.propensity, nlbandit.host.ridge)


def host_specializations() -> int:
    """The specializations compiled or loaded so far by the numba functions of :data:`MODULES`."""
    return sum(len(f.signatures) for m in MODULES for f in vars(m).values()
               if hasattr(f, "signatures") and f.__module__ == m.__name__)
