"""Off-policy estimates of a policy's value from logged bandit data, with bootstrap confidence intervals.

Logged data: n events i, each with the K actions on offer, the logged action a_i, its reward r_i and the
logging policy's probability p_i = π₀(a_i | x_i) of having taken it (the propensity). A target policy π is
given by its action probabilities π(· | x_i) on each event (a one-hot row for a deterministic policy). With
the importance weight w_i = π(a_i | x_i) / p_i:

* inverse propensity scoring (Horvitz & Thompson 1952; Li et al. 2011): V̂_IPS = (1/n) Σ w_i r_i, unbiased
  whenever π₀ gives every action π may take a positive probability (refused where the log shows it did not:
  an event logged with probability 1 on which π may take another action);
* self-normalised IPS (Swaminathan & Joachims 2015): V̂_SNIPS = Σ w_i r_i / Σ w_i, biased by O(1/n) but with
  a smaller variance, and invariant to adding a constant to every reward;
* doubly robust (Dudík, Langford & Li 2011): V̂_DR = (1/n) Σ [Σ_a π(a | x_i) q̂(x_i, a) + w_i (r_i − q̂(x_i,
  a_i))] with a reward model q̂: unbiased when the propensities are right and cover π's actions, whatever q̂
  (where they do not, only if q̂ is right there), and of smaller variance the better q̂ is.

Confidence intervals are percentile intervals of the nonparametric bootstrap over events (Efron 1979):
the estimate recomputed on ``resamples`` resamples of the n events drawn with replacement.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

ESTIMATORS = ("ips", "snips", "dr")
"""The estimators' names, in the order reports list them."""


class Unsupported(ValueError):
    """An estimator asked for on a log that cannot support it (:func:`estimates`: IPS or SNIPS where the logging
    policy never played an arm the target may play)."""


class Estimate(NamedTuple):
    """An off-policy value estimate: the ``value`` on the data and its bootstrap interval [``lo``, ``hi``]
    at ``level``."""

    name: str
    value: float
    lo: float
    hi: float
    level: float


def _check(actions, rewards, propensities, target, q_hat) -> tuple[np.ndarray, ...]:
    """The inputs as float64/int arrays, refused with a message naming the argument when malformed."""
    target = np.asarray(target, np.float64)
    if target.ndim != 2 or target.shape[0] < 1:
        raise ValueError(f"target must be an (n, K) array of action probabilities, got shape {target.shape}")
    n, k = target.shape
    actions = np.asarray(actions)
    rewards = np.asarray(rewards, np.float64)
    propensities = np.asarray(propensities, np.float64)
    for name, a in (("actions", actions), ("rewards", rewards), ("propensities", propensities)):
        if a.shape != (n,):
            raise ValueError(f"{name} must have shape ({n},), one entry per event of target, got {a.shape}")
    if not np.issubdtype(actions.dtype, np.integer) or actions.min() < 0 or actions.max() >= k:
        raise ValueError(f"actions must be integers in 0..{k - 1} (columns of target)")
    if not np.all(np.isfinite(rewards)):
        raise ValueError("rewards must be finite")
    if not np.all((propensities > 0) & (propensities <= 1)):
        raise ValueError("propensities must lie in (0, 1]: an action the logging policy never takes cannot be "
                         "reweighted")
    if not (np.all(target >= 0) and np.allclose(target.sum(axis=1), 1.0, atol=1e-9)):
        raise ValueError("every row of target must be a probability vector (non-negative, summing to 1)")
    if q_hat is not None:
        q_hat = np.asarray(q_hat, np.float64)
        if q_hat.shape != (n, k) or not np.all(np.isfinite(q_hat)):
            raise ValueError(f"q_hat must be a finite ({n}, {k}) array of predicted rewards, got shape {q_hat.shape}")
    return actions.astype(np.int64), rewards, propensities, target, q_hat


def _refuse_unsupported(names: tuple[str, ...], actions: np.ndarray, p: np.ndarray, target: np.ndarray) -> None:
    """Refuse IPS and SNIPS where the log shows that the logging policy never played an arm the target may play:
    an event logged with probability 1 (a deterministic logging policy: every other arm had probability 0) on
    which the target gives the other arms a positive probability. Those arms' rewards are never reweighted, so
    both estimates would be biased (IPS by the target's value there, SNIPS towards the logged arms' value), and
    no interval says so. DR is kept: its reward model stands in for them (unbiased only if the model is right).
    An arm of probability 0 on an event logged with a probability below 1 cannot be seen in the log."""
    weighting = [name for name in names if name in ("ips", "snips")]
    unseen = (p == 1.0) & (target[np.arange(actions.size), actions] < 1.0 - 1e-12)
    if weighting and unseen.any():
        mass = 1.0 - target[np.arange(actions.size), actions][unseen]
        raise Unsupported(
            f"{' and '.join(weighting)}: on {int(unseen.sum())} of the {actions.size} events the logged arm had "
            f"probability 1 (a deterministic logging policy: the other arms had probability 0) and the target gives "
            f"the other arms probability ({mass.mean():.3g} on average); importance weighting cannot reach arms the "
            "logging policy never plays, so the estimate would be biased: use 'dr' (its reward model stands in for "
            "them) or a log of a randomised policy (ε-greedy, Thompson sampling)")


