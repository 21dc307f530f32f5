"""The contract every policy keeps, public: :func:`check_policy` (in the spirit of scikit-learn's
``check_estimator``).

The test suite runs it over every registered policy (``tests/test_contract.py``); run it over your own
:class:`~nlbandit.policies.entry.PolicyEntry` before registering it. Each check runs the policy with its
defaults, overridden by the entry's ``test_hypers`` (a small, fast configuration its family declares, e.g. a
warm-up shortened to fit the short horizon), on a small environment that meets its
:class:`~nlbandit.core.types.Requirements` (a Bernoulli logistic bandit, or a heteroscedastic one for a policy
that reads the noise level, assumes a noise bound or the identity link). The policy must:

1. run under ``jit(vmap(scan))`` over seeds with random arm masks and extreme but valid features (scaled by 1e3
   for some instances and by 1e-3 for others, a duplicated arm, an all-zero arm), choosing only available
   arms, with finite results and a finite state in its own float type (:meth:`PolicyContract.masked_run_is_sound`);
2. be deterministic: a resumed run equals the uninterrupted one bit for bit, and each seed's results do not
   depend on which seeds run beside it (:meth:`PolicyContract.resume_and_seed_split_are_bit_identical`);
3. take its params as a record of exactly its traced hyperparameters (:meth:`PolicyContract.params_are_its_record`);
4. run a grid vmapped over its traced hyperparameters, each grid point equal to the plain run (float32
   policies: on 80% of the decisions; :meth:`PolicyContract.grid_equals_plain_runs`);
5. return an int32 arm and a well-formed ``info`` from ``act``: float scalars, and where a probability is given
   (not NaN), one that does not depend on the round's key and matches the frequency of the choice over 4,000 keys
   (:meth:`PolicyContract.probabilities_are_choice_frequencies`);
6. be refused, with a clear error naming the policy and before anything is compiled, on an environment it
   cannot run on (:meth:`PolicyContract.incompatible_environments_are_refused`).

A failed check raises ``AssertionError`` naming the policy and what went wrong.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.hyper import ConfigError
from nlbandit.core.keys import seed_keys
from nlbandit.core.round import round_key
from nlbandit.core.simulate import SimProgress, SimResult, simulate
from nlbandit.core.types import Env, ProblemSpec, Requirements
from nlbandit.envs.registry import make_env
from nlbandit.policies.entry import PolicyEntry
from nlbandit.policies.registry import build_policy, check_policy_env, policy_entry, resolve_policy

D, K, T = 3, 5, 40
"""The sizes of the contract's runs: d, K and the horizon."""
SEEDS = (0, 1, 2, 3)
SCALES = (1e3, 1e-3)
"""The feature scales of the extreme instances."""


def _base_env(need: Requirements) -> Env:
    """A Bernoulli logistic bandit, or a heteroscedastic one (which reveals its noise level and declares a noise
    bound: σ_high, at most the policy's R) for a policy that needs either or the identity link."""
    if need.noise_level or need.noise_bound is not None or need.link == "identity":
        bound = {} if need.noise_bound is None or need.noise_bound >= 1.0 else {
            "sigma_low": min(0.01, need.noise_bound), "sigma_high": need.noise_bound}
        return make_env("heteroscedastic", d=D, k=K, contexts="fixed", link=need.link or "identity", **bound)
    return make_env("logistic", d=D, k=K, theta_norm=2.0)


def masked(env: Env, p: float = 0.5) -> Env:
    """``env`` whose arms are each offered with probability p per round (at least one always)."""

    def observe(state, key, t):
        k_env, k_mask = jax.random.split(key)
        ctx, mask = env.observe(state, k_env, t)
        u = jax.random.uniform(k_mask, (env.spec.k,))
        return ctx, (mask & (u < p)).at[jnp.argmin(jnp.where(mask, u, 2.0))].set(True)

    return env._replace(observe=observe)


def extreme(env: Env) -> Env:
    """``env`` with features scaled by 1e3 or 1e-3 (drawn per instance, so one compiled run covers both),
    arm 1 a copy of arm 0 and the last arm all zeros."""

    def reset(key):
        scale = jnp.asarray(SCALES)[jax.random.bits(jax.random.fold_in(key, 8)) % 2]
        return env.reset(key), scale

    def observe(state, key, t):
        ctx, mask = env.observe(state[0], key, t)
        return ctx.at[1].set(ctx[0]).at[-1].set(0.0) * state[1], mask

    return env._replace(reset=reset, observe=observe, pull=lambda s, *a: env.pull(s[0], *a),
                        mean=lambda s, ctx: env.mean(s[0], ctx))


def _snapshot(prog: SimProgress) -> SimProgress:
    return SimProgress.from_bytes(prog.to_bytes())


