"""The Open Bandit Dataset (Saito et al. 2020) as logged bandit data: the ``random`` behaviour policy,
campaign ``all``, from the 10,000-event sample that the ``obp`` wheel ships (fetched with ``pip download``,
never installed: it needs torch), with Bae & Lee's features (spec 001 §4.5, App. J.1).

Each logged event shows one of 80 items at one of 3 positions, chosen uniformly at random (propensity
1/80), with the user's 4 categorical features and the 80 user–item affinities. Bae & Lee's reduction:

* **arms**: the logged item and the 4 other items of highest affinity for this event's user (ties broken by
  the smaller item id), K = 5, in an order shuffled per event (once, with a fixed seed, so that an arm's
  index carries no information);
* **features** of candidate item a, concatenated (d = 45): the user's one-hot features reduced to 16
  dimensions by a truncated SVD; the item's categorical one-hot features reduced to 8 by a truncated SVD,
  and its numeric ``item_feature_0``; the display position one-hot (3); log(1 + affinity(user, a)); the user
  embedding times that scaled affinity (16). The SVDs (of the uncentred one-hot matrices, as scikit-learn's
  TruncatedSVD) are fitted once on the whole sample, and every final column is min–max scaled to [−1, 1]
  over all (event, candidate) pairs (a constant column becomes 0; spec 001 §4.5 [REC]);
* **reward**: the click.

The reduction breaks the premise of Li et al.'s replay (a logging policy uniform over the offered arms):
the logged item is always among the 5, which were chosen knowing it. The replay's click rate is then the
paper's metric, not an unbiased estimate of the policy's online click rate; the standard off-policy
estimates of :mod:`nlbandit.replay.estimators` use the logged propensity 1/80 over all 80 items instead.
"""

from __future__ import annotations

import csv
import io
import zipfile
from typing import NamedTuple

import numpy as np

from nlbandit.data.cache import DataError
from nlbandit.data.encode import minmax
from nlbandit.data.sources import Reader, WheelSource

SOURCE = WheelSource("obp==0.4.1", "obp-0.4.1-py3-none-any.whl",
                     "87dec9caf4283c25ab13036532e0a24566f1c7bdcad1653a8ded43b2f5ef8208",
                     ("obp/dataset/obd/random/all/all.csv", "obp/dataset/obd/random/all/item_context.csv"), Reader(),
                     "Open Bandit Dataset sample (obp wheel): 10,000 events of the random policy, 80 items, "
                     "3 positions")
"""Where the sample comes from (``nlbandit data fetch obd``)."""

ARMS = 5
USER_DIMS, ITEM_DIMS = 16, 8


class OBDEvents(NamedTuple):
    """The sample as read: per event the item shown, its position (0..2), the click, the propensity, the user's
    categorical features (n, 4) and the affinities (n, 80); per item its numeric feature (80,) and categorical
    features (80, 3)."""

    item: np.ndarray
    position: np.ndarray
    click: np.ndarray
    propensity: np.ndarray
    user: np.ndarray
    affinity: np.ndarray
    item_numeric: np.ndarray
    item_categorical: np.ndarray


class OBDBandit(NamedTuple):
    """Bae & Lee's logged bandit: ``contexts`` (n, 5, 45), ``logged`` (n,) the index of the logged item among the
    5, ``click`` (n,), ``items`` (n, 5) the item ids of the arms, ``propensity`` (n,) the logging policy's
    probability of the logged item among all 80."""

    contexts: np.ndarray
    logged: np.ndarray
    click: np.ndarray
    items: np.ndarray
    propensity: np.ndarray


def parse(events_csv: str, items_csv: str, where: str) -> OBDEvents:
    """The events and item table from the texts of ``all.csv`` and ``item_context.csv``.

    Raises:
      DataError: naming ``where``: a missing column, a malformed number, an unknown item id, a position
        outside 1..3, or a propensity outside (0, 1].
    """
    rows = list(csv.DictReader(io.StringIO(events_csv)))
    items = list(csv.DictReader(io.StringIO(items_csv)))
    if not rows or not items:
        raise DataError(f"{where}: no events or no items")
    need = ["item_id", "position", "click", "propensity_score"] + [f"user_feature_{j}" for j in range(4)]
    n_items = len(items)
    need += [f"user-item_affinity_{j}" for j in range(n_items)]
    missing = [c for c in need if c not in rows[0]]
    missing += [c for c in ("item_id", "item_feature_0", "item_feature_1", "item_feature_2", "item_feature_3")
                if c not in items[0]]
    if missing:
        raise DataError(f"{where}: column {missing[0]!r} is missing")
    try:
        item_ids = np.array([int(r["item_id"]) for r in items])
        order = np.argsort(item_ids)
        if not np.array_equal(item_ids[order], np.arange(n_items)):
            raise DataError(f"{where}: item ids must be 0..{n_items - 1}")
        items = [items[i] for i in order]
        item = np.array([int(r["item_id"]) for r in rows])
        position = np.array([int(r["position"]) for r in rows]) - 1
        click = np.array([float(r["click"]) for r in rows])
        propensity = np.array([float(r["propensity_score"]) for r in rows])
        affinity = np.array([[float(r[f"user-item_affinity_{j}"]) for j in range(n_items)] for r in rows])
        item_numeric = np.array([float(r["item_feature_0"]) for r in items])
    except (ValueError, TypeError) as e:
        raise DataError(f"{where}: a malformed number ({e})") from None
    if item.min() < 0 or item.max() >= n_items:
        raise DataError(f"{where}: an item id outside 0..{n_items - 1}")
    if position.min() < 0 or position.max() > 2:
        raise DataError(f"{where}: a position outside 1..3")
    if not np.all((propensity > 0) & (propensity <= 1)) or not np.all(np.isin(click, (0.0, 1.0))):
        raise DataError(f"{where}: propensities must lie in (0, 1] and clicks be 0 or 1")
    if not (np.all(np.isfinite(affinity)) and np.all(np.isfinite(item_numeric))):
        raise DataError(f"{where}: non-finite affinities or item features")
    user = np.array([[r[f"user_feature_{j}"] for j in range(4)] for r in rows], dtype=object)
    item_categorical = np.array([[r[f"item_feature_{j}"] for j in (1, 2, 3)] for r in items], dtype=object)
    return OBDEvents(item, position, click, propensity, user, affinity, item_numeric, item_categorical)


