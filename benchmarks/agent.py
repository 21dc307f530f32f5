"""The online agent's latency, one decision at a time, against Vowpal Wabbit driven the same way.

Run: ``python benchmarks/agent.py [--rounds 2000] [--policies lin-ucb lin-es lin-ts glm-ucb glm-es]``
(Vowpal Wabbit from the ``peers`` extra: ``pip install -e '.[peers]'``; without it only nlbandit runs).

Problem: a linear bandit with K = 50 arms in d = 20 (``nb.make_env("linear", d=20, k=50)``, seed 0): the
round's contexts and the reward every arm would pay are drawn once, up front, from the environment's own
keys (``nlbandit.instances.export_instance``), so every learner sees the same contexts and is paid the same
rewards (common random numbers).

Each learner is driven as a service would drive it: per round, hand over the (K, d) contexts, get an arm,
hand back its reward.

* nlbandit: ``Agent.decide`` then ``Agent.reward`` (decision, probability and learning: the whole round).
  Compilation is paid by a first agent of the same shapes, before the timed one (it is cached across
  agents). GLM policies use the identity link (the rewards are Gaussian) and the history backend (contexts
  change every round), so their per-round cost grows
  with t; policies without an exact probability (Lin-TS) also pay its estimate by redraws (``estimate_draws``).
* Vowpal Wabbit: ``--cb_explore_adf`` (ε-greedy, ε = 0.05, its default exploration), one multi-line
  example per round in VW's text format (an action line ``|a f0:v0 … f19:v19`` per arm), ``predict`` for the
  PMF, an arm drawn from it with NumPy, and ``learn`` on the same example labelled with the chosen arm's
  cost (−reward) and probability. The text of every round is formatted before the clock starts, which
  favours VW: a service would format it per round.

Printed: µs per round (decide + reward, the mean over ``--rounds`` rounds) and the cumulative pseudo-regret
against the best mean of each round, and the ratio VW / nlbandit (issue 16's target: ≥ 10 for the linear
and GLM policies).
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
from nlbandit.agent import Agent  # noqa: E402
from nlbandit.instances import export_instance  # noqa: E402

D, K = 20, 50
EXTRA = {"glm-ucb": {"backend": "history", "warmup": "round-robin", "warmup_rounds": 20, "link": "identity"},
         "glm-es": {"backend": "history", "warmup": "round-robin", "warmup_rounds": 20, "link": "identity"},
         "glm-tsl": {"backend": "history", "warmup": "round-robin", "warmup_rounds": 20, "link": "identity"}}


def problem(rounds: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Contexts (T, K, d), the reward each arm would pay (T, K) and the means (T, K) of the linear bandit."""
    instance = export_instance(nb.make_env("linear", d=D, k=K), seed, rounds)
    return instance.contexts, instance.rewards, instance.means


def run_agent(name: str, contexts, pay, means) -> tuple[float, float]:
    """µs per round and pseudo-regret of an nlbandit agent."""
    rounds = len(contexts)
    warm = Agent(name, d=D, k=K, horizon=rounds, seed=1, **EXTRA.get(name, {}))
    for t in range(3):  # compiles decide, reward and the redraws
        warm.reward(warm.decide(contexts[t]).event_id, float(pay[t, 0]))
    agent = Agent(name, d=D, k=K, horizon=rounds, seed=0, **EXTRA.get(name, {}))
    regret = 0.0
    start = time.perf_counter()
    for t in range(rounds):
        decision = agent.decide(contexts[t])
        agent.reward(decision.event_id, float(pay[t, decision.arm]))
        regret += means[t].max() - means[t, decision.arm]
    jax.block_until_ready(agent._state)
    return 1e6 * (time.perf_counter() - start) / rounds, regret


def run_vw(contexts, pay, means) -> tuple[float, float]:
    """µs per round and pseudo-regret of Vowpal Wabbit's ``--cb_explore_adf``."""
    import vowpalwabbit

    vw = vowpalwabbit.Workspace("--cb_explore_adf --epsilon 0.05 --quiet")
    rng = np.random.default_rng(0)
    names = [f"f{j}" for j in range(D)]
    rounds, regret = len(contexts), 0.0
    text = [["|a " + " ".join(f"{n}:{v:.6g}" for n, v in zip(names, row)) for row in c] for c in contexts]
    start = time.perf_counter()
    for t in range(rounds):
        lines = text[t]
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
    parser.add_argument("--policies", nargs="+", default=["lin-ucb", "lin-es", "lin-ts", "glm-ucb", "glm-es"])
    args = parser.parse_args()
    contexts, pay, means = problem(args.rounds)
    print(f"linear bandit, d = {D}, K = {K}, {args.rounds} rounds, one decision at a time; jax {jax.__version__}")
    try:
        vw_us, vw_regret = run_vw(contexts, pay, means)
        print(f"{'vowpalwabbit --cb_explore_adf':34s} {vw_us:10.1f} µs/round   regret {vw_regret:8.1f}")
    except ImportError:
        vw_us = None
        print("vowpalwabbit not installed (pip install -e '.[peers]'): nlbandit only")
    for name in args.policies:
        us, regret = run_agent(name, contexts, pay, means)
        ratio = f"   VW / agent = {vw_us / us:5.1f}x" if vw_us else ""
        print(f"{'nlbandit Agent ' + name:34s} {us:10.1f} µs/round   regret {regret:8.1f}{ratio}")


if __name__ == "__main__":
    main()
