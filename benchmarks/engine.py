"""Engine throughput against a plain NumPy loop, and per-round cost versus t.

Run: ``python benchmarks/engine.py [--seeds 50] [--horizon 10000] [--numpy-seeds 10] [--phe-seeds 10]``.

Setting: linear bandit, K = 50 arms and θ* uniform on the unit sphere in d = 20, Gaussian noise 0.5.

1. Throughput. ``nb.simulate`` runs ``lin-ucb`` (OFUL width) and ``lin-es`` (m = 25, σ_R = 0.1, prior on)
   on all seeds at once; a float64 NumPy implementation runs the same algorithms seed after seed, round
   after round, in a plain Python loop with Sherman–Morrison updates (O(Kd²) per round like the engine).
   The NumPy loop gets the engine's problem instances and draws its own randomness with NumPy (in bulk,
   inside the timed region). Per-seed-round times are compared; ``--numpy-seeds`` times the NumPy loop
   on fewer seeds than the engine to keep the run short. Each side is timed ``--repeats`` times and the
   fastest run is kept (this VM's timings jitter by ±30% between runs). Target: engine ≥ 10× faster.
2. Same decisions. On ``--check-seeds`` seeds the NumPy loop is fed the engine's own draws (instance,
   reward noise, Lin-ES model indices, perturbations and prior, reproduced from the seed's keys) and
   follows the engine's arms; its decision must equal the engine's in every round, except at numerical
   ties (top two scores within 1e-9, e.g. round 1 of LinUCB, where all unit-norm arms score ‖x‖/√λ).
3. Per-round cost versus t, from ``SimResult.chunk_seconds`` (chunks of ``--chunk-size`` rounds): the
   ratio late/early = mean of the last two chunks / mean of chunks 2–3 (the first is skipped). Target for
   ``lin-es``: ≤ 1.2 (constant cost per round). ``lin-phe`` re-perturbs the whole history each round, so
   its ratio should approach the ratio of mean t, ≈ 4.5 for 10 chunks; it must exceed 2 (this shows the
   method resolves growth in t).

Threads: BLAS/OpenMP pools are limited to one thread (unless already set) — the NumPy loop works on
20 × 20 matrices where threading only adds overhead; XLA keeps its default thread pool. No processes
are spawned.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from typing import NamedTuple  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import nlbandit as nb  # noqa: E402
from nlbandit.core.keys import normal, seed_keys  # noqa: E402
from nlbandit.core.round import round_key  # noqa: E402

D, K, NOISE_STD = 20, 50, 0.5
LIN_UCB = dict(lam=1.0, sigma=0.5, delta=0.01, s=1.0)
LIN_ES = dict(m=25, lam=1.0, sigma_r=0.1, prior_scale=0.1)
TIE_GAP = 1e-9


class Instance(NamedTuple):
    """A problem instance as NumPy arrays: θ* (d,) and the arm pool (K, d)."""

    theta: np.ndarray
    arms: np.ndarray


class Draws(NamedTuple):
    """All randomness of one seed: standard normal reward noise (T,); for Lin-ES, model indices j (T,),
    perturbations Z (T, m) (already scaled by σ_R) and the prior b₀ (d, m) (already scaled)."""

    noise: np.ndarray
    j: np.ndarray | None = None
    Z: np.ndarray | None = None
    prior: np.ndarray | None = None


class LoopResult(NamedTuple):
    """Output of a NumPy run: the loop's own decision each round, the top-two score gap (only when
    following another run's arms, else None), and the cumulative pseudo-regret of the played arms."""

    choices: np.ndarray
    gaps: np.ndarray | None
    regret: float