def _terms(name: str, w: np.ndarray, r: np.ndarray, direct: np.ndarray | None,
           q_logged: np.ndarray | None) -> tuple[np.ndarray, ...]:
    """The per-event terms whose resamples estimator ``name`` averages or sums (module docstring): IPS w_i r_i;
    SNIPS w_i r_i and w_i; DR the direct value plus w_i (r_i − q̂(x_i, a_i))."""
    if name == "ips":
        return (w * r,)
    if name == "snips":
        return w * r, w
    return (direct + w * (r - q_logged),)


def _values(name: str, terms: tuple[np.ndarray, ...], idx: np.ndarray) -> np.ndarray:
    """The estimate ``name`` from its per-event ``terms`` (:func:`_terms`) on the event resamples ``idx`` (B, n),
    one value per resample."""
    if name == "snips":
        return terms[0][idx].sum(axis=1) / np.maximum(terms[1][idx].sum(axis=1), 1e-300)
    return terms[0][idx].mean(axis=1)


def estimate(name: str, actions, rewards, propensities, target, q_hat=None, *, resamples: int = 1000,
             level: float = 0.95, seed: int = 0) -> Estimate:
    """The off-policy estimate ``name`` ∈ {ips, snips, dr} (module docstring) of the value of the policy with
    action probabilities ``target`` (n, K), from the logged ``actions`` (n,), ``rewards`` (n,) and
    ``propensities`` (n,), with its bootstrap percentile interval at ``level`` over ``resamples`` resamples
    drawn with NumPy's generator seeded by ``seed``. ``q_hat`` (n, K), a reward model's predictions, is
    required by ``dr`` and ignored otherwise.

    Raises:
      ValueError: an unknown name, malformed or inconsistent arrays, a propensity outside (0, 1]; ``ips`` or
        ``snips`` where an event was logged with probability 1 and the target may play another arm on it (the
        logging policy never played that arm: the estimate would be biased, ``dr`` is accepted).
    """
    return estimates((name,), actions, rewards, propensities, target, q_hat, resamples=resamples, level=level,
                     seed=seed)[name]


def estimates(names, actions, rewards, propensities, target, q_hat=None, *, resamples: int = 1000,
              level: float = 0.95, seed: int = 0) -> dict[str, Estimate]:
    """:func:`estimate` of each estimator of ``names`` on the same data, by name: each the same numbers as its own
    call, its bootstrap on the same resamples (one draw of them serves all). ``q_hat`` is required when ``names``
    holds ``dr``.

    Raises:
      ValueError: as :func:`estimate`; no name.
    """
    names = tuple(dict.fromkeys(names))
    unknown = [name for name in names if name not in ESTIMATORS]
    if unknown or not names:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {unknown[0] if unknown else 'none'!r}")
    if "dr" in names and q_hat is None:
        raise ValueError("the doubly robust estimator needs q_hat, a reward model's (n, K) predictions")
    if not (isinstance(resamples, int) and resamples >= 1) or not 0 < level < 1:
        raise ValueError(f"resamples must be an integer >= 1 and level in (0, 1), got {resamples!r}, {level!r}")
    actions, r, p, target, q_hat = _check(actions, rewards, propensities, target, q_hat if "dr" in names else None)
    n = r.size
    _refuse_unsupported(names, actions, p, target)
    w = target[np.arange(n), actions] / p
    direct = q_logged = None
    if "dr" in names:
        direct, q_logged = (target * q_hat).sum(axis=1), q_hat[np.arange(n), actions]
    terms = {name: _terms(name, w, r, direct, q_logged) for name in names}
    values = {name: float(_values(name, terms[name], np.arange(n)[None])[0]) for name in names}
    rng = np.random.default_rng(seed)
    chunk = max(1, 2**22 // n)  # resamples drawn in blocks of at most ~4M indices
    boot: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for s in range(0, resamples, chunk):
        idx = rng.integers(0, n, (min(chunk, resamples - s), n))
        for name in names:
            boot[name].append(_values(name, terms[name], idx))
    out = {}
    for name in names:
        lo, hi = np.quantile(np.concatenate(boot[name]), [(1 - level) / 2, (1 + level) / 2])
        out[name] = Estimate(name, values[name], float(lo), float(hi), level)
    return out
