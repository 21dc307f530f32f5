"""Host mirrors of :mod:`nlbandit.policies.exploration` (compiled by numba): the masked argmax with hashed
tie-breaking and the exact probability of an ensemble's choice, bit-for-bit the same choices given the same
scores.

A ``mask`` is a (K,) boolean array of the available arms, or None when every arm is available (which
saves masking the scores in the common case)."""

from __future__ import annotations

import numpy as np
from numba import njit

from nlbandit.policies.exploration import TIE_RTOL

_GOLDEN = np.uint64(0x9E3779B9)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True)
def _priority(word: np.uint64, arm: int) -> np.uint64:
    """:func:`nlbandit.policies.exploration.tie_priorities` of one arm: mix32(word XOR golden·arm), in uint64
    arithmetic kept to 32 bits (numba has no wrapping uint32 products)."""
    x = word ^ ((np.uint64(arm) * _GOLDEN) & _LOW32)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & _LOW32
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & _LOW32
    return x ^ (x >> np.uint64(16))


def tied_arms(scores: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """The available arms whose score is within ``TIE_RTOL``·max(1, |best|) of the best (last axis); the
    scores are finite and some arm is available, so an unavailable arm, put at −∞, is never tied."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    best = scores.max(axis=-1, keepdims=True)
    return scores >= best - TIE_RTOL * np.maximum(1.0, np.abs(best))


@njit(cache=True)
def _best(scores: np.ndarray, mask: np.ndarray | None) -> float:
    """The best score among the available arms."""
    best = -np.inf
    for a in range(scores.shape[0]):
        if (mask is None or mask[a]) and scores[a] > best:
            best = scores[a]
    return best


@njit(cache=True)
def greedy_choice(word: np.uint32, scores: np.ndarray, mask: np.ndarray | None) -> tuple[int, float]:
    """(arm, probability) of :func:`nlbandit.policies.exploration.greedy_choice`: among the tied arms
    (:func:`tied_arms`), the one of highest priority, and 1/|tied|. As the jitted rule's argmax over the
    tied arms' priorities and zeros elsewhere: the first of equal priorities, and arm 0 when every tied arm's
    priority is 0."""
    best = _best(scores, mask)
    floor = best - TIE_RTOL * max(1.0, abs(best))
    w = np.uint64(word)
    arm, top, count = 0, np.uint64(0), 0
    for a in range(scores.shape[0]):
        if (mask is None or mask[a]) and scores[a] >= floor:
            count += 1
            priority = _priority(w, a)
            if priority > top:
                arm, top = a, priority
    return arm, 1.0 / count


def member_draw(word: np.uint32, m_used: float) -> int:
    """:func:`nlbandit.policies.exploration.member_draw`: j = word mod m_used."""
    return int(word) % int(m_used)


@njit(cache=True)
def ensemble_probability(member_scores: np.ndarray, arm: int, mask: np.ndarray | None, m_used: int) -> float:
    """:func:`nlbandit.policies.exploration.ensemble_probability` from the members' scores (m, K): the mean over
    the first ``m_used`` members of [arm tied for the member's best]/|tied| (compiled: one pass, no masks built).
    """
    total = 0.0
    for j in range(m_used):
        best = _best(member_scores[j], mask)
        floor = best - TIE_RTOL * max(1.0, abs(best))
        if member_scores[j, arm] >= floor and (mask is None or mask[arm]):
            tied = 0
            for a in range(member_scores.shape[1]):
                if (mask is None or mask[a]) and member_scores[j, a] >= floor:
                    tied += 1
            total += 1.0 / tied
    return total / m_used
