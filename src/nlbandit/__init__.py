"""nlbandit: nonlinear contextual bandits in JAX.

Importing the package turns on JAX's 64-bit mode (``jax_enable_x64``): the linear and GLM estimators
keep their incremental inverses in float64, which a float32 Sherman–Morrison update cannot match over
10^5 updates (see ``nlbandit.models.ridge``). Neural code asks for float32 explicitly.

It also asks XLA's CPU backend for LLVM optimisation level 1 (``--xla_backend_optimization_level=1`` in
``XLA_FLAGS``) unless ``XLA_FLAGS`` already sets a level, which takes effect when JAX starts its backend
after this import. A simulation is compiled once per batch of runs and most batches run for seconds, so
compile time is much of an experiment's time: level 1 compiles a GLM batch's programs in about two thirds (68%) of the
default level's time at the same run time, and gave bit-identical results on the policies compared
(docs/performance.md). The flags are part of every run's code hash (:mod:`nlbandit.provenance`).
"""

import os as _os

if "--xla_backend_optimization_level" not in _os.environ.get("XLA_FLAGS", ""):
    _os.environ["XLA_FLAGS"] = (_os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=1").strip()

import jax as _jax  # noqa: E402

_jax.config.update("jax_enable_x64", True)

from nlbandit.agent import Agent, Decision  # noqa: E402
from nlbandit.core.simulate import SimResult, simulate  # noqa: E402
from nlbandit.core.types import Env, Feedback, Policy, ProblemSpec  # noqa: E402
from nlbandit.envs.registry import make_env  # noqa: E402
from nlbandit.policies.registry import make_policy  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "Decision",
    "Env",
    "Feedback",
    "Policy",
    "ProblemSpec",
    "SimResult",
    "make_env",
    "make_policy",
    "simulate",
    "__version__",
]
