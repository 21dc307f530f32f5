"""nlbandit beside Vowpal Wabbit, coba and MABWiser on identical problems: regret and µs per round.

Run: ``python benchmarks/peers.py [--rounds 2000] [--instances 5]`` (the peers come with the ``peers`` extra:
``pip install -e '.[peers]'``; a library that is not installed is reported as such and skipped).

Problems (issue 16): a linear bandit, K = 50 arms in d = 20 (``make_env("linear", d=20, k=50)``, Gaussian
rewards), and a logistic one, K = 100 in d = 10 (``make_env("logistic", d=10, k=100)``, Bernoulli rewards);
both have a fixed arm set per instance. Each instance (seeds 0..S−1) is exported once
(:func:`nlbandit.instances.export_instance`): the arms' features, and the reward every arm would pay in
every round. Every learner plays every instance and is paid from that table (common random numbers);
its pseudo-regret is scored by :func:`~nlbandit.instances.replay_arms`.

Each library is driven its own natural way:

* Vowpal Wabbit (``--cb_explore_adf``, one multi-line text example per round, an action line per arm;
  ε-greedy with its default ε = 0.05, and SquareCB): ``predict`` → PMF → an arm drawn with NumPy →
  ``learn`` with the chosen arm's cost (−reward) and probability. The text of every round is formatted
  before the clock starts, which favours VW: formatting 50 × 20 numbers per round costs another ~160 µs
  even written the fastest way we found (``benchmarks/agent.py``), and a service would pay it.
* coba (``coba.Experiment`` over an environment built with ``Environments.from_lambda`` from the exported
  table; the arms are actions given by their features, no context): its ``LinUCBLearner`` (α = 1) and
  ``LinTSLearner`` on the action features (``features=['a']``). Time: the whole ``Experiment.run``.
  nlbandit's ``lin-ucb`` runs twice: with its default OFUL width (the theory's confidence radius, wide),
  and with the constant α = 1 that coba's LinUCB uses.
* MABWiser (context-free: it has no per-arm-feature model, and the arm set is fixed): ``UCB1`` (α = 1) on
  both problems, ``ThompsonSampling`` (Beta–Bernoulli) on the logistic one. After one round-robin pass,
  ``predict`` then ``partial_fit`` every round.
* nlbandit, three ways: *batched* — ``simulate`` over all S instances at once (µs per instance-round);
  *single* — ``simulate`` of one instance at a time (µs per round, compilation excluded and paid once:
  later calls of the same shapes reuse it); *online* — an ``Agent``, ``decide`` then ``reward`` every round,
  with the decision's probability (exact, or estimated by redraws for Thompson sampling); all but ``glm-es``
  run the agent's host round (:mod:`nlbandit.host`), ``glm-es`` the jitted one.
  The three play the same policy with the same seeds; whether they chose the same arms is printed. Single
  and online compute the same one-instance round (the host round with the same formulas and draws, to
  rounding); the batched program is compiled for S instances at once, and where
  XLA sums in another order, a policy that iterates to a solution (the GLM's Newton steps) can end a
  round a rounding error apart and, rarely, choose another arm from then on.

Printed per problem: learner, regret after T rounds (mean ± 95% t-interval over the S instances), µs per
round (mean over everything), and how it was driven.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import time  # noqa: E402
from typing import Callable  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402

import nlbandit as nb  # noqa: E402
from nlbandit.agent import Agent  # noqa: E402
from nlbandit.experiments.claims import t_quantile_975  # noqa: E402
from nlbandit.instances import Instance, export_instance, replay_arms  # noqa: E402

PROBLEMS = {  # nlbandit's series: (label, policy, hyperparameters); defaults unless named
    "linear": {"env": {"name": "linear", "d": 20, "k": 50},
               "nlbandit": [("lin-ucb (OFUL width)", "lin-ucb", {}),
                            ("lin-ucb (α = 1, as coba's)", "lin-ucb", {"width": "constant", "alpha": 1.0}),
                            ("lin-ts", "lin-ts", {}), ("lin-es", "lin-es", {})]},
    "logistic": {"env": {"name": "logistic", "d": 10, "k": 100},
                 "nlbandit": [("glm-ucb", "glm-ucb", {"link": "logistic"}),
                              ("glm-tsl", "glm-tsl", {"link": "logistic"}),
                              ("glm-es", "glm-es", {"link": "logistic"})]},
}


# ---- peers: each returns (arms (T,), seconds) for one instance -------------------------------------------

def vw(flags: str) -> Callable[[Instance], tuple[np.ndarray, float]]:
    """Vowpal Wabbit ``--cb_explore_adf`` with ``flags``."""
    def play(inst: Instance) -> tuple[np.ndarray, float]:
        import vowpalwabbit

        ws = vowpalwabbit.Workspace(f"--cb_explore_adf {flags} --quiet --random_seed {inst.seed}")
        rng = np.random.default_rng(inst.seed)
        t_max, k, d = inst.contexts.shape
        names = [f"f{j}" for j in range(d)]
        text = [["|a " + " ".join(f"{n}:{v:.6g}" for n, v in zip(names, row)) for row in c] for c in inst.contexts]
        arms = np.empty(t_max, np.int64)
        start = time.perf_counter()
        for t in range(t_max):
            lines = list(text[t])
            pmf = np.asarray(ws.predict(lines))
            arm = int(rng.choice(k, p=pmf / pmf.sum()))
            lines[arm] = f"0:{-float(inst.rewards[t, arm]):.6g}:{pmf[arm]:.6g} " + lines[arm]
            ws.learn(lines)
            arms[t] = arm
        seconds = time.perf_counter() - start
        ws.finish()
        return arms, seconds
    return play


def coba_learner(make: Callable[[], object]) -> Callable[[Instance], tuple[np.ndarray, float]]:
    """A coba learner run by ``coba.Experiment`` on the instance (arms as feature tuples, no context)."""
    def play(inst: Instance) -> tuple[np.ndarray, float]:
        import coba
        from coba.evaluators import SequentialCB
        from coba.primitives import Learner

        actions = [[tuple(float(v) for v in row) for row in c] for c in inst.contexts]
        index = [{a: i for i, a in enumerate(round_actions)} for round_actions in actions]
        chosen: list[tuple] = []

        class Recorded(Learner):  # the learner itself, noting the action of each learn (one per round, in order)
            def __init__(self, inner):
                self.inner = inner

            @property
            def params(self):
                return self.inner.params

            def predict(self, context, actions):
                return self.inner.predict(context, actions)

            def learn(self, context, action, reward, probability, **kwargs):
                chosen.append(action)
                self.inner.learn(context, action, reward, probability, **kwargs)

        env = coba.Environments.from_lambda(inst.horizon, lambda i: None, lambda i, c: actions[i],
                                            lambda i, c, a: float(inst.rewards[i, index[i][a]]))
        start = time.perf_counter()
        coba.Experiment(env, [Recorded(make())], SequentialCB(record=["reward"])).run(processes=1, quiet=True)
        seconds = time.perf_counter() - start
        return np.array([index[i][tuple(a)] for i, a in enumerate(chosen)], np.int64), seconds
    return play


def mabwiser(policy: Callable[[], object]) -> Callable[[Instance], tuple[np.ndarray, float]]:
    """A context-free MABWiser policy: a round-robin pass, then predict and partial_fit every round."""
    def play(inst: Instance) -> tuple[np.ndarray, float]:
        from mabwiser.mab import MAB

        t_max, k, _ = inst.contexts.shape
        arms = np.empty(t_max, np.int64)
        start = time.perf_counter()
        mab = MAB(arms=list(range(k)), learning_policy=policy(), seed=inst.seed)
        first = np.arange(min(k, t_max))
        mab.fit(decisions=first.tolist(), rewards=inst.rewards[first, first].tolist())
        arms[: len(first)] = first
        for t in range(len(first), t_max):
            arm = int(mab.predict())
            mab.partial_fit(decisions=[arm], rewards=[float(inst.rewards[t, arm])])
            arms[t] = arm
        return arms, time.perf_counter() - start
    return play


def peers(problem: str) -> list[tuple[str, str, str, Callable]]:
    """(library module, label, how driven, player) of the peers run on ``problem``."""
    out = [("vowpalwabbit", "VW cb_explore_adf ε-greedy", "predict/learn per round", vw("--epsilon 0.05")),
           ("vowpalwabbit", "VW cb_explore_adf SquareCB", "predict/learn per round", vw("--squarecb"))]

    def linucb():
        from coba.learners import LinUCBLearner
        return LinUCBLearner(alpha=1.0, features=["a"])

    def lints():
        from coba.learners import LinTSLearner
        return LinTSLearner(features=["a"])

    out += [("coba", "coba LinUCBLearner", "Experiment.run", coba_learner(linucb)),
            ("coba", "coba LinTSLearner", "Experiment.run", coba_learner(lints))]

    def ucb1():
        from mabwiser.mab import LearningPolicy
        return LearningPolicy.UCB1(alpha=1.0)

    def thompson():
        from mabwiser.mab import LearningPolicy
        return LearningPolicy.ThompsonSampling()

    out.append(("mabwiser", "MABWiser UCB1", "predict/partial_fit per round", mabwiser(ucb1)))
    if problem == "logistic":
        out.append(("mabwiser", "MABWiser ThompsonSampling", "predict/partial_fit per round", mabwiser(thompson)))
    return out


# ---- nlbandit ---------------------------------------------------------------------------------------------

def nlbandit_batched(env, name, hyper, t_max, seeds) -> tuple[np.ndarray, float]:
    """All instances at once: arms (S, T) and seconds of the run (its compilation excluded)."""
    policy, params = nb.make_policy(name, env, horizon=t_max, **hyper)
    res = nb.simulate(env, policy, params, t_max, seeds)
    return np.asarray(res.arms), res.run_s


def nlbandit_single(env, name, hyper, t_max, seed) -> tuple[np.ndarray, float]:
    """One instance: arms (T,) and seconds of the run (compiled on the first instance, reused after)."""
    policy, params = nb.make_policy(name, env, horizon=t_max, **hyper)
    res = nb.simulate(env, policy, params, t_max, [seed])
    return np.asarray(res.arms)[0], res.run_s


def nlbandit_online(inst: Instance, name, hyper) -> tuple[np.ndarray, float]:
    """An Agent driven round by round: arms (T,) and seconds (compiled by an earlier agent of the same shapes)."""
    t_max, k, d = inst.contexts.shape
    agent = Agent(name, d=d, k=k, horizon=t_max, seed=inst.seed, **hyper)
    arms = np.empty(t_max, np.int64)
    start = time.perf_counter()
    for t in range(t_max):
        decision = agent.decide(inst.contexts[t])
        agent.reward(decision.event_id, float(inst.rewards[t, decision.arm]))
        arms[t] = decision.arm
    jax.block_until_ready(agent._state)
    return arms, time.perf_counter() - start


def summary(regrets: list[float]) -> str:
    r = np.asarray(regrets)
    half = t_quantile_975(r.size - 1) * r.std(ddof=1) / np.sqrt(r.size) if r.size > 1 else float("nan")
    return f"{r.mean():9.1f} ± {half:6.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2000, help="rounds T per instance")
    parser.add_argument("--instances", type=int, default=5, help="instances S (seeds 0..S-1)")
    parser.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    args = parser.parse_args()
    t_max, seeds = args.rounds, list(range(args.instances))
    print(f"T = {t_max} rounds, S = {args.instances} instances; jax {jax.__version__}, one thread per library")
    for problem in args.problems:
        spec = PROBLEMS[problem]
        env_config = spec["env"]
        env = nb.make_env(**env_config)
        instances = [export_instance(env, s, t_max, env_config) for s in seeds]
        print(f"\n{problem}: K = {env_config['k']}, d = {env_config['d']}")
        print(f"  {'learner':46s} {'regret (mean ± 95% CI)':>24s} {'µs/round':>10s}  driven by")

        def line(label, regrets, seconds, rounds, how):
            print(f"  {label:46s} {summary(regrets):>24s} {1e6 * seconds / rounds:10.1f}  {how}", flush=True)

        for module, label, how, play in peers(problem):
            if importlib.util.find_spec(module) is None:
                print(f"  {label:46s} {'not installed':>24s}")
                continue
            runs = [play(inst) for inst in instances]
            line(label, [replay_arms(i, a)["cum_regret"][-1] for i, (a, _) in zip(instances, runs)],
                 sum(s for _, s in runs), t_max * len(instances), how)

        for label, name, hyper in spec["nlbandit"]:
            arms, seconds = nlbandit_batched(env, name, hyper, t_max, seeds)
            batched = [replay_arms(i, a)["cum_regret"][-1] for i, a in zip(instances, arms)]
            line(f"nlbandit {label} batched", batched, seconds, t_max * len(seeds), "simulate, S instances at once")
            single = [nlbandit_single(env, name, hyper, t_max, s) for s in seeds]
            line(f"nlbandit {label} single", [replay_arms(i, a)["cum_regret"][-1] for i, (a, _) in
                                              zip(instances, single)], sum(s for _, s in single),
                 t_max * len(seeds), "simulate, one instance per call")
            warm = Agent(name, d=env_config["d"], k=env_config["k"], horizon=t_max, seed=99, **hyper)
            for t in range(3):  # compiles decide, reward (and the redraws), shared with the timed agents
                warm.reward(warm.decide(instances[0].contexts[t]).event_id, 0.0)
            online = [nlbandit_online(inst, name, hyper) for inst in instances]
            line(f"nlbandit {label} online", [replay_arms(i, a)["cum_regret"][-1] for i, (a, _) in
                                              zip(instances, online)], sum(s for _, s in online),
                 t_max * len(seeds), "Agent.decide/reward per round")
            agree = {"batched = single": all(np.array_equal(a, b) for a, (b, _) in zip(arms, single)),
                     "single = online": all(np.array_equal(b, c) for (b, _), (c, _) in zip(single, online))}
            same = ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in agree.items())
            print(f"  {'':46s}   same arms: {same}")

if __name__ == "__main__":
    main()
