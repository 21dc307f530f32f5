"""GLM policies: engine per-round time against a float64 NumPy loop in the reference code's style, and
per-round cost versus t.

Run: ``python benchmarks/glm.py [--seeds 20] [--horizon 2000] [--numpy-seeds 2] [--repeats 2] [--policies ...]``.

Setting (issue 3): logistic bandit with Bernoulli rewards, K = 100 arms uniform on [−1, 1]^d, d = 10,
θ* ~ N(0, 3/d² I), T = 2,000; every policy starts with the d-arm basis warm-up (GLM-ES: a G-optimal
warm-up of τ = 100 rounds) and uses λ = 1.

1. Throughput. ``nb.simulate`` runs each policy on all seeds at once. The NumPy side is written the way
   the reference code (Kveton et al.'s) is: per-arm counts N_k and reward sums Y_k, an IRLS/Newton refit
   of at most 30 iterations warm-started at the previous estimate every round, ``np.linalg`` solves, one
   seed after the other in a Python loop. It implements GLM-UCB, UCB-GLM, GLM-TSL, GLM-FPL (aggregated
   noise) and GLM-ES (m = 10 models, 100 gradient steps of 0.01 on the mean loss, batched over models as
   one matrix product; its warm-up is round-robin, so the design's one-off cost is not counted). The
   fastest of ``--repeats`` runs per side is kept. Target: engine ≥ 5× faster
   per seed-round for every policy with a NumPy counterpart.
2. Per-round cost versus t (``SimResult.chunk_seconds``, 4 chunks of T/4 rounds): late/early = last
   chunk / second chunk. Targets: GLM-ES ≤ 1.2 (flat), ada-OFU-ECOLog ≤ 1.2 (flat), GLM-PHE > 1.5
   (grows with t: every past reward is re-perturbed each round). Logistic-UCB-1 is timed on its full
   history (grows with t) and on per-arm statistics (``logistic-ucb-1/arms``, flat).
3. GLM-ES's solvers side by side: the paper's 100 gradient steps (``glm-es``) and the exact argmin by one
   Hessian shared by the ensemble (``glm-es/ensemble-newton``, no NumPy counterpart).

Threads: BLAS pools limited to one thread (unless already set); XLA keeps its default pool.
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
from nlbandit.core.keys import seed_keys  # noqa: E402

D, K = 10, 100
ENV = dict(d=D, k=K, arms="box", theta="gaussian", theta_var="3/d^2")
POLICIES = {
    "glm-ucb": dict(alpha=0.5),
    "ucb-glm": dict(alpha=0.5),
    "glm-tsl": dict(a=1.0),
    "glm-fpl": dict(a=0.5),
    "glm-es": dict(m=10, sigma_r=0.1, warmup_rounds=100),
    "glm-es/ensemble-newton": dict(m=10, sigma_r=0.1, warmup_rounds=100, solver="ensemble-newton"),
    "glm-phe": dict(a=0.5, solver="gd"),
    "logistic-ucb-1": {},
    "logistic-ucb-1/arms": dict(backend="arms"),
    "ada-ofu-ecolog": {},
}


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def _irls(arms, n, y, theta, lam=1.0, max_iter=30, tol=1e-6):
    """Newton/IRLS on per-arm statistics, warm start, at most 30 iterations (the reference code's style)."""
    for _ in range(max_iter):
        mu = _sigmoid(arms @ theta)
        grad = arms.T @ (n * mu - y) + lam * theta
        hess = (arms * (n * mu * (1 - mu))[:, None]).T @ arms + lam * np.eye(arms.shape[1])
        step = np.linalg.solve(hess, grad)
        theta = theta - step
        if np.linalg.norm(step) < tol:
            break
    return theta, hess


def numpy_run(name: str, arms: np.ndarray, theta_star: np.ndarray, horizon: int, rng) -> float:
    """One seed of ``name`` in a plain NumPy loop; returns its pseudo-regret."""
    means = _sigmoid(arms @ theta_star)
    n, y = np.zeros(K), np.zeros(K)
    theta, g_inv = np.zeros(D), np.eye(D)
    m = 10
    sums, thetas = np.zeros((K, m)), np.zeros((m, D))
    basis = list(range(D))  # the first d arms are independent for continuous random features
    regret = 0.0
    for t in range(horizon):
        if name == "glm-es":
            arm = t % K if t < 100 else int(np.argmax(arms @ thetas[rng.integers(m)]))
        elif t < D:
            arm = basis[t]
        elif name == "glm-ucb":
            width = np.sqrt(np.einsum("kd,de,ke->k", arms, g_inv, arms))
            arm = int(np.argmax(_sigmoid(arms @ theta) + 0.5 * width))
        elif name == "ucb-glm":
            width = np.sqrt(np.einsum("kd,de,ke->k", arms, g_inv, arms))
            arm = int(np.argmax(arms @ theta + 0.5 * width))
        elif name == "glm-tsl":
            center, hess = _irls(arms, n, y, theta)
            theta = center
            sample = center + np.linalg.solve(np.linalg.cholesky(hess).T, rng.standard_normal(D))
            arm = int(np.argmax(arms @ sample))
        else:  # glm-fpl
            theta, _ = _irls(arms, n, y + 0.5 * np.sqrt(n) * rng.standard_normal(K), theta)
            arm = int(np.argmax(arms @ theta))
        reward = float(rng.random() < means[arm])
        regret += means.max() - means[arm]
        n[arm] += 1
        y[arm] += reward
        x = arms[arm]
        if name in ("glm-ucb", "ucb-glm"):
            vx = g_inv @ x
            g_inv -= np.outer(vx, vx) / (1 + x @ vx)
            theta, _ = _irls(arms, n, y, theta)
        elif name == "glm-es":
            sums[arm] += reward + 0.1 * rng.standard_normal(m)
            for _ in range(100):
                grad = (arms.T @ (n[:, None] * _sigmoid(arms @ thetas.T) - sums)).T + thetas
                thetas -= 0.01 * grad / n.sum()
    return regret


def instances(seeds: int) -> list[tuple[np.ndarray, np.ndarray]]:
    env = nb.make_env("logistic", **ENV)
    out = []
    for s in range(seeds):
        inst = jax.device_get(env.reset(seed_keys(s).env_reset))
        out.append((np.asarray(inst.arms), np.asarray(inst.theta)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--horizon", type=int, default=2000)
    ap.add_argument("--numpy-seeds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--policies", nargs="+", choices=list(POLICIES), default=list(POLICIES),
                    help="policies to time (default: all)")
    args = ap.parse_args()
    env = nb.make_env("logistic", **ENV)
    spec = nb.ProblemSpec(D, K, args.horizon)
    chunk = args.horizon // 4
    insts = instances(args.numpy_seeds)
    print(f"K = {K}, d = {D}, T = {args.horizon}; engine {args.seeds} seeds, NumPy {args.numpy_seeds} seeds; "
          f"best of {args.repeats}")
    print(f"{'policy':16s} {'engine µs':>10s} {'NumPy µs':>10s} {'speed-up':>9s} {'late/early':>10s} "
          f"{'regret (engine)':>16s} {'regret (NumPy)':>15s}")
    for name in args.policies:
        hp = POLICIES[name]
        policy, params = nb.make_policy(name.split("/")[0], spec, **hp)
        best, res = np.inf, None
        for _ in range(args.repeats):
            res = nb.simulate(env, policy, params, args.horizon, range(args.seeds), chunk_size=chunk)
            best = min(best, res.run_s)
        engine_us = 1e6 * best / (args.seeds * args.horizon)
        ratio = res.chunk_seconds[-1] / res.chunk_seconds[1]
        np_us, np_regret = float("nan"), float("nan")
        if name in ("glm-ucb", "ucb-glm", "glm-tsl", "glm-fpl", "glm-es"):
            best_np = np.inf
            for _ in range(args.repeats):
                rng = np.random.default_rng(0)
                t0 = time.perf_counter()
                regrets = [numpy_run(name, arms, theta, args.horizon, rng) for arms, theta in insts]
                best_np = min(best_np, time.perf_counter() - t0)
            np_us = 1e6 * best_np / (len(insts) * args.horizon)
            np_regret = float(np.mean(regrets))
        print(f"{name:16s} {engine_us:10.1f} {np_us:10.1f} {np_us / engine_us:8.1f}× {ratio:10.2f} "
              f"{res.final_regret.mean():16.1f} {np_regret:15.1f}")


if __name__ == "__main__":
    main()
