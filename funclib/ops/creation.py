"""Array API creation functions: asarray, zeros, ones, full, empty, arange, linspace, eye, *_like, meshgrid,
tril, triu, from_dlpack."""

from __future__ import annotations

import builtins
import functools

import numpy as np

from .. import dtypes
from ..checks import check_int, check_number, check_shape, describe
from ..core import (
    PY_SCALARS,
    Tensor,
    Tracer,
    _state,
    _wrap,
    array_from,
    check_no_imaginary,
    check_scalar_fits,
    holds_tracer,
    numpy_cast,
    remember_dlpack_source,
    strengthen,
)
from ..errors import DTypeError, ShapeError
from ..kernels import devices
from ..kernels.devices import canonical
from ..namespace import public, tensor_method
from ..primitives import shape as S
from ..primitives.elementwise import add, convert, greater_equal, less_equal, multiply, stack_values, subtract
from .searching import where


def _check_device(device, op):
    canonical(device, op)


def _placed(fn):
    """``fn`` with its ``device=`` argument applied: the result is made on the CPU and moved to ``device`` (the
    ``*_like`` functions default to their argument's device, as the Array API says)."""
    op = fn.__name__
    like = op.endswith("_like") or op == "astype"

    @functools.wraps(fn)
    def placed(*args, device=None, **kwargs):
        target = canonical(device, op)
        out = fn(*args, **kwargs)
        if target is None and like and args and isinstance(args[0], Tensor) and not isinstance(args[0], Tracer):
            target = args[0].device
        if target is None or isinstance(out, Tracer) or out.device == target:
            return out
        return out.to_device(target)

    return placed


@public
@_placed
def asarray(obj, /, *, dtype=None, device=None, copy: bool | None = None) -> Tensor:
    """Convert ``obj`` (a Tensor, NumPy array, nested sequence or Python scalar) to a Tensor.

    A writable NumPy source is copied, so nobody can change the Tensor behind its back; a read-only one is
    shared. Another library's CUDA array (``__cuda_array_interface__`` or DLPack on a GPU) is shared on its device,
    as ``fl.from_dlpack`` shares it (``copy=True`` copies it there). Python floats become float32, ints int64 (the
    defaults).

    >>> fl.asarray([1.0, 2.0])
    Tensor([1., 2.], dtype=float32)
    """
    _check_device(device, "asarray")
    if isinstance(obj, Tracer):
        want = dtypes.canonicalize(dtype) if dtype is not None else None
        if obj.weak_type:  # a Python scalar traced by jit: what asarray makes of the scalar itself
            return strengthen(obj) if want is None else convert(obj, want)
        if want is None or obj.dtype == want:
            return obj
        if copy is False:
            raise ValueError(f"asarray: converting {obj.dtype.name} to {want.name} needs a copy, but copy=False")
        check_no_imaginary(obj.dtype in dtypes.COMPLEX, want, "asarray")
        return convert(obj, want)
    if isinstance(obj, Tensor) and (dtype is None or obj.dtype == dtypes.canonicalize(dtype)):
        return obj
    if isinstance(obj, (list, tuple)) and holds_tracer(obj):
        return stack_values(obj, dtype)
    if not isinstance(obj, (Tensor, np.ndarray, list, tuple)) and _foreign_cuda(obj):
        t = _wrap(devices.share_foreign(obj, "asarray", copy=copy))
        return t if dtype is None else convert(t, dtypes.canonicalize(dtype))
    return _wrap(array_from(obj, dtype, copy=copy))


def _foreign_cuda(obj) -> bool:
    # another library's CUDA array: looked for only when the object offers an exchange protocol
    if not (hasattr(obj, "__cuda_array_interface__") or hasattr(obj, "__cuda_ndarray__")
            or hasattr(obj, "__dlpack_device__")):
        return False
    return devices.is_foreign_cuda(obj)


def _check_fill(v, op: str):
    """A fill value: a Python/NumPy number or a 0-d tensor."""
    if isinstance(v, Tensor):
        if v.ndim != 0:
            raise ShapeError(f"{op}: fill_value must be a scalar, got a tensor of shape {tuple(v.shape)}")
        return v
    if type(v) in PY_SCALARS or isinstance(v, (np.bool_, np.number)):
        return v
    raise TypeError(f"{op}: fill_value must be a number (bool, int, float or complex), got {describe(v)}")


