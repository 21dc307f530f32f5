"""NumPy mirrors of :mod:`nlbandit.policies.exploration`: the masked argmax with hashed tie-breaking and
the exact probability of an ensemble's choice, bit-for-bit the same choices given the same scores.

A ``mask`` is a (K,) boolean array of the available arms, or None when every arm is available (which
saves masking the scores in the common case)."""

from __future__ import annotations

import numpy as np

from nlbandit.policies.exploration import TIE_RTOL

_GOLDEN = np.uint32(0x9E3779B9)


def tie_priorities(word: np.uint32, k: int) -> np.ndarray:
    """:func:`nlbandit.policies.exploration.tie_priorities`: mix32(word XOR golden·index), uint32 arithmetic."""
    x = np.uint32(word) ^ (np.arange(k, dtype=np.uint32) * _GOLDEN)
    x ^= x >> 16
    x *= np.uint32(0x7FEB352D)
    x ^= x >> 15
    x *= np.uint32(0x846CA68B)
    return x ^ (x >> 16)


def tied_arms(scores: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """The available arms whose score is within ``TIE_RTOL``·max(1, |best|) of the best (last axis); the
    scores are finite and some arm is available, so an unavailable arm, put at −∞, is never tied."""
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    best = scores.max(axis=-1, keepdims=True)
    return scores >= best - TIE_RTOL * np.maximum(1.0, np.abs(best))


def _mix32(x: int) -> int:
    """:func:`nlbandit.policies.exploration.mix32` of one Python integer."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def greedy_choice(word: np.uint32, scores: np.ndarray, mask: np.ndarray | None) -> tuple[int, float]:
    """(arm, probability) of :func:`nlbandit.policies.exploration.greedy_choice`: the tied arm of highest
    priority, and 1/|tied|.

    With one arm tied (almost every round) only that arm's priority is computed: the jitted rule's
    argmax over the tied arms' priorities and zeros elsewhere returns it, or arm 0 when its priority is 0.
    """
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    best = float(scores.max())
    tied = scores >= best - TIE_RTOL * max(1.0, abs(best))  # unavailable arms are at -inf, below any finite best
    count = int(np.count_nonzero(tied))
    if count > 1:
        return int(np.argmax(np.where(tied, tie_priorities(word, scores.shape[0]), 0))), 1.0 / count
    arm = int(tied.argmax())
    if _mix32(int(word) ^ ((arm * 0x9E3779B9) & 0xFFFFFFFF)) == 0:
        arm = 0
    return arm, 1.0


def member_draw(word: np.uint32, m_used: float) -> int:
    """:func:`nlbandit.policies.exploration.member_draw`: j = word mod m_used."""
    return int(word) % int(m_used)


def ensemble_probability(member_scores: np.ndarray, arm: int, mask: np.ndarray | None, m_used: float) -> float:
    """:func:`nlbandit.policies.exploration.ensemble_probability` from the members' scores (m, K)."""
    tied = tied_arms(member_scores[: int(m_used)], mask)
    return float((tied[:, arm] / tied.sum(axis=1)).sum() / m_used)