def load() -> OBDEvents:
    """The sample from the cached ``obp`` wheel (``nlbandit data fetch obd`` first; a :class:`DataError` says
    so)."""
    SOURCE.version("obd")
    try:
        with zipfile.ZipFile(SOURCE.path()) as z:
            events, items = (z.read(m).decode("utf-8") for m in SOURCE.members)
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError) as e:
        raise DataError(f"{SOURCE.path()}: cannot read the OBD sample: {e}") from None
    return parse(events, items, f"{SOURCE.path()}:{SOURCE.members[0]}")


def describe(events: OBDEvents) -> str:
    """One paragraph: events, items, clicks, the logging propensities, provenance."""
    return (f"obd: {events.item.size} events of the random policy over {events.affinity.shape[1]} items at 3 "
            "positions, "
            f"{int(events.click.sum())} clicks (click rate {events.click.mean():.4f}), propensities "
            f"{events.propensity.min():g}–{events.propensity.max():g}; source {SOURCE.requirement}, files "
            f"{', '.join(SOURCE.members)}, wheel sha256 {SOURCE.sha256}")


def one_hot(values: np.ndarray) -> np.ndarray:
    """(n, Σ levels): every categorical column of ``values`` (n, c) as indicator columns (levels sorted)."""
    blocks = []
    for column in values.T:
        levels, codes = np.unique(column.astype(str), return_inverse=True)
        blocks.append(np.eye(levels.size)[codes])
    return np.concatenate(blocks, axis=1)


def truncated_svd(x: np.ndarray, dims: int) -> np.ndarray:
    """(n, dims): the rows of ``x`` projected on its top ``dims`` right singular vectors (uncentred, like
    scikit-learn's TruncatedSVD; each vector's sign fixed so that its largest entry is positive; zero
    columns when ``x`` has fewer than ``dims`` columns)."""
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    vt = vt[:dims]
    vt = vt * np.sign(vt[np.arange(vt.shape[0]), np.argmax(np.abs(vt), axis=1)])[:, None]
    out = x @ vt.T
    return np.pad(out, ((0, 0), (0, dims - out.shape[1])))


def bandit(events: OBDEvents, seed: int = 0) -> OBDBandit:
    """Bae & Lee's logged bandit of ``events`` (module docstring); ``seed`` fixes the arm order shuffle."""
    n, n_items = events.affinity.shape
    others = np.where(np.arange(n_items)[None] == events.item[:, None], -np.inf, events.affinity)
    top = np.argsort(-others, axis=1, kind="stable")[:, :ARMS - 1]  # ties: the smaller item id first
    arms = np.concatenate([events.item[:, None], top], axis=1)
    rng = np.random.default_rng(seed)
    arms = np.take_along_axis(arms, np.argsort(rng.random(arms.shape), axis=1), axis=1)
    logged = np.argmax(arms == events.item[:, None], axis=1)

    user = truncated_svd(one_hot(events.user), USER_DIMS)  # (n, 16)
    item = np.concatenate([truncated_svd(one_hot(events.item_categorical), ITEM_DIMS),
                           events.item_numeric[:, None]], axis=1)  # (80, 9)
    affinity = np.take_along_axis(events.affinity, arms, axis=1)  # (n, 5)
    log_aff = np.log1p(np.maximum(affinity, 0.0))
    scaled = minmax(log_aff.ravel()).reshape(n, ARMS)
    position = np.eye(3)[events.position]
    parts = [np.broadcast_to(user[:, None], (n, ARMS, USER_DIMS)), item[arms],
             np.broadcast_to(position[:, None], (n, ARMS, 3)), log_aff[:, :, None],
             user[:, None, :] * scaled[:, :, None]]
    x = np.concatenate(parts, axis=2)
    flat = x.reshape(n * ARMS, -1)
    x = np.stack([minmax(c) for c in flat.T], axis=1).reshape(n, ARMS, -1)
    return OBDBandit(x, logged, events.click, arms, events.propensity)
