"""Off-policy evaluation from a service's own journal (nlbandit.service.evaluate, ``nlbandit evaluate``): on a
simulated log whose candidate value is known, every estimator recovers it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the service needs the test extra's starlette")
from service_log import D, write_log  # noqa: E402

from nlbandit.cli import main  # noqa: E402
from nlbandit.core.hyper import ConfigError  # noqa: E402
from nlbandit.service.evaluate import agent_folder, evaluate_log, read_log  # noqa: E402
from nlbandit.service.journal import decode_array  # noqa: E402

ROUNDS = 1500


def _logged(folder):
    """A uniform logger's service that played ROUNDS rounds of a linear bandit (tests/service_log.py); returns the
    (ROUNDS, K) mean rewards of the rounds' arms."""
    return write_log(folder, ROUNDS, env_seed=7, logger_seed=1)


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """(folder, means) of one simulated log, shared by the tests."""
    folder = tmp_path_factory.mktemp("log") / "s"
    return folder, _logged(folder)


def test_every_estimator_recovers_a_learning_candidates_known_value(log):
    """Uniform logging (p = 1/4, exact); the candidate lin-ucb learns from the log. Its value, known here from
    the environment's means, (1/n) Σ_t Σ_a π_t(a) μ_t(a), lies within each estimate's 95% bootstrap interval
    widened by half (a stated margin for the interval's own sampling error)."""
    folder, means = log
    result = evaluate_log(folder, "lin-ucb", {"alpha": 0.5}, resamples=2000)
    assert (result.events, result.skipped) == (ROUNDS, 0)
    truth = float(np.mean((result.target * means).sum(axis=1)))
    uniform = float(means.mean())
    assert truth > uniform + 0.1, "the candidate must be distinguishable from the logger"
    assert [(e.name, e.level) for e in result.estimates] == [("ips", 0.95), ("snips", 0.95), ("dr", 0.95)]
    for e in result.estimates:
        half = (e.hi - e.lo) / 2
        assert abs(e.value - truth) <= 1.5 * half, (e, truth)
        assert e.hi - e.lo < truth - uniform, (e, "the interval must resolve the candidate from the logger")


def test_the_candidates_probabilities_are_a_numpy_lin_ucb_learning_from_the_log(log):
    """The replay's target probabilities against a float64 NumPy LinUCB (constant width α = 0.5, λ = 1) refit on
    the logged (arm, reward) pairs that precede each decision in the journal: one-hot on its argmax of
    xᵀθ̂ + α‖x‖_{V⁻¹}, V = I + Σ x xᵀ, uniform on tied arms (a learning order or an event matched to another's
    reward would differ)."""
    folder, _ = log
    result = evaluate_log(folder, "lin-ucb", {"alpha": 0.5}, resamples=10)
    config, records = read_log(agent_folder(folder))
    gram, b, decided, expected = np.eye(D), np.zeros(D), {}, []
    event = config.get("first_event_id", 1)  # (a decision's event id: the next in turn)
    for record in records:
        if record["op"] == "decide":
            x = decode_array(record["x"]).astype(np.float64)
            theta = np.linalg.solve(gram, b)
            scores = x @ theta + 0.5 * np.sqrt(np.einsum("kd,de,ke->k", x, np.linalg.inv(gram), x))
            top = np.isclose(scores, scores.max(), rtol=1e-12, atol=0.0)
            expected.append(top / top.sum())  # a tie: broken at random
            decided[event], event = x[record["arm"]], event + 1
        elif record["op"] == "reward":
            for rewarded, value in zip(record["ids"], record["values"]):
                features = decided.pop(rewarded)
                gram += np.outer(features, features)
                b += value * features
    expected = np.array(expected)
    ties = expected.max(axis=1) < 1
    assert np.flatnonzero(ties).tolist() == [0]  # round 1: θ̂ = 0 and the arms on the unit sphere, equal widths
    np.testing.assert_array_equal(result.target[~ties], expected[~ties])
    np.testing.assert_allclose(result.target[ties], expected[ties], atol=0.06)  # 1,000 redraws: 4 standard errors


def test_the_command_prints_the_estimates_and_refuses_bad_input(log, tmp_path, capsys):
    folder, _ = log
    assert main(["evaluate", str(folder), "--policy", "lin-ucb", "--set", "alpha=0.5"]) == 0
    out = capsys.readouterr().out
    assert "lin-ucb on 1500 logged rewarded decisions" in out and "snips" in out and "bootstrap interval" in out
    assert main(["evaluate", str(tmp_path / "none"), "--policy", "lin-ucb"]) == 2
    assert "holds no agent" in capsys.readouterr().err
    assert main(["evaluate", str(folder.parent), "--agent", "../s", "--policy", "lin-ucb"]) == 2
    assert "is not an agent name" in capsys.readouterr().err
    for given, message in (((), r"must be one or more of ips, snips, dr, got \(\)"),
                           (("bogus",), r"must be one or more of ips, snips, dr, got \('bogus',\)"),
                           (("dr", "dr"), "names 'dr' more than once")):  # the check of --estimators, in Python too
        with pytest.raises(ConfigError, match=rf"^evaluate: estimators {message}$"):
            evaluate_log(folder, "lin-ucb", estimators=given)
    for given in ({"seed": 5}, {"first_event_id": 3}):  # the agent's own arguments (once a TypeError)
        with pytest.raises(ConfigError, match=r"evaluate: the candidate's hyperparameters must"):
            evaluate_log(folder, "lin-ucb", given)


def test_a_log_with_a_missing_segment_is_refused(log, tmp_path):
    import shutil

    folder, _ = log
    copy = tmp_path / "copy"
    shutil.copytree(folder / "agents" / "default", copy)  # an agent's folder: evaluate reads it directly
    (copy / "lock").unlink(missing_ok=True)
    first = sorted((copy / "segments").glob("journal-*.log"))[0]
    first.unlink()
    with pytest.raises(ConfigError, match="whole log from its first record: .* must be complete and start at or "
                                          "before record 1"):
        evaluate_log(copy, "lin-ucb")
    for segment in (copy / "segments").glob("journal-*.log"):
        segment.unlink()
    with pytest.raises(ConfigError, match="a segment is missing"):
        evaluate_log(copy, "lin-ucb")
