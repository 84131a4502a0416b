"""Functional random numbers: splittable Threefry-2x32 keys, samplers, a key-reuse check, a seeded global key.

A key is a uint32 tensor of shape ``(2,)``. Samplers are pure functions of a key: the same key gives the same
numbers eagerly, under ``fl.jit`` and in every lane of ``fl.vmap``. Derive fresh keys with ``split`` or
``fold_in`` and never feed one key to two samplers (the key-reuse check warns when a traced function does).

>>> key = fl.random.key(0)
>>> k1, k2 = fl.random.split(key)
>>> x = fl.random.normal(k1, (3,))
>>> i = fl.random.randint(k2, (3,), 0, 10)

The stateful functions (``manual_seed``, ``rand``, ``randn``, ``randperm``, ``rand_like``, ``randn_like``,
``global_randint``) draw from a global key for PyTorch-style code. They refuse to run under a transform, where
they would freeze one draw into the traced function.
"""

from __future__ import annotations

import math
import operator
import os
import threading
import warnings
import weakref
from collections.abc import Sequence

import numpy as np

from . import dtypes, ops
from .checks import check_int, describe
from .core import Tensor, Tracer, _state, _wrap, current_trace
from .errors import DTypeError, FunclibError, ShapeError
from .kernels import threefry as _tf
from .primitives._util import broadcast_shapes
from .primitives.elementwise import convert as _convert
from .primitives.random_bits import (
    random_bits_p,
    random_gamma_p,
    random_normal_p,
    random_poisson_p,
    random_standard_p,
    random_truncated_normal_p,
    random_uniform_p,
    threefry2x32_p,
)

__all__ = [
    "KeyReuseError",
    "KeyReuseWarning",
    "GlobalRandomStateError",
    "key",
    "split",
    "fold_in",
    "key_data",
    "wrap_key_data",
    "threefry_2x32",
    "set_key_reuse_check",
    "bits",
    "uniform",
    "normal",
    "truncated_normal",
    "bernoulli",
    "randint",
    "categorical",
    "choice",
    "permutation",
    "gumbel",
    "exponential",
    "laplace",
    "logistic",
    "gamma",
    "beta",
    "dirichlet",
    "poisson",
    "multivariate_normal",
    "orthogonal",
    "manual_seed",
    "initial_seed",
    "get_rng_state",
    "set_rng_state",
    "rand",
    "randn",
    "global_randint",
    "randperm",
    "rand_like",
    "randn_like",
]

Shape = int | Sequence[int]
_U32 = dtypes.uint32
_MASK32 = 0xFFFFFFFF


class KeyReuseError(FunclibError, ValueError):
    """A traced function passed one key to two random functions (raised when the check is set to "error")."""


class KeyReuseWarning(UserWarning):
    """A traced function passed one key to two random functions."""


class GlobalRandomStateError(FunclibError, RuntimeError):
    """A stateful random function (``fl.randn``, ...) was called under a transform."""


# ----------------------------------------------------------------------------------------------------
# Keys


