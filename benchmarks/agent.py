"""The online agent's latency, one decision at a time, against Vowpal Wabbit driven the same way.

Run: ``python benchmarks/agent.py [--rounds 2000] [--policies lin-ucb lin-es ... neural-es]``
(Vowpal Wabbit from the ``peers`` extra: ``pip install -e '.[peers]'``; without it only nlbandit runs).

Problem: a linear bandit with K = 50 arms in d = 20 (``nb.make_env("linear", d=20, k=50)``, seed 0): the
round's contexts and the reward every arm would pay are drawn once, up front, from the environment's own
keys (``nlbandit.instances.export_instance``), so every learner sees the same contexts and is paid the same
rewards (common random numbers).

Each learner is driven as a service would drive it: per round, hand over the (K, d) contexts, get an arm,
hand back its reward.

* nlbandit: ``Agent.decide`` then ``Agent.reward`` (decision, probability and learning: the whole round),
  with the agent's host round (NumPy arrays, numba-compiled steps) where the policy has one (here
  ``lin-ucb``, ``lin-es``, ``lin-ts``, ``glm-ucb``, ``glm-tsl``, ``glm-fpl``, ``glm-es`` with its default
  gradient descent, whose steps have a closed form with the identity link, and with the ensemble Newton solver;
  :func:`nlbandit.host.host_rounds`)
  and again with its jitted round (``numpy_round=False``) for comparison.
  Compilation is paid by a first agent of the same shapes, before the timed one (it is cached across
  agents). GLM policies use the identity link (the rewards are Gaussian) and otherwise their defaults (the
  arm set is fixed, so their per-arm statistics), or the hyperparameters a ``--policies`` entry gives
  (``NAME:KEY=VALUE,...``; by default GLM-ES runs also with ``solver=ensemble-newton``); policies without an
  exact probability also pay its estimate at the agent's default (Lin-TS, GLM-TSL, GLM-FPL on a host round: 64
  conditional draws of their Gaussian score law, :mod:`nlbandit.host.propensity`;
  the jitted rounds: 1,000 redraws), and run once more without it (``estimate_draws=0``: decision and learning
  only).
  Neural policies run with their defaults (their training cadence is part of their round; the issue asks
  for their latency to be stated, with no target).
* Vowpal Wabbit: ``--cb_explore_adf`` (ε-greedy, ε = 0.05, its default exploration), one multi-line
  example per round in VW's text format (an action line ``|a f0:v0 … f19:v19`` per arm), ``predict`` for the
  PMF, an arm drawn from it with NumPy, and ``learn`` on the same example labelled with the chosen arm's
  cost (−reward) and probability. Timed twice: with the text formatted in every round, as a service
  holding the round's features as numbers drives it (the Agent takes the numbers), and with every round's
  text formatted before the clock starts (VW's own work only; formatting the 50 × 20 numbers costs ~160 µs
  of a round even with one ``%`` format per arm, the fastest way we found).

Printed: µs per round (decide + reward, the mean over ``--rounds`` rounds) and the cumulative pseudo-regret
against the best mean of each round, and the ratios VW / nlbandit for both VW timings (issue 16's target:
≥ 10 for the linear and GLM policies); then, per policy, the latency of ``decide`` alone when the rewards
were learnt before it (``Agent.learn`` after each reward, as a service does when idle; the mean over
``--decide-rounds`` rounds): for the neural policies, the decision without their training.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import nlbandit as nb  # noqa: E402
from nlbandit import machine  # noqa: E402
from nlbandit.agent import Agent  # noqa: E402
from nlbandit.instances import export_instance  # noqa: E402

D, K = 20, 50
EXTRA = {name: {"link": "identity"} for name in ("glm-ucb", "ucb-glm", "glm-es", "glm-tsl", "glm-fpl",
                                                "glm-phe")}


def problem(rounds: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contexts (T, K, d), the reward each arm would pay (T, K) and the means (T, K) of the linear bandit."""
    instance = export_instance(nb.make_env("linear", d=D, k=K), seed, rounds)
    return instance.contexts, instance.rewards, instance.means


def compiled_agent(name: str, contexts, pay, learn: bool = False, **options) -> Agent:
    """A fresh agent (seed 0) of ``name`` whose programs a first agent of the same shapes compiled, over d + 3
    rounds (decide, reward and the redraws, past the GLM policies' d-round warm-up, whose planned pulls need
    no redraw; with ``learn``, also ``Agent.learn``)."""
    options = dict(EXTRA.get(name, {}), **options)
    warm = Agent(name, d=D, k=K, horizon=len(contexts), seed=1, **options)
    for t in range(D + 3):
        warm.reward(warm.decide(contexts[t]).event_id, float(pay[t, 0]))
        if learn:
            warm.learn()
    return Agent(name, d=D, k=K, horizon=len(contexts), seed=0, **options)


def run_agent(name: str, contexts, pay, means, **options) -> tuple[float, float, bool, bool]:
    """µs per round and pseudo-regret of an nlbandit agent (``options``: ``numpy_round``, ``estimate_draws``),
    whether it ran a host round, and whether it estimated probabilities by redraws."""
    rounds = len(contexts)
    agent = compiled_agent(name, contexts, pay, **options)
    regret, estimated = 0.0, False
    start = time.perf_counter()
    for t in range(rounds):
        decision = agent.decide(contexts[t])
        agent.reward(decision.event_id, float(pay[t, decision.arm]))
        regret += means[t].max() - means[t, decision.arm]
        estimated |= decision.method.startswith("estimate")
    jax.block_until_ready(agent._state)
    return 1e6 * (time.perf_counter() - start) / rounds, regret, agent.numpy_round, estimated


