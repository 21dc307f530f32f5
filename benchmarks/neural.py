"""Neural policies: engine per-seed-round time against eager per-round implementations in the style of the
public reference code (PyTorch and NumPy), per-round cost versus t, and the training step's GFLOP/s against
this machine's dense-matmul peak and against the rate of its own kernels.

Run: ``python benchmarks/neural.py [--seeds 10] [--horizon 800] [--ref-rounds 5]``.

Setting (issue 13 item 8; spec 003 §4.3): quadratic bandit, d = 20, K = 50 fixed arms on the unit sphere,
σ = 0.5; every policy uses the papers' network (L = 3, N = 20, ReLU, block-symmetric θ₀) and training
(100 full-batch gradient steps of 0.01 on the mean loss, warm start, λ = 1), one pull per arm first.
NeuralUCB/NeuralTS: diagonal design, ν = 0.1; Neural-ES: m = 10, σ_R = 0.1; Neural-PHE: σ_R = 0.1.

1. Throughput. ``nb.simulate`` runs each policy on all seeds at once, on per-arm statistics (Neural-PHE
   too: one N(0, n_k σ_R²) draw per arm is the law of the sum of its n_k fresh perturbations, spec 003
   §2.5), and Neural-PHE also on its history (the O(t) form of the public code), in four chunks of T/4
   rounds; its time per seed-round is that of the second chunk (rounds T/4 to T/2: compiled, and
   t = 3T/8 on average). The reference side runs one seed, eager, round after round, with 3T/8
   observations already in its history, and is timed for ``--ref-rounds`` rounds after one untimed round:

   * PyTorch (``benchmarks/neural_torch.py``, the optional ``bench`` extra), written the way the public
     NeuralUCB / NeuralTS / NPR code is (its docstring says how) — the issue's reference, which was
     measured here at 0.15–0.27 s per round at a few hundred rounds in its own configurations;
   * float32 NumPy with hand-written backpropagation, the same rounds without a framework's per-operation
     overhead (a stronger baseline than the public code: reported beside it).

   Both train by 100 full-batch gradient steps over the whole history (the papers' configuration; per-arm
   statistics give the engine the same gradient in O(K) rows), compute the gradient features by one
   backward pass per arm (NeuralUCB; NeuralTS in one vectorised pass in PyTorch), and train Neural-ES's m
   networks one after the other. Target: engine ≥ 20× faster per seed-round than the PyTorch reference.
2. Per-round cost versus t (chunks of T/4 rounds): late/early = last chunk / second chunk. Targets:
   Neural-ES ≤ 1.2 (flat on fixed arms), Neural-PHE on its history > 1.5 (every past reward re-perturbed
   each round).
3. The training step alone (``nlbandit.models.mlp_train.train``, vmapped over the seeds and the m
   members) in GFLOP/s, counting 2 FLOPs per multiply-add of the products it needs: forward
   K·(dN + N²(L−2) + N), backward the weight gradients (as many) and the hidden layers' input gradients
   K·(N²(L−2) + N) — not layer 1's, which nobody computes; against the peak of a jitted float32
   2048 × 2048 matrix product. Target ≥ 30%. Beside it, the ceiling XLA's own kernels set: the rate of
   the step's two kinds of product timed alone, chained 200 times — the batched (S·m) × [N × N by N × K]
   products of the hidden layer (forward, weight and input gradients) and the (S·m·N × d by d × K)
   product of layer 1 (forward and weight gradient) — and the step's rate if it ran at exactly those.

4. Bae & Lee's neural logistic policies (``--neurallog``; spec 001 §6, App. K) on the latent h1 bandit
   (d = 20, K = 5 contexts per round from a pool of 2500, Bernoulli rewards), the paper's network (L = 2,
   m = 20, p = 420): µs per seed-round in experiment mode without training (``train_every`` > T: the
   selection and the O(p) diagonal-design and effective-dimension updates, which must be flat in t), with
   the paper's training every 50 rounds (100 steps over all t observations: O(t) amortised, so it grows),
   and in theory mode (full p × p float64 matrices: an O(p³) log det and Cholesky factor every round, and
   TrainNN from θ₀ every round); beside them the linear baselines ``logistic-ucb-1`` and ``ada-ofu-ecolog``
   in the same experiment mode (full 20 × 20 matrices by Sherman–Morrison, GD on the same schedule).

Threads: BLAS pools limited to one thread (unless already set); XLA keeps its default pool.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import nlbandit as nb  # noqa: E402
from nlbandit.models.history import empty_rows  # noqa: E402
from nlbandit.models.mlp import MLP, mlp_init  # noqa: E402
from nlbandit.models.mlp_train import Training, train  # noqa: E402
from nlbandit.policies.neurallog import RULES  # noqa: E402

D, K, WIDTH, DEPTH, STEPS, LR, LAM = 20, 50, 20, 3, 100, 0.01, 1.0
ENSEMBLE = 10
POLICIES = {  # benchmark label: (policy name, options)
    "neural-ucb": ("neural-ucb", dict(backend="arms", nu=0.1)),
    "neural-ts": ("neural-ts", dict(backend="arms", nu=0.1)),
    "neural-es": ("neural-es", dict(backend="arms", m=ENSEMBLE, sigma_r=0.1)),
    "neural-greedy": ("neural-greedy", dict(backend="arms")),
    "neural-phe/arms": ("neural-phe", dict(backend="arms", sigma_r=0.1)),
    "neural-phe/history": ("neural-phe", dict(sigma_r=0.1)),
}


class NumpyNet:
    """The reference style's network: W_1 (N, d), W_2 (N, N), W_3 (1, N), output ×√N, float32."""

    def __init__(self, rng: np.random.Generator):
        half = WIDTH // 2
        blocks = []
        for rows, cols in ((WIDTH, D), (WIDTH, WIDTH)):
            w = rng.normal(0.0, math.sqrt(4.0 / WIDTH), (half, cols // 2)).astype(np.float32)
            blocks.append(np.block([[w, np.zeros_like(w)], [np.zeros_like(w), w]]))
        w = rng.normal(0.0, math.sqrt(2.0 / WIDTH), (1, half)).astype(np.float32)
        blocks.append(np.concatenate([w, -w], axis=1))
        self.w = blocks
        self.w0 = [b.copy() for b in blocks]

    def forward(self, x):
        h1 = np.maximum(x @ self.w[0].T, 0)
        h2 = np.maximum(h1 @ self.w[1].T, 0)
        return math.sqrt(WIDTH) * (h2 @ self.w[2].T)[:, 0], (x, h1, h2)

    def backward(self, cache, dout):
        """Gradients of Σ dout_i f(x_i) with respect to W_1, W_2, W_3."""
        x, h1, h2 = cache
        d3 = math.sqrt(WIDTH) * dout[:, None]
        g3 = d3.T @ h2
        d2 = (d3 @ self.w[2]) * (h2 > 0)
        g2 = d2.T @ h1
        d1 = (d2 @ self.w[1]) * (h1 > 0)
        return [d1.T @ x, g2, g3]

    def arm_gradients(self, arms):
        """One backward pass per arm (the reference code's loop), flattened: (K, p)."""
        out = []
        for k in range(arms.shape[0]):
            _, cache = self.forward(arms[k:k + 1])
            out.append(np.concatenate([g.ravel() for g in self.backward(cache, np.ones(1, np.float32))]))
        return np.stack(out)

    def train(self, x, y):
        """100 full-batch gradient steps of the mean loss with the ½λN‖θ − θ₀‖² regulariser."""
        n = x.shape[0]
        for _ in range(STEPS):
            f, cache = self.forward(x)
            grads = self.backward(cache, f - y)
            self.w = [w - LR * (g + LAM * WIDTH * (w - w0)) / n for w, g, w0 in zip(self.w, grads, self.w0)]


def numpy_round(name: str, nets: list[NumpyNet], u: np.ndarray, arms, xs, ys, rng) -> None:
    """One round of ``name`` in the reference style: select, observe, update (with ``xs``/``ys`` the history
    before the round)."""
    if name in ("neural-ucb", "neural-ts"):
        f, _ = nets[0].forward(arms)
        g = nets[0].arm_gradients(arms)
        sigma = np.sqrt(LAM * 0.1 * np.sum(g * g / u, axis=1))
        scores = f + sigma if name == "neural-ucb" else rng.normal(f, sigma)
        arm = int(np.argmax(scores))
        u += g[arm] ** 2
    elif name == "neural-es":
        j = rng.integers(len(nets))
        arm = int(np.argmax(nets[j].forward(arms)[0]))
    else:
        arm = int(np.argmax(nets[0].forward(arms)[0]))
    x = np.concatenate([xs, arms[arm:arm + 1]])
    y = np.concatenate([ys, rng.normal(0.2, 0.5, (1, ys.shape[1])).astype(np.float32)])
    if name == "neural-phe":
        nets[0].train(x, y[:, 0] + rng.normal(0, 0.1, x.shape[0]).astype(np.float32))
    else:
        for j, net in enumerate(nets):
            net.train(x, y[:, j])


def numpy_seconds_per_round(name: str, history: int, rounds: int) -> float:
    """Seconds per round of the reference style once ``history`` observations exist."""
    rng = np.random.default_rng(0)
    arms = rng.standard_normal((K, D)).astype(np.float32)
    arms /= np.linalg.norm(arms, axis=1, keepdims=True)
    m = ENSEMBLE if name == "neural-es" else 1
    nets = [NumpyNet(np.random.default_rng(1)) for _ in range(m)]
    u = np.full(WIDTH * D + WIDTH * WIDTH + WIDTH, LAM, np.float32)
    xs = arms[rng.integers(0, K, history)]
    ys = rng.normal(0.2, 0.5, (history, m)).astype(np.float32)
    start = time.perf_counter()
    for _ in range(rounds):
        numpy_round(name, nets, u, arms, xs, ys, rng)
    return (time.perf_counter() - start) / rounds


def torch_seconds_per_round(name: str, history: int, rounds: int) -> float | None:
    """Seconds per round of the PyTorch reference (``benchmarks/neural_torch.py``), or None without torch."""
    try:
        import neural_torch
    except ImportError:
        return None
    return neural_torch.seconds_per_round(name, d=D, k=K, width=WIDTH, steps=STEPS, lr=LR, lam=LAM, nu=0.1,
                                          sigma_r=0.1, m=ENSEMBLE, history=history,
                                          rounds=rounds)


def engine(label: str, seeds: int, horizon: int) -> tuple[float, float]:
    """(µs per seed-round in the second of four chunks, last/second chunk-time ratio) of ``POLICIES[label]``."""
    env = nb.make_env("quadratic", d=D, k=K)
    name, options = POLICIES[label]
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, K, horizon), **options)
    res = nb.simulate(env, policy, params, horizon, range(seeds), chunk_size=horizon // 4)
    chunks = res.chunk_seconds
    per = 1e6 * chunks[1] / (seeds * (horizon // 4))
    return per, chunks[-1] / chunks[1]


def step_macs() -> int:
    """Multiply-adds of one gradient step of one network on the K per-arm rows (module docstring, 3.)."""
    hidden = WIDTH * WIDTH * (DEPTH - 2) + WIDTH
    return K * (2 * (D * WIDTH + hidden) + hidden)


def train_gflops(seeds: int, m: int = ENSEMBLE, repeats: int = 5) -> float:
    """GFLOP/s of the vmapped training step (seeds × m networks, per-arm rows)."""
    arch = MLP(D, WIDTH, DEPTH)
    how = Training(STEPS, "gd", history=False)
    theta0 = jax.vmap(lambda k: mlp_init(arch, k))(jax.random.split(jax.random.key(0), seeds))
    theta = jnp.repeat(theta0[:, None], m, axis=1)
    arms = jax.random.normal(jax.random.key(1), (K, D), jnp.float32)
    rows = empty_rows(K, D, m, "float32")._replace(x=arms, n=jnp.full((K,), 20.0, jnp.float32),
                                                  y=jax.random.normal(jax.random.key(2), (K, m), jnp.float32))
    step = jax.jit(jax.vmap(lambda th, th0: train(arch, how, th, th0, rows, jnp.float32(LAM), jnp.float32(LR),
                                                                 jax.random.key(0))))
    jax.block_until_ready(step(theta, theta0))
    best = min(_timed(lambda: step(theta, theta0)) for _ in range(repeats))
    return 2 * step_macs() * STEPS * m * seeds / best / 1e9


def kernel_ceiling(seeds: int, m: int = ENSEMBLE, repeats: int = 7) -> tuple[float, float, float]:
    """GFLOP/s of (the batched hidden-layer product, the layer-1 product, a step made of exactly those):
    each product chained 200 times in one jitted loop, at the training step's shapes."""
    b, chain = seeds * m, 200
    keys = jax.random.split(jax.random.key(0), 3)
    w = 0.2 * jax.random.normal(keys[0], (b, WIDTH, WIDTH), jnp.float32)
    h = jax.random.normal(keys[1], (b, WIDTH, K), jnp.float32)
    w1 = 0.2 * jax.random.normal(keys[2], (b * WIDTH, D), jnp.float32)
    batched = jax.jit(lambda w, h: jax.lax.fori_loop(0, chain, lambda i, h: jnp.einsum("bij,bjk->bik", w, h), h))
    layer1 = jax.jit(lambda w1, h: jax.lax.fori_loop(
        0, chain, lambda i, h: (w1 @ (h[0, :D] + 1e-3)).reshape(b, WIDTH, K), h))
    rates = []
    for fn, args, macs in ((batched, (w, h), b * WIDTH * WIDTH * K), (layer1, (w1, h), b * WIDTH * D * K)):
        jax.block_until_ready(fn(*args))
        rates.append(2 * macs * chain / min(_timed(lambda: fn(*args)) for _ in range(repeats)) / 1e9)
    hidden_flops = 2 * b * K * (3 * WIDTH * WIDTH * (DEPTH - 2))
    layer1_flops = 2 * b * K * 2 * D * WIDTH
    step = (hidden_flops + layer1_flops) / (hidden_flops / rates[0] + layer1_flops / rates[1])
    return rates[0], rates[1], step


def matmul_peak(n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of a jitted float32 n × n matrix product."""
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    jax.block_until_ready(f(a))
    return 2 * n**3 / min(_timed(lambda: f(a)) for _ in range(repeats)) / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def neurallog_times(name: str, seeds: int, horizon: int, **options) -> tuple[float, float]:
    """(µs per seed-round in the second of four chunks, last/second chunk-time ratio) of ``name`` on the
    latent h1 bandit (module docstring, 4.)."""
    env = nb.make_env("latent", d=D, k=5, latent="h1")
    policy, params = nb.make_policy(name, nb.ProblemSpec(D, 5, horizon), **options)
    chunks = nb.simulate(env, policy, params, horizon, range(seeds), chunk_size=horizon // 4).chunk_seconds
    return 1e6 * chunks[1] / (seeds * (horizon // 4)), chunks[-1] / chunks[1]


def print_neurallog(seeds: int, horizon: int, theory_horizon: int) -> None:
    """The table of the module docstring's item 4."""
    print(f"Bae & Lee's policies, latent h1 bandit, d={D}, K=5, L=2, m=20; {seeds} seeds x {horizon} rounds "
          f"(theory mode: {theory_horizon})")
    print(f"{'policy':<17}{'no training µs':>16}{'late/early':>12}{'every 50 µs':>14}{'late/early':>12}"
          f"{'theory µs':>12}{'late/early':>12}")
    for name in RULES:
        flat = neurallog_times(name, seeds, horizon, train_every=10 * horizon)
        trained = neurallog_times(name, seeds, horizon)
        theory = neurallog_times(name, seeds, theory_horizon, mode="theory")
        print(f"{name:<17}" + "".join(f"{per:>14.1f}{growth:>12.2f}" for per, growth in (flat, trained, theory)),
              flush=True)
    for name in ("logistic-ucb-1", "ada-ofu-ecolog"):  # the linear baselines in the same experiment mode
        flat = neurallog_times(name, seeds, horizon, mode="experiment", train_every=10 * horizon)
        trained = neurallog_times(name, seeds, horizon, mode="experiment")
        print(f"{name:<17}" + "".join(f"{per:>14.1f}{growth:>12.2f}" for per, growth in (flat, trained))
              + f"{'—':>14}{'—':>12}", flush=True)


def main() -> None:
    """Print the tables of the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--horizon", type=int, default=800)
    ap.add_argument("--ref-rounds", type=int, default=5)
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--neurallog", action="store_true", help="print only the table of item 4")
    ap.add_argument("--log-horizon", type=int, default=2000, help="T of item 4 (theory mode: T/4)")
    args = ap.parse_args()
    if args.neurallog:
        print_neurallog(args.seeds, args.log_horizon, args.log_horizon // 4)
        return
    history = 3 * args.horizon // 8
    print(f"jax {jax.__version__}, devices {jax.devices()}; d={D}, K={K}, L={DEPTH}, N={WIDTH}, {STEPS} steps; "
          f"{args.seeds} seeds x {args.horizon} rounds; references at history {history}")
    print(f"{'policy':<19}{'engine µs/seed-round':>22}{'PyTorch ref µs/round':>22}{'ratio':>8}"
          f"{'NumPy ref µs/round':>20}{'ratio':>8}{'late/early':>12}")
    for label in args.policies:
        name = POLICIES[label][0]
        per, growth = engine(label, args.seeds, args.horizon)
        torch_ref = torch_seconds_per_round(name, history, args.ref_rounds)
        torch_cols = (f"{1e6 * torch_ref:>22.0f}{torch_ref * 1e6 / per:>7.0f}x" if torch_ref
                      else f"{'(no torch)':>22}{'':>8}")
        ref = 1e6 * numpy_seconds_per_round(name, history, args.ref_rounds)
        print(f"{label:<19}{per:>22.1f}{torch_cols}{ref:>20.0f}{ref / per:>7.0f}x{growth:>12.2f}", flush=True)
    peak = matmul_peak()
    achieved = train_gflops(args.seeds)
    print(f"training step (Neural-ES, {args.seeds} seeds x {ENSEMBLE} members): {achieved:.1f} GFLOP/s; float32 "
          f"matmul peak {peak:.1f} GFLOP/s; {100 * achieved / peak:.0f}% of peak")
    hidden, layer1, step = kernel_ceiling(args.seeds)
    print(f"XLA's kernels at the step's shapes, alone: batched {WIDTH}x{WIDTH} by {WIDTH}x{K} {hidden:.1f} GFLOP/s "
          f"({100 * hidden / peak:.0f}%), layer 1 {layer1:.1f} GFLOP/s ({100 * layer1 / peak:.0f}%); a step at "
          f"those rates {step:.1f} GFLOP/s ({100 * step / peak:.0f}% of peak); the step reaches "
          f"{100 * achieved / step:.0f}% of it")


if __name__ == "__main__":
    main()