def key(seed: int | Tensor) -> Tensor:
    """A new key from an integer seed (a Python int or an integer tensor, which may be traced).

    The 64-bit two's complement of the seed becomes the key's two words ``[hi, lo]``.

    Args:
        seed: an int, or an integer tensor of any shape (giving keys of shape ``seed.shape + (2,)``).

    Returns:
        A uint32 tensor of shape ``(2,)``.

    >>> fl.random.key(42)
    Tensor([ 0, 42], dtype=uint32)
    """
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        s = int(seed) & 0xFFFFFFFFFFFFFFFF
        return _wrap(np.array([s >> 32, s & _MASK32], _U32))
    if not isinstance(seed, (Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"random.key: seed must be an int or an integer tensor, got {describe(seed)}")
    seed = ops.asarray(seed)
    if seed.dtype not in dtypes.INTEGER:
        raise DTypeError(f"random.key: the seed must be an integer, got {seed.dtype.name}")
    hi, lo = _words64(seed)
    return ops.stack([hi, lo], axis=-1)


def _words64(x):
    """Split an integer tensor into the uint32 words ``hi, lo`` of its 64-bit two's complement."""
    if x.dtype in dtypes.SIGNED:
        x = _convert(x, dtypes.int64)
    u = _convert(x, dtypes.uint64)
    hi = _convert(ops.bitwise_right_shift(u, _u64(32)), _U32)
    return hi, _convert(u, _U32)


def _u64(v: int):
    return _wrap(np.asarray(v, np.uint64))


def key_data(key: Tensor) -> Tensor:
    """The raw uint32 words of a key (keys are plain uint32 tensors, so this only checks it).

    >>> fl.random.key_data(fl.random.key(1))
    Tensor([0, 1], dtype=uint32)
    """
    return _as_key(key, "key_data", batched=True)


def wrap_key_data(data: Tensor | Sequence[int]) -> Tensor:
    """A key from raw uint32 words of shape ``(..., 2)`` (for example, saved by ``key_data``).

    >>> fl.random.wrap_key_data(fl.tensor([0, 7], dtype=fl.uint32))
    Tensor([0, 7], dtype=uint32)
    """
    return _as_key(data, "wrap_key_data", batched=True)


def _as_key(k, op: str, batched: bool = False):
    if not isinstance(k, Tensor):
        arr = np.asarray(k)
        if arr.dtype.kind in "iu" and arr.size and (arr.min() < 0 or arr.max() > _MASK32):
            raise ValueError(f"random.{op}: key words must be in [0, 2**32), got {arr.tolist()}")
        k = _wrap(arr.astype(_U32)) if arr.dtype.kind in "iu" else ops.asarray(k)
    bad_shape = (not k.shape or k.shape[-1] != 2) if batched else k.shape != (2,)
    if k.dtype != _U32 or bad_shape:
        want = "shape (..., 2)" if batched else "shape (2,)"
        raise DTypeError(
            f"random.{op}: expected a key (a uint32 tensor of {want}), got {k.aval.str_short()}. Make one "
            "with fl.random.key(seed); to draw with many keys at once, map over them with fl.vmap."
        )
    return k


def split(key: Tensor, num: Shape = 2) -> Tensor:
    """Split a key into ``num`` new independent keys (and consume it).

    Args:
        key: a key.
        num: the number of keys, or a shape of keys. Default 2.

    Returns:
        Keys of shape ``(num, 2)`` (or ``num + (2,)`` for a shape).

    >>> k1, k2 = fl.random.split(fl.random.key(0))
    """
    key = _consume(key, "split")
    shape = (operator.index(num),) if not isinstance(num, Sequence) else _shape(num, "split")
    return _keyed(random_bits_p, key, shape=shape + (2,), dtype=_U32)


def fold_in(key: Tensor, data: int | Tensor) -> Tensor:
    """A new key from ``key`` and an integer (a step, a device index): ``threefry(key, (hi, lo) of data)``.

    ``fold_in`` does not consume ``key``: folding in different data is the intended way to derive many keys.

    Args:
        key: a key.
        data: an int, or an integer tensor (giving keys of shape ``data.shape + (2,)``).

    >>> step_key = fl.random.fold_in(fl.random.key(0), 17)
    """
    key = _as_key(key, "fold_in")
    if isinstance(data, bool) or not isinstance(data, (int, np.integer, Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"random.fold_in: data must be an int or an integer tensor, got {describe(data)}")
    if isinstance(data, (int, np.integer)) and _state.trace is None and type(key) is Tensor:
        d = int(data) & 0xFFFFFFFFFFFFFFFF
        k = key._value
        out0, out1 = np.empty(1, _U32), np.empty(1, _U32)
        k0, k1 = np.array(k[:1], _U32), np.array(k[1:], _U32)
        _tf.threefry2x32(k0, k1, np.array([d >> 32], _U32), np.array([d & _MASK32], _U32), out0, out1)
        return _wrap(np.concatenate([out0, out1]))
    data = ops.asarray(data)
    if data.dtype not in dtypes.INTEGER:
        raise DTypeError(f"random.fold_in: data must be an integer, got {data.dtype.name}")
    hi, lo = _words64(data)
    y0, y1 = threefry2x32_p.bind(key[0], key[1], hi, lo)
    return ops.stack([y0, y1], axis=-1)


def threefry_2x32(key: Tensor | Sequence[int], counts: Tensor | Sequence[int]) -> Tensor:
    """The Threefry-2x32 (20 rounds) block function, for checking against the Random123 known answers.

    The flattened ``counts`` (padded with one zero when odd) are split into halves that form the two counter
    words; the two output words are concatenated back, so the result has the shape of ``counts``.

    Args:
        key: a key, or any pair of uint32 words ``[k0, k1]``.
        counts: a uint32 tensor (or nested sequence of ints in [0, 2**32)).

    Returns:
        A uint32 tensor shaped like ``counts``.

    >>> fl.random.threefry_2x32([0x13198A2E, 0x03707344], [0x243F6A88, 0x85A308D3])
    Tensor([3297917596, 1212020640], dtype=uint32)
    """
    key = _as_key(key, "threefry_2x32")
    if not isinstance(counts, Tensor):
        arr = np.asarray(counts)
        if arr.dtype.kind in "iu" and arr.size and (arr.min() < 0 or arr.max() > _MASK32):
            raise ValueError("random.threefry_2x32: counts must be in [0, 2**32)")
        counts = _wrap(arr.astype(_U32))
    if counts.dtype != _U32:
        raise DTypeError(f"random.threefry_2x32: counts must be uint32, got {counts.dtype.name}")
    flat = ops.reshape(counts, (-1,))
    n = flat.shape[0]
    if n % 2:
        flat = ops.concat([flat, _wrap(np.zeros(1, _U32))])
    half = flat.shape[0] // 2
    y0, y1 = threefry2x32_p.bind(key[0], key[1], flat[:half], flat[half:])
    out = ops.concat([y0, y1])
    if n % 2:
        out = out[:n]
    return ops.reshape(out, counts.shape)


# ----------------------------------------------------------------------------------------------------
# Key-reuse check: a traced key tracer handed to two consuming functions

_REUSE_MODES = ("warn", "error", "off")
_reuse = {"mode": os.environ.get("FUNCLIB_KEY_REUSE_CHECK", "warn").strip().lower()}
if _reuse["mode"] not in _REUSE_MODES:
    raise ValueError(f"FUNCLIB_KEY_REUSE_CHECK must be one of {_REUSE_MODES}, got {_reuse['mode']!r}")
_consumed: dict[int, tuple[weakref.ref, str]] = {}
_consumed_lock = threading.RLock()  # re-entrant: a weakref callback may fire while it is held


def set_key_reuse_check(mode: str) -> str:
    """Set what happens when a traced function gives one key to two random functions; returns the old mode.

    Args:
        mode: ``"warn"`` (the default: a ``KeyReuseWarning``), ``"error"`` (a ``KeyReuseError``) or ``"off"``.

    Only traced keys (inside ``fl.jit``, ``fl.vmap``, ``fl.grad``, ...) are tracked; ``fold_in`` never
    consumes its key. The environment variable ``FUNCLIB_KEY_REUSE_CHECK`` sets the mode at import.

    >>> old = fl.random.set_key_reuse_check("error")
    """
    if mode not in _REUSE_MODES:
        raise ValueError(f"set_key_reuse_check: mode must be one of {_REUSE_MODES}, got {mode!r}")
    old = _reuse["mode"]
    _reuse["mode"] = mode
    return old


def _forget(kid: int, ref: weakref.ref) -> None:
    with _consumed_lock:
        entry = _consumed.get(kid)
        if entry is not None and entry[0] is ref:
            del _consumed[kid]


def _consume(k, op: str):
    k = _as_key(k, op)
    mode = _reuse["mode"]
    if mode == "off" or not isinstance(k, Tracer):
        return k
    kid = id(k)
    with _consumed_lock:
        entry = _consumed.get(kid)
        first = entry[1] if entry is not None and entry[0]() is k else None
        if first is None:
            _consumed[kid] = (weakref.ref(k, lambda r, kid=kid: _forget(kid, r)), op)
    if first is not None:
        msg = (
            f"random.{op}: this key was already used by random.{first} in the same traced function, so both "
            "draws are correlated (often identical). Split it first: k1, k2 = fl.random.split(key). "
            'Silence with fl.random.set_key_reuse_check("off").'
        )
        if mode == "error":
            raise KeyReuseError(msg)
        warnings.warn(msg, KeyReuseWarning, stacklevel=3)
    return k


# ----------------------------------------------------------------------------------------------------
# Helpers


def _shape(shape, op: str) -> tuple[int, ...]:
    if type(shape) is tuple and all(type(d) is int and d >= 0 for d in shape):
        return shape
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ShapeError(f"random.{op}: shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in out):
        raise ShapeError(f"random.{op}: negative dimension in shape {out}")
    return out


def _number(v):
    """A parameter given as a Python or NumPy number (as a float), else None. Tensor parameters keep JAX's
    elementwise semantics (NaN, -1 or ``minval`` where invalid), which vectorized code may mask; a bad number is a
    mistake."""
    if type(v) in (int, float) or (isinstance(v, (int, float, np.number)) and not isinstance(v, bool)):
        return v
    return None


def _check_positive(v, op: str, name: str, strict: bool = True) -> None:
    """A ValueError when a number parameter is <= 0 (< 0 unless ``strict``), or NaN."""
    k = _number(v)
    if k is not None and not (k > 0 if strict else k >= 0):
        raise ValueError(f"random.{op}: {name} must be {'> 0' if strict else '>= 0'}, got {k!r}")


def _check_order(lo, hi, op: str, lo_name: str, hi_name: str, strict: bool = True) -> None:
    """A ValueError when number bounds give an empty interval: ``hi <= lo`` (``hi < lo`` unless ``strict``)."""
    a, b = _number(lo), _number(hi)
    if a is not None and b is not None and (b <= a if strict else b < a):
        raise ValueError(
            f"random.{op}: {hi_name} must be {'greater than' if strict else 'at least'} {lo_name}, got "
            f"{lo_name}={a!r} and {hi_name}={b!r}"
        )


def _float_dtype(dtype, op: str) -> np.dtype:
    if dtype is None:
        return dtypes.default_float
    d = dtypes.canonicalize(dtype)
    if d not in dtypes.REAL_FLOATING:
        raise DTypeError(f"random.{op}: dtype must be a real floating dtype, got {d.name}")
    return d


def _work(d: np.dtype) -> np.dtype:
    """float16/bfloat16 samples are computed in float32 and rounded once at the end."""
    return dtypes.float64 if d == dtypes.float64 else dtypes.float32


def _cast(x, d: np.dtype):
    return x if x.dtype == d else _convert(x, d)


def _param(x, d: np.dtype):
    """A parameter as a tensor of dtype ``d``."""
    if isinstance(x, Tensor):
        return x if x.dtype == d else _convert(x, d)
    return ops.asarray(x, dtype=d)


def _shape_of(x) -> tuple[int, ...]:
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def _fit(x, shape: tuple[int, ...], op: str):
    if x.shape == shape:
        return x
    try:
        broadcast_shapes(x.shape, shape)
    except ShapeError:
        raise ShapeError(
            f"random.{op}: parameters of shape {x.shape} do not broadcast to shape {shape}"
        ) from None
    if len(x.shape) > len(shape) or broadcast_shapes(x.shape, shape) != shape:
        raise ShapeError(
            f"random.{op}: parameters of shape {x.shape} broadcast beyond the requested shape {shape}; "
            "pass a shape that covers the parameters' shape"
        )
    return ops.broadcast_to(x, shape)


def _keyed(prim, k, **params):
    """Bind a key-only sampler; eagerly, call its implementation directly (no trace to consult)."""
    if _state.trace is None and type(k) is Tensor:
        return _wrap(prim.impl(k._value, **params))
    return prim.bind(k, **params)


def _uniform01(k, shape, w):
    return _keyed(random_uniform_p, k, shape=shape, dtype=w, open=False)


def _split2(k):
    ks = _keyed(random_bits_p, k, shape=(2, 2), dtype=_U32)
    return ks[0], ks[1]


# ----------------------------------------------------------------------------------------------------
# Samplers


def bits(key: Tensor, shape: Shape = (), dtype=dtypes.uint32) -> Tensor:
    """Uniformly random unsigned integers (all bits random).

    Args:
        key: a key.
        shape: the output shape. Default ``()``.
        dtype: ``uint8``, ``uint16``, ``uint32`` (default) or ``uint64``.

    >>> fl.random.bits(fl.random.key(0), (4,))
    """
    key = _consume(key, "bits")
    d = dtypes.canonicalize(dtype)
    if d not in dtypes.UNSIGNED:
        raise DTypeError(f"random.bits: dtype must be an unsigned integer dtype, got {d.name}")
    shape = _shape(shape, "bits")
    if d == dtypes.uint64:
        return _keyed(random_bits_p, key, shape=shape, dtype=d)
    b = _keyed(random_bits_p, key, shape=shape, dtype=_U32)
    if d == _U32:
        return b
    return _convert(ops.bitwise_right_shift(b, _wrap(np.asarray(32 - 8 * d.itemsize, _U32))), d)


def uniform(
    key: Tensor, shape: Shape = (), dtype=None, minval: float | Tensor = 0.0, maxval: float | Tensor = 1.0
) -> Tensor:
    """Uniform floats in ``[minval, maxval)``; differentiable in ``minval`` and ``maxval``.

    Args:
        key: a key.
        shape: the output shape. Default ``()``.
        dtype: a real floating dtype. Default float32.
        minval, maxval: bounds (scalars or tensors broadcastable to ``shape``). Default 0 and 1.

    >>> fl.random.uniform(fl.random.key(0), (2, 3), minval=-1.0, maxval=1.0)
    """
    key = _consume(key, "uniform")
    _check_order(minval, maxval, "uniform", "minval", "maxval", strict=False)
    d = _float_dtype(dtype, "uniform")
    w = _work(d)
    shape = _shape(shape, "uniform")
    u = _uniform01(key, shape, w)
    if not (_is_number(minval, 0) and _is_number(maxval, 1)):
        lo, hi = _param(minval, w), _param(maxval, w)
        u = _fit(ops.maximum(lo, lo + u * (hi - lo)), shape, "uniform")
    return _cast(u, d)


def _is_number(x, v) -> bool:
    return type(x) in (int, float) and x == v


def normal(key: Tensor, shape: Shape = (), dtype=None) -> Tensor:
    """Standard normal samples (scale and shift them for other means and deviations).

    Args:
        key: a key.
        shape: the output shape. Default ``()``.
        dtype: a real floating dtype. Default float32.

    >>> mu, sigma = 1.0, 0.5
    >>> x = mu + sigma * fl.random.normal(fl.random.key(0), (1000,))
    """
    key = _consume(key, "normal")
    d = _float_dtype(dtype, "normal")
    return _cast(_keyed(random_normal_p, key, shape=_shape(shape, "normal"), dtype=_work(d)), d)


def truncated_normal(
    key: Tensor, lower: float | Tensor, upper: float | Tensor, shape: Shape | None = None, dtype=None
) -> Tensor:
    """Standard normal samples conditioned on ``lower < x < upper``, by inverting the CDF in float64.

    Accurate far into either tail (``truncated_normal(key, 8.0, 9.0)`` works), and differentiable in ``lower``
    and ``upper``: ``dx/dlower = (1 - u) pdf(lower) / pdf(x)``, ``dx/dupper = u pdf(upper) / pdf(x)``.

    Args:
        key: a key.
        lower, upper: bounds (scalars or tensors; infinities allowed).
        shape: the output shape. Default: the broadcast shape of the bounds.
        dtype: a real floating dtype. Default float32.

    >>> fl.random.truncated_normal(fl.random.key(0), -1.0, 2.0, (5,))
    """
    key = _consume(key, "truncated_normal")
    _check_order(lower, upper, "truncated_normal", "lower", "upper")
    d = _float_dtype(dtype, "truncated_normal")
    w = _work(d)
    lo, hi = _param(lower, w), _param(upper, w)
    shape = broadcast_shapes(lo.shape, hi.shape) if shape is None else _shape(shape, "truncated_normal")
    lo, hi = _fit(lo, shape, "truncated_normal"), _fit(hi, shape, "truncated_normal")
    return _cast(random_truncated_normal_p.bind(key, lo, hi), d)


def bernoulli(key: Tensor, p: float | Tensor = 0.5, shape: Shape | None = None) -> Tensor:
    """Booleans that are True with probability ``p``.

    Args:
        key: a key.
        p: the probability (a scalar or a tensor). Default 0.5.
        shape: the output shape. Default: the shape of ``p``.

    >>> fl.random.bernoulli(fl.random.key(0), 0.3, (10,))
    """
    key = _consume(key, "bernoulli")
    k = _number(p)
    if k is not None and not 0 <= k <= 1:
        raise ValueError(f"random.bernoulli: p must be a probability in [0, 1], got {k!r}")
    pd = p.dtype if isinstance(p, Tensor) and p.dtype == dtypes.float64 else dtypes.float32
    p = _param(p, pd)
    shape = p.shape if shape is None else _shape(shape, "bernoulli")
    return _fit(_uniform01(key, shape, pd) < p, shape, "bernoulli")


def _int_dtype(dtype, op: str) -> np.dtype:
    d = dtypes.default_int if dtype is None else dtypes.canonicalize(dtype)
    if d not in dtypes.INTEGER:
        raise DTypeError(f"random.{op}: dtype must be an integer dtype, got {d.name}")
    return d


def randint(key: Tensor, shape: Shape, minval: int | Tensor, maxval: int | Tensor, dtype=None) -> Tensor:
    """Uniform integers in ``[minval, maxval)`` (bounds outside the dtype's range are clipped to it). Python
    bounds with ``maxval <= minval`` are an error; tensor bounds give ``minval`` there, as in JAX.

    Each value is a 64-bit random word reduced modulo the range, so the bias is below ``range / 2**64``.

    Args:
        key: a key.
        shape: the output shape.
        minval, maxval: bounds (ints or integer tensors broadcastable to ``shape``).
        dtype: an integer dtype. Default int64.

    >>> fl.random.randint(fl.random.key(0), (3,), 0, 10)
    """
    key = _consume(key, "randint")
    _check_order(minval, maxval, "randint", "minval", "maxval")
    d = _int_dtype(dtype, "randint")
    return _randint(key, _shape(shape, "randint"), minval, maxval, d)


def _randint(k, shape, minval, maxval, d):
    info = np.iinfo(d)
    wide = dtypes.uint64 if d == dtypes.uint64 else dtypes.int64
    b = _keyed(random_bits_p, k, shape=shape, dtype=dtypes.uint64)
    if _is_int(minval) and _is_int(maxval) and _state.trace is None and type(b) is Tensor:
        top = int(info.max) + 1 if info.bits < 64 else int(info.max)
        lo, hi = max(int(minval), int(info.min)), min(int(maxval), top)
        if hi <= lo:
            return _wrap(np.full(shape, lo, d))
        v = b._value % np.uint64(hi - lo) + np.uint64(lo & 0xFFFFFFFFFFFFFFFF)
        return _wrap(v.view(wide).astype(d, copy=False))
    lo, hi = (_clip_int(v, info, wide) for v in (minval, maxval))
    ulo, uhi = _convert(lo, dtypes.uint64), _convert(hi, dtypes.uint64)
    span = uhi - ulo
    ok = hi > lo
    span = ops.where(ok, span, _u64(1))
    out = _convert(ulo + ops.remainder(b, span), wide)
    out = ops.where(ok, out, lo)
    return _cast(_fit(out, shape, "randint"), d)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _clip_int(v, info, wide):
    if _is_int(v):
        top = int(info.max) + 1 if info.bits < 64 else int(info.max)
        return _wrap(np.asarray(min(max(int(v), int(info.min)), top), wide))
    v = ops.asarray(v)
    if v.dtype not in dtypes.INTEGER:
        raise DTypeError(f"random.randint: bounds must be integers, got {v.dtype.name}")
    return _convert(v, wide)


def categorical(key: Tensor, logits: Tensor, axis: int = -1, shape: Shape | None = None) -> Tensor:
    """Class indices drawn with probabilities ``softmax(logits)`` along ``axis`` (by the Gumbel-max trick).

    Args:
        key: a key.
        logits: unnormalized log-probabilities; ``-inf`` marks impossible classes.
        axis: the class axis. Default -1.
        shape: the output shape; it must end with the logits' batch shape. Default: that batch shape.

    Returns:
        int64 indices.

    >>> fl.random.categorical(fl.random.key(0), fl.log(fl.tensor([0.2, 0.8])), shape=(5,))
    """
    key = _consume(key, "categorical")
    logits = ops.asarray(logits)
    if logits.dtype not in dtypes.REAL_FLOATING:
        logits = _convert(logits, dtypes.default_float)
    axis = _norm_axis(axis, logits.ndim, "categorical")
    batch = logits.shape[:axis] + logits.shape[axis + 1 :]
    shape = batch if shape is None else _shape(shape, "categorical")
    if shape[len(shape) - len(batch) :] != batch or len(shape) < len(batch):
        raise ShapeError(f"random.categorical: shape {shape} must end with the logits' batch shape {batch}")
    lg = ops.moveaxis(logits, axis, -1)
    w = _work(logits.dtype)
    g = _standard(key, shape + (logits.shape[axis],), w, "gumbel")
    return ops.argmax(_cast(lg, w) + g, axis=-1)


def _norm_axis(axis: int, ndim: int, op: str) -> int:
    if not -ndim <= axis < ndim:
        raise ShapeError(f"random.{op}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim


def _standard(k, shape, w, dist: str):
    return _keyed(random_standard_p, k, shape=shape, dtype=w, dist=dist)


def _perm_indices(k, n: int):
    return ops.argsort(_keyed(random_bits_p, k, shape=(n,), dtype=dtypes.uint64))


def permutation(key: Tensor, x: int | Tensor, axis: int = 0, independent: bool = False) -> Tensor:
    """A random permutation of ``range(x)`` (for an int) or of a tensor along ``axis``.

    Args:
        key: a key.
        x: an int ``n`` or a tensor.
        axis: the axis to shuffle. Default 0.
        independent: shuffle each slice along ``axis`` separately. Default False (one permutation for all).

    >>> fl.random.permutation(fl.random.key(0), 5)
    """
    key = _consume(key, "permutation")
    if isinstance(x, bool) or not isinstance(x, (int, np.integer, Tensor, np.ndarray, list, tuple)):
        raise TypeError(f"random.permutation: x must be an int or a tensor, got {describe(x)}")
    if isinstance(x, (int, np.integer)):
        if x < 0:
            raise ValueError(f"random.permutation: n must be non-negative, got {x}")
        return _perm_indices(key, int(x))
    x = ops.asarray(x)
    if x.ndim == 0:
        raise ShapeError("random.permutation: x must be an int or a tensor of rank >= 1")
    axis = _norm_axis(axis, x.ndim, "permutation")
    if independent:
        order = ops.argsort(_keyed(random_bits_p, key, shape=x.shape, dtype=dtypes.uint64), axis=axis)
        return ops.take_along_axis(x, order, axis=axis)
    return ops.take(x, _perm_indices(key, x.shape[axis]), axis=axis)


def choice(
    key: Tensor,
    a: int | Tensor,
    shape: Shape = (),
    replace: bool = True,
    p: Tensor | None = None,
    axis: int = 0,
) -> Tensor:
    """Random elements of ``a`` (an int ``n`` stands for ``arange(n)``), with or without replacement.

    Args:
        key: a key.
        a: an int or a tensor.
        shape: the shape of the draw. Default ``()``.
        replace: draw with replacement. Default True.
        p: probabilities of the ``n`` entries (normalized here). Default uniform.
        axis: the axis of ``a`` to draw from. Default 0.

    >>> fl.random.choice(fl.random.key(0), 10, (3,), replace=False)
    """
    key = _consume(key, "choice")
    shape = _shape(shape, "choice")
    size = math.prod(shape)
    if isinstance(a, (int, np.integer)) and not isinstance(a, bool):
        n, arr = int(a), None
    else:
        arr = ops.asarray(a)
        if arr.ndim == 0:
            raise ShapeError("random.choice: a must be an int or a tensor of rank >= 1")
        axis = _norm_axis(axis, arr.ndim, "choice")
        n = arr.shape[axis]
    if n <= 0 and size:
        raise ValueError("random.choice: cannot draw from an empty population")
    if not replace and size > n:
        raise ValueError(f"random.choice: cannot draw {size} of {n} elements without replacement")
    if p is not None:
        p = ops.asarray(p)
        if p.shape != (n,):
            raise ShapeError(f"random.choice: p must have shape ({n},), got {p.shape}")
        if p.dtype not in dtypes.REAL_FLOATING:
            p = _convert(p, dtypes.default_float)
    if replace:
        if p is None:
            idx = _randint(key, shape, 0, n, dtypes.int64)
        else:
            w = _work(p.dtype)
            cdf = ops.cumsum(_cast(p, w))
            u = _uniform01(key, shape, w) * cdf[-1]
            idx = ops.minimum(ops.searchsorted(cdf, u, side="right"), _wrap(np.asarray(n - 1, np.int64)))
    else:
        if p is None:
            order = _perm_indices(key, n)
        else:
            # exponential race: E_i / p_i is Exp(p_i), and the order of the arrivals is a weighted draw
            w = _work(p.dtype)
            pw = _cast(p, w)
            pos = pw > 0
            race = _standard(key, (n,), w, "exponential") / ops.where(pos, pw, _wrap(np.ones((), w)))
            order = ops.argsort(ops.where(pos, race, _wrap(np.asarray(np.inf, w))))
        idx = ops.reshape(order[:size], shape)
    if arr is None:
        return idx
    flat = ops.take(arr, ops.reshape(idx, (-1,)), axis=axis)
    return ops.reshape(flat, arr.shape[:axis] + shape + arr.shape[axis + 1 :])


def gumbel(key: Tensor, shape: Shape = (), dtype=None) -> Tensor:
    """Standard Gumbel samples: ``-log(-log(u))`` for ``u`` uniform in (0, 1).

    >>> fl.random.gumbel(fl.random.key(0), (3,))
    """
    key = _consume(key, "gumbel")
    d = _float_dtype(dtype, "gumbel")
    return _cast(_standard(key, _shape(shape, "gumbel"), _work(d), "gumbel"), d)


def exponential(key: Tensor, shape: Shape = (), dtype=None) -> Tensor:
    """Standard exponential samples (rate 1): ``-log(1 - u)`` for ``u`` uniform in (0, 1).

    >>> fl.random.exponential(fl.random.key(0), (3,)) / 2.0  # rate 2
    """
    key = _consume(key, "exponential")
    d = _float_dtype(dtype, "exponential")
    return _cast(_standard(key, _shape(shape, "exponential"), _work(d), "exponential"), d)


def laplace(key: Tensor, shape: Shape = (), dtype=None) -> Tensor:
    """Standard Laplace samples (density ``exp(-|x|) / 2``).

    >>> fl.random.laplace(fl.random.key(0), (3,))
    """
    key = _consume(key, "laplace")
    d = _float_dtype(dtype, "laplace")
    return _cast(_standard(key, _shape(shape, "laplace"), _work(d), "laplace"), d)


def logistic(key: Tensor, shape: Shape = (), dtype=None) -> Tensor:
    """Standard logistic samples: ``log(u / (1 - u))`` for ``u`` uniform in (0, 1).

    >>> fl.random.logistic(fl.random.key(0), (3,))
    """
    key = _consume(key, "logistic")
    d = _float_dtype(dtype, "logistic")
    return _cast(_standard(key, _shape(shape, "logistic"), _work(d), "logistic"), d)


def gamma(key: Tensor, a: float | Tensor, shape: Shape | None = None, dtype=None) -> Tensor:
    """Gamma(a, 1) samples, differentiable in ``a`` (implicit reparameterization: ``dx/da = -dF/da / f``).

    Divide by a rate (or multiply by a scale) for other scales. Samples that would underflow are returned as
    the dtype's smallest normal number.

    Args:
        key: a key.
        a: the shape parameter, > 0 (a scalar or tensor).
        shape: the output shape. Default: the shape of ``a``.
        dtype: a real floating dtype. Default float32.

    >>> fl.random.gamma(fl.random.key(0), fl.tensor([0.5, 2.0, 10.0]))
    """
    key = _consume(key, "gamma")
    _check_positive(a, "gamma", "a")
    d = _float_dtype(dtype, "gamma")
    return _cast(_gamma(key, a, shape, _work(d), "gamma"), d)


def _gamma(k, a, shape, w, op):
    a = _param(a, w)
    shape = a.shape if shape is None else _shape(shape, op)
    return random_gamma_p.bind(k, _fit(a, shape, op))


def beta(
    key: Tensor, a: float | Tensor, b: float | Tensor, shape: Shape | None = None, dtype=None
) -> Tensor:
    """Beta(a, b) samples as ``Ga / (Ga + Gb)``, differentiable in ``a`` and ``b``.

    Args:
        key: a key.
        a, b: positive parameters (scalars or tensors).
        shape: the output shape. Default: the broadcast shape of ``a`` and ``b``.
        dtype: a real floating dtype. Default float32.

    >>> fl.random.beta(fl.random.key(0), 2.0, 5.0, (4,))
    """
    key = _consume(key, "beta")
    d = _float_dtype(dtype, "beta")
    w = _work(d)
    a, b = _param(a, w), _param(b, w)
    shape = broadcast_shapes(a.shape, b.shape) if shape is None else _shape(shape, "beta")
    ka, kb = _split2(key)
    ga = _gamma(ka, a, shape, w, "beta")
    gb = _gamma(kb, b, shape, w, "beta")
    return _cast(ga / (ga + gb), d)


def dirichlet(key: Tensor, alpha: Tensor, shape: Shape | None = None, dtype=None) -> Tensor:
    """Dirichlet(alpha) samples (normalized gammas along the last axis), differentiable in ``alpha``.

    Args:
        key: a key.
        alpha: concentrations of shape ``(..., k)``.
        shape: the batch shape of the draw. Default ``alpha.shape[:-1]``.
        dtype: a real floating dtype. Default float32.

    Returns:
        Samples of shape ``shape + (k,)``.

    >>> fl.random.dirichlet(fl.random.key(0), fl.tensor([1.0, 2.0, 3.0]), (2,))
    """
    key = _consume(key, "dirichlet")
    _check_positive(alpha, "dirichlet", "alpha")
    d = _float_dtype(dtype, "dirichlet")
    w = _work(d)
    alpha = _param(alpha, w)
    if alpha.ndim < 1:
        raise ShapeError("random.dirichlet: alpha must have at least one axis (the categories)")
    shape = alpha.shape[:-1] if shape is None else _shape(shape, "dirichlet")
    g = _gamma(key, alpha, shape + alpha.shape[-1:], w, "dirichlet")
    return _cast(g / ops.sum(g, axis=-1, keepdims=True), d)


def poisson(key: Tensor, lam: float | Tensor, shape: Shape | None = None, dtype=None) -> Tensor:
    """Poisson(lam) counts (inversion below rate 10, transformed rejection above). A negative Python rate is an
    error; invalid entries of a tensor of rates give -1, as in JAX.

    Args:
        key: a key.
        lam: the rate, >= 0 (a scalar or tensor).
        shape: the output shape. Default: the shape of ``lam``.
        dtype: an integer dtype. Default int64.

    >>> fl.random.poisson(fl.random.key(0), 3.5, (4,))
    """
    key = _consume(key, "poisson")
    _check_positive(lam, "poisson", "lam", strict=False)
    d = _int_dtype(dtype, "poisson")
    lam = _param(lam, dtypes.float64)
    shape = lam.shape if shape is None else _shape(shape, "poisson")
    return random_poisson_p.bind(key, _fit(lam, shape, "poisson"), dtype=d)


def multivariate_normal(
    key: Tensor,
    mean: Tensor,
    cov: Tensor,
    shape: Shape | None = None,
    dtype=None,
    method: str = "cholesky",
) -> Tensor:
    """Multivariate normal samples ``mean + L z`` with ``L L^T = cov``; differentiable in mean and cov.

    Args:
        key: a key.
        mean: means of shape ``(..., n)``.
        cov: covariances of shape ``(..., n, n)``, symmetric positive (semi-)definite.
        shape: the batch shape of the draw. Default: the broadcast batch shape of ``mean`` and ``cov``.
        dtype: a real floating dtype. Default float32.
        method: ``"cholesky"`` (default, positive definite), ``"eigh"`` or ``"svd"`` (semi-definite).

    Returns:
        Samples of shape ``shape + (n,)``.

    >>> fl.random.multivariate_normal(fl.random.key(0), fl.zeros(2), fl.eye(2), (5,))
    """
    key = _consume(key, "multivariate_normal")
    d = _float_dtype(dtype, "multivariate_normal")
    w = _work(d)
    mean, cov = _param(mean, w), _param(cov, w)
    if mean.ndim < 1 or cov.ndim < 2 or cov.shape[-2:] != (mean.shape[-1],) * 2:
        raise ShapeError(
            "random.multivariate_normal: mean must be (..., n) and cov (..., n, n), got "
            f"{mean.shape} and {cov.shape}"
        )
    n = mean.shape[-1]
    batch = broadcast_shapes(mean.shape[:-1], cov.shape[:-2])
    shape = batch if shape is None else _shape(shape, "multivariate_normal")
    if method == "cholesky":
        factor = ops.linalg.cholesky(cov)
    elif method == "eigh":
        ev, vecs = ops.linalg.eigh(cov)
        factor = vecs * ops.sqrt(ops.maximum(ev, 0.0))[..., None, :]
    elif method == "svd":
        u, s, _ = ops.linalg.svd(cov)
        factor = u * ops.sqrt(s)[..., None, :]
    else:
        raise ValueError(
            f"random.multivariate_normal: method must be 'cholesky', 'eigh' or 'svd', got {method!r}"
        )
    z = _keyed(random_normal_p, key, shape=shape + (n,), dtype=w)
    return _cast(mean + ops.matmul(factor, z[..., None])[..., 0], d)


def orthogonal(key: Tensor, n: int, shape: Shape = (), dtype=None) -> Tensor:
    """Random orthogonal matrices, uniform (Haar) over O(n): Q of a Gaussian matrix's QR, signs fixed by R.

    Args:
        key: a key.
        n: the matrix size.
        shape: the batch shape. Default ``()``.
        dtype: a real floating dtype. Default float32.

    Returns:
        Matrices of shape ``shape + (n, n)``.

    >>> q = fl.random.orthogonal(fl.random.key(0), 3)
    """
    key = _consume(key, "orthogonal")
    d = _float_dtype(dtype, "orthogonal")
    w = _work(d)
    n = operator.index(n)
    z = _keyed(random_normal_p, key, shape=_shape(shape, "orthogonal") + (n, n), dtype=w)
    q, r = ops.linalg.qr(z)
    diag = ops.linalg.diagonal(r)
    sign = ops.where(diag < 0, _wrap(np.asarray(-1, w)), _wrap(np.asarray(1, w)))
    return _cast(q * sign[..., None, :], d)


# ----------------------------------------------------------------------------------------------------
# The global key for stateful, PyTorch-style code

_DEFAULT_SEED = 0
_global = {"seed": _DEFAULT_SEED, "key": np.array([0, _DEFAULT_SEED], _U32)}
_global_lock = threading.Lock()


def manual_seed(seed: int) -> None:
    """Reset the global key used by ``fl.rand``, ``fl.randn``, ``fl.randint``, ``fl.randperm``.

    >>> fl.manual_seed(0); x = fl.randn(3, 10)
    """
    seed = check_int(seed, "manual_seed", "seed")
    k = key(seed)._value
    with _global_lock:
        _global["seed"] = seed
        _global["key"] = k


def initial_seed() -> int:
    """The seed last given to ``manual_seed`` (0 before any call)."""
    return _global["seed"]


def get_rng_state() -> Tensor:
    """The current global key (to save and later restore with ``set_rng_state``)."""
    return _wrap(_global["key"].copy())


def set_rng_state(state: Tensor) -> None:
    """Restore the global key saved by ``get_rng_state``."""
    k = _as_key(state, "set_rng_state")
    if isinstance(k, Tracer):
        raise GlobalRandomStateError("set_rng_state: the state must be a concrete key, not a traced value")
    with _global_lock:
        _global["key"] = np.array(k._value, _U32)


def _next_key(op: str) -> Tensor:
    """Advance the global key and return a fresh subkey; refuse under a transform."""
    trace = current_trace()
    if trace is not None:
        raise GlobalRandomStateError(
            f"fl.{op} draws from the global random state, which cannot be used inside {trace.name}: the "
            "traced function would replay one frozen draw forever. Pass a key instead, e.g. "
            "key = fl.random.key(0) outside, then fl.random.normal(key, shape) or "
            "fl.random.uniform(key, shape) inside (split it for each draw)."
        )
    out = np.empty((1, 4), _U32)
    with _global_lock:
        _tf.bits32(_global["key"].reshape(1, 2), out)
        _global["key"] = out[0, :2].copy()
    return _wrap(out[0, 2:].copy())


def _size(size, op: str) -> tuple[int, ...]:
    if len(size) == 1 and not isinstance(size[0], (int, np.integer)):
        size = size[0]
    return _shape(size, op)


def rand(*size: int, dtype=None) -> Tensor:
    """Uniform floats in [0, 1) from the global key (PyTorch style).

    >>> fl.manual_seed(0); fl.rand(2, 3)
    """
    k = _next_key("rand")
    d = _float_dtype(dtype, "rand")
    return _cast(_uniform01(k, _size(size, "rand"), _work(d)), d)


def randn(*size: int, dtype=None) -> Tensor:
    """Standard normal floats from the global key (PyTorch style).

    >>> fl.manual_seed(0); fl.randn(3, 10)
    """
    k = _next_key("randn")
    d = _float_dtype(dtype, "randn")
    return _cast(_keyed(random_normal_p, k, shape=_size(size, "randn"), dtype=_work(d)), d)


def global_randint(low: int, high: int | None = None, size: Shape = (), *, dtype=None) -> Tensor:
    """Uniform integers in ``[low, high)`` from the global key (PyTorch's ``randint``; ``randint(high, size)``
    works too).

    >>> fl.manual_seed(0); fl.randint(0, 10, (3,))
    """
    k = _next_key("randint")
    if high is None:
        low, high = 0, low
    _check_order(low, high, "randint", "low", "high")
    return _randint(k, _shape(size, "randint"), low, high, _int_dtype(dtype, "randint"))


def randperm(n: int, *, dtype=None) -> Tensor:
    """A random permutation of ``range(n)`` from the global key.

    >>> fl.manual_seed(0); fl.randperm(5)
    """
    k = _next_key("randperm")
    n = check_int(n, "randperm", "n", min=0)
    return _cast(_perm_indices(k, n), _int_dtype(dtype, "randperm"))


def rand_like(x: Tensor, *, dtype=None) -> Tensor:
    """``fl.rand`` with the shape (and, for floating ``x``, the dtype) of ``x``.

    >>> fl.rand_like(fl.zeros((2, 2)))
    """
    d = dtype if dtype is not None else (x.dtype if x.dtype in dtypes.REAL_FLOATING else None)
    return rand(*_shape_of(x), dtype=d)


def randn_like(x: Tensor, *, dtype=None) -> Tensor:
    """``fl.randn`` with the shape (and, for floating ``x``, the dtype) of ``x``.

    >>> fl.randn_like(fl.zeros((2, 2)))
    """
    d = dtype if dtype is not None else (x.dtype if x.dtype in dtypes.REAL_FLOATING else None)
    return randn(*_shape_of(x), dtype=d)