def _like_source(x, op: str):
    if isinstance(x, Tensor):
        return x
    try:
        return asarray(x)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: x must be a tensor (or convertible with fl.asarray), got {describe(x)}") from None


@tensor_method("astype")
def _astype_method(self, dtype, /, *, copy: bool = True, device=None):
    """Cast to ``dtype`` (and move to ``device`` when given)."""
    out = convert(self, dtypes.canonicalize(dtype))
    return out if device is None else out.to_device(device)


def _cast_method(name: str, dtype):
    def cast(self):
        return convert(self, dtype)

    cast.__name__ = cast.__qualname__ = name
    cast.__doc__ = f"``x.{name}()`` is ``x.astype(fl.{dtype.name})``, as PyTorch's method."
    return tensor_method(name)(cast)


for _name, _dtype in (
    ("float", dtypes.float32),
    ("double", dtypes.float64),
    ("half", dtypes.float16),
    ("bfloat16", dtypes.bfloat16),
    ("long", dtypes.int64),
    ("int", dtypes.int32),
    ("bool", dtypes.bool_),
):
    _cast_method(_name, _dtype)


@tensor_method("numel")
def _numel(self) -> int:
    """The number of elements (``x.size``), as PyTorch's ``x.numel()``."""
    return self.size


@tensor_method("dim")
def _dim(self) -> int:
    """The number of axes (``x.ndim``), as PyTorch's ``x.dim()``."""
    return self.ndim


@public
@_placed
def astype(x, dtype, /, *, copy: bool = True, device=None) -> Tensor:
    """Cast ``x`` to ``dtype`` (any cast NumPy allows: float to int truncates, complex to real is an error).

    ``copy`` is accepted for the standard; tensors are immutable, so a copy and the original are
    indistinguishable and no copy is made when the dtype already matches.

    >>> fl.astype(fl.asarray([1.7, -1.7]), fl.int32)
    Tensor([ 1, -1], dtype=int32)
    """
    _check_device(device, "astype")
    x = asarray(x) if not isinstance(x, Tensor) else x
    d = dtypes.canonicalize(dtype)
    if x.dtype in dtypes.COMPLEX and d not in dtypes.COMPLEX:
        raise DTypeError(
            f"astype: casting {x.dtype.name} to {d.name} would drop the imaginary part; "
            "use fl.real(x) or fl.abs(x)"
        )
    return convert(x, d)


@public
def tensor(data, dtype=None, device=None) -> Tensor:
    """PyTorch spelling of ``asarray``.

    >>> fl.tensor([[1, 2], [3, 4]])
    Tensor([[1, 2],
           [3, 4]], dtype=int64)
    """
    return asarray(data, dtype=dtype, device=device)


def _shape_arg(shape, op) -> tuple[int, ...]:
    return check_shape(shape, op)


def _varargs_shape(shape, op):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return _shape_arg(shape[0], op)
    return _shape_arg(shape, op)


@public
@_placed
def zeros(shape, *, dtype=None, device=None) -> Tensor:
    """A tensor of zeros (float32 by default).

    >>> fl.zeros((2, 3)).shape
    (2, 3)
    """
    _check_device(device, "zeros")
    return S.full(_shape_arg(shape, "zeros"), 0, dtypes.canonicalize(dtype or dtypes.float_default()))


@public
@_placed
def ones(shape, *, dtype=None, device=None) -> Tensor:
    """A tensor of ones (float32 by default).

    >>> fl.ones((2, 3))
    Tensor([[1., 1., 1.],
            [1., 1., 1.]], dtype=float32)
    """
    _check_device(device, "ones")
    return S.full(_shape_arg(shape, "ones"), 1, dtypes.canonicalize(dtype or dtypes.float_default()))


@public
@_placed
def empty(shape, *, dtype=None, device=None) -> Tensor:
    """A tensor of ``shape`` filled with zeros (an immutable tensor is never observed uninitialized).

    >>> fl.empty((2,))
    Tensor([0., 0.], dtype=float32)
    """
    _check_device(device, "empty")
    return S.full(_shape_arg(shape, "empty"), 0, dtypes.canonicalize(dtype or dtypes.float_default()))


