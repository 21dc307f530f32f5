"""The anytime wrapper: the doubling trick with full restarts (Sun, Wang & Xu 2025, §6 and App. E).

``anytime(base, t0, b, horizon, schedule)`` runs ``base`` in epochs ending at T_i = ⌊T₀ bⁱ⌋
(:func:`nlbandit.theory.doubling_schedule`). At the end of every epoch the base policy is thrown away
and re-initialised with fresh randomness: new models, no data, no perturbations, and a new warm-up
(spec 003 §2.6; U7 default: the warm-up is re-run in every epoch and cut at the epoch's end; U9: new
initial state). Inside an epoch the base policy sees the round counter restarted at 1.

``warmup_scope="once"`` is the spec's alternative to U7 for bases with a warm-up plan (GLM policies):
the warm-up is played once, and every later epoch restarts from the base state reached at the end of
that warm-up (its observations, their perturbations and the models fitted on them), discarding every
observation made after it; the restarted base's round counter continues after the warm-up. Epoch ends
that fall inside the warm-up advance the epoch (and its schedule) without a restart. Two consequences
differ from a full restart (U9): every epoch reuses the warm-up's perturbations rather than drawing
fresh ones, and with ``schedule="sun2025"`` those perturbations keep the σ_R of the epoch(s) in which
the warm-up was played (0.09–0.12 for T₀ = 100), while later observations get the epoch's own σ_R.

Per-epoch schedules of the T-dependent hyperparameters, computed from the *planned* epoch length τ_i
(even when the horizon cuts the last epoch short):

* ``none``: the base hyperparameters in every epoch;
* ``sun2025``: m_i = max(1, ⌈2 ln τ_i⌉) models and σ_R,i = 0.02 ln τ_i (spec 003 §4.3, U8), for
  ensemble policies. The base is built with the largest m_i and the draw j_t is restricted to the
  first m_i models (the ensemble policies' traced ``m_used``), so every epoch shares one compiled shape.

The restart is a ``lax.cond`` on the round counter alone, which is the same for every seed and grid
point, so under ``vmap`` the re-initialisation (including a G-optimal design) runs only at the
boundaries.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from nlbandit.core.hyper import ConfigError, Hyper
from nlbandit.core.types import Policy, ProblemSpec, healthy
from nlbandit.policies.entry import PolicyEntry
from nlbandit.theory import doubling_schedule, epoch_models, epoch_sigma_r

NUMERICS = 1
"""Version of the numbers the doubling-trick wrapper computes: bump it when they change on purpose (their golden
fingerprints fail until it is, tests/fingerprints.py); part of every stored run's key (:mod:`nlbandit.provenance`)."""


SCHEDULES = ("none", "sun2025")
WARMUP_SCOPES = ("epoch", "once")


class AnytimeState(NamedTuple):
    """Wrapper state: the current epoch, the offset of the base's round counter, the base state, the
    arm set of round 1 (to prepare a restarted base), and with ``warmup_scope="once"`` the base state at
    the end of the warm-up (``None`` otherwise)."""

    epoch: jax.Array
    offset: jax.Array
    base: object
    arms: jax.Array
    mask: jax.Array
    resume: object = None

    def healthy(self) -> jax.Array:
        """The base state's check (:func:`~nlbandit.core.types.healthy`)."""
        return healthy(self.base)


def epoch_table(t0: int, b: float, horizon: int, schedule: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(last round of every epoch but the final one, {hyperparameter: per-epoch values})."""
    epochs = doubling_schedule(t0, b, horizon)
    ends = np.array([e.end for e in epochs[:-1]], np.int64)
    if schedule == "none":
        return ends, {}
    planned = [e.planned for e in epochs]
    return ends, {
        "m_used": np.array([epoch_models(p) for p in planned], np.float64),
        "sigma_r": np.array([epoch_sigma_r(p) for p in planned], np.float64),
    }


def _select(pred: jax.Array, new, old):
    """``new`` where ``pred`` else ``old``, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), new, old)


def _epoch_params(t0: int, b: float, horizon: int, schedule: str, dtype: str):
    """``epoch_params(params, epoch)``: the base's params in ``epoch`` (the schedule's values in the base's
    float type; ``params`` a record of a registered policy or the dict of a hand-built one)."""
    table = {name: jnp.asarray(v, dtype) for name, v in epoch_table(t0, b, horizon, schedule)[1].items()}

    def epoch_params(params, epoch):
        values = {name: v[epoch] for name, v in table.items()}
        return params._replace(**values) if hasattr(params, "_replace") else {**params, **values}

    return epoch_params