def numpy_lin_ucb(inst: Instance, draws: Draws, follow: np.ndarray | None = None) -> LoopResult:
    """LinUCB with the OFUL width √β_t, float64 NumPy, Sherman–Morrison updates.

    With ``follow`` (T,), the played arm of round t is ``follow[t]`` (the loop's own choice is still
    recorded, with its top-two score gap); otherwise the loop plays its own choice.
    """
    lam, sigma, delta, s = LIN_UCB["lam"], LIN_UCB["sigma"], LIN_UCB["delta"], LIN_UCB["s"]
    arms, horizon = inst.arms, draws.noise.shape[0]
    means = arms @ inst.theta
    best = means.max()
    v_inv, b, logdet = np.eye(D) / lam, np.zeros(D), 0.0
    log_term, prior_width = 2.0 * math.log(1.0 / delta), math.sqrt(lam) * s
    choices = np.empty(horizon, np.int64)
    gaps = None if follow is None else np.empty(horizon)
    regret = 0.0
    for t in range(horizon):
        radius = sigma * math.sqrt(log_term + logdet) + prior_width
        widths = np.sqrt(np.maximum(((arms @ v_inv) * arms).sum(axis=1), 0.0))
        scores = arms @ (v_inv @ b) + radius * widths
        arm = int(np.argmax(scores))
        choices[t] = arm
        if follow is not None:
            gaps[t] = _top_gap(scores)
            arm = int(follow[t])
        x = arms[arm]
        y = means[arm] + NOISE_STD * draws.noise[t]
        regret += best - means[arm]
        vx = v_inv @ x
        q = x @ vx
        v_inv -= np.outer(vx, vx / (1.0 + q))
        logdet += math.log1p(q)
        b += y * x
    return LoopResult(choices, gaps, regret)


def numpy_lin_es(inst: Instance, draws: Draws, follow: np.ndarray | None = None) -> LoopResult:
    """Linear ensemble sampling (B = b₀ + Σ x (y + Z_t)ᵀ, play argmax xᵀ V⁻¹ B[:, j_t]), float64 NumPy.

    ``follow`` as in :func:`numpy_lin_ucb`.
    """
    arms, horizon = inst.arms, draws.noise.shape[0]
    means = arms @ inst.theta
    best = means.max()
    v_inv, B = np.eye(D) / LIN_ES["lam"], draws.prior.copy()
    choices = np.empty(horizon, np.int64)
    gaps = None if follow is None else np.empty(horizon)
    regret = 0.0
    for t in range(horizon):
        scores = arms @ (v_inv @ B[:, draws.j[t]])
        arm = int(np.argmax(scores))
        choices[t] = arm
        if follow is not None:
            gaps[t] = _top_gap(scores)
            arm = int(follow[t])
        x = arms[arm]
        y = means[arm] + NOISE_STD * draws.noise[t]
        regret += best - means[arm]
        vx = v_inv @ x
        v_inv -= np.outer(vx, vx / (1.0 + x @ vx))
        B += np.outer(x, y + draws.Z[t])
    return LoopResult(choices, gaps, regret)


def _top_gap(scores: np.ndarray) -> float:
    """Difference between the largest and the second largest score."""
    top2 = np.partition(scores, -2)[-2:]
    return float(top2[1] - top2[0])


def numpy_draws(policy: str, rng: np.random.Generator, horizon: int) -> Draws:
    """Fresh NumPy randomness for one seed of ``policy`` (what a standalone NumPy simulation draws)."""
    noise = rng.standard_normal(horizon)
    if policy == "lin-ucb":
        return Draws(noise)
    m = LIN_ES["m"]
    prior = math.sqrt(LIN_ES["lam"]) * LIN_ES["prior_scale"] * rng.standard_normal((D, m))
    return Draws(noise, rng.integers(0, m, horizon), LIN_ES["sigma_r"] * rng.standard_normal((horizon, m)), prior)


def engine_draws(policy: str, seed: int, horizon: int) -> Draws:
    """The engine's own draws for ``seed``, reproduced from its keys as the env and policy draw them."""
    keys = seed_keys(jnp.uint32(seed))
    ts = jnp.arange(1, horizon + 1)
    noise = jax.vmap(lambda t: normal(round_key(keys.env_pull, t)))(ts)
    if policy == "lin-ucb":
        return Draws(np.asarray(noise))
    m = LIN_ES["m"]
    j = jax.vmap(lambda t: jax.random.bits(round_key(keys.policy_act, t), (2,), jnp.uint32)[0] % m)(ts)
    z = jax.vmap(lambda t: normal(round_key(keys.policy_update, t), (m,)))(ts)
    w = normal(keys.policy_init, (D, m))
    scale = math.sqrt(LIN_ES["lam"]) * LIN_ES["prior_scale"]
    return Draws(np.asarray(noise), np.asarray(j), LIN_ES["sigma_r"] * np.asarray(z), scale * np.asarray(w))