@public
@_placed
def full(shape, fill_value, *, dtype=None, device=None) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value``; the dtype follows the value when not given.

    >>> fl.full((2,), 7)
    Tensor([7, 7], dtype=int64)
    """
    _check_device(device, "full")
    shape = _shape_arg(shape, "full")
    _check_fill(fill_value, "full")
    if isinstance(fill_value, Tensor):
        d = dtypes.canonicalize(dtype) if dtype is not None else fill_value.dtype
        return S.full(shape, convert(fill_value, d), d)
    d = dtypes.canonicalize(dtype) if dtype is not None else dtypes.python_scalar_dtype(fill_value)
    check_scalar_fits(fill_value, d)
    return S.full(shape, fill_value, d)


def _like(x, dtype):
    return dtypes.canonicalize(dtype) if dtype is not None else x.dtype


@public
@_placed
def zeros_like(x, /, *, dtype=None, device=None) -> Tensor:
    """Zeros with ``x``'s shape (and dtype unless given).

    >>> fl.zeros_like(fl.ones((2, 2)), dtype=fl.int32)
    Tensor([[0, 0],
            [0, 0]], dtype=int32)
    """
    _check_device(device, "zeros_like")
    x = _like_source(x, "zeros_like")
    return S.full(tuple(x.shape), 0, _like(x, dtype))


@public
@_placed
def ones_like(x, /, *, dtype=None, device=None) -> Tensor:
    """Ones with ``x``'s shape (and dtype unless given).

    >>> fl.ones_like(fl.tensor([1, 2, 3]))
    Tensor([1, 1, 1], dtype=int64)
    """
    _check_device(device, "ones_like")
    x = _like_source(x, "ones_like")
    return S.full(tuple(x.shape), 1, _like(x, dtype))


@public
@_placed
def empty_like(x, /, *, dtype=None, device=None) -> Tensor:
    """``zeros_like`` (an immutable tensor is never observed uninitialized).

    >>> fl.empty_like(fl.tensor([1, 2]))
    Tensor([0, 0], dtype=int64)
    """
    _check_device(device, "empty_like")
    x = _like_source(x, "empty_like")
    return S.full(tuple(x.shape), 0, _like(x, dtype))


@public
@_placed
def full_like(x, /, fill_value, *, dtype=None, device=None) -> Tensor:
    """``fill_value`` with ``x``'s shape (and dtype unless given).

    >>> fl.full_like(fl.tensor([1.0, 2.0]), 7)
    Tensor([7., 7.], dtype=float32)
    """
    _check_device(device, "full_like")
    x = _like_source(x, "full_like")
    _check_fill(fill_value, "full_like")
    d = _like(x, dtype)
    return S.full(tuple(x.shape), convert(fill_value, d) if isinstance(fill_value, Tensor) else fill_value, d)


@public
@_placed
def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Tensor:
    """Evenly spaced values in ``[start, stop)``.

    >>> fl.arange(3)
    Tensor([0, 1, 2], dtype=int64)
    """
    _check_device(device, "arange")
    for v in (start, stop, step):
        if isinstance(v, Tracer):
            raise TypeError(
                "arange: start/stop/step must be concrete numbers (the output shape depends on them)"
            )
    if stop is None:
        start, stop = 0, start
    start, stop, step = (
        check_number(v, "arange", n) for v, n in ((start, "start"), (stop, "stop"), (step, "step"))
    )
    if step == 0:
        raise ValueError("arange: step must not be zero")
    if dtype is None:
        is_float = any(isinstance(v, float) for v in (start, stop, step))
        d = dtypes.float_default() if is_float else dtypes.default_int
    else:
        d = dtypes.canonicalize(dtype)
    if all(isinstance(v, int) for v in (start, stop, step)):
        n = builtins.max(-((start - stop) // step), 0)  # ceil((stop - start) / step), exact for any int size
    else:
        n = builtins.max(int(np.ceil((stop - start) / step)), 0)
    if _state.trace is None:
        if d in dtypes.INTEGER and isinstance(start, int) and isinstance(step, int):
            # computed in the target dtype, so uint64 values beyond the int64 range stay exact
            i = np.arange(n, dtype=d)
            if step > 0:
                return _wrap(np.asarray(start, d) + np.asarray(step, d) * i)
            return _wrap(np.asarray(start, d) - np.asarray(-step, d) * i)
        wide = np.float64 if d in dtypes.INEXACT else np.int64
        return _wrap(numpy_cast(start + step * np.arange(n, dtype=wide), d))
    base = convert(S.iota(dtypes.int64, (n,), 0), d)
    return add(multiply(base, step), start) if (start, step) != (0, 1) else base


@public
@_placed
def linspace(start, stop, /, num: int, *, dtype=None, device=None, endpoint: bool = True) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop``.

    >>> fl.linspace(0.0, 1.0, 3)
    Tensor([0. , 0.5, 1. ], dtype=float32)
    """
    _check_device(device, "linspace")
    if isinstance(start, complex) or isinstance(stop, complex):
        d = dtypes.canonicalize(dtype) if dtype is not None else dtypes.complex_default()
    else:
        d = dtypes.canonicalize(dtype) if dtype is not None else dtypes.float_default()
    if d not in dtypes.INEXACT:
        raise DTypeError(f"linspace: dtype must be floating-point, got {d.name}")
    num = check_int(num, "linspace", "num", min=0)
    if isinstance(start, Tensor) or isinstance(stop, Tensor):
        div = (num - 1) if endpoint else num
        steps = convert(S.iota(dtypes.int64, (num,), 0), d)
        frac = multiply(steps, 1.0 / builtins.max(div, 1))
        return add(start, multiply(frac, subtract(stop, start)))
    wide = np.complex128 if d in dtypes.COMPLEX else np.float64
    return _wrap(numpy_cast(np.linspace(start, stop, num, endpoint=endpoint, dtype=wide), d))


