"""Hyperparameter defaults live in one place: a constructor's signature for what it takes, the Hyper record for
the traced rest (nlbandit.core.hyper)."""

from __future__ import annotations

import inspect

import jax
import pytest

import nlbandit as nb
from nlbandit.core.hyper import SIGNATURE, Hyper, forwards, signature_defaults
from nlbandit.policies.registry import POLICIES, build_policy, resolve_policy


def _shared(spec, depth: int = 3, init: str = "symmetric"):
    return depth, init


@forwards(_shared)
def _outer(spec, m: int = 10, init: str = "standard", **options):
    return m, _shared(spec, init=init, **options)


def test_a_signature_default_is_read_once_and_never_declared_twice():
    m, lr = Hyper("m", SIGNATURE, "size", kind=int, static=True), Hyper("lr", 0.1, "step")
    filled = signature_defaults((m, lr), _outer, "policy 'x'")
    assert [(h.default, h.from_signature) for h in filled] == [(10, True), (0.1, False)]
    assert signature_defaults(filled, _outer, "policy 'x'") == filled  # idempotent
    with pytest.raises(TypeError, match=r"policy 'x': hyperparameter 'm' has a default \(10\) beside the one of "
                                        r"_outer's signature \(10\); declare it once"):
        signature_defaults((Hyper("m", 10, "size", kind=int, static=True),), _outer, "policy 'x'")
    with pytest.raises(TypeError, match="hyperparameter 'lr' takes its default from the signature of _outer, which "
                                        "gives none"):
        signature_defaults((Hyper("lr", SIGNATURE, "step"),), _outer, "policy 'x'")
    with pytest.raises(TypeError, match=r"has a default \(12\) beside the one of _outer's signature \(10\)"):
        signature_defaults((Hyper("m", 12, "size", kind=int, static=True, from_signature=True),), _outer, "p")


def test_forwards_shows_the_defaults_the_constructor_passes_on():
    params = inspect.signature(_outer).parameters
    assert {name: p.default for name, p in params.items() if p.default is not p.empty} == {
        "m": 10, "init": "standard", "depth": 3}  # its own init wins over the shared one's
    assert _outer(None) == (10, (3, "standard"))


@pytest.mark.parametrize("name", sorted(n for n, e in POLICIES.items() if all(
    h.from_signature for h in e.hypers if h.static and h.name not in e.boundary)))
def test_calling_a_constructor_directly_builds_the_registered_default(name):
    # What `make_policy(name, spec)` builds and what `entry.make(spec)` builds agree: same meta, same state shapes
    # (the GLM-ES constructor once used another solver and warm-up than the registry's).
    entry, spec = POLICIES[name], nb.ProblemSpec(3, 5, 200)
    registered, params = build_policy(resolve_policy({"name": name}), spec)
    direct = entry.make(spec)
    assert direct.meta == registered.meta._replace(spec=None, params_type=None)
    shapes = [jax.eval_shape(p.init, params, jax.random.key(0)) for p in (registered, direct)]
    assert jax.tree.structure(shapes[0]) == jax.tree.structure(shapes[1])
    assert jax.tree.leaves(shapes[0]) == jax.tree.leaves(shapes[1])
