"""The realised effective dimension of a run: d̃ = log det((R/λ₀)·H̃ + I), H̃ = Σ_t Σ_{x ∈ X_t} g(x; θ₀)
g(x; θ₀)ᵀ/m over all T·K context vectors the environment presents, repeats included (Bae & Lee 2025, Def. 4.3;
spec 001 §1.4, the diagnostic of §4.4).

The presented contexts depend on the seed alone (the engine draws them from the seed's environment streams,
whatever the policy does), so the diagnostic is computed for a (environment, seed, horizon) by replaying
``reset`` and ``observe`` with the engine's keys. The features are the gradients at the block-symmetric θ₀
drawn from the seed's policy stream, as the theory has them. In the p-dimensional form log det of a p × p
matrix (p = the network's parameter count), whatever T·K is.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from nlbandit.core.keys import seed_keys
from nlbandit.core.round import observe
from nlbandit.core.types import Env
from nlbandit.models.mlp import MLP, mlp_grads, mlp_init


def presented_contexts(env: Env, seed: int, horizon: int) -> jax.Array:
    """(T, K, d): the contexts ``env`` offers in rounds 1…T of repetition ``seed`` (the engine's draws)."""
    keys = seed_keys(jnp.uint32(seed))
    state = env.reset(keys.env_reset)
    return jax.vmap(lambda t: observe(env, state, keys, t)[0])(jnp.arange(1, horizon + 1))


def realized_effective_dimension(env: Env, seed: int, horizon: int, arch: MLP, lam0: float,
                                 r: float = 0.25) -> float:
    """d̃ = log det((r/λ₀) H̃ + I) of repetition ``seed`` over ``horizon`` rounds with the network ``arch``
    (module docstring), in float64."""
    contexts = presented_contexts(env, seed, horizon).reshape(-1, env.spec.d)
    theta0 = mlp_init(arch, seed_keys(jnp.uint32(seed)).policy_init, "symmetric", "float64")
    features = mlp_grads(arch, theta0, contexts.astype(jnp.float64)) / jnp.sqrt(arch.width)
    gram = features.T @ features
    return float(jnp.linalg.slogdet((r / lam0) * gram + jnp.eye(gram.shape[0]))[1])
