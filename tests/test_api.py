"""The Python API checks what the command line checks and derives what it can (issue 16 §6): a policy built
for an environment takes its sizes and is checked against it; ``simulate`` takes the policy's horizon."""

from __future__ import annotations

import pytest

import nlbandit as nb
from nlbandit.core.hyper import ConfigError


def test_a_policy_built_for_an_environment_takes_its_sizes():
    env = nb.make_env("linear", d=4, k=6)
    policy, params = nb.make_policy("lin-ucb", env, horizon=50)
    assert policy is nb.make_policy("lin-ucb", nb.ProblemSpec(4, 6, 50))[0]  # the same object: shared programs
    result = nb.simulate(env, policy, params, seeds=[0, 1])
    assert result.horizon == 50
    with pytest.raises(ConfigError, match="needs horizon=T"):
        nb.make_policy("lin-ucb", env)
    with pytest.raises(ConfigError, match="differs from the ProblemSpec's 50"):
        nb.make_policy("lin-ucb", nb.ProblemSpec(4, 6, 50), horizon=60)
    with pytest.raises(ValueError, match="seeds must be given"):
        nb.simulate(env, policy, params)


def test_link_env_takes_the_environments_link():
    env = nb.make_env("logistic", d=3, k=5)
    policy, _ = nb.make_policy("glm-ucb", env, horizon=40, link="env")
    assert policy is nb.make_policy("glm-ucb", nb.ProblemSpec(3, 5, 40), link="logistic")[0]


def test_what_an_experiment_file_refuses_is_refused_when_the_policy_is_built():
    linear = nb.make_env("linear", d=3, k=5)
    with pytest.raises(ConfigError, match=r"policy 'glm-ucb'.*rewards in \[0, 1\]"):
        nb.make_policy("glm-ucb", linear, horizon=40, link="logistic")
    # a family's own check (here: the disjoint encoding needs disjoint-encoded arms), which ProblemSpec cannot see
    nb.make_policy("neurallog-ucb-1", nb.ProblemSpec(6, 2, 40), features="disjoint")
    with pytest.raises(ConfigError, match="disjoint"):
        nb.make_policy("neurallog-ucb-1", nb.make_env("logistic", d=6, k=2), horizon=40, features="disjoint")
