"""The reference side of ``benchmarks/neural.py`` in PyTorch, written the way the public code is
(``../shared/specs/reference_code.md`` §3.13–3.15): one seed, eager, round after round, on CPU, one thread.

* The network is an ``nn.Module`` of bias-free ``nn.Linear`` layers with the papers' configuration (the
  block-symmetric θ₀ and the √N output factor of ``nlbandit.models.mlp``), so both sides compute the same
  function.
* Training (every round, warm start): a new ``torch.optim.SGD(lr)`` and 100 full-batch steps of
  ``zero_grad``/``backward``/``step`` on the mean squared loss over the whole history plus the
  ½λN‖θ − θ₀‖² regulariser (per observation), the history being grown by ``torch.cat`` (NeuralTS's
  ``learner_diag.py``).
* NeuralUCB's gradient features: one ``backward(retain_graph=True)`` per arm (uclaml ``learner_diag.py``);
  NeuralTS's: all arms in one pass (ZeroWeight uses BackPACK's ``BatchGrad``; here ``torch.func``'s
  ``vmap(grad)``, its equivalent without the extra package). Both keep the diagonal U, updated at
  selection time.
* NPR (Neural-PHE): greedy selection and fresh N(0, σ_R²) noise on every past reward before training
  (yilingjia ``learner_neural_phe.py``). Neural-ES has no public code; its m networks train one after the
  other, each on its own perturbed responses.

Needs the optional ``bench`` extra (``pip install -e '.[bench]'``: torch 2.13.0, of which this machine
holds a CPU build on disk).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch
from torch import nn

torch.set_num_threads(1)  # spec reference_code.md §2 item 11: more threads made these loops 5–20× slower here


class Net(nn.Module):
    """f(x) = √N · W_3 φ(W_2 φ(W_1 x)), bias-free, with the block-symmetric initialisation."""

    def __init__(self, d: int, width: int, generator: torch.Generator):
        super().__init__()
        self.width = width
        self.layers = nn.ModuleList([nn.Linear(d, width, bias=False), nn.Linear(width, width, bias=False),
                                     nn.Linear(width, 1, bias=False)])
        half = width // 2
        with torch.no_grad():
            for layer in self.layers[:2]:
                w = torch.randn(half, layer.in_features // 2, generator=generator) * math.sqrt(4.0 / width)
                layer.weight.copy_(torch.block_diag(w, w))
            w = torch.randn(1, half, generator=generator) * math.sqrt(2.0 / width)
            self.layers[2].weight.copy_(torch.cat([w, -w], dim=1))
        self.theta0 = [p.detach().clone() for p in self.parameters()]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The outputs f(x_i), shape (n,)."""
        h = torch.relu(self.layers[0](x))
        h = torch.relu(self.layers[1](h))
        return math.sqrt(self.width) * self.layers[2](h)[:, 0]

    def fit(self, x: torch.Tensor, y: torch.Tensor, steps: int, lr: float, lam: float) -> None:
        """``steps`` full-batch gradient steps of ½ mean (f − y)² + ½λN‖θ − θ₀‖²/n, warm start."""
        optimizer = torch.optim.SGD(self.parameters(), lr=lr)
        n = x.shape[0]
        for _ in range(steps):
            optimizer.zero_grad()
            loss = 0.5 * torch.mean((self(x) - y) ** 2)
            loss = loss + 0.5 * lam * self.width / n * sum(((p - p0) ** 2).sum()
                                                           for p, p0 in zip(self.parameters(), self.theta0))
            loss.backward()
            optimizer.step()

    def arm_gradients_loop(self, arms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(f(arms), their gradient features (K, p)) by one backward pass per arm (uclaml NeuralUCB)."""
        mu = self(arms)
        grads = []
        for fx in mu:
            self.zero_grad()
            fx.backward(retain_graph=True)
            grads.append(torch.cat([p.grad.flatten().detach() for p in self.parameters()]))
        return mu.detach(), torch.stack(grads)

    def arm_gradients_batched(self, arms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(f(arms), their gradient features (K, p)) in one vectorised pass (NeuralTS's BackPACK step)."""
        params = {k: v.detach() for k, v in self.named_parameters()}

        def f(p, x):
            return torch.func.functional_call(self, p, (x[None],))[0]

        grads = torch.func.vmap(torch.func.grad(f), in_dims=(None, 0))(params, arms)
        with torch.no_grad():
            mu = self(arms)
        return mu, torch.cat([g.flatten(1) for g in grads.values()], dim=1)


def seconds_per_round(name: str, *, d: int, k: int, width: int, steps: int, lr: float, lam: float, nu: float,
                      sigma_r: float, m: int, history: int, rounds: int) -> float:
    """Seconds per round of ``name`` (``neural-ucb|ts|es|greedy|phe``) once ``history`` observations exist,
    averaged over ``rounds`` rounds of select, observe, train (after one untimed round)."""
    gen = torch.Generator().manual_seed(0)
    arms = torch.randn(k, d, generator=gen)
    arms = arms / arms.norm(dim=1, keepdim=True)
    nets = [Net(d, width, torch.Generator().manual_seed(1 + j)) for j in range(m if name == "neural-es" else 1)]
    u = torch.full((sum(p.numel() for p in nets[0].parameters()),), lam)
    xs = arms[torch.randint(0, k, (history,), generator=gen)]
    ys = 0.2 + 0.5 * torch.randn(history, len(nets), generator=gen)
    rng = np.random.default_rng(0)
    for i in range(rounds + 1):  # round 0 warms PyTorch up and is not timed
        if i == 1:
            start = time.perf_counter()
        if name in ("neural-ucb", "neural-ts"):
            gradients = nets[0].arm_gradients_loop if name == "neural-ucb" else nets[0].arm_gradients_batched
            mu, g = gradients(arms)
            sigma = torch.sqrt(lam * nu * torch.sum(g * g / u, dim=1))
            scores = mu + sigma if name == "neural-ucb" else torch.normal(mu, sigma)
            arm = int(torch.argmax(scores))
            u += g[arm] ** 2
        else:
            net = nets[int(rng.integers(len(nets)))]
            with torch.no_grad():
                arm = int(torch.argmax(net(arms)))
        xs = torch.cat([xs, arms[arm:arm + 1]])
        ys = torch.cat([ys, 0.2 + 0.5 * torch.randn(1, ys.shape[1], generator=gen)])
        for j, net in enumerate(nets):
            y = ys[:, j] + (sigma_r * torch.randn(ys.shape[0], generator=gen) if name == "neural-phe" else 0.0)
            net.fit(xs, y, steps, lr, lam)
    return (time.perf_counter() - start) / rounds