def decide_latency(name: str, contexts, pay, rounds: int, **options) -> float:
    """µs per ``decide`` of an nlbandit agent whose rewards were learnt before it (``Agent.learn``, as a service
    does when idle), over ``rounds`` rounds: the decision alone, without the update or training."""
    agent = compiled_agent(name, contexts, pay, learn=True, **options)
    seconds = 0.0
    for t in range(rounds):
        start = time.perf_counter()
        decision = agent.decide(contexts[t])
        seconds += time.perf_counter() - start
        agent.reward(decision.event_id, float(pay[t, decision.arm]))
        agent.learn()
    return 1e6 * seconds / rounds


def policy_option(text: str) -> tuple[str, dict]:
    """``--policies`` entry ``NAME`` or ``NAME:KEY=VALUE,...`` → (name, hyperparameters; numbers parsed)."""
    name, _, rest = text.partition(":")
    options = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            options[key] = int(value)
        except ValueError:
            try:
                options[key] = float(value)
            except ValueError:
                options[key] = value
    return name, options


VW_LINE = "|a " + " ".join(f"f{j}:%.6g" for j in range(D))


def vw_text(contexts: np.ndarray) -> list[str]:
    """One round's arms as VW action lines ``|a f0:v0 … f19:v19`` (one ``%`` format per arm: the fastest way
    we measured to write them from Python, 3–4× faster than formatting number by number)."""
    return [VW_LINE % row for row in map(tuple, contexts.tolist())]


def run_vw(contexts, pay, means, preformatted: bool) -> tuple[float, float]:
    """µs per round and pseudo-regret of Vowpal Wabbit's ``--cb_explore_adf``, its text formatted before
    the clock starts (``preformatted``) or in every round."""
    import vowpalwabbit

    vw = vowpalwabbit.Workspace("--cb_explore_adf --epsilon 0.05 --quiet")
    rng = np.random.default_rng(0)
    rounds, regret = len(contexts), 0.0
    text = [vw_text(c) for c in contexts] if preformatted else None
    start = time.perf_counter()
    for t in range(rounds):
        lines = text[t] if preformatted else vw_text(contexts[t])
        pmf = np.asarray(vw.predict(lines))
        arm = int(rng.choice(K, p=pmf / pmf.sum()))
        labelled = list(lines)
        labelled[arm] = f"0:{-float(pay[t, arm]):.6g}:{pmf[arm]:.6g} " + lines[arm]
        vw.learn(labelled)
        regret += means[t].max() - means[t, arm]
    seconds = time.perf_counter() - start
    vw.finish()
    return 1e6 * seconds / rounds, regret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--policies", nargs="+", default=["lin-ucb", "lin-es", "lin-ts", "glm-ucb", "glm-tsl",
                                                          "glm-fpl", "glm-es", "glm-es:solver=ensemble-newton",
                                                          "neural-ucb", "neural-es"],
                        help="policy names, each optionally with hyperparameters: NAME:KEY=VALUE,...")
    parser.add_argument("--decide-rounds", type=int, default=200, help="rounds of the decide-only timing")
    args = parser.parse_args()
    contexts, pay, means = problem(args.rounds)
    print(f"linear bandit, d = {D}, K = {K}, {args.rounds} rounds, one decision at a time; jax {jax.__version__}; "
          f"{machine.describe()}")
    vw_us = {}
    try:
        for how, pre in (("text per round", False), ("text pre-formatted", True)):
            vw_us[how], vw_regret = run_vw(contexts, pay, means, pre)
            print(f"{'VW --cb_explore_adf, ' + how:60s} {vw_us[how]:10.1f} µs/round   regret {vw_regret:8.1f}")
    except ImportError:
        print("vowpalwabbit not installed (pip install -e '.[peers]'): nlbandit only")
    for entry in args.policies:
        name, hyper = policy_option(entry)
        runs = [{}, {"numpy_round": False}, {"estimate_draws": 0}]
        while runs:
            options = runs.pop(0)
            us, regret, on_host, estimated = run_agent(name, contexts, pay, means, **hyper, **options)
            ratio = "   VW / agent = " + " / ".join(f"{v / us:5.1f}x" for v in vw_us.values()) if vw_us else ""
            label = f"nlbandit Agent {entry}" + (", host round" if on_host else ", jitted round") + (
                ", no estimate" if "estimate_draws" in options else "")
            print(f"{label:60s} {us:10.1f} µs/round   regret {regret:8.1f}{ratio}")
            if not options:  # keep the jitted round where a host round ran, no-estimate where redraws ran
                runs = [r for r in runs if (on_host if "numpy_round" in r else estimated)]
        print(f"{'  decide alone (rewards learnt before)':60s} "
              f"{decide_latency(name, contexts, pay, min(args.decide_rounds, args.rounds), **hyper):10.1f} µs/decide")


if __name__ == "__main__":
    main()
