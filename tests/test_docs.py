"""The documentation's examples and numbers that can rot: the full experiment file of docs/experiments.md loads as
written; docs/data.md's table quotes `nlbandit data list` and its numbers on the OBD reduction are the sample's."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from nlbandit.data import obd, sources
from nlbandit.experiments.plan import load_experiment

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_the_full_experiment_file_of_experiments_md_loads(tmp_path):
    """docs/experiments.md's "experiment file in full" (its only block opening with name = ...): it lacked k and a
    series its claim names, and named a case it did not have."""
    text = (DOCS / "experiments.md").read_text()
    start = text.index('```toml\nname = "fig1a_linear"') + len("```toml\n")
    path = tmp_path / "sun2025" / "fig1a_linear.toml"
    path.parent.mkdir()
    path.write_text(text[start:text.index("```", start)])
    exp = load_experiment(path)
    assert exp.labels == ["Lin-ES", "Lin-TS"] and [c.name for c in exp.claims] == ["es-competitive"]


def test_data_md_table_quotes_nlbandit_data_list():
    """The table's middle column is each data set as `nlbandit data list` describes it."""
    docs = {**{name: src.doc for name, src in sources.SOURCES.items()}, "obd": obd.SOURCE.doc}
    rows = dict(re.findall(r"^\| `([a-z0-9-]+)` \| (.*?) \| .* \|$", (DOCS / "data.md").read_text(), re.MULTILINE))
    assert rows == docs


def test_data_md_obd_degeneracy_numbers_are_the_samples():
    """docs/data.md's paragraph on the OBD reduction: the share of zero affinities, of events whose 4 other arms are
    the smallest item ids, and of events where "the largest item id" is the logged item, recomputed from the sample."""
    if not obd.SOURCE.available("obd"):
        pytest.skip("the obp wheel is not in the cache (nlbandit data fetch obd)")
    text = " ".join((DOCS / "data.md").read_text().split())
    m = re.search(r"([\d.]+)% of its user–item affinities are 0, so in ([\d.]+)% of the events the 4 other arms are "
                  r"the 4 smallest item ids other than the logged item's.*?plays the logged item in ([\d.]+)% of the "
                  r"events, where a uniform choice does in 20%", text)
    assert m, "docs/data.md lost its paragraph on the OBD reduction's degeneracy"
    ev = obd.load()
    b = obd.bandit(ev)
    others = np.sort(np.where(b.items == ev.item[:, None], -1, b.items), axis=1)[:, 1:]
    smallest = np.array([[j for j in range(obd.ARMS + 1) if j != i][:obd.ARMS - 1] for i in ev.item])
    shares = (np.mean(ev.affinity == 0), np.mean(np.all(others == smallest, axis=1)),
              np.mean(np.argmax(b.items, axis=1) == b.logged))
    assert [float(g) for g in m.groups()] == [round(100 * v, 1) for v in shares]