@public
@_placed
def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype=None, device=None) -> Tensor:
    """The identity matrix (ones on diagonal ``k``).

    >>> fl.eye(2)
    Tensor([[1., 0.],
           [0., 1.]], dtype=float32)
    """
    _check_device(device, "eye")
    n_rows = check_int(n_rows, "eye", "n_rows", min=0)
    n_cols = n_rows if n_cols is None else check_int(n_cols, "eye", "n_cols", min=0)
    k = check_int(k, "eye", "k")
    d = dtypes.canonicalize(dtype or dtypes.float_default())
    return _wrap(np.eye(n_rows, n_cols, k=k, dtype=d))


@public
def from_dlpack(x, /, *, device=None, copy: bool | None = None) -> Tensor:
    """A Tensor over the memory of any DLPack producer (NumPy, PyTorch, JAX, ...), without a copy.

    The Tensor is read-only, but it shares the producer's buffer, as ``torch.from_dlpack`` and
    ``jax.dlpack.from_dlpack`` do: writes to the source made later through the producer are visible in it. Pass
    ``copy=True`` for a snapshot (or use ``fl.asarray``, which copies writable sources). ``copy=False`` raises if
    sharing is impossible.

    >>> src = np.arange(3.0)
    >>> fl.from_dlpack(src)
    Tensor([0., 1., 2.], dtype=float64)
    """
    _check_device(device, "from_dlpack")
    if isinstance(x, Tensor):
        if copy and x.device != "cpu":
            return _wrap(devices.share_foreign(x, "from_dlpack", copy=True))
        return _wrap(np.array(x._value)) if copy else x
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        raise TypeError(
            f"from_dlpack: x must support the DLPack protocol (__dlpack__ and __dlpack_device__), got {describe(x)}; "
            "use fl.asarray for lists, scalars and buffers"
        )
    if devices.is_foreign_cuda(x):
        # CUDA memory: shared on its device (a DeviceTensor), never brought to the host
        return _wrap(devices.share_foreign(x, "from_dlpack", copy=copy))
    try:
        arr = np.from_dlpack(x, copy=copy)
    except (BufferError, TypeError, ValueError, RuntimeError) as e:
        hint = (
            " (NumPy, through which funclib reads DLPack, has no DLPack code for bfloat16 or float8: convert on "
            "the producer's side, e.g. t.float())"
            if "dtype" in str(e).lower()
            else ""
        )
        what = f"{type(x).__module__}.{type(x).__qualname__}"
        raise type(e)(f"from_dlpack: cannot import a {what} through DLPack: {e}{hint}") from None
    t = _shared(arr, "from_dlpack")
    if not copy:
        remember_dlpack_source(t._value, x)
    return t


