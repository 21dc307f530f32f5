"""The contract every registered policy keeps (:mod:`nlbandit.testing`, in the spirit of scikit-learn's
``check_estimator``), run check by check over :data:`nlbandit.policies.registry.POLICIES` (plus one
``@anytime`` wrapper of each ensemble), so a policy added to a family's ``ENTRIES`` is checked without touching
this file; and each policy's golden fingerprint (:mod:`fingerprints`): a digest of the contract's masked run
(arms, regret and final state) against the checked-in table, unless its family's ``NUMERICS`` was bumped and
the table re-recorded. :func:`nlbandit.testing.check_policy` itself must catch a broken policy."""

from __future__ import annotations

import functools

import jax.numpy as jnp
import pytest

from fingerprints import check, digest
from nlbandit.core.types import Policy, PolicyMeta
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.exploration import act_info, uniform_arm
from nlbandit.policies.registry import POLICIES, policy_entry
from nlbandit.testing import CHECKS, PolicyContract, check_policy

NAMES = sorted(POLICIES) + ["glm-es@anytime", "neural-es@anytime"]
GRID_DEFAULT = {"lin-ucb", "lin-phe", "glm-ucb", "glm-es@anytime", "ada-ofu-ecolog", "neural-ucb", "neurallog-ts-1",
                "deep-fpl"}
"""One policy per estimator for the grid check of the default suite (each of its runs is two compilations): the
ridge estimators (LinUCB; ε-greedy's too), the perturbed history, the GLM MLE, the ensemble under the doubling
trick (also Neural-ES's wrapper), ECOLog, the MLP, NeuralLog's and DeepFPL's networks (MOR-UCB's FTRL estimator:
its λ grid in the regression loop, tests/test_ftrl.py). The other policies' grid checks run under ``-m slow``."""


@functools.cache
def contract(name: str) -> PolicyContract:
    """One contract per policy, so its checks share the masked run."""
    return PolicyContract(policy_entry(name))


def _cases():
    for name in NAMES:
        for name_check in CHECKS:
            slow = name_check == "grid_equals_plain_runs" and name not in GRID_DEFAULT
            yield pytest.param(name, name_check, id=f"{name}-{name_check}", marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize("name, name_check", list(_cases()))
def test_contract(name, name_check):
    getattr(contract(name), name_check)()


@pytest.mark.parametrize("name", NAMES)
def test_numbers_match_the_golden_fingerprint(name):
    res, _, final = contract(name).masked_run
    check("policies", name, digest(res.arms, res.cum_regret, *final.policy_state),
          policy_entry(name).modules() + ("nlbandit.core.simulate",))


def _toy(name: str, offer_masked: bool) -> PolicyEntry:
    """A policy built outside the registry: a uniformly random arm among those offered (or, broken, among all)
    with its exact probability."""

    def make(spec):
        def act(params, state, key, contexts, mask, t):
            offered = mask if not offer_masked else jnp.ones_like(mask)
            arm = uniform_arm(key, offered)
            return arm, act_info(jnp.zeros(()), jnp.nan, 1.0 / jnp.sum(offered))

        return Policy(lambda params, key: jnp.zeros(()), act, lambda params, state, *args: state, PolicyMeta(name))

    return PolicyEntry(name, make, (), "a toy")


def test_check_policy_passes_a_sound_policy_and_names_what_a_broken_one_breaks():
    check_policy(_toy("toy-uniform", offer_masked=False))
    with pytest.raises(AssertionError, match="toy-broken chose an unavailable arm"):
        check_policy(_toy("toy-broken", offer_masked=True))
