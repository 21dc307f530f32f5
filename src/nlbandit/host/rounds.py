"""The rounds the agent runs on the host (:mod:`nlbandit.host`): what one is, the pieces they share, and how the
agent finds a policy's.

A :class:`HostRound` is the policy's ``act`` and ``update`` on NumPy state, with the random numbers each
needs as a function of the round key (``act_draws``, ``update_draws``) so that they are the jitted policy's
own draws: each calls the function the family draws them with (e.g.
:func:`~nlbandit.policies.exploration.epsilon_greedy_draws`), so no key is split in two places. Each family
declares its host rounds beside it, in ``nlbandit/policies/<family>_host.py`` as
``HOST_ROUNDS`` (policy name → builder), each citing the jitted policy it mirrors; :func:`host_rounds`
collects them. The family module does not import them, so they are in no run's code hash.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, NamedTuple

import jax
import numpy as np

from nlbandit.core.types import Policy, ProblemSpec
from nlbandit.discovery import declaring_modules
from nlbandit.host.ridge import ridge_update
from nlbandit.policies.exploration import tie_word as draw_tie_word

Round = tuple[int, float, float, float]
"""What ``act`` returns: (arm, score, bonus, probability), NaN where undefined."""


class HostRound(NamedTuple):
    """A policy's round in NumPy.

    Attributes:
      act: ``act(params, state, draws, contexts, mask, t) -> (arm, score, bonus, probability)``, ``mask`` None
        when every arm is available (:mod:`nlbandit.host.exploration`).
      update: ``update(params, state, draws, contexts, arm, reward, t) -> state``.
      act_draws, update_draws: one round key → the tuple of arrays that ``act`` / ``update`` read as
        ``draws`` (the jitted policy's draws from that key); None when the step draws nothing.
      estimate: for a Thompson-type policy, whose parameters given the history are θ̃ = θ̄ + c M ξ with
        ξ ~ N(0, I_d): ``estimate(params, state, draws, contexts, mask, t, normals) -> (arm, score, bonus, p,
        se)``, ``act`` with the probability of its choice estimated from ``normals`` (d, N) standard normals in
        the same compiled call (:mod:`nlbandit.host.propensity`), ``se`` None where the probability is exact (a
        planned arm); None for the others.
    """

    act: Callable[..., Round]
    update: Callable[..., Any]
    act_draws: Callable[[jax.Array], tuple] | None
    update_draws: Callable[[jax.Array], tuple] | None
    estimate: Callable[..., tuple] | None = None


class LastState:
    """A value derived from a host state, kept for the last state object it was derived from: host rounds never
    change a state's arrays in place (a learnt state is a new object; tests/test_host_rounds.py), so a round's
    ``act`` or ``estimate`` and the next ``update`` derive it once."""

    def __init__(self):
        self._state: Any = None
        self._value: Any = None

    def get(self, state: Any, derive: Callable[[], Any]) -> Any:
        """The value for ``state``: the kept one if ``state`` is the object it was derived from, else ``derive()``
        (then kept)."""
        if self._state is not state:
            self._state, self._value = state, derive()
        return self._value

    def put(self, state: Any, value: Any) -> None:
        """Keep ``value`` as derived from ``state`` (an update that computed it on the way)."""
        self._state, self._value = state, value


def tie_word(key: jax.Array) -> tuple:
    """The draws of a step that reads one tie word from its key
    (:func:`~nlbandit.policies.exploration.tie_word`)."""
    return (draw_tie_word(key),)


def available(mask: np.ndarray | None, k: int) -> int:
    """The number of available arms."""
    return k if mask is None else int(np.count_nonzero(mask))


def learn_nothing(params, state, draws, contexts, arm, reward, t):
    """The update of a policy that learns nothing."""
    return state


def ridge_learn(params, state, draws, contexts, arm, reward, t):
    """The update of a policy whose state is one ridge regression on the played features."""
    return ridge_update(state, contexts[arm], reward)


@functools.cache
def host_rounds() -> dict[str, Callable[[dict[str, Any], ProblemSpec], HostRound | None]]:
    """Every family's host rounds by policy name (the ``HOST_ROUNDS`` of the modules of :mod:`nlbandit.policies`):
    each builds the round from the resolved configuration and the sizes, or gives None for a configuration it
    does not cover."""
    return {name: build for module in declaring_modules("nlbandit.policies", "HOST_ROUNDS")
            for name, build in module.HOST_ROUNDS.items()}


def host_round(policy: Policy, config: dict[str, Any]) -> HostRound | None:
    """The host round of ``policy`` (resolved ``config``), or None where it has none: a policy without one
    (:func:`host_rounds`), a float32 policy, or a configuration its family's host round does not cover."""
    build = host_rounds().get(config["name"])
    return None if build is None or policy.meta.dtype != "float64" else build(config, policy.meta.spec)
