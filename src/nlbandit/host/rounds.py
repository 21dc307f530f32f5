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

import contextlib
import functools
import threading
from typing import Any, Callable, Iterator, NamedTuple

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
      caches: the :class:`LastState` values the round's functions keep between calls (e.g. the identity link's
        Gram factor, updated by a rank-one step per reward, so its last bits depend on the path and not only on
        the state), in the order the round's builder made them; :func:`host_round` fills it, so that the agent
        saves them with the state and carries them over a rebuild (a loaded agent then continues bit for bit).
    """

    act: Callable[..., Round]
    update: Callable[..., Any]
    act_draws: Callable[[jax.Array], tuple] | None
    update_draws: Callable[[jax.Array], tuple] | None
    estimate: Callable[..., tuple] | None = None
    caches: tuple["LastState", ...] = ()


_building = threading.local()
"""The :class:`LastState` objects made by the host round being built in this thread (:func:`host_round`)."""


@contextlib.contextmanager
def _collecting() -> Iterator[list]:
    """The list that collects the :class:`LastState` objects made in this block (this thread)."""
    outer = getattr(_building, "found", None)
    _building.found = found = []
    try:
        yield found
    finally:
        _building.found = outer


class LastState:
    """A value derived from a host state, kept for the last state object it was derived from: host rounds never
    change a state's arrays in place (a learnt state is a new object; tests/test_host_rounds.py), so a round's
    ``act`` or ``estimate`` and the next ``update`` derive it once.

    An update may put a value computed on the way (a rank-one update of the last one) whose last bits differ from
    ``derive()``'s; the agent therefore saves the value kept for its state (:meth:`kept`) and gives it back to
    the loaded or rebuilt agent's round (:meth:`restore`), so that it continues bit for bit."""

    def __init__(self):
        self._state: Any = None
        self._value: Any = None
        self._unchecked = False
        found = getattr(_building, "found", None)
        if found is not None:
            found.append(self)

    def get(self, state: Any, derive: Callable[[], Any]) -> Any:
        """The value for ``state``: the kept one if ``state`` is the object it was derived from, else ``derive()``
        (then kept). A restored value is checked against ``derive()`` at its first use and replaced by it unless
        it is the same array to rounding (a saved file's value is used only where it is the state's)."""
        if self._state is not state:
            self._state, self._value, self._unchecked = state, derive(), False
        elif self._unchecked:
            fresh, self._unchecked = derive(), False
            if not _same_value(self._value, fresh):
                self._value = fresh
        return self._value

    def kept(self, state: Any) -> Any:
        """The value kept for ``state`` (the very object), None if none is."""
        return self._value if self._state is state and self._state is not None else None

    def restore(self, state: Any, value: Any) -> None:
        """Keep ``value`` (saved with an agent, or kept by the round it replaces) for ``state``, checked at its
        first use (:meth:`get`)."""
        self._state, self._value, self._unchecked = state, value, True

    def put(self, state: Any, value: Any) -> None:
        """Keep ``value`` as derived from ``state`` (an update that computed it on the way)."""
        self._state, self._value, self._unchecked = state, value, False


def _same_value(kept: Any, fresh: Any) -> bool:
    """Whether ``kept`` (a restored value) is ``fresh`` (derived from the state now) to rounding: float arrays of
    the same shape, close everywhere (square ones, Cholesky factors: in their lower triangle, the only one read)."""
    if not (isinstance(kept, np.ndarray) and isinstance(fresh, np.ndarray) and kept.shape == fresh.shape
            and kept.dtype == fresh.dtype == np.float64):
        return False
    if fresh.ndim == 2 and fresh.shape[0] == fresh.shape[1]:
        kept, fresh = np.tril(kept), np.tril(fresh)
    scale = 1.0 + float(np.abs(fresh).max(initial=0.0))
    return bool(np.isfinite(kept).all() and np.allclose(kept, fresh, rtol=1e-8, atol=1e-12 * scale))


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
    if build is None or policy.meta.dtype != "float64":
        return None
    with _collecting() as caches:
        found = build(config, policy.meta.spec)
    return None if found is None else found._replace(caches=tuple(caches))
