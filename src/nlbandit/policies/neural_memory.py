"""How much memory a neural policy needs per seed, by part (issue 13 §9), checked before anything runs.

With p = the network's parameter count (:attr:`~nlbandit.models.mlp.MLP.n_params`), m the ensemble size (1
for a single network; for ``@anytime`` the largest epoch's), C the data rows (the history capacity, T rounded
up to 128-row blocks, or K per-arm rows on ``backend = "arms"``), d the feature dimension, K arms, N the
width and L the depth, a neural policy holds per seed, in float32 (4 bytes):

* **network**: (m + 1)·p — its parameters (or the ensemble's) and θ₀;
* **data**: C·(d + 1 + m) — features, counts and responses (m perturbed columns for an ensemble);
* **design** (NeuralUCB, NeuralTS): p on the diagonal, p² for the full Z⁻¹ (1 for the others);
* **warm-up plan and counters**: the warm-up's rounds and two counters (int32); ``@anytime`` with
  ``warmup_scope = "once"`` keeps a second copy of all of the above (the state at the warm-up's end);
* **selection** (transient): NeuralUCB/TS's K per-arm gradients, K·p (twice that with a full design: Z⁻¹g);
  the ensemble's member scores, K·m;
* **training** (transient): one block's activations and their gradients, 3·B·N·L per member, B = 128
  history rows or K.

Kveton et al.'s policies (:mod:`nlbandit.policies.deep`), with H hidden units, a window of B examples and
E = ⌈m·T⌉ exploration rounds, hold the network with its Adam moments, 3·(d·H + 2H + 1) floats and a step
counter, and the window, B·(d + 1) and a counter; ``rep-glm-fpl`` adds the exploration phase's features,
E·d, its T-sized history on the embedding, C·(H + 3), and θ̃, H + 1.

Bae & Lee's policies (:mod:`nlbandit.policies.neurallog`) hold the network and θ₀, 2p, the history,
C·(d + 2) and its count, the diagonal design and the sums of squares of the effective dimension, 2p; while
selecting, the K per-arm gradients, K·p, and while training as above with m = 1. In theory mode the
design is a float64 p × p matrix (two for the W-type policies) with λ_t and ν_t, 8·(p² (+ p²) + 2) bytes,
and selecting adds a Cholesky factor, 8·p² bytes.

The engine holds all seeds (and grid points) at once, so a run needs S times this; the experiment loader
adds it to the loop's own arrays and refuses, naming the sizes, a run that exceeds the machine's memory
(:func:`nlbandit.core.memory.check_memory`). The parts that live in the state are exactly the state's
arrays (tested against ``jax.eval_shape`` of the policy's ``init``).
"""

from __future__ import annotations

from typing import Any

from nlbandit.core.types import ProblemSpec
from nlbandit.models.history import HISTORY_BLOCK, history_capacity
from nlbandit.models.mlp import MLP
from nlbandit.policies.anytime import SUFFIX, epoch_table
from nlbandit.policies.deep import exploration_rounds
from nlbandit.policies.neurallog import RULES

NEURAL = ("neural-ucb", "neural-ts", "neural-phe", "neural-es", "neural-greedy")
DEEP = ("deep-fpl", "deep-fl", "rep-glm-fpl")
NEURALLOG = tuple(RULES)
"""The policies (and their ``@anytime`` variants) whose memory :func:`neural_memory` states."""
F32 = 4


def _deep_memory(config: dict[str, Any], spec: ProblemSpec) -> dict[str, int]:
    """Bytes per seed of one of :data:`DEEP` (module docstring)."""
    d, hidden, batch = spec.d, config["hidden"], config["batch"]
    parts = {"network and Adam moments": F32 * (3 * (d * hidden + 2 * hidden + 1) + 1),
             "window B·(d + 1)": F32 * (batch * (d + 1) + 1)}
    if config["name"].removesuffix(SUFFIX) == "rep-glm-fpl":
        explore = exploration_rounds(config["explore_fraction"], spec.horizon)
        parts["exploration features E·d"] = F32 * explore * d
        parts["history C·(H + 3) and θ̃"] = F32 * (history_capacity(spec.horizon) * (hidden + 3) + 1 + hidden + 1)
    return parts


def neural_memory(config: dict[str, Any], env: dict[str, Any], horizon: int) -> dict[str, int]:
    """Bytes per seed of a resolved neural policy configuration on a resolved environment (its ``d`` and
    ``k``) over ``horizon`` rounds, by part (module docstring); an empty dict for a policy that is not one
    of :data:`NEURAL`, :data:`DEEP` or :data:`NEURALLOG`."""
    name = config["name"].removesuffix(SUFFIX)
    if name not in NEURAL + DEEP + NEURALLOG:
        return {}
    spec = ProblemSpec(env["d"], env["k"], horizon)
    if name in DEEP:
        return _deep_memory(config, spec)
    arch = MLP(spec.d, config["width"], config["depth"], config["duplicate"], config["output_scale"])
    p = arch.n_params
    if name in NEURALLOG:
        rows = history_capacity(spec.horizon)
        parts = {"network 2p": F32 * 2 * p, "data C·(d + 2)": F32 * rows * (spec.d + 2) + 4}
        if config["mode"] == "theory":
            weighted = p * p if RULES[name].weighted else 1
            parts["float64 matrices p² (+ p² for W) and λ_t, ν_t"] = 8 * (p * p + weighted + 2)
            selection = 8 * spec.k * p + 8 * p * p  # float64 features and a Cholesky factor
        else:
            parts["design and squares 2p"] = F32 * 2 * p
            selection = F32 * spec.k * p
        return {**parts, "selection (transient)": selection,
                "training (transient)": F32 * 3 * HISTORY_BLOCK * arch.width * arch.depth}
    m = config.get("m", 1) if name == "neural-es" else 1
    if config["name"].endswith(SUFFIX) and config.get("schedule") == "sun2025":
        m = int(epoch_table(config["t0"], config["b"], spec.horizon, config["schedule"])[1]["m_used"].max())
    rows = history_capacity(spec.horizon) if config["backend"] == "history" else spec.k
    design = {"diagonal": p, "full": p * p}.get(config.get("design"))
    gradients = spec.k * m if design is None else spec.k * p * (2 if config.get("design") == "full" else 1)
    block = HISTORY_BLOCK if config["backend"] == "history" else spec.k
    warmup = spec.k if config["warmup_rounds"] is None else config["warmup_rounds"]
    parts = {
        "network (m + 1)·p": F32 * (m + 1) * p,
        "data C·(d + 1 + m)": F32 * rows * (spec.d + 1 + m),
        "design": F32 * (design or 1),  # the state keeps a 0-d array when the policy has no design
        "warm-up plan and counters": 4 * (max(warmup, 1) + 2),
    }
    if config.get("warmup_scope") == "once":  # @anytime keeps the state reached at the warm-up's end
        parts["saved warm-up state"] = sum(parts.values())
    return {**parts, "selection (transient)": F32 * gradients,
            "training (transient)": F32 * 3 * block * arch.width * arch.depth * m}