class PolicyContract:
    """The contract's checks of one policy entry (module docstring), sharing one masked run of seeds 0–3 in
    two chunks (:attr:`masked_run`)."""

    def __init__(self, entry: PolicyEntry):
        self.entry, self.name = entry, entry.name
        spec = ProblemSpec(D, K, T)
        config = resolve_policy({"name": entry.name, **(entry.test_hypers(spec) if entry.test_hypers else {})},
                                entry.name, entry)
        probe, _ = build_policy({**config, "link": "identity"} if config.get("link") == "env" else config, spec, entry)
        self.base_env = _base_env(probe.meta.requires)
        self.config = check_policy_env(config, self.base_env, T, entry.name, entry=entry)
        self.policy, self.params = build_policy(self.config, spec, entry)
        self.env = masked(extreme(self.base_env))

    @functools.cached_property
    def masked_run(self) -> tuple[SimResult, SimProgress, SimProgress]:
        """Seeds 0–3 on the stressed environment in two chunks: the result, the checkpoint after the first
        chunk, and the final progress (with the policy state)."""
        progress = []
        res = simulate(self.env, self.policy, self.params, T, list(SEEDS), chunk_size=T // 2,
                       on_chunk=lambda p: progress.append(_snapshot(p)))
        return res, progress[0], progress[-1]

    def _state_of_seed(self, index: int) -> Any:
        _, _, final = self.masked_run
        shapes = jax.eval_shape(lambda: self.policy.init(self.params, jax.random.key(0)))
        return jax.tree.unflatten(jax.tree.structure(shapes), [jnp.asarray(a[index]) for a in final.policy_state])

    def masked_run_is_sound(self) -> None:
        """Check 1 (module docstring)."""
        res, _, final = self.masked_run
        env, name = self.env, self.name
        scales = jax.vmap(lambda s: env.reset(seed_keys(s).env_reset)[1])(jnp.asarray(SEEDS, jnp.uint32))
        assert set(np.asarray(scales).tolist()) == set(SCALES), "the seeds must cover both feature scales"

        def masks(seed):
            keys = seed_keys(seed)
            state = env.reset(keys.env_reset)
            return jax.vmap(lambda t: env.observe(state, round_key(keys.env_observe, t), t)[1])(jnp.arange(1, T + 1))

        offered = np.asarray(jax.vmap(masks)(jnp.asarray(SEEDS, jnp.uint32)))
        chosen = np.take_along_axis(offered, res.arms[..., None], axis=-1)[..., 0]
        assert chosen.all(), f"{name} chose an unavailable arm"
        assert np.isfinite(res.cum_regret).all() and np.isfinite(res.cum_reward).all(), f"{name}: non-finite results"
        for leaf in final.policy_state:
            if np.issubdtype(leaf.dtype, np.floating):
                assert np.isfinite(leaf).all(), f"{name}: non-finite policy state (feature scales {SCALES})"
                assert leaf.dtype == np.dtype(self.policy.meta.dtype), \
                    f"{name}: a {leaf.dtype} state leaf in a {self.policy.meta.dtype} policy"

    def resume_and_seed_split_are_bit_identical(self) -> None:
        """Check 2 (module docstring)."""
        res, half, _ = self.masked_run
        resumed = simulate(self.env, self.policy, self.params, T, list(SEEDS), chunk_size=T // 2, resume=half)
        assert np.array_equal(resumed.arms, res.arms), f"{self.name}: a resumed run chose other arms"
        assert np.array_equal(resumed.cum_regret, res.cum_regret), f"{self.name}: a resumed run has another regret"
        order = [2, 3, 0, 1]  # the same seeds in another order: each seed's run depends on that seed alone
        shuffled = simulate(self.env, self.policy, self.params, T, order, chunk_size=T // 2)
        assert np.array_equal(shuffled.arms, res.arms[order]), f"{self.name}: a seed's arms depend on its neighbours"
        assert np.array_equal(shuffled.cum_reward, res.cum_reward[order]), \
            f"{self.name}: a seed's rewards depend on its neighbours"

    def params_are_its_record(self) -> None:
        """Check 3 (module docstring)."""
        declared = {h.name: h for h in self.entry.hypers}
        params = self.params
        assert type(params) is self.policy.meta.params_type, f"{self.name}: params are not its record"
        assert all(f in declared and not declared[f].static for f in params._fields), \
            f"{self.name}: a params field that is not a traced hyperparameter"
        assert all(np.ndim(v) == 0 and np.asarray(v).dtype == np.float64 for v in params), \
            f"{self.name}: params must be float64 scalars"
        try:
            simulate(self.base_env, self.policy, {**params, "not_a_field": 1.0}, T, list(SEEDS))
        except ValueError as e:
            assert "params must have exactly the fields" in str(e), f"{self.name}: unclear error for a wrong field: {e}"
        else:
            raise AssertionError(f"{self.name}: params with an unknown field were accepted")

    def grid_equals_plain_runs(self) -> None:
        """Check 4 (module docstring); nothing to check for a policy without traced hyperparameters."""
        if not self.params:
            return
        res, _, _ = self.masked_run
        stacked = jax.tree.map(lambda v: jnp.stack([v, v]), self.params)
        assert type(stacked) is self.policy.meta.params_type, \
            f"{self.name}: the params record does not survive tree maps"
        grid = simulate(self.env, self.policy, dict(stacked), T, list(SEEDS), chunk_size=T // 2, grid=True)
        for g in range(2):
            if self.policy.meta.dtype == "float32":
                # XLA's CPU kernels may round a float32 product batched over the grid differently from the plain
                # one (seen on an AVX2-only CPU: 14 of 160 neural-greedy decisions parted after near-ties, then
                # rejoined), so float32 (neural) policies must agree on at least 80% of the decisions; float64
                # policies stay bit-identical.
                assert np.mean(grid.arms[g] == res.arms) >= 0.8, f"{self.name}: grid point {g} parts from the plain run"
                continue
            assert np.array_equal(grid.arms[g], res.arms), f"{self.name}: grid point {g} chose other arms"
            np.testing.assert_allclose(grid.cum_regret[g], res.cum_regret, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{self.name}: grid point {g}")

    def probabilities_are_choice_frequencies(self, n: int = 4000) -> None:
        """Check 5 (module docstring)."""
        name, policy, params = self.name, self.policy, self.params
        state = self._state_of_seed(0)
        keys = seed_keys(jnp.uint32(0))
        contexts, _ = self.env.observe(self.env.reset(keys.env_reset), round_key(keys.env_observe, T + 1), T + 1)
        mask = jnp.asarray([True, True, False, True, True])
        arms, info = jax.jit(jax.vmap(lambda k: policy.act(params, state, k, contexts, mask, jnp.asarray(T + 1))))(
            jax.random.split(jax.random.key(3), n))
        arms = np.asarray(arms)
        assert arms.dtype == np.int32, f"{name}: act must return the arm as an int32 scalar, got {arms.dtype}"
        assert np.asarray(mask)[arms].all(), f"{name}: act chose an unavailable arm"
        for field in info:
            assert field.shape == (n,) and jnp.issubdtype(field.dtype, jnp.floating), f"{name}: info must be floats"
        prob = np.asarray(info.probability)
        if np.isnan(prob).all():
            return  # a sampling rule without a closed-form probability
        assert not np.isnan(prob).any() and ((prob > 0) & (prob <= 1 + 1e-12)).all(), f"{name}: bad probabilities"
        total = 0.0
        for arm in np.unique(arms):
            p = prob[arms == arm]
            np.testing.assert_allclose(p, p[0], rtol=1e-12, err_msg=f"{name}: probability depends on the key")
            freq = np.mean(arms == arm)
            assert abs(freq - p[0]) <= 5 * np.sqrt(p[0] * (1 - p[0]) / n) + 1e-3, \
                f"{name}: arm {arm} chosen with frequency {freq}, probability {p[0]}"
            total += p[0]
        assert 0.99 <= total <= 1 + 1e-9, f"{name}: the probabilities of the chosen arms sum to {total}"

    def incompatible_environments_are_refused(self) -> None:
        """Check 6 (module docstring)."""
        name, env = self.name, self.base_env
        other = make_env(env.name if env.name != "heteroscedastic" else "linear", d=D + 1, k=K)
        _refused(lambda: simulate(other, self.policy, self.params, T, list(SEEDS)),
                 f"'{name}' was built for d = {D}, K = {K}", name)
        need = self.policy.meta.requires
        if (need.noise_level or need.reward_range is not None or need.link not in (None, "identity")
                or need.noise_bound is not None):
            bad = make_env("linear", d=D, k=K)  # reveals no noise level, unbounded rewards, identity link
        elif need.fixed_arms:
            bad = make_env("linear", d=D, k=K, contexts="fresh")
        else:
            return  # runs on every environment of these sizes
        _refused(lambda: simulate(bad, self.policy, self.params, T, list(SEEDS)), f"policy '{name}'", name)


def _refused(call, expected: str, name: str) -> None:
    try:
        call()
    except ConfigError as e:
        assert expected in str(e), f"{name}: refused, but the message does not say {expected!r}: {e}"
    else:
        raise AssertionError(f"{name}: an environment it cannot run on was accepted")


CHECKS = ("masked_run_is_sound", "resume_and_seed_split_are_bit_identical", "params_are_its_record",
          "grid_equals_plain_runs", "probabilities_are_choice_frequencies", "incompatible_environments_are_refused")
"""The checks of :class:`PolicyContract`, in the order :func:`check_policy` runs them."""


def check_policy(entry: PolicyEntry | str) -> None:
    """Run every check of the contract (module docstring) on a policy entry, or a registered policy's name;
    ``AssertionError`` naming the policy and the failure, otherwise nothing."""
    contract = PolicyContract(policy_entry(entry) if isinstance(entry, str) else entry)
    for check in CHECKS:
        getattr(contract, check)()
