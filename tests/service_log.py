"""A service's decision log written over HTTP for the off-policy evaluation tests (tests/test_evaluate.py,
tests/test_evaluate_loop.py): a logging agent of a service state folder plays a linear bandit with fresh
contexts, each decision and reward a request to the server (starlette's TestClient), each reward given back at
once."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from starlette.testclient import TestClient

import nlbandit as nb
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import round_key
from nlbandit.service.app import agent_config
from nlbandit.service.fleet import Fleet
from nlbandit.service.server import create_app

D, K, NOISE = 3, 4, 0.3
"""The logged bandit: d, K and the reward noise's standard deviation."""


def write_log(folder, rounds: int, *, env_seed: int, logger_seed: int, start: int = 1, logger: str = "uniform",
              **hyper) -> np.ndarray:
    """Serve rounds ``start..start+rounds-1`` of the instance ``env_seed`` of the linear bandit by the agent
    ``default`` of the service folder ``folder`` (created running ``logger`` with seed ``logger_seed`` and
    ``hyper``, or continued); return the (rounds, K) mean rewards of the rounds' arms."""
    env = nb.make_env("linear", d=D, k=K, contexts="fresh", noise_std=NOISE)
    keys = seed_keys(jnp.uint32(env_seed))
    state = env.reset(keys.env_reset)
    means = []
    fleet = Fleet.open(folder, {"default": agent_config(logger, D, K, seed=logger_seed, **hyper)})
    with TestClient(create_app(fleet)) as c:
        for t in range(start, start + rounds):
            x, _ = env.observe(state, round_key(keys.env_observe, t), t)
            d = c.post("/decide", json={"contexts": np.asarray(x).tolist()}).json()
            reward = float(env.pull(state, round_key(keys.env_pull, t), t, x, d["arm"]).reward)
            assert c.post("/reward", json={"event_id": d["event_id"], "value": reward}).status_code == 200
            means.append(np.asarray(env.mean(state, x)))
    return np.array(means)
