"""Disjoint arm features with and without their zeros (issue 15 item 5; ``nlbandit.models.disjoint``).

Run: ``python benchmarks/disjoint.py [--seeds 4] [--horizon 1000]``.

Setting: a classification bandit of MNIST's size in Bae & Lee's Fig. 2 (d₀ = 196 pooled pixels, K = 10
classes: arms of d = d₀K = 1,960 numbers, nine tenths zeros) on generated data (2,500 rows drawn per seed,
uniform features with a class-dependent shift; no data files needed), the paper's experiment mode:
NeuralLog-UCB-2 (L = 2, m = 20, p = 39,220, diagonal design, 100 GD steps every 50 rounds) and
Logistic-UCB-1 (full matrices by Sherman–Morrison, the same training). Each policy runs with
``features = "dense"`` and ``"disjoint"`` on the same seeds; printed side by
side: µs per seed-round, the ratio, the bytes of one seed's policy state, and the share of seed-rounds in
which the two made the same decision (the compact form changes only the order of floating-point sums, so
float32 rounding may let two runs part after a near-tie).

Threads: BLAS pools limited to one thread (unless already set); XLA keeps its default pool (pin the process
with ``taskset -c 0`` on this 2-core machine to time one core).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import jax  # noqa: E402
import numpy as np  # noqa: E402

import nlbandit as nb  # noqa: E402
from nlbandit.envs.classification import classification  # noqa: E402

D0, K, ROWS = 196, 10, 5000


def _env():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, K, ROWS)
    numeric = rng.uniform(-1, 1, (ROWS, D0)) + 0.5 * np.eye(K, D0)[labels]
    return classification(numeric, np.zeros((ROWS, 0), np.int32), (), labels, K, 2500)


def _state_bytes(policy, params) -> int:
    state = jax.eval_shape(lambda: policy.init(params, jax.random.key(0)))
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(state))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--horizon", type=int, default=1000)
    args = parser.parse_args()
    env, seeds, horizon = _env(), range(args.seeds), args.horizon
    print(f"d0 = {D0}, K = {K} (d = {D0 * K}), {args.seeds} seeds x {horizon} rounds, jax {jax.__version__}")
    print(f"{'policy':18} {'dense µs/sr':>12} {'disjoint µs/sr':>15} {'speed-up':>9} {'dense MB/seed':>14} "
          f"{'disjoint MB/seed':>17} {'same arms':>10}")
    for name, options in (("neurallog-ucb-2", {}), ("logistic-ucb-1", {"mode": "experiment", "kappa": 10.0})):
        times, sizes, arms = {}, {}, {}
        for features in ("dense", "disjoint"):
            policy, params = nb.make_policy(name, nb.ProblemSpec(D0 * K, K, horizon), features=features, **options)
            result = nb.simulate(env, policy, params, horizon, seeds, chunk_size=horizon)
            arms[features] = np.asarray(result.arms)
            times[features] = result.run_s / (args.seeds * horizon) * 1e6  # compilation excluded
            sizes[features] = _state_bytes(policy, params) / 2**20
        print(f"{name:18} {times['dense']:12.0f} {times['disjoint']:15.0f} {times['dense'] / times['disjoint']:8.1f}x "
              f"{sizes['dense']:14.2f} {sizes['disjoint']:17.2f} {str(bool((arms['dense'] == arms['disjoint']).all())):>10}")


if __name__ == "__main__":
    main()