def anytime(base: Policy, t0: int, b: float, horizon: int, schedule: str = "none", k: int = 1,
            d: int = 1, warmup_scope: str = "epoch") -> Policy:
    """Wrap ``base`` in the doubling trick (module docstring); ``k``, ``d`` size the stored arm set.
    ``warmup_scope="once"`` needs a base whose state has a ``warmup`` (:class:`~nlbandit.policies.warmup.Warmup`)."""
    once = warmup_scope == "once"
    ends_j = jnp.asarray(epoch_table(t0, b, horizon, schedule)[0])
    epoch_params = _epoch_params(t0, b, horizon, schedule, base.meta.dtype)

    def fresh(params, epoch, key, arms, mask):
        k_init, k_prep = jax.random.split(key)
        p = epoch_params(params, epoch)
        state = base.init(p, k_init)
        return state if base.prepare is None else base.prepare(p, state, k_prep, arms, mask)

    def init(params, key):
        zero = jnp.zeros((), jnp.int32)
        state = base.init(epoch_params(params, zero), key)
        return AnytimeState(zero, zero, state, jnp.zeros((k, d), base.meta.dtype), jnp.ones((k,), bool),
                            state if once else None)

    def prepare(params, state, key, arms, mask):
        arms = arms.astype(base.meta.dtype)
        return state._replace(base=fresh(params, state.epoch, key, arms, mask), arms=arms, mask=mask)

    def act(params, state, key, contexts, mask, t):
        return base.act(epoch_params(params, state.epoch), state.base, key, contexts, mask, t - state.offset)

    def update(params, state, key, contexts, arm, feedback, t):
        k_update, k_restart = jax.random.split(key)
        local = t - state.offset
        new = base.update(epoch_params(params, state.epoch), state.base, k_update, contexts, arm, feedback, local)
        state = state._replace(base=new)
        if once:  # the first time the base's warm-up is complete (the counter never returns to its length);
            # the warm-up ends by round `capacity` (t is shared by all seeds, so this is a real branch)
            state = jax.lax.cond(t <= new.warmup.plan.shape[0],
                                 lambda s: s._replace(resume=_select(local == new.warmup.length, new, s.resume)),
                                 lambda s: s, state)

        def restart(s):
            epoch = s.epoch + 1
            if not once:
                return s._replace(epoch=epoch, offset=t.astype(jnp.int32),
                                  base=fresh(params, epoch, k_restart, s.arms, s.mask))
            length = s.base.warmup.length
            done = local >= length  # otherwise the warm-up is still running: no restart
            return s._replace(epoch=epoch, offset=jnp.where(done, t - length, s.offset).astype(jnp.int32),
                              base=_select(done, s.resume, s.base))

        return jax.lax.cond(jnp.any(ends_j == t), restart, lambda s: s, state)

    return Policy(init, act, update, base.meta._replace(name=base.meta.name + SUFFIX), prepare)


SUFFIX = "@anytime"
_HYPERS = (
    Hyper("t0", 100, "T₀: the first epoch's length (epochs end at ⌊T₀ bⁱ⌋)", kind=int, static=True, low=1),
    Hyper("b", 2.618033988749895, "growth factor b of the epochs ((3+√5)/2 is optimal)", static=True, low=1.0,
          low_open=True),
    Hyper("schedule", "none", "per-epoch hyperparameters: none, or sun2025 (m = ⌈2 ln τ_i⌉, σ_R = 0.02 ln τ_i)",
          kind=str, static=True, choices=SCHEDULES),
    Hyper("warmup_scope", "epoch", "epoch: a new warm-up in every epoch (spec 003 U7 default); once: one warm-up, "
          "every later epoch restarts from the state at its end", kind=str, static=True, choices=WARMUP_SCOPES),
)


def anytime_entry(base: PolicyEntry) -> PolicyEntry:
    """``<base>@anytime``: the registered policy ``base`` under the doubling trick (module docstring)."""
    names = {h.name for h in base.hypers}

    def base_static(spec: ProblemSpec, t0: int, b: float, schedule: str, static: dict[str, Any]) -> dict[str, Any]:
        if schedule == "sun2025":  # the base holds the largest ensemble of any epoch; `m` is ignored
            return {**static, "m": int(epoch_table(t0, b, spec.horizon, schedule)[1]["m_used"].max())}
        return static

    def make(spec: ProblemSpec, t0: int, b: float, schedule: str, warmup_scope: str, **static: Any) -> Policy:
        return anytime(base.make(spec, **base_static(spec, t0, b, schedule, static)), t0, b, spec.horizon, schedule,
                       spec.k, spec.d, warmup_scope)

    def resample(spec: ProblemSpec, t0: int, b: float, schedule: str, warmup_scope: str, **static: Any):
        static = base_static(spec, t0, b, schedule, static)
        redraw = base.resample(spec, **static)
        epoch_params = _epoch_params(t0, b, spec.horizon, schedule, base.make(spec, **static).meta.dtype)

        def resample_epoch(params, state, key):
            return state._replace(base=redraw(epoch_params(params, state.epoch), state.base, key))

        return resample_epoch

    def finalize(values: dict[str, Any]) -> dict[str, Any]:
        if values["schedule"] == "sun2025" and not {"m", "sigma_r"} <= names:
            raise ConfigError(f"field 'schedule' = 'sun2025' sets m and σ_R per epoch and needs an ensemble "
                              f"policy (lin-es, glm-es), not '{base.name}'")
        if values["schedule"] == "sun2025":  # m_used is set per epoch; the base's m (and m_used) are unused
            values = {**values, "m_used": None}
        values = base.finalize(values)
        if values["t0"] * (values["b"] - 1.0) <= 1.0:
            raise ConfigError(f"fields 't0' and 'b' must satisfy t0·(b − 1) > 1, got {values['t0']}·"
                              f"({values['b']:g} − 1)")
        if values["warmup_scope"] == "once" and values.get("warmup", "none") == "none":
            raise ConfigError("field 'warmup_scope' = 'once' needs a base policy with a warm-up (field 'warmup' "
                              "other than 'none')")
        return values

    return PolicyEntry(base.name + SUFFIX, make, base.hypers + _HYPERS,
                       f"{base.doc}, anytime (doubling trick, full restarts; schedule sun2025 overrides m and "
                       "σ_R)", finalize, base.check, base.adapt, base.boundary, base.modules(),
                       lambda spec: {**(base.test_hypers(spec) if base.test_hypers else {}), "t0": 10},
                       draws_in_update=base.draws_in_update, resample=None if base.resample is None else resample)