def engine_instances(env: nb.Env, seeds: list[int]) -> list[Instance]:
    """The problem instances the engine draws for ``seeds``."""
    keys = jax.vmap(seed_keys)(jnp.asarray(seeds, jnp.uint32))
    state = jax.device_get(jax.vmap(env.reset)(keys.env_reset))
    return [Instance(np.asarray(state.theta[i]), np.asarray(state.arms[i])) for i in range(len(seeds))]


NUMPY_LOOPS = {"lin-ucb": numpy_lin_ucb, "lin-es": numpy_lin_es}


def time_numpy(policy: str, instances: list[Instance], horizon: int, repeats: int) -> tuple[float, float]:
    """Run the NumPy loop on every instance, one after the other, ``repeats`` times; return (seconds of the
    fastest repeat, mean final regret)."""
    loop, best = NUMPY_LOOPS[policy], math.inf
    for _ in range(repeats):
        rng = np.random.default_rng(12345)
        start = time.perf_counter()
        regrets = [loop(inst, numpy_draws(policy, rng, horizon)).regret for inst in instances]
        best = min(best, time.perf_counter() - start)
    return best, float(np.mean(regrets))


def check_decisions(policy: str, env: nb.Env, res: nb.SimResult, seeds: list[int]) -> tuple[int, int, int]:
    """Feed the NumPy loop the engine's draws on ``seeds``, following the engine's arms.

    Returns (rounds compared, decisions that differ among them, rounds at numerical ties, not compared).
    """
    compared = differ = ties = 0
    for i, inst in enumerate(engine_instances(env, seeds)):
        engine_arms = res.arms[i]
        out = NUMPY_LOOPS[policy](inst, engine_draws(policy, seeds[i], res.horizon), follow=engine_arms)
        tie = out.gaps < TIE_GAP
        compared += int(np.sum(~tie))
        differ += int(np.sum((out.choices != engine_arms) & ~tie))
        ties += int(np.sum(tie))
    return compared, differ, ties


def late_early(chunk_seconds: list[float]) -> float:
    """Mean time of the last two chunks over the mean of chunks 2–3 (the first, warm-up chunk skipped)."""
    c = np.asarray(chunk_seconds)
    return float(c[-2:].mean() / c[1:3].mean())


