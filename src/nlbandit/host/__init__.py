"""Float64 host rounds of the online agent, on NumPy arrays, for the policies whose round is a few small matrix
products.

One online decision through XLA costs at least one program launch (~20 µs on this project's 2-core CPU,
docs/performance.md) whatever the arithmetic, and a linear or GLM round at d = 20, K = 50 is only a
few thousand flops. :class:`~nlbandit.agent.Agent` therefore runs the round of the policies listed
with a host round (:func:`~nlbandit.host.rounds.host_rounds`: each family declares its own beside it, in
``nlbandit/policies/<family>_host.py``) on the host: the same state pytree (NumPy leaves instead of
device arrays), the same formulas as the jitted policy, and the same random numbers — every draw comes from
the simulator's round keys, computed for blocks of rounds at once by one jitted call
(:class:`~nlbandit.host.draws.DrawBlocks`). A NumPy call costs ~1 µs whatever its size, so the steps that
would take dozens of them (the tie rule, the ensemble probability, the Sherman–Morrison update, the GLM
index, the Newton refit and GLM-TSL's sample) are numba functions: compiled on first use and cached on disk
(2–18 s at an agent's first rounds by policy, once per machine), several times faster than their NumPy spelling
(both measured in docs/performance.md).

Decisions therefore equal the jitted policy's except where two scores differ by less than floating-point
rounding (the two paths round differently in the last bits); ``tests/test_host_rounds.py`` checks equality
with :func:`~nlbandit.core.simulate.simulate` over thousands of rounds and the states to 1e-9.

Modules: :mod:`~nlbandit.host.exploration` (the tie rule, ensemble probabilities), :mod:`~nlbandit.host.ridge`
(Sherman–Morrison ridge), :mod:`~nlbandit.host.glm` (links and the damped Newton MLE),
:mod:`~nlbandit.host.draws` (the round keys' draws in blocks) and :mod:`~nlbandit.host.rounds` (what a
host round is, the pieces the families' rounds share, and how the agent finds them).
"""

from nlbandit.host.rounds import HostRound, host_round, host_rounds

__all__ = ["HostRound", "host_round", "host_rounds"]
