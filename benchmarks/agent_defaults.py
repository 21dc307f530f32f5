"""How the online agent's practice defaults were chosen: candidate settings of each policy on held-out problems.

Run: ``python benchmarks/agent_defaults.py [--rounds 2000] [--seeds 10]``

Held-out problems (none of them the agent benchmark's, ``benchmarks/agent.py``: linear, d = 20, K = 50, seed
0; :func:`problems`): four linear bandits with Gaussian noise (d, K, arm sets fresh or fixed, σ from 0.1 to 1,
‖θ*‖ = 1) and three logistic bandits with Bernoulli rewards and a fixed arm set (the GLM policies' per-arm
statistics; ‖θ*‖ = 3 or 1), seeds 100..100 + seeds − 1 (their own instances). Every candidate of a policy
runs on every problem of its kind (linear policies on the linear problems, GLM policies with their logistic
link on the logistic ones) through :func:`nlbandit.simulate`, common random numbers across candidates.

Printed, per policy: each candidate's cumulative regret at T divided by the best candidate's on each problem,
averaged over the problems (1.00 = best everywhere), and the mean regrets; the candidate with the smallest
average ratio is the agent's practice default (``AGENT_DEFAULTS`` in the family's ``*_host.py``), unless it
is within 2% of the registered default, which is then kept.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

import nlbandit as nb

CANDIDATES = {
    "lin-ucb": [{"width": "oful"}] + [{"width": "constant", "alpha": a} for a in (0.1, 0.25, 0.5, 1.0)],
    "lin-ts": [{"v": v} for v in (0.1, 0.25, 0.5, 1.0)],
    "lin-es": [{"sigma_r": s, "prior_scale": p} for s, p in itertools.product((0.1, 0.5), (None, 1.0))],
    "glm-ucb": [{"alpha": a} for a in (0.1, 0.25, 0.5, 1.0)],
    "glm-tsl": [{"a": a} for a in (0.1, 0.25, 0.5, 1.0)],
    "glm-fpl": [{"a": a} for a in (0.1, 0.25, 0.5, 1.0)],
    "glm-es": [{"solver": s} for s in ("gd", "ensemble-newton")],
}
"""Candidates per policy (the registered default among them)."""


def problems() -> list[tuple[str, dict]]:
    """(kind, environment config) of the held-out problems."""
    linear = [(5, 10, "fresh", 0.5), (20, 50, "fresh", 0.5), (10, 20, "fixed", 1.0), (10, 20, "fresh", 0.1)]
    logistic = [(5, 10, 3.0), (20, 50, 3.0), (10, 20, 1.0)]
    return ([("linear", {"name": "linear", "d": d, "k": k, "contexts": c, "noise_std": s, "theta_norm": 1.0})
             for d, k, c, s in linear]
            + [("logistic", {"name": "logistic", "d": d, "k": k, "contexts": "fixed", "theta_norm": n})
               for d, k, n in logistic])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--policies", nargs="+", default=list(CANDIDATES))
    args = parser.parse_args()
    seeds = range(100, 100 + args.seeds)
    for policy in args.policies:
        kind = "logistic" if policy.startswith("glm") else "linear"
        table = []  # rows: candidates; columns: problems
        labels = []
        for label, config in problems():
            if label != kind:
                continue
            env = nb.make_env(**config)
            labels.append(f"d={config['d']} K={config['k']} {config['contexts']}"
                          + (f" σ={config['noise_std']}" if kind == "linear" else f" S={config['theta_norm']}"))
            column = []
            for hyper in CANDIDATES[policy]:
                run = nb.simulate(env, *nb.make_policy(policy, env, horizon=args.rounds, **hyper), seeds=seeds)
                column.append(float(np.mean(run.cum_regret[:, -1])))
            table.append(column)
        regrets = np.array(table).T  # (candidates, problems)
        ratio = (regrets / regrets.min(axis=0)).mean(axis=1)
        print(f"\n{policy} on {kind} bandits ({'; '.join(labels)}; T = {args.rounds}, {args.seeds} seeds)")
        for hyper, r, row in zip(CANDIDATES[policy], ratio, regrets):
            print(f"  {str(hyper):45s} ratio {r:5.2f}   regrets " + " ".join(f"{v:8.1f}" for v in row))
        print(f"  best: {CANDIDATES[policy][int(np.argmin(ratio))]}", flush=True)


if __name__ == "__main__":
    main()