def main() -> None:
    """Parse arguments, run the benchmark, print the report and the PASS/FAIL lines."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=50, help="seeds run by the engine (default 50)")
    parser.add_argument("--horizon", type=int, default=10_000, help="rounds T (default 10^4)")
    parser.add_argument("--numpy-seeds", type=int, default=10,
                        help="seeds timed in the NumPy loop (per-seed-round times are compared; default 10)")
    parser.add_argument("--phe-seeds", type=int, default=10, help="seeds for the lin-phe timing run (default 10)")
    parser.add_argument("--check-seeds", type=int, default=2, help="seeds for the decision check (default 2)")
    parser.add_argument("--chunk-size", type=int, default=1000, help="rounds per engine chunk (default 1000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per side; the fastest is kept (default 3)")
    args = parser.parse_args()
    if args.horizon < 5 * args.chunk_size or args.horizon % args.chunk_size:
        parser.error("the horizon must be a multiple of the chunk size, with at least 5 chunks (late/early ratio)")
    if not 1 <= args.check_seeds <= args.seeds or not 1 <= args.numpy_seeds <= args.seeds:
        parser.error("--numpy-seeds and --check-seeds must be between 1 and --seeds")

    T, S = args.horizon, args.seeds
    seeds = list(range(S))
    env = nb.make_env("linear", d=D, k=K, noise_std=NOISE_STD)
    spec = nb.ProblemSpec(D, K, T)
    dev = jax.devices()[0]
    print(f"linear bandit: K={K}, d={D}, noise {NOISE_STD}, unit-sphere arms and θ*, T={T}")
    print(f"jax {jax.__version__} on {dev.platform} ({dev.device_kind}), {os.cpu_count()} CPU cores; "
          f"NumPy {np.__version__} loop single-threaded (OPENBLAS/OMP/MKL_NUM_THREADS="
          f"{os.environ['OPENBLAS_NUM_THREADS']})")
    print(f"engine: {S} seeds at once, chunk_size {args.chunk_size}; NumPy loop: {args.numpy_seeds} of those "
          f"seeds one after the other (per-seed-round times are compared); fastest of {args.repeats} runs each")
    print()

    instances = engine_instances(env, seeds[: args.numpy_seeds])
    results, checks, speedups = {}, {}, {}
    header = (f"{'policy':8} {'compile s':>9} {'run s':>7} {'engine µs/seed-round':>21} "
              f"{'NumPy µs/seed-round':>20} {'ratio':>6}   mean final regret on the NumPy seeds, engine / NumPy")
    print(header)
    for name, hypers in (("lin-ucb", LIN_UCB), ("lin-es", LIN_ES)):  # engine first, before any NumPy work
        policy, params = nb.make_policy(name, spec, **hypers)
        runs = [nb.simulate(env, policy, params, T, seeds, chunk_size=args.chunk_size) for _ in range(args.repeats)]
        results[name] = min(runs, key=lambda r: r.run_s)
    for name in ("lin-ucb", "lin-es"):
        res = results[name]
        engine_us = res.run_s / (S * T) * 1e6
        numpy_s, numpy_regret = time_numpy(name, instances, T, args.repeats)
        numpy_us = numpy_s / (args.numpy_seeds * T) * 1e6
        speedups[name] = numpy_us / engine_us
        print(f"{name:8} {res.compile_s:9.2f} {res.run_s:7.2f} {engine_us:21.2f} {numpy_us:20.2f} "
              f"{speedups[name]:5.1f}×   {res.final_regret[: args.numpy_seeds].mean():.1f} / {numpy_regret:.1f}")
        checks[name] = check_decisions(name, env, res, seeds[: args.check_seeds])
    print()

    print(f"decisions: NumPy loop fed the engine's draws on {args.check_seeds} seeds, following its arms")
    for name, (compared, differ, ties) in checks.items():
        print(f"  {name:8} {compared - differ}/{compared} rounds identical "
              f"({ties} numerical ties with top-two gap < {TIE_GAP:g} not compared)")
    print()

    policy, params = nb.make_policy("lin-phe", spec, sigma_r=LIN_ES["sigma_r"])
    results["lin-phe"] = nb.simulate(env, policy, params, T, seeds[: args.phe_seeds], chunk_size=args.chunk_size)
    ratios = {}
    print(f"per-round time vs t: chunk seconds ({args.chunk_size} rounds each)")
    for name, n_seeds in (("lin-es", S), ("lin-phe", args.phe_seeds)):
        res = results[name]
        ratios[name] = late_early(res.chunk_seconds)
        print(f"  {name:8} ({n_seeds} seeds): {' '.join(f'{c:.3f}' for c in res.chunk_seconds)}")
        print(f"  {'':8} late/early = {ratios[name]:.2f}")
    n_chunks = len(results["lin-phe"].chunk_seconds)
    linear_ratio = (n_chunks - 1) / 2  # mean t of the last two chunks / of chunks 2–3, (n − 1)C / 2C
    print(f"  (cost ∝ t would give late/early ≈ {linear_ratio:.2f})")
    print()

    targets = [
        (f"lin-ucb engine/NumPy speedup {speedups['lin-ucb']:.1f}× ≥ 10×", speedups["lin-ucb"] >= 10),
        (f"lin-es engine/NumPy speedup {speedups['lin-es']:.1f}× ≥ 10×", speedups["lin-es"] >= 10),
        (f"lin-ucb decisions identical to the NumPy loop ({checks['lin-ucb'][1]} differ)", checks["lin-ucb"][1] == 0),
        (f"lin-es decisions identical to the NumPy loop ({checks['lin-es'][1]} differ)", checks["lin-es"][1] == 0),
        (f"lin-es per-round time late/early {ratios['lin-es']:.2f} ≤ 1.2", ratios["lin-es"] <= 1.2),
        (f"lin-phe per-round time late/early {ratios['lin-phe']:.2f} ≥ 2 (grows with t)", ratios["lin-phe"] >= 2),
    ]
    for text, ok in targets:
        print(f"{'PASS' if ok else 'FAIL'}  {text}")


if __name__ == "__main__":
    main()
