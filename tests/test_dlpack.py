"""Zero-copy exchange: ``fl.from_dlpack``, ``Tensor.__dlpack__`` and ``fl.from_numpy`` share memory with NumPy,
PyTorch and JAX on the CPU (the PyTorch and JAX tests run when those are installed), and funclib's buffers leave
read-only wherever the consumer can express it."""

from __future__ import annotations

import numpy as np
import pytest

import funclib as fl
from funclib.errors import DTypeError


def _ptr(t: fl.Tensor) -> int:
    return t.numpy().ctypes.data


# ---------------------------------------------------------------------------------------------------------------
# NumPy


def test_from_numpy_shares_memory_read_only():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = fl.from_numpy(a)
    assert _ptr(t) == a.ctypes.data and a.flags.writeable  # the caller's array is left as it was
    assert not t.numpy().flags.writeable
    a[0, 0] = 42.0
    assert float(t[0, 0]) == 42.0
    assert fl.from_numpy(a[:, 1]).tolist() == [1.0, 4.0]  # strided views are shared too
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)
    np.testing.assert_array_equal(fl.grad(lambda x: fl.sum(x * x))(t).numpy(), 2 * a)


def test_from_numpy_refuses_what_it_cannot_share():
    with pytest.raises(TypeError, match="expected a NumPy ndarray, got list"):
        fl.from_numpy([1.0, 2.0])
    with pytest.raises(ValueError, match="non-native byte order"):
        fl.from_numpy(np.arange(3, dtype=">f4"))
    with pytest.raises(DTypeError, match="from_numpy: dtype object"):
        fl.from_numpy(np.array([None]))


def test_numpy_round_trip_shares_memory():
    t = fl.arange(5.0)
    a = np.from_dlpack(t)
    assert a.ctypes.data == _ptr(t) and not a.flags.writeable
    back = fl.from_dlpack(a)
    assert _ptr(back) == _ptr(t)
    src = np.ones(4)
    assert np.shares_memory(fl.from_dlpack(src).numpy(), src)
    assert not np.shares_memory(fl.from_dlpack(src, copy=True).numpy(), src)


def test_legacy_consumers_get_shared_or_copied_buffers():
    t = fl.arange(4.0) * 2.0
    cap = t.__dlpack__()  # a consumer of DLPack < 1.0: no read-only mark exists there
    assert type(cap).__name__ == "PyCapsule"
    ro = fl.from_numpy(np.arange(3.0))  # memory funclib does not own is copied for such consumers
    ro.__dlpack__()
    with pytest.raises(BufferError, match="before 1.0"):
        ro.__dlpack__(copy=False)


# ---------------------------------------------------------------------------------------------------------------
# PyTorch


def test_torch_round_trip_shares_memory():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    t = fl.asarray(np.arange(8, dtype=np.float32).reshape(2, 4))
    tt = torch.from_dlpack(t)
    assert tt.data_ptr() == _ptr(t) and tt.shape == (2, 4)
    back = fl.from_dlpack(tt)
    assert _ptr(back) == tt.data_ptr()
    src = torch.arange(6, dtype=torch.float64)
    f = fl.from_dlpack(src)
    assert _ptr(f) == src.data_ptr() and not f.numpy().flags.writeable
    src[0] = 9.0  # the Tensor shares the producer's memory, as torch.from_dlpack does
    assert float(f[0]) == 9.0
    for dt in (torch.float16, torch.bool, torch.int8, torch.uint8, torch.uint16, torch.int64, torch.complex64):
        x = torch.ones(3, dtype=dt)
        y = fl.from_dlpack(x)
        assert _ptr(y) == x.data_ptr() and y.dtype.name == str(dt).removeprefix("torch.")
        assert torch.from_dlpack(y).data_ptr() == x.data_ptr()
    # NumPy's DLPack has no bfloat16: a clear error, not a wrong dtype
    with pytest.raises(RuntimeError, match="torch.Tensor through DLPack.*bfloat16"):
        fl.from_dlpack(torch.ones(2, dtype=torch.bfloat16))


# ---------------------------------------------------------------------------------------------------------------
# JAX


def test_jax_round_trip_shares_memory():
    jax = pytest.importorskip("jax", reason="JAX is not installed")
    import jax.numpy as jnp

    j = jnp.arange(1024, dtype=jnp.float32)
    f = fl.from_dlpack(j)
    assert _ptr(f) == j.unsafe_buffer_pointer()
    # JAX reads DLPack < 1.0, which cannot mark memory read-only, so read-only memory goes out as a copy; and
    # XLA copies buffers that are not 64-byte aligned, which NumPy's allocations usually are not
    back = jax.dlpack.from_dlpack(f)
    np.testing.assert_array_equal(np.asarray(back), np.asarray(j))
    assert back.unsafe_buffer_pointer() == j.unsafe_buffer_pointer()  # JAX -> funclib -> JAX: one buffer
    assert jax.dlpack.from_dlpack(fl.from_dlpack(j, copy=True)).unsafe_buffer_pointer() != j.unsafe_buffer_pointer()
    assert jax.dlpack.from_dlpack(f[1:]).unsafe_buffer_pointer() != j.unsafe_buffer_pointer()
    t = fl.asarray(np.arange(10, dtype=np.float32)) * 2.0
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(t)), t.numpy())
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(fl.from_numpy(np.ones(3)))), np.ones(3))
