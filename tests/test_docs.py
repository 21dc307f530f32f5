"""The documentation's examples that can rot: the full experiment file of docs/experiments.md loads as written."""

from __future__ import annotations

from pathlib import Path

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
