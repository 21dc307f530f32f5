"""Report plug-ins (:mod:`nlbandit.plugins`): declared beside what they compute, collected by discovery,
validated at load, and outside every run's code hash."""

from __future__ import annotations

import pytest

from nlbandit.core.hyper import ConfigError
from nlbandit.experiments.plan import load_experiment
from nlbandit.loops import LOOPS
from nlbandit.policies.registry import POLICIES
from nlbandit.provenance import module_closure
from nlbandit.plugins import Diagnostic, Panel, of_kind, plugins


def test_plugins_are_collected_from_their_owners():
    assert set(of_kind(Panel)) == {"anytime-constant", "regret-vs-d"}
    assert set(of_kind(Diagnostic)) == {"effective-dimension"}
    assert plugins()["effective-dimension"].lines.__module__ == "nlbandit.policies.neurallog_report"
    assert plugins()["anytime-constant"].draw.__module__ == "nlbandit.policies.anytime_report"
    assert plugins()["regret-vs-d"].draw.__module__ == "nlbandit.loops.regression_report"


def test_report_modules_are_in_no_run_hash():
    closures = set(module_closure(LOOPS["regression"].code_modules("ftrl", "stochastic")))
    for name in POLICIES:
        closures |= set(module_closure(LOOPS["bandit"].code_modules(name, "linear")))
    assert not {m for m in closures if m.endswith("_report") or m.startswith(("nlbandit.report", "nlbandit.plugins"))}


@pytest.mark.parametrize("field, value, message", [
    ("plots", '["no-such"]', "field 'plots' must be a list of distinct names from 'anytime-constant', 'regret-vs-d'"),
    ("plots", '["regret-vs-d"]', "plot 'regret-vs-d' needs a grid over env field 'd'"),
    ("diagnostics", '["anytime-constant"]', "field 'diagnostics' must be a list of distinct names from "
     "'effective-dimension'"),
    ("diagnostics", '["effective-dimension"]', "diagnostic 'effective-dimension' needs an even d in every case"),
])
def test_plugin_names_and_checks_are_validated_at_load(experiment_file, field, value, message):
    text = f'horizon = 10\nseeds = 1\n{field} = {value}\n[env]\nname = "linear"\nd = 3\nk = 2\n' \
           '[[policies]]\nlabel = "U"\nname = "uniform"\n'
    with pytest.raises(ConfigError, match=message):
        load_experiment(experiment_file(text))
