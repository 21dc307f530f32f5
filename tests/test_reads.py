"""Which hyperparameters a configuration reads (nlbandit.policies.reads), checked against the programs: JAX's
dead-code elimination of the traced init, act and update says which params the outputs depend on."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import pytest
from jax._src.interpreters import partial_eval as pe

import nlbandit as nb
from nlbandit.core.hyper import ConfigError
from nlbandit.core.types import Feedback, ProblemSpec, to_dtype
from nlbandit.policies.reads import READ_WHEN, unread
from nlbandit.policies.registry import POLICIES, make_policy, resolve_policy

SPEC = ProblemSpec(4, 5, 60)
SWITCHES = ("mode", "width", "scale", "schedule", "solver")


def _unread_by_the_program(name: str, hyper: dict) -> set[str]:
    """The traced hyperparameters that no output of init, prepare, two acts and two updates depends on."""
    policy, params = make_policy(name, SPEC, **hyper)
    params, dtype = to_dtype(params, policy.meta.dtype), policy.meta.dtype
    key, x, mask = jax.random.key(0), jnp.full((SPEC.k, SPEC.d), 0.1, dtype), jnp.ones(SPEC.k, bool)
    feedback = Feedback(jnp.asarray(0.5, dtype), jnp.asarray(0.1, dtype) if policy.meta.requires.noise_level else None)

    def rounds(params):
        state = policy.init(params, key)
        if policy.prepare is not None:
            state = policy.prepare(params, state, key, x, mask)
        out = []
        for t in (1, 2):
            arm, info = policy.act(params, state, key, x, mask, jnp.asarray(t))
            state = policy.update(params, state, key, x, arm, feedback, jnp.asarray(t))
            out.append((arm, info))
        return out, state

    jaxpr = jax.make_jaxpr(rounds)(params).jaxpr
    _, used = pe.dce_jaxpr(jaxpr, [True] * len(jaxpr.outvars))
    return {field for field, read in zip(params._fields, used) if not read}


def _configurations(name: str):
    """Every combination of the policy's switches that its family accepts, on its small test configuration
    (without it where the family refuses it in that mode)."""
    entry = POLICIES[name]
    base = entry.test_hypers(SPEC) if entry.test_hypers else {}
    switches = [h for h in entry.hypers if h.name in SWITCHES and h.choices]
    for values in itertools.product(*(h.choices for h in switches)):
        chosen = dict(zip((h.name for h in switches), values))
        for hyper in ({**base, **chosen}, chosen):
            try:
                resolve_policy({"name": name, **hyper}, reads=True)
                make_policy(name, SPEC, **hyper)
            except ConfigError:
                continue
            yield hyper
            break


@pytest.mark.parametrize("name", sorted(READ_WHEN))
def test_the_table_says_what_the_programs_read(name):
    """For every switch combination: the hyperparameters READ_WHEN calls unread are exactly those the traced
    programs do not depend on (a rule missing, or one too many, fails here)."""
    checked = 0
    for hyper in _configurations(name):
        values = resolve_policy({"name": name, **hyper})
        assert set(unread(values)) == _unread_by_the_program(name, hyper), (name, hyper)
        checked += 1
    assert checked >= 2, f"{name}: fewer than two configurations traced"


@pytest.mark.parametrize("name", sorted(set(POLICIES) - set(READ_WHEN)))
def test_every_other_policy_reads_all_its_hyperparameters(name):
    """The policies READ_WHEN does not list read every traced hyperparameter, whatever their switches."""
    checked = 0
    for hyper in _configurations(name):
        assert _unread_by_the_program(name, hyper) == set(), (name, hyper)
        checked += 1
    assert checked >= 1, f"{name}: no configuration accepted, none traced"


def test_a_hyperparameter_set_to_no_effect_is_refused_where_a_user_writes_it(tmp_path):
    """lin-ucb's default OFUL width never reads alpha: a sweep over it gave identical series under different
    labels. make_policy, the agent and an experiment file refuse it, naming the switch; the default value,
    the switch set, and an experiment's `unread` list (a paper's table row) pass; a saved configuration loads."""
    with pytest.raises(ConfigError, match=r"field 'alpha' = 5.0 has no effect: lin-ucb with width = 'oful' does not "
                                          r"read it \(it reads it with width = 'constant'\)"):
        make_policy("lin-ucb", SPEC, alpha=5.0)
    make_policy("lin-ucb", SPEC, alpha=1.0)  # its default
    make_policy("lin-ucb", SPEC, width="constant", alpha=5.0)
    with pytest.raises(ConfigError, match="glm-ucb never reads it"):
        make_policy("glm-ucb", SPEC, sigma=0.3)
    with pytest.raises(ConfigError, match="field 'alpha' = 0.3 has no effect"):
        nb.Agent("lin-ucb", d=4, k=5, width="oful", alpha=0.3)
    nb.Agent("glm-tsl", d=4, k=5, scale="theory")  # the agent's own default a = 0.5 is not the caller's
    assert resolve_policy({"name": "lin-ucb", "alpha": 5.0})["alpha"] == 5.0  # stored configurations resolve
    experiment = tmp_path / "sweep.toml"
    body = ('name = "sweep"\ntitle = "t"\nhorizon = 50\nseeds = 2\n[env]\nname = "linear"\nd = 3\nk = 4\n'
            '[[policies]]\nlabel = "U"\nname = "lin-ucb"\nalpha = [0.1, 5.0]\n')
    experiment.write_text(body)
    from nlbandit.experiments.plan import load_experiment

    with pytest.raises(ConfigError, match=r"policies\[0\] \(U \[alpha=0.1\]\): field 'alpha' = 0.1 has no effect"):
        load_experiment(experiment)
    experiment.write_text(body + 'unread = ["alpha"]\n')
    assert len(load_experiment(experiment).runs) == 2