@public
def from_numpy(a: np.ndarray, /) -> Tensor:
    """A read-only Tensor sharing ``a``'s memory (no copy), like ``torch.from_numpy``.

    funclib never writes to it, but ``a`` stays writable: values written to ``a`` later are visible through the
    Tensor (and a ``jit`` that captured it as a constant keeps the values it saw). Use ``fl.asarray(a)`` for an
    independent copy.

    >>> a = np.zeros(2, np.float32)
    >>> t = fl.from_numpy(a)
    >>> a[0] = 5.0
    >>> t
    Tensor([5., 0.], dtype=float32)
    """
    if not isinstance(a, np.ndarray):
        raise TypeError(
            f"from_numpy: expected a NumPy ndarray, got {type(a).__name__}; use fl.asarray for other objects"
        )
    if a.dtype.byteorder not in ("=", "|") and a.dtype.itemsize > 1:
        raise ValueError(
            f"from_numpy: the array has non-native byte order ({a.dtype.str}), so its memory cannot be shared; "
            "fl.asarray(a) converts it with a copy"
        )
    return _shared(a, "from_numpy")


def _shared(arr: np.ndarray, op: str) -> Tensor:
    if arr.dtype not in dtypes._KNOWN:
        raise DTypeError(
            f"{op}: dtype {arr.dtype} is not supported by funclib; convert it first (e.g. to float32)"
        )
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return _wrap(arr)


@public
def meshgrid(*arrays, indexing: str = "xy") -> list[Tensor]:
    """Coordinate matrices from 1-D tensors (``indexing`` is 'xy' or 'ij').

    >>> xs, ys = fl.meshgrid(fl.tensor([1, 2, 3]), fl.tensor([10, 20]))
    >>> xs
    Tensor([[1, 2, 3],
            [1, 2, 3]], dtype=int64)
    >>> ys
    Tensor([[10, 10, 10],
            [20, 20, 20]], dtype=int64)
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [asarray(a) for a in arrays]
    for a in arrays:
        if a.ndim != 1:
            raise ShapeError(f"meshgrid: inputs must be 1-D, got shape {tuple(a.shape)}")
    if not arrays:
        return []
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        dim = i
        if indexing == "xy" and len(arrays) > 1 and i < 2:
            dim = 1 - i
        out.append(S.broadcast_in_dim(a, tuple(shape), (dim,)))
    return out


def _tri_mask(x, k, lower):
    n, m = x.shape[-2], x.shape[-1]
    rows = S.iota(dtypes.int64, (n, m), 0, like=x)
    cols = S.iota(dtypes.int64, (n, m), 1, like=x)
    return less_equal(cols, add(rows, k)) if lower else greater_equal(cols, add(rows, k))


@public
def tril(x, /, *, k: int = 0) -> Tensor:
    """The lower triangle of the last two axes (zeros above diagonal ``k``).

    >>> fl.tril(fl.ones((3, 3)))
    Tensor([[1., 0., 0.],
            [1., 1., 0.],
            [1., 1., 1.]], dtype=float32)
    """
    if x.ndim < 2:
        raise ShapeError(f"tril: needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return where(_tri_mask(x, k, True), x, 0)


@public
def triu(x, /, *, k: int = 0) -> Tensor:
    """The upper triangle of the last two axes (zeros below diagonal ``k``).

    >>> fl.triu(fl.ones((3, 3)), k=1)
    Tensor([[0., 1., 1.],
            [0., 0., 1.],
            [0., 0., 0.]], dtype=float32)
    """
    if x.ndim < 2:
        raise ShapeError(f"triu: needs at least 2 dimensions, got shape {tuple(x.shape)}")
    return where(_tri_mask(x, k, False), x, 0)
