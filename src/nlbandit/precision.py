"""The 64-bit mode nlbandit needs, checked where a user builds something: an environment, a policy, an agent.

``import nlbandit`` turns JAX's 64-bit mode on for the process (docs/concepts.md#precision-float64-and-float32);
``with jax.enable_x64(False):`` turns it off for its block, which keeps a user's own JAX code 32-bit. nlbandit
called inside such a block computed in float32, silently: another instance of an environment for the same seed
(its draws float32), other arms from round 1. :func:`require_x64` refuses it instead.
"""

from __future__ import annotations

import jax

from nlbandit.core.hyper import ConfigError


def require_x64(where: str) -> None:
    """ConfigError when JAX's 64-bit mode is off here (inside ``with jax.enable_x64(False):``)."""
    if not jax.config.jax_enable_x64:
        raise ConfigError(f"{where}: nlbandit computes in float64, but JAX's 64-bit mode is off here (inside `with "
                          "jax.enable_x64(False):`?); call nlbandit outside that block")
