"""nlbandit: nonlinear contextual bandits in JAX.

Importing the package turns on JAX's 64-bit mode (``jax_enable_x64``): the linear and GLM estimators
keep their incremental inverses in float64, which a float32 Sherman–Morrison update cannot match over
10^5 updates (see ``nlbandit.models.ridge``). Neural code asks for float32 explicitly.
"""

import jax as _jax

_jax.config.update("jax_enable_x64", True)

from nlbandit.core.simulate import SimResult, simulate  # noqa: E402
from nlbandit.core.types import Env, Feedback, Policy, ProblemSpec  # noqa: E402
from nlbandit.envs.registry import make_env  # noqa: E402
from nlbandit.policies.registry import make_policy  # noqa: E402

__version__ = "0.1.0"

__all__ = [
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
