"""Collectives over named vmap axes: pytrees, tuples of names, chunked axes, and bodies of jit, loops and rules.

Chunking must never change a result: every collective is checked with ``chunk_size`` (dividing the batch or not)
and ``max_bytes`` against the unchunked vmap and NumPy, eagerly, under ``grad`` (inside and outside the vmap) and
under ``jit`` (inside and outside).
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from funclib.transforms.batching import ChunkedCollectiveError
from hypothesis import given
from hypothesis import strategies as st

import funclib as fl
from funclib.primitives.collectives import UnboundAxisError
from funclib.testing import assert_trees_allclose

RNG = np.random.default_rng(0)
X = fl.asarray(RNG.normal(size=(7, 3)))


def every_collective(v):
    """One lane: each collective over "i", on a pytree, and a value that depends on all of them."""
    s = fl.psum({"v": v, "sq": v * v}, "i")
    i = fl.axis_index("i")
    g = fl.all_gather(v, "i")
    out = {
        "psum": s["v"],
        "pmean": fl.pmean(v * v, "i"),
        "pmax": fl.pmax(v, "i"),
        "pmin": fl.pmin(v, "i"),
        "gather": g,
        "index": i,
    }
    out["mixed"] = v / s["v"] + s["sq"] * g.sum(0) * fl.astype(i, v.dtype) + fl.pmax(fl.pmin(v, "i") * v, "i")
    return out


def reference(x):
    x = np.asarray(x)
    n = x.shape[0]
    s, sq = x.sum(0), (x * x).sum(0)
    idx = np.arange(n)
    pmin = x.min(0)
    mixed = x / s + sq * x.sum(0) * idx[:, None] + (pmin * x).max(0)
    b = lambda a: np.broadcast_to(a, x.shape)  # noqa: E731
    return {
        "psum": b(s),
        "pmean": b(sq / n),
        "pmax": b(x.max(0)),
        "pmin": b(pmin),
        "gather": np.broadcast_to(x, (n,) + x.shape),
        "index": idx,
        "mixed": mixed,
    }


def close(got, want, tol=1e-12):
    assert_trees_allclose(got, want, rtol=tol, atol=tol)


# --- chunked axes -------------------------------------------------------------------------------------------------


def test_the_reported_chunked_psum():
    got = fl.vmap(lambda v: fl.psum(v, "i"), axis_name="i", chunk_size=2)(fl.arange(6.0))
    np.testing.assert_array_equal(got.numpy(), [15.0] * 6)
    got = fl.vmap(lambda v: (fl.pmean(v, "i"), fl.axis_index("i"), fl.all_gather(v, "i")), axis_name="i", chunk_size=2)
    mean, index, gathered = got(fl.arange(6.0))
    np.testing.assert_array_equal(mean.numpy(), [2.5] * 6)
    np.testing.assert_array_equal(index.numpy(), np.arange(6))
    np.testing.assert_array_equal(gathered.numpy(), np.tile(np.arange(6.0), (6, 1)))


@pytest.mark.parametrize("chunk", [1, 2, 3, 6, 7, 10])
def test_every_collective_over_a_chunked_axis(chunk):
    want = reference(X)
    close(fl.vmap(every_collective, axis_name="i")(X), want)
    close(fl.vmap(every_collective, axis_name="i", chunk_size=chunk)(X), want)
    close(fl.jit(fl.vmap(every_collective, axis_name="i", chunk_size=chunk))(X), want)
    close(fl.vmap(fl.jit(every_collective), axis_name="i", chunk_size=chunk)(X), want)


def test_max_bytes_chunks_collectives_too():
    per_lane = fl.transforms.batching.lane_bytes(
        every_collective, [X], [0], fl.tree.structure(((X,), {})), fl.transforms.batching.NamedAxis("i", 7)
    )
    for budget in (per_lane, 2 * per_lane, 3 * per_lane):
        close(fl.vmap(every_collective, axis_name="i", max_bytes=budget)(X), reference(X))


def _loss(x, **kw):
    out = fl.vmap(every_collective, axis_name="i", **kw)(x)
    return sum(fl.sum(v * 1.0) for k, v in out.items() if k != "index")


def test_chunked_collectives_under_grad_and_jit_outside():
    want = fl.grad(_loss)(X)
    for chunk in (1, 2, 3, 7):
        close(fl.grad(lambda x, c=chunk: _loss(x, chunk_size=c))(X), want, 1e-10)
    close(fl.jit(fl.grad(lambda x: _loss(x, chunk_size=3)))(X), want, 1e-10)
    t = fl.asarray(RNG.normal(size=X.shape))
    close(fl.jvp(lambda x: _loss(x, chunk_size=2), (X,), (t,)), fl.jvp(_loss, (X,), (t,)), 1e-10)


def test_chunked_collectives_under_grad_inside_the_vmap():
    # per-lane gradients whose backward pass binds collectives (psum's transpose is a psum)
    def per_lane(v, w):
        return fl.sum(v / fl.psum(v, "i")) * w + fl.pmax(v, "i").sum() + fl.all_gather(v * w, "i")[1].sum()

    w = fl.asarray(np.float64(2.0))
    grads = lambda **kw: fl.vmap(fl.grad(per_lane, argnums=(0, 1)), in_axes=(0, None), axis_name="i", **kw)  # noqa: E731
    want = grads()(X, w)
    for chunk in (1, 3, 4):
        close(grads(chunk_size=chunk)(X, w), want, 1e-10)
        close(fl.jit(grads(chunk_size=chunk))(X, w), want, 1e-10)


@given(
    n=st.integers(1, 9),
    chunk=st.integers(1, 10),
    seed=st.integers(0, 2**16),
)
def test_chunking_never_changes_a_result(n, chunk, seed):
    x = fl.asarray(np.random.default_rng(seed).normal(size=(n, 2)))
    close(fl.vmap(every_collective, axis_name="i", chunk_size=chunk)(x), reference(x), 1e-11)


@pytest.mark.parametrize("dtype", [fl.bool, fl.uint8, fl.int32, fl.float32, fl.complex128])
def test_chunked_collectives_at_every_dtype(dtype):
    values = np.array([3, 0, 2, 250, 1, 7, 0], np.int64)
    x = fl.asarray(values).astype(dtype)
    ops = [fl.psum, fl.all_gather] + ([fl.pmax, fl.pmin] if dtype != fl.complex128 else [])
    for op in ops:
        want = fl.vmap(lambda v, op=op: op(v, "i"), axis_name="i")(x)
        for chunk in (2, 3):
            got = fl.vmap(lambda v, op=op: op(v, "i"), axis_name="i", chunk_size=chunk)(x)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=f"{op.__name__} at {dtype}")


def test_chunks_with_collectives_keep_memory_bounded():
    """The work before a collective is recomputed per chunk, not stored: peak memory follows the chunk."""

    def lane(v):
        big = fl.outer(v, v)  # 4 MB per lane, gone before the psum
        return fl.psum(fl.sum(fl.tanh(big)), "i") * v

    x = fl.asarray(RNG.normal(size=(32, 700)))

    def peak(**kw):
        tracemalloc.start()
        out = fl.vmap(lane, axis_name="i", **kw)(x)
        _, p = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return out, p

    full, p_full = peak()
    chunked, p_chunk = peak(chunk_size=4)
    close(chunked, full, 1e-10)
    assert p_chunk * 4 <= p_full, (p_chunk, p_full)


def test_collectives_inside_loops_under_a_chunked_axis_raise_a_clear_error():
    body = lambda v: fl.scan(lambda c, _: (c + fl.psum(v, "i"), None), v, None, length=2)[0]  # noqa: E731
    x = fl.arange(6.0)
    np.testing.assert_allclose(fl.vmap(body, axis_name="i")(x).numpy(), x.numpy() + 30)
    for f in (body, fl.jit(body)):
        with pytest.raises(ChunkedCollectiveError, match=r"psum over axis 'i' inside a loop.*Remove chunk_size"):
            fl.vmap(f, axis_name="i", chunk_size=2)(x)


def test_a_function_that_binds_different_collectives_per_run_is_an_error():
    calls = []

    def lane(v):
        calls.append(1)
        return fl.psum(v, "i") if len(calls) < 3 else fl.pmax(v, "i")

    with pytest.raises(ChunkedCollectiveError, match="same collectives in the same order"):
        fl.vmap(lane, axis_name="i", chunk_size=2)(fl.arange(6.0))


def test_chunks_without_collectives_run_once():
    calls = []

    def lane(v):
        calls.append(1)
        return v * 2

    fl.vmap(lane, axis_name="i", chunk_size=2)(fl.arange(6.0))
    assert len(calls) == 3
    calls.clear()
    fl.vmap(lambda v: lane(v) + fl.psum(v, "i"), axis_name="i", chunk_size=2)(fl.arange(6.0))
    assert len(calls) == 6  # one run to resolve the psum, one to finish


# --- pytrees and tuples of axis names -----------------------------------------------------------------------------


def test_collectives_take_pytrees():
    x = fl.arange(4.0)
    tree = lambda v: {"a": v, "b": [v * 2, (v, 1.0)]}  # noqa: E731
    got = fl.vmap(lambda v: fl.psum(tree(v), "i"), axis_name="i")(x)
    close(got, {"a": fl.full((4,), 6.0), "b": [fl.full((4,), 12.0), (fl.full((4,), 6.0), fl.full((4,), 4.0))]})
    three = lambda v: (fl.pmean(tree(v), "i"), fl.pmax(tree(v), "i"), fl.all_gather(tree(v), "i"))  # noqa: E731
    got = fl.vmap(three, axis_name="i")(x)
    assert got[0]["b"][0].shape == (4,) and float(got[0]["b"][0][0]) == 3.0
    assert float(got[1]["b"][1][0][0]) == 3.0
    assert got[2]["b"][0].shape == (4, 4)
    assert fl.vmap(lambda v: fl.psum({}, "i"), axis_name="i")(x) == {}


def test_tuples_of_axis_names_reduce_over_nested_vmaps():
    y = RNG.normal(size=(3, 4))

    def lane(v):
        return {
            "psum": fl.psum(v, ("i", "j")),
            "psum_ji": fl.psum(v, ("j", "i")),
            "pmean": fl.pmean(v, ("i", "j")),
            "pmax": fl.pmax(v, ("j", "i")),
            "pmin": fl.pmin(v, ["i", "j"]),
            "gather": fl.all_gather(v, ("i", "j")),
            "gather_ji": fl.all_gather(v, ("j", "i")),
            "index": fl.axis_index(("i", "j")),
            "index_ji": fl.axis_index(("j", "i")),
        }

    b = lambda a: np.broadcast_to(a, y.shape)  # noqa: E731
    want = {
        "psum": b(y.sum()),
        "psum_ji": b(y.sum()),
        "pmean": b(y.mean()),
        "pmax": b(y.max()),
        "pmin": b(y.min()),
        "gather": np.broadcast_to(y.ravel(), y.shape + (12,)),
        "gather_ji": np.broadcast_to(y.T.ravel(), y.shape + (12,)),
        "index": np.arange(12).reshape(3, 4),
        "index_ji": np.arange(12).reshape(4, 3).T,
    }
    nested = fl.vmap(fl.vmap(lane, axis_name="j"), axis_name="i")
    close(nested(fl.asarray(y)), want)
    close(fl.jit(nested)(fl.asarray(y)), want)
    # the other nesting order: "j" outer
    swapped = fl.vmap(fl.vmap(lane, axis_name="i"), axis_name="j", in_axes=1, out_axes=1)
    close(swapped(fl.asarray(y)), want)
    for ci, cj in ((2, None), (None, 3), (2, 3), (1, 1)):
        chunked = fl.vmap(fl.vmap(lane, axis_name="j", chunk_size=cj), axis_name="i", chunk_size=ci)
        close(chunked(fl.asarray(y)), want)


def test_tuple_names_under_grad():
    y = fl.asarray(RNG.normal(size=(3, 4)))

    def loss(y):
        lanes = fl.vmap(fl.vmap(lambda v: (v / fl.psum(v * v, ("i", "j"))) ** 2, axis_name="j"), axis_name="i")
        return fl.sum(lanes(y))

    close(fl.grad(loss)(y), fl.grad(lambda y: fl.sum((y / fl.sum(y * y)) ** 2))(y), 1e-10)


def test_collectives_over_another_axis_keep_the_batch_axis_in_place():
    """all_gather over an outer axis, from inside an inner vmap, adds its axis in front of the inner one."""
    y = RNG.normal(size=(2, 3))
    got = fl.vmap(fl.vmap(lambda v: fl.all_gather(v, "i"), axis_name="j"), axis_name="i")(fl.asarray(y))
    np.testing.assert_array_equal(got.numpy(), np.broadcast_to(y.T[None], (2, 3, 2)))
    got = fl.vmap(fl.vmap(lambda v: fl.axis_index("i") * 10 + fl.axis_index("j"), axis_name="j"), axis_name="i")
    np.testing.assert_array_equal(got(fl.asarray(y)).numpy(), [[0, 1, 2], [10, 11, 12]])


def test_axis_name_errors():
    x = fl.arange(3.0)
    with pytest.raises(UnboundAxisError, match="axis_name='k'"):
        fl.vmap(lambda v: fl.psum(v, ("i", "k")), axis_name="i")(x)
    with pytest.raises(UnboundAxisError, match="axis_name='nope'"):
        fl.psum(x, "nope")
    with pytest.raises(ValueError, match="names an axis twice"):
        fl.vmap(lambda v: fl.psum(v, ("i", "i")), axis_name="i")(x)
    with pytest.raises(ValueError, match="axis_name is empty"):
        fl.vmap(lambda v: fl.psum(v, ()), axis_name="i")(x)
    with pytest.raises(TypeError, match="one name"):
        fl.vmap(lambda v: v, axis_name=("i", "j"))(x)
    with pytest.raises(ValueError, match="axis_size=4"):
        fl.vmap(lambda v: fl.all_gather(v, "i", axis_size=4), axis_name="i")(x)


# --- collectives in the bodies of jit, control flow and custom rules under a named vmap ------------------------


def test_collectives_inside_jit_loops_and_custom_rules():
    x = fl.arange(1.0, 7.0)
    total = float(x.sum())
    np.testing.assert_allclose(fl.vmap(fl.jit(lambda v: fl.psum(v, "i")), axis_name="i")(x).numpy(), total)
    scan = lambda v: fl.scan(lambda c, _: (c + fl.pmean(v, "i"), None), v, None, length=2)[0]  # noqa: E731
    np.testing.assert_allclose(fl.vmap(scan, axis_name="i")(x).numpy(), x.numpy() + 7.0)
    cond = lambda v: fl.cond(v > 3, lambda a: fl.psum(a, "i"), lambda a: a, v)  # noqa: E731
    np.testing.assert_allclose(fl.vmap(cond, axis_name="i")(x).numpy(), np.where(x.numpy() > 3, total, x.numpy()))
    loop = lambda v: fl.while_loop(lambda c: c[1] < 2, lambda c: (c[0] + fl.psum(v, "i"), c[1] + 1), (v, 0))[0]  # noqa: E731
    np.testing.assert_allclose(fl.vmap(loop, axis_name="i")(x).numpy(), x.numpy() + 2 * total)

    @fl.custom_vjp
    def normalize(v):
        return v / fl.psum(v, "i")

    normalize.defvjp(lambda v: (normalize(v), v), lambda v, g: (g / fl.psum(v, "i"),))
    np.testing.assert_allclose(fl.vmap(normalize, axis_name="i")(x).numpy(), x.numpy() / total)
    np.testing.assert_allclose(fl.vmap(fl.grad(normalize), axis_name="i")(x).numpy(), 1 / total)
    with pytest.raises(ChunkedCollectiveError, match="psum over axis 'i'"):
        fl.vmap(normalize, axis_name="i", chunk_size=2)(x)
    # with no batched operand, a jitted body's collective still sees the axis
    ones = fl.vmap(lambda: fl.jit(lambda: fl.psum(fl.ones(()), "i"))(), axis_name="i", axis_size=3)()
    np.testing.assert_array_equal(ones.numpy(), [3.0, 3.0, 3.0])


def test_a_jitted_collective_suits_any_batch_size():
    mean = fl.jit(lambda v: fl.pmean(v, "i"))
    for n in (3, 4):
        np.testing.assert_allclose(fl.vmap(mean, axis_name="i")(fl.arange(float(n))).numpy(), (n - 1) / 2)
    # all_gather's output shape is the axis size: the enclosing axes' sizes are part of jit's cache key
    gather = fl.jit(lambda v: fl.all_gather(v, "i"))
    for n in (3, 4, 3):
        out = fl.vmap(gather, axis_name="i")(fl.arange(float(n)))
        np.testing.assert_array_equal(out.numpy(), np.tile(np.arange(float(n)), (n, 1)))
    assert gather.num_traces == 2
    assert "vmap axis 'i'" in str(gather._history[-1])
