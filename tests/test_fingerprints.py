"""Every registered environment computes the numbers it computed before (:mod:`fingerprints`): uniform play
for 200 rounds on seeds 0 and 1, its arms and regret digested and compared with ``tests/fingerprints.json``.
The policies' fingerprints are part of their contract (``tests/test_contract.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import nlbandit as nb
from fingerprints import check, digest
from nlbandit.data import sources
from nlbandit.data.sources import FileSource, Reader
from nlbandit.envs.registry import ENVS, env_entry, make_env, resolve_env
from nlbandit.policies.registry import make_policy

T, SEEDS = 200, [0, 1]
CASES = {
    "linear": dict(d=4, k=6),
    "logistic": dict(d=4, k=6),
    "probit": dict(d=4, k=6),
    "poisson": dict(d=4, k=6),
    "distance": dict(d=4, k=6),
    "quadratic": dict(d=4, k=6),
    "heteroscedastic": dict(d=4, k=6, schedule="burst"),
    "latent": dict(d=4, k=6, pool=50),
    "classification": dict(dataset="fp", pool=30),
    "target-class": dict(dataset="fp", k=4, target=1),
}
"""Small sizes for each registered environment (the generated data set ``fp`` for those that read data)."""


@pytest.fixture
def data(tmp_path, monkeypatch):
    """'fp': 60 rows of 3 features drawn from a fixed generator, 3 classes, in a fresh cache."""
    monkeypatch.setenv("NLBANDIT_DATA", str(tmp_path / "cache"))
    rng = np.random.default_rng(7)
    rows = [",".join(f"{v:.3f}" for v in rng.uniform(-2, 2, 3)) + f",c{rng.integers(3)}" for _ in range(60)]
    src = FileSource(("fp.csv",), "nowhere", Reader(), "fp")
    monkeypatch.setitem(sources.SOURCES, "fp", src)
    src.folder("fp").mkdir(parents=True)
    (src.folder("fp") / "fp.csv").write_text("\n".join(rows))


def test_every_environment_has_a_case():
    assert set(CASES) == set(ENVS), "add the new environment to CASES"


@pytest.mark.parametrize("name", sorted(CASES))
def test_numbers_match_the_golden_fingerprint(name, data):
    config = resolve_env({"name": name, **CASES[name]})
    env = make_env(**config)
    policy, params = make_policy("uniform", nb.ProblemSpec(env.spec.d, env.spec.k, T))
    res = nb.simulate(env, policy, params, T, SEEDS)
    check("envs", name, digest(res.arms, res.cum_regret), (env_entry(name).make.__module__, "nlbandit.core.simulate"))
