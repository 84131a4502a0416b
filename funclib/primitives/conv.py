"""Convolution patches: ``conv_patches`` (im2col) and its adjoint ``conv_patches_transpose`` (col2im).

A convolution is ``conv_patches`` followed by one ``dot_general`` on BLAS; its input gradient and a transposed
convolution are ``dot_general`` followed by ``conv_patches_transpose``. Both primitives are linear and each is the
other's transpose, so every derivative order and vmap come from these few rules. They exist as primitives (rather
than compositions of ``slice``/``pad``) for speed: the patch matrix is one strided copy, and its adjoint is
``prod(kernel)`` strided in-place adds instead of that many full-size pads.

Layout: inputs are channels-first, ``x: (N, C, *spatial)``; patches are channels-last,
``(N, *out_spatial, *kernel, C)``, so that ``reshape(patches, (N * P, K * C))`` feeds a single matrix multiply, or
with ``channels_last=False`` ``(N, C, *kernel, *out_spatial)``: one ``(C * K, P)`` matrix per example, which a
weight multiplies straight into a channels-first output (what ``conv2d`` uses).
float32/float64 with 1 or 2 spatial axes run numba loops (``funclib.kernels.conv``); the NumPy code below is the
reference for every other case.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import dtypes
from ..core import Primitive, ShapedArray, Tensor, Zero, _state, _wrap, aval_of
from ..errors import DTypeError, ShapeError
from ..kernels import conv as _kconv
from .shape import bdim_to_front, instantiate, reshape


def out_size(size: int, k: int, stride: int, lo: int, hi: int, dilation: int) -> int:
    """Number of window positions along one spatial axis."""
    return (size + lo + hi - dilation * (k - 1) - 1) // stride + 1


def _check_params(op, nd, kernel_shape, strides, padding, dilation):
    for name, v in (("kernel_shape", kernel_shape), ("strides", strides), ("dilation", dilation)):
        if len(v) != nd or any(int(a) < 1 for a in v):
            raise ShapeError(f"{op}: {name} must be {nd} positive ints, got {v}")
    if len(padding) != nd or any(len(p) != 2 or p[0] < 0 or p[1] < 0 for p in padding):
        raise ShapeError(f"{op}: padding must be {nd} non-negative (low, high) pairs, got {padding}")


# --- conv_patches ---------------------------------------------------------------------------------------------------

conv_patches_p = Primitive("conv_patches", linear=True)
conv_patches_p.family = "conv"


def _to_channels_first(nd):
    """(N, *out, *kernel, C) -> (N, C, *kernel, *out)."""
    return (0, 2 * nd + 1, *range(nd + 1, 2 * nd + 1), *range(1, nd + 1))


def _patches_impl(x, *, kernel_shape, strides, padding, dilation, channels_last=True):
    x = np.asarray(x)
    nd = len(kernel_shape)
    if not channels_last:
        if nd <= 2 and x.dtype in _kconv.SUPPORTED:
            return _kconv.im2col_cf(x, kernel_shape, strides, padding, dilation)
        cols = _patches_impl(x, kernel_shape=kernel_shape, strides=strides, padding=padding, dilation=dilation)
        return np.ascontiguousarray(np.transpose(cols, _to_channels_first(nd)))
    xt = np.moveaxis(x, 1, -1)
    if nd <= 2 and x.dtype in _kconv.SUPPORTED:
        return _kconv.im2col(xt, kernel_shape, strides, padding, dilation)
    if any(lo or hi for lo, hi in padding):
        xp = np.pad(xt, [(0, 0)] + [tuple(p) for p in padding] + [(0, 0)])
    else:
        xp = np.ascontiguousarray(xt)
    osz = [out_size(x.shape[2 + i], kernel_shape[i], strides[i], *padding[i], dilation[i]) for i in range(nd)]
    st = xp.strides
    shape = (x.shape[0], *osz, *kernel_shape, x.shape[1])
    view_strides = (
        st[0],
        *(st[1 + i] * strides[i] for i in range(nd)),
        *(st[1 + i] * dilation[i] for i in range(nd)),
        st[-1],
    )
    return np.ascontiguousarray(as_strided(xp, shape, view_strides, writeable=False))


conv_patches_p.def_impl(_patches_impl)


@conv_patches_p.def_abstract_eval
def _patches_abstract(x, *, kernel_shape, strides, padding, dilation, channels_last=True):
    nd = len(kernel_shape)
    if x.ndim != nd + 2:
        raise ShapeError(
            f"conv_patches: expected an input of rank {nd + 2} (N, C, {nd} spatial axes), got {x.str_short()}"
        )
    if x.dtype == dtypes.bool_:
        raise DTypeError("conv_patches: boolean input is not supported; cast to a numeric dtype")
    _check_params("conv_patches", nd, kernel_shape, strides, padding, dilation)
    osz = [out_size(x.shape[2 + i], kernel_shape[i], strides[i], *padding[i], dilation[i]) for i in range(nd)]
    if any(o < 1 for o in osz):
        raise ShapeError(
            f"conv_patches: input spatial shape {x.shape[2:]} with padding {padding} is smaller than the dilated "
            f"kernel {tuple(dilation[i] * (kernel_shape[i] - 1) + 1 for i in range(nd))}; pad the input or use a "
            "smaller kernel"
        )
    if not channels_last:
        return ShapedArray((x.shape[0], x.shape[1], *kernel_shape, *osz), x.dtype)
    return ShapedArray((x.shape[0], *osz, *kernel_shape, x.shape[1]), x.dtype)


def _linear_jvp(p):
    def rule(primals, tangents, **params):
        out = p.bind(*primals, **params)
        if type(tangents[0]) is Zero:
            return out, Zero(aval_of(out))
        return out, p.bind(instantiate(tangents[0]), **params)

    return rule


conv_patches_p.def_jvp(_linear_jvp(conv_patches_p))


@conv_patches_p.def_transpose
def _patches_transpose(ct, x, *, kernel_shape, strides, padding, dilation, channels_last=True):
    return [
        conv_patches_transpose(
            ct, x.aval.shape[2:], strides=strides, padding=padding, dilation=dilation, channels_last=channels_last
        )
    ]


def _merge_batch(x, d):
    x = bdim_to_front(x, d)
    return reshape(x, (x.shape[0] * x.shape[1],) + tuple(x.shape[2:])), x.shape[0]


def _split_batch(y, b):
    return reshape(y, (b, y.shape[0] // b) + tuple(y.shape[1:]))


@conv_patches_p.def_vmap
def _patches_vmap(args, dims, **params):
    x, b = _merge_batch(args[0], dims[0])
    return _split_batch(conv_patches_p.bind(x, **params), b), 0


# --- conv_patches_transpose ---------------------------------------------------------------------------------------

conv_patches_transpose_p = Primitive("conv_patches_transpose", linear=True)
conv_patches_transpose_p.family = "conv"


def _col2im_impl(cols, *, input_shape, strides, padding, dilation, channels_last=True):
    cols = np.asarray(cols)
    nd = len(input_shape)
    if not channels_last:
        if nd <= 2 and cols.dtype in _kconv.SUPPORTED:
            return _kconv.col2im_cf(cols, input_shape, strides, padding, dilation)
        # (N, C, *kernel, *out) -> (N, *out, *kernel, C)
        perm = (0, *range(nd + 2, 2 * nd + 2), *range(2, nd + 2), 1)
        return _col2im_impl(
            np.transpose(cols, perm), input_shape=input_shape, strides=strides, padding=padding, dilation=dilation
        )
    if nd <= 2 and cols.dtype in _kconv.SUPPORTED:
        return np.moveaxis(_kconv.col2im(cols, input_shape, strides, padding, dilation), -1, 1)
    n, c = cols.shape[0], cols.shape[-1]
    osz = cols.shape[1 : 1 + nd]
    ksz = cols.shape[1 + nd : 1 + 2 * nd]
    buf = np.zeros((n, *(input_shape[i] + padding[i][0] + padding[i][1] for i in range(nd)), c), cols.dtype)
    for kidx in itertools.product(*(range(k) for k in ksz)):
        dst = (slice(None),) + tuple(
            slice(kidx[i] * dilation[i], kidx[i] * dilation[i] + strides[i] * (osz[i] - 1) + 1, strides[i])
            for i in range(nd)
        )
        buf[dst] += cols[(slice(None),) * (1 + nd) + kidx]
    crop = (slice(None),) + tuple(slice(padding[i][0], padding[i][0] + input_shape[i]) for i in range(nd))
    return np.moveaxis(buf[crop], -1, 1)


conv_patches_transpose_p.def_impl(_col2im_impl)


@conv_patches_transpose_p.def_abstract_eval
def _col2im_abstract(cols, *, input_shape, strides, padding, dilation, channels_last=True):
    nd = len(input_shape)
    if cols.ndim != 2 * nd + 2:
        layout = f"{nd} output axes, {nd} kernel axes, C" if channels_last else f"C, {nd} kernel axes, {nd} output axes"
        raise ShapeError(
            f"conv_patches_transpose: expected patches of rank {2 * nd + 2} (N, {layout}) for a {nd}-d input, got "
            f"{cols.str_short()}"
        )
    if cols.dtype == dtypes.bool_:
        raise DTypeError("conv_patches_transpose: boolean input is not supported; cast to a numeric dtype")
    ksz, osz, c = _patch_axes(cols.shape, nd, channels_last)
    _check_params("conv_patches_transpose", nd, ksz, strides, padding, dilation)
    want = tuple(out_size(input_shape[i], ksz[i], strides[i], *padding[i], dilation[i]) for i in range(nd))
    if want != osz:
        raise ShapeError(
            f"conv_patches_transpose: patches {cols.str_short()} do not match input spatial shape {input_shape} "
            f"(expected {want} window positions for kernel {ksz}, strides {strides}, padding {padding}, "
            f"dilation {dilation})"
        )
    return ShapedArray((cols.shape[0], c, *input_shape), cols.dtype)


def _patch_axes(shape, nd, channels_last):
    """(kernel sizes, window positions, channels) of a patches shape in either layout."""
    if channels_last:
        return tuple(shape[1 + nd : 1 + 2 * nd]), tuple(shape[1 : 1 + nd]), shape[-1]
    return tuple(shape[2 : 2 + nd]), tuple(shape[2 + nd :]), shape[1]


conv_patches_transpose_p.def_jvp(_linear_jvp(conv_patches_transpose_p))


@conv_patches_transpose_p.def_transpose
def _col2im_transpose(ct, cols, *, input_shape, strides, padding, dilation, channels_last=True):
    ksz = _patch_axes(cols.aval.shape, len(input_shape), channels_last)[0]
    return [conv_patches(ct, ksz, strides=strides, padding=padding, dilation=dilation, channels_last=channels_last)]


@conv_patches_transpose_p.def_vmap
def _col2im_vmap(args, dims, **params):
    cols, b = _merge_batch(args[0], dims[0])
    return _split_batch(conv_patches_transpose_p.bind(cols, **params), b), 0


# --- wrappers -------------------------------------------------------------------------------------------------------


def _params(nd, strides, padding, dilation):
    strides = (1,) * nd if strides is None else tuple(int(s) for s in strides)
    dilation = (1,) * nd if dilation is None else tuple(int(d) for d in dilation)
    padding = ((0, 0),) * nd if padding is None else tuple((int(lo), int(hi)) for lo, hi in padding)
    return strides, padding, dilation


def conv_patches(x, kernel_shape, *, strides=None, padding=None, dilation=None, channels_last=True):
    """Sliding windows of ``x: (N, C, *spatial)`` as ``(N, *out_spatial, *kernel_shape, C)`` (im2col).

    Args:
        x: channels-first input.
        kernel_shape: window size per spatial axis.
        strides, dilation: per spatial axis; default 1.
        padding: ``(low, high)`` zero padding per spatial axis; default none.
        channels_last: False gives ``(N, C, *kernel_shape, *out_spatial)`` instead, whose
            ``(N, C * prod(kernel), prod(out))`` matrices multiply a weight into channels-first outputs.

    Example:
        >>> conv_patches(fl.ones((1, 1, 3, 3)), (2, 2)).shape
        (1, 2, 2, 2, 2, 1)
    """
    kernel_shape = tuple(int(k) for k in kernel_shape)
    strides, padding, dilation = _params(len(kernel_shape), strides, padding, dilation)
    params = dict(
        kernel_shape=kernel_shape,
        strides=strides,
        padding=padding,
        dilation=dilation,
        channels_last=bool(channels_last),
    )
    if _state.trace is None and type(x) is Tensor:
        _patches_abstract(aval_of(x), **params)
        return _wrap(_patches_impl(x._value, **params))
    return conv_patches_p.bind(x, **params)


def conv_patches_transpose(cols, input_shape, *, strides=None, padding=None, dilation=None, channels_last=True):
    """The adjoint of ``conv_patches``: sum windows ``(N, *out_spatial, *kernel, C)`` (or, with
    ``channels_last=False``, ``(N, C, *kernel, *out_spatial)``) back into ``(N, C, *input_shape)`` (col2im).

    Example:
        >>> conv_patches_transpose(fl.ones((1, 2, 2, 2, 2, 1)), (3, 3))[0, 0]
        Tensor([[1., 2., 1.],
               [2., 4., 2.],
               [1., 2., 1.]], dtype=float32)
    """
    input_shape = tuple(int(s) for s in input_shape)
    strides, padding, dilation = _params(len(input_shape), strides, padding, dilation)
    params = dict(
        input_shape=input_shape, strides=strides, padding=padding, dilation=dilation, channels_last=bool(channels_last)
    )
    if _state.trace is None and type(cols) is Tensor:
        _col2im_abstract(aval_of(cols), **params)
        return _wrap(_col2im_impl(cols._value, **params))
    return conv_patches_transpose_p.bind(cols, **params)
