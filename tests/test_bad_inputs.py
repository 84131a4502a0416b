"""Bad input across the public API: every row must raise a funclib error or a standard TypeError / ValueError /
IndexError whose message names the function, the argument and what was expected. An internal AttributeError,
KeyError, ZeroDivisionError or UnboundLocalError, any other exception type, or a returned value fails the row.

Each row is ``case(id, thunk, *needles)``: the thunk makes the bad call, and every needle must appear in the
message (the function's name and the argument, at least). ``allowed=`` widens the accepted types where Python's
convention is another one (a missing file is a FileNotFoundError)."""

from __future__ import annotations

import os
import pickle
from collections.abc import Callable
from typing import NamedTuple

import funclib.nn as nn
import funclib.nn.functional as F
import funclib.optim as optim
import numpy as np
import pytest
from funclib.optim import lr_scheduler as S

import funclib as fl
import funclib.testing as T
from funclib import random as R
from funclib.errors import FunclibError

ALLOWED = (FunclibError, TypeError, ValueError, IndexError)
INTERNAL = (AttributeError, KeyError, ZeroDivisionError, UnboundLocalError)


class Case(NamedTuple):
    id: str
    fn: Callable
    needles: tuple[str, ...]
    allowed: tuple


CASES: list[Case] = []


def case(id: str, fn: Callable, *needles: str, allowed: tuple = ALLOWED) -> None:
    CASES.append(Case(id, fn, needles, allowed))


def x3():
    return fl.ones(3)


def m23():
    return fl.ones((2, 3))


def sq():
    return fl.asarray(np.eye(3) + 1.0)


def key():
    return R.key(0)


def _setitem(obj, idx, value):
    obj[idx] = value


def _save_to(path_name):
    def go(obj):
        import tempfile

        fl.save(obj, f"{tempfile.mkdtemp()}/{path_name}")

    return go


# ---------------------------------------------------------------------------------------------------------------
# creation

case("asarray-object", lambda: fl.asarray(object()), "asarray", "object")
case("asarray-copy-false", lambda: fl.asarray(np.zeros(3), copy=False), "asarray", "copy=False")
case("asarray-ragged", lambda: fl.asarray([[1.0, 2.0], [3.0]]), "asarray", "sequence")
case("asarray-strings", lambda: fl.asarray(["a", "b"]), "asarray", "<U1")
case("asarray-bad-dtype", lambda: fl.asarray([1.0], dtype="bogus"), "bogus", "dtype")
case("asarray-int-overflow", lambda: fl.asarray(2**70), "asarray", "int64")
case("asarray-int8-overflow", lambda: fl.asarray(300, dtype=fl.int8), "asarray", "int8")
case("asarray-device", lambda: fl.asarray([1.0], device="tpu:0"), "asarray", "'tpu:0'", "'cuda:N'")
case("asarray-complex-to-float", lambda: fl.asarray(fl.asarray([1j]), dtype=fl.float32), "complex", "float32")
case("tensor-object", lambda: fl.tensor({1, 2}), "asarray", "set")
case("zeros-negative", lambda: fl.zeros(-1), "zeros", "negative")
case("zeros-float-dim", lambda: fl.zeros((2, 1.5)), "zeros", "shape")
case("zeros-str-shape", lambda: fl.zeros("abc"), "zeros", "shape")
case("ones-negative", lambda: fl.ones((2, -3)), "ones", "negative")
case("empty-negative", lambda: fl.empty((-2,)), "empty", "negative")
case("full-bad-fill", lambda: fl.full((2,), "x"), "full", "fill_value")
case("full-shape", lambda: fl.full("ab", 1.0), "full", "shape")
case("zeros-device", lambda: fl.zeros(2, device="gpu"), "zeros", "'gpu'")
case("zeros-like-str", lambda: fl.zeros_like("abc"), "zeros_like", "str")
case("full-like-bad-fill", lambda: fl.full_like(x3(), "x"), "full_like", "fill_value")
case("arange-step-zero", lambda: fl.arange(0, 10, 0), "arange", "step")
case("arange-str", lambda: fl.arange("a"), "arange", "str")
case("linspace-negative-num", lambda: fl.linspace(0.0, 1.0, -1), "linspace", "num")
case("linspace-float-num", lambda: fl.linspace(0.0, 1.0, 2.5), "linspace", "num")
case("eye-negative", lambda: fl.eye(-1), "eye", "n_rows")
case("eye-k-str", lambda: fl.eye(2, k="a"), "eye", "k")
case("tril-1d", lambda: fl.tril(x3()), "tril", "2")
case("triu-0d", lambda: fl.triu(fl.asarray(1.0)), "triu", "2")
case("meshgrid-2d", lambda: fl.meshgrid(m23(), x3()), "meshgrid", "1-D")
case("meshgrid-indexing", lambda: fl.meshgrid(x3(), x3(), indexing="bogus"), "meshgrid", "indexing")
case("from-dlpack-int", lambda: fl.from_dlpack(3), "from_dlpack", "__dlpack__")
case("from-dlpack-list", lambda: fl.from_dlpack([1.0]), "from_dlpack", "__dlpack__")
case("astype-bogus", lambda: fl.astype(x3(), "bogus"), "bogus", "dtype")
case("astype-complex-real", lambda: fl.astype(fl.asarray([1j]), fl.float32), "astype", "imaginary")
case("method-astype-bogus", lambda: x3().astype("bogus"), "bogus", "dtype")

# ---------------------------------------------------------------------------------------------------------------
# elementwise: every unary function given a string, every binary function given mismatched shapes

_UNARY = (
    "abs acos acosh asin asinh atan atanh cbrt ceil conj cos cosh digamma erf erfinv exp exp2 expm1 floor imag "
    "isfinite isinf isnan lgamma log log10 log1p log2 logical_not negative positive real reciprocal round rsqrt sign "
    "signbit sin sinh sqrt square tan tanh trunc sigmoid relu relu6 silu gelu elu softplus log_sigmoid "
    "bitwise_invert leaky_relu"
).split()
for _n in _UNARY:
    case(f"{_n}-str", lambda _n=_n: getattr(fl, _n)("abc"), _n, "str")

_BINARY = (
    "add subtract multiply divide pow maximum minimum atan2 hypot copysign logaddexp nextafter remainder "
    "floor_divide equal not_equal less less_equal greater greater_equal"
).split()
for _n in _BINARY:
    case(f"{_n}-shapes", lambda _n=_n: getattr(fl, _n)(fl.ones(3), fl.ones(4)), _n, "(3,)", "(4,)")
for _n in "bitwise_and bitwise_or bitwise_xor bitwise_left_shift bitwise_right_shift".split():
    case(f"{_n}-float", lambda _n=_n: getattr(fl, _n)(x3(), x3()), _n, "float32")
for _n in "logical_and logical_or logical_xor".split():
    case(f"{_n}-shapes", lambda _n=_n: getattr(fl, _n)(fl.ones(3, dtype=fl.bool), fl.ones(2, dtype=fl.bool)), _n,
         "(3,)", "(2,)")
case("add-str", lambda: fl.add(x3(), "a"), "add", "str")
case("operator-add-list-of-str", lambda: x3() + ["a"], "<U1")
case("where-shapes", lambda: fl.where(fl.ones(3, dtype=fl.bool), fl.ones(2), 0.0), "where", "(3,)", "(2,)")
case("clip-str", lambda: fl.clip(x3(), "a"), "clip", "str")
case("polygamma-float-order", lambda: fl.polygamma(1.5, x3()), "polygamma", "n")
case("polygamma-negative-order", lambda: fl.polygamma(-1, x3()), "polygamma", "n")
case("one-hot-float-labels", lambda: fl.one_hot(x3(), 3), "one_hot", "float32")
case("one-hot-out-of-range", lambda: fl.one_hot(fl.asarray([0, 3]), 3), "one_hot", "3", "num_classes")
case("one-hot-negative-label", lambda: fl.one_hot(fl.asarray([-1, 0]), 3), "one_hot", "-1", "num_classes")
case("one-hot-num-classes", lambda: fl.one_hot(fl.asarray([0]), 0), "one_hot", "num_classes")
case("softmax-axis", lambda: fl.softmax(x3(), axis=3), "softmax", "axis")
case("log-softmax-axis", lambda: fl.log_softmax(x3(), axis=-2), "log_softmax", "axis")
case("gelu-approximate", lambda: fl.gelu(x3(), approximate="fast"), "gelu", "approximate")
case("normalize-axis", lambda: fl.normalize(x3(), axis=2), "axis")

# ---------------------------------------------------------------------------------------------------------------
# reductions and scans

for _n in "sum mean prod max min var std all any argmax argmin logsumexp count_nonzero".split():
    case(f"{_n}-axis", lambda _n=_n: getattr(fl, _n)(m23(), axis=2), _n, "axis")
for _n in "cumsum cumulative_sum cumprod cummax cummin logcumsumexp".split():
    case(f"{_n}-axis", lambda _n=_n: getattr(fl, _n)(m23(), axis=5), _n, "axis")
case("max-empty", lambda: fl.max(fl.zeros(0)), "max", "zero-size")
case("argmin-empty", lambda: fl.argmin(fl.zeros(0)), "argmin", "empty")
case("sum-axis-str", lambda: fl.sum(x3(), axis="a"), "sum", "axis")
case("sum-duplicate-axes", lambda: fl.sum(m23(), axis=(0, 0)), "sum", "axis")
case("argmax-axis-tuple", lambda: fl.argmax(m23(), axis=(0, 1)), "argmax", "axis")
case("var-correction", lambda: fl.var(x3(), correction="a"), "var", "correction")
case("mean-int", lambda: fl.mean(fl.asarray([1, 2])), "mean", "int64")
case("method-sum-dim", lambda: m23().sum(dim=4), "sum", "axis")

# ---------------------------------------------------------------------------------------------------------------
# manipulation

case("reshape-size", lambda: fl.reshape(m23(), (4,)), "reshape", "(2, 3)", "(4,)")
case("reshape-two-unknown", lambda: fl.reshape(m23(), (-1, -1)), "reshape", "-1")
case("reshape-negative", lambda: fl.reshape(m23(), (-2, 3)), "reshape", "-2")
case("method-reshape-str", lambda: m23().reshape("ab"), "reshape", "shape")
case("concat-shapes", lambda: fl.concat([m23(), fl.ones((2, 2))]), "concat", "(2, 3)", "(2, 2)")
case("concat-empty", lambda: fl.concat([]), "concat", "at least one")
case("concat-axis", lambda: fl.concat([x3(), x3()], axis=1), "concat", "axis")
case("concat-not-a-list", lambda: fl.concat(x3()), "concat", "list or tuple")
case("stack-shapes", lambda: fl.stack([fl.ones(2), fl.ones(3)]), "stack", "(2,)", "(3,)")
case("stack-empty", lambda: fl.stack([]), "stack", "at least one")
case("stack-axis", lambda: fl.stack([x3(), x3()], axis=3), "stack", "axis")
case("squeeze-not-one", lambda: fl.squeeze(m23(), axis=0), "squeeze", "axis 0")
case("squeeze-axis-range", lambda: fl.squeeze(m23(), axis=4), "squeeze", "axis")
case("expand-dims-axis", lambda: fl.expand_dims(x3(), axis=3), "expand_dims", "axis")
case("permute-dims-perm", lambda: fl.permute_dims(m23(), (0, 0)), "permute_dims", "(0, 0)")
case("permute-dims-length", lambda: fl.permute_dims(m23(), (0,)), "permute_dims", "(0,)")
case("transpose-method-perm", lambda: m23().transpose(2, 0), "permute_dims", "axis 2")
case("flip-axis", lambda: fl.flip(x3(), axis=1), "flip", "axis")
case("roll-mismatch", lambda: fl.roll(m23(), (1, 2), axis=(0,)), "roll", "shift")
case("roll-axis", lambda: fl.roll(x3(), 1, axis=2), "roll", "axis")
case("tile-negative", lambda: fl.tile(x3(), (-1,)), "tile", "repetitions")
case("repeat-negative", lambda: fl.repeat(x3(), -1), "repeat", "repeats")
case("repeat-axis", lambda: fl.repeat(x3(), 2, axis=1), "repeat", "axis")
case("repeat-length", lambda: fl.repeat(x3(), fl.asarray([1, 2])), "repeat", "repeats")
case("broadcast-to", lambda: fl.broadcast_to(x3(), (2, 4)), "broadcast_to", "(3,)", "(2, 4)")
case("broadcast-arrays", lambda: fl.broadcast_arrays(x3(), fl.ones(4)), "broadcast", "(3,)", "(4,)")
case("moveaxis-source", lambda: fl.moveaxis(m23(), 3, 0), "moveaxis", "axis")
case("moveaxis-lengths", lambda: fl.moveaxis(m23(), (0, 1), (0,)), "moveaxis", "source")
case("swapaxes-axis", lambda: fl.swapaxes(m23(), 0, 2), "swapaxes", "axis")
case("split-uneven", lambda: fl.split(x3(), 2), "split", "2")
case("split-axis", lambda: fl.split(x3(), 3, axis=1), "split", "axis")
case("unstack-axis", lambda: fl.unstack(x3(), axis=1), "unstack", "axis")
case("pad-width", lambda: fl.pad(m23(), ((1, 1),) * 3), "pad", "pad_width")
case("pad-negative", lambda: fl.pad(x3(), -1), "pad", "pad_width")
case("pad-mode", lambda: fl.pad(x3(), 1, mode="bogus"), "pad", "mode")
case("flatten-dims", lambda: fl.flatten(m23(), 1, 0), "flatten", "start")
case("ravel-str", lambda: fl.ravel("abc"), "ravel", "str")
case("matrix-transpose-1d", lambda: fl.matrix_transpose(x3()), "matrix_transpose", "2")
case("tensor-T-3d", lambda: fl.ones((2, 2, 2)).T, "T", "2-D")
case("atleast-1d-str", lambda: fl.atleast_1d("abc"), "atleast_1d", "str")

# ---------------------------------------------------------------------------------------------------------------
# indexing, gather/scatter, searching, sorting, sets

case("index-out-of-range", lambda: x3()[5], "index 5", "size 3")
case("index-negative-range", lambda: x3()[-4], "index -4", "size 3")
case("index-too-many", lambda: x3()[0, 0], "too many indices", "1")
case("index-float", lambda: x3()[1.5], "index", "float")
case("index-str", lambda: x3()["a"], "index", "str")
case("index-list-out-of-range", lambda: x3()[[0, 5]], "index 5", "size 3")
case("index-tensor-out-of-range", lambda: x3()[fl.asarray([0, 3])], "index 3", "size 3")
case("index-float-tensor", lambda: x3()[fl.asarray([0.0])], "indices", "float32")
case("mask-wrong-length", lambda: x3()[fl.asarray([True, False])], "mask", "(2,)", "(3,)")
case("mask-wrong-shape", lambda: m23()[fl.ones((3, 2), dtype=fl.bool)], "mask", "(3, 2)", "(2, 3)")
case("numpy-mask-wrong-length", lambda: x3()[np.array([True, False])], "mask", "(2,)", "(3,)")
case("setitem", lambda: _setitem(x3(), 0, 5.0), "immutable", ".at[idx].set(v)")
case("at-setitem", lambda: _setitem(x3().at, 0, 5.0), ".at[0].set(5.0)", "immutable")
case("at-set-str", lambda: x3().at[0].set("a"), "str")
case("at-set-shape", lambda: x3().at[0:2].set(fl.ones(3)), "(3,)", "(2,)")
case("at-index-str", lambda: x3().at["a"].set(1.0), "index", "str")
case("at-out-of-range", lambda: x3().at[5].get(), "index 5", "size 3")
case("take-out-of-range", lambda: fl.take(x3(), fl.asarray([3])), "take", "3")
case("take-axis", lambda: fl.take(m23(), fl.asarray([0]), axis=2), "take", "axis")
case("take-float-index", lambda: fl.take(x3(), fl.asarray([0.0])), "take", "float32")
case("take-along-axis-ndim", lambda: fl.take_along_axis(m23(), fl.asarray([0]), axis=1), "take_along_axis", "rank")
case("dynamic-slice-sizes", lambda: fl.dynamic_slice(x3(), (0,), (4,)), "dynamic_slice", "slice_sizes")
case("dynamic-slice-starts", lambda: fl.dynamic_slice(m23(), (0,), (1, 1)), "dynamic_slice", "starts")
case("dynamic-update-slice", lambda: fl.dynamic_update_slice(x3(), fl.ones(4), (0,)), "dynamic_update_slice", "f32[4]")
case("searchsorted-2d", lambda: fl.searchsorted(m23(), x3()), "searchsorted", "1-D")
case("searchsorted-side", lambda: fl.searchsorted(x3(), x3(), side="middle"), "searchsorted", "side")
case("sort-axis", lambda: fl.sort(x3(), axis=1), "sort", "axis")
case("argsort-axis", lambda: fl.argsort(x3(), axis=-2), "argsort", "axis")
case("sort-complex", lambda: fl.sort(fl.asarray([1j, 2j])), "sort", "complex")
case("nonzero-0d", lambda: fl.nonzero(fl.asarray(1.0)), "nonzero", "0-d")
case("unique-values-str", lambda: fl.unique_values("abc"), "unique_values", "str")
case("len-0d", lambda: len(fl.asarray(1.0)), "len()", "0-d")
case("iter-0d", lambda: iter(fl.asarray(1.0)), "iteration", "0-d")
case("float-of-vector", lambda: float(x3()), "float", "(3,)")
case("bool-of-vector", lambda: bool(x3()), "truth value", "(3,)")
case("item-of-vector", lambda: x3().item(), "item()", "(3,)")
case("index-of-float", lambda: [0, 1][fl.asarray(1.0)], "integer", "float32")
case("hash", lambda: hash(x3()), "unhashable", "id(x)")
case("to-device", lambda: x3().to_device("gpu"), "to_device", "'gpu'")

# ---------------------------------------------------------------------------------------------------------------
# linear algebra

L = fl.linalg
case("matmul-shapes", lambda: fl.matmul(m23(), m23()), "matmul", "(2, 3)")
case("matmul-0d", lambda: fl.matmul(fl.asarray(1.0), x3()), "matmul", "1-D")
case("matmul-operator", lambda: m23() @ fl.ones(2), "matmul", "(2,)")
case("vecdot-shapes", lambda: fl.vecdot(x3(), fl.ones(4)), "vecdot", "(3,)", "(4,)")
case("inner-shapes", lambda: fl.inner(x3(), fl.ones(4)), "inner", "3", "4")
case("tensordot-axes", lambda: fl.tensordot(m23(), m23(), axes=((0,), (1,))), "tensordot", "2", "3")
case("tensordot-axes-count", lambda: fl.tensordot(m23(), m23(), axes=3), "tensordot", "axes")
case("einsum-subscripts", lambda: fl.einsum("ij,jk->ik", m23(), m23()), "einsum", "j")
case("einsum-operand-count", lambda: fl.einsum("ij,jk->ik", m23()), "einsum", "operand")
case("einsum-bad-char", lambda: fl.einsum("i$->i", x3()), "einsum", "$")
case("diagonal-1d", lambda: fl.diagonal(x3()), "diagonal", "2")
case("inv-non-square", lambda: L.inv(m23()), "inv", "(2, 3)")
case("inv-1d", lambda: L.inv(x3()), "inv", "2")
case("det-non-square", lambda: L.det(m23()), "det", "(2, 3)")
case("slogdet-non-square", lambda: L.slogdet(m23()), "slogdet", "(2, 3)")
case("solve-shapes", lambda: L.solve(sq(), fl.ones(4)), "solve", "(4,)")
case("solve-non-square", lambda: L.solve(m23(), fl.ones(2)), "solve", "(2, 3)")
case("cholesky-non-square", lambda: L.cholesky(m23()), "cholesky", "(2, 3)")
case("qr-1d", lambda: L.qr(x3()), "qr", "2")
case("qr-mode", lambda: L.qr(sq(), mode="bogus"), "qr", "mode")
case("svd-1d", lambda: L.svd(x3()), "svd", "2")
case("svdvals-1d", lambda: L.svdvals(x3()), "svdvals", "2")
case("eigh-non-square", lambda: L.eigh(m23()), "eigh", "(2, 3)")
case("eigvalsh-non-square", lambda: L.eigvalsh(m23()), "eigvalsh", "(2, 3)")
case("matrix-norm-ord", lambda: L.matrix_norm(sq(), ord="bogus"), "matrix_norm", "ord")
case("matrix-norm-1d", lambda: L.matrix_norm(x3()), "matrix_norm", "2")
case("vector-norm-ord", lambda: L.vector_norm(x3(), ord="fro"), "vector_norm", "ord")
case("vector-norm-axis", lambda: L.vector_norm(x3(), axis=2), "vector_norm", "axis")
case("matrix-power-float", lambda: L.matrix_power(sq(), 1.5), "matrix_power", "n")
case("matrix-power-non-square", lambda: L.matrix_power(m23(), 2), "matrix_power", "(2, 3)")
case("matrix-rank-1d", lambda: L.matrix_rank(x3()), "matrix_rank", "2")
case("pinv-1d", lambda: L.pinv(x3()), "pinv", "2")
case("trace-1d", lambda: L.trace(x3()), "trace", "2")
case("cross-size", lambda: L.cross(fl.ones(2), fl.ones(2)), "cross", "3")
case("cross-shapes", lambda: L.cross(fl.ones(3), fl.ones((2, 4))), "cross", "3")
case("solve-triangular-shapes", lambda: L.solve_triangular(sq(), fl.ones(4)), "solve_triangular", "(4,)")
case("lu-1d", lambda: L.lu(x3()), "lu", "2")
case("outer-2d", lambda: L.outer(m23(), x3()), "outer", "1-D")
case("linalg-vecdot-axis", lambda: L.vecdot(x3(), x3(), axis=2), "vecdot", "axis")

# ---------------------------------------------------------------------------------------------------------------
# fft

FFT = fl.fft
case("fft-n-zero", lambda: FFT.fft(x3(), n=0), "fft", "n")
case("fft-axis", lambda: FFT.fft(x3(), axis=1), "fft", "axis")
case("fft-norm", lambda: FFT.fft(x3(), norm="bogus"), "fft", "norm")
case("ifft-n-negative", lambda: FFT.ifft(x3(), n=-2), "ifft", "n")
case("rfft-complex", lambda: FFT.rfft(fl.asarray([1j, 2j])), "rfft", "complex")
case("irfft-n", lambda: FFT.irfft(fl.asarray([1j, 2j]), n=-1), "irfft", "n")
case("fftn-axes", lambda: FFT.fftn(m23(), axes=(0, 2)), "fftn", "axis")
case("fftn-s-length", lambda: FFT.fftn(m23(), s=(2,), axes=(0, 1)), "fftn", "s")
case("rfftn-complex", lambda: FFT.rfftn(fl.asarray([[1j]])), "rfftn", "complex")
case("fftfreq-zero", lambda: FFT.fftfreq(0), "fftfreq", "n")
case("fftfreq-str", lambda: FFT.fftfreq("a"), "fftfreq", "n")
case("rfftfreq-negative", lambda: FFT.rfftfreq(-1), "rfftfreq", "n")
case("fftshift-axes", lambda: FFT.fftshift(x3(), axes=2), "fftshift", "axis")
case("hfft-norm", lambda: FFT.hfft(fl.asarray([1j, 2j]), norm="fast"), "hfft", "norm")

# ---------------------------------------------------------------------------------------------------------------
# random

case("key-str", lambda: R.key("a"), "key", "seed")
case("key-float", lambda: R.key(1.5), "key", "seed")
case("normal-not-a-key", lambda: R.normal(fl.ones(3), (2,)), "normal", "key")
case("normal-shape", lambda: R.normal(key(), (-1,)), "normal", "shape")
case("uniform-dtype-int", lambda: R.uniform(key(), (2,), dtype=fl.int32), "uniform", "int32")
case("uniform-bounds", lambda: R.uniform(key(), (2,), minval=1.0, maxval=0.0), "uniform", "minval", "maxval")
case("randint-empty-range", lambda: R.randint(key(), (3,), 5, 5), "randint", "minval", "maxval")
case("randint-float-dtype", lambda: R.randint(key(), (3,), 0, 5, dtype=fl.float32), "randint", "float32")
case("global-randint-empty-range", lambda: fl.randint(5, 5, (3,)), "randint", "low", "high")
case("global-randint-size", lambda: fl.randint(0, 5, (-1,)), "randint", "shape")
case("categorical-axis", lambda: R.categorical(key(), m23(), axis=2), "categorical", "axis")
case("choice-no-replace", lambda: R.choice(key(), 3, (5,), replace=False), "choice", "replace")
case("choice-p-shape", lambda: R.choice(key(), 3, (2,), p=fl.ones(4) / 4), "choice", "p")
case("split-not-a-key", lambda: R.split(fl.ones(5)), "split", "key")
case("permutation-str", lambda: R.permutation(key(), "a"), "permutation", "str")
case("bernoulli-p", lambda: R.bernoulli(key(), 1.5, (2,)), "bernoulli", "p")
case("gamma-shape-param", lambda: R.gamma(key(), -1.0, (2,)), "gamma", "a")
case("poisson-lam", lambda: R.poisson(key(), -1.0, (2,)), "poisson", "lam")
case("dirichlet-alpha-0d", lambda: R.dirichlet(key(), fl.asarray(1.0)), "dirichlet", "alpha")
case("multivariate-normal-cov", lambda: R.multivariate_normal(key(), x3(), fl.eye(2)), "multivariate_normal", "cov")
case("multivariate-normal-method", lambda: R.multivariate_normal(key(), x3(), fl.eye(3), method="bogus"),
     "multivariate_normal", "method")
case("truncated-normal-bounds", lambda: R.truncated_normal(key(), 1.0, -1.0, (2,)), "truncated_normal", "lower")
case("fold-in-str", lambda: R.fold_in(key(), "a"), "fold_in", "data")
case("exponential-shape", lambda: R.exponential(key(), (2, -1)), "exponential", "shape")
case("bits-dtype", lambda: R.bits(key(), (2,), dtype=fl.float32), "bits", "float32")
case("randn-negative", lambda: fl.randn(-1), "randn", "shape")
case("rand-str", lambda: fl.rand("a"), "rand", "shape")
case("randperm-negative", lambda: fl.randperm(-1), "randperm", "n")
case("manual-seed-str", lambda: fl.manual_seed("a"), "manual_seed", "seed")
case("global-rng-under-jit", lambda: fl.jit(lambda x: x + fl.randn(3))(x3()), "randn", "key")

# ---------------------------------------------------------------------------------------------------------------
# pytrees

TR = fl.tree
case("tree-map-not-callable", lambda: TR.map(3, [x3()]), "map", "callable")
case("tree-map-structures", lambda: TR.map(fl.add, [x3()], [x3(), x3()]), "map", "structure")
case("tree-unflatten-count", lambda: TR.unflatten(TR.structure([1, 2]), [1]), "unflatten", "2")
case("tree-transpose", lambda: TR.transpose(TR.structure([0, 0]), TR.structure((0, 0)), [(1, 2), (3,)]),
     "transpose", "outer tree")
case("tree-reduce-not-callable", lambda: TR.reduce(3, [1, 2]), "reduce", "callable")
case("tree-register-not-callable", lambda: TR.register_pytree_node(type("K", (), {}), 3, 4), "register_pytree_node",
     "callable")
case("tree-keystr-path", lambda: TR.keystr(3), "keystr", "path")
case("tree-flatten-is-leaf", lambda: TR.flatten([1], is_leaf=3), "flatten", "is_leaf")

# ---------------------------------------------------------------------------------------------------------------
# transforms


def _f1(x):
    return (x * x).sum()


def _loop_body(i, c):
    return c + 1.0


for _n in "jit grad value_and_grad vmap jacfwd jacrev hessian make_jaxpr checkpoint custom_jvp custom_vjp".split():
    case(f"{_n}-not-callable", lambda _n=_n: getattr(fl, _n)(3), _n, "callable", "int")
case("remat-not-callable", lambda: fl.remat(3), "checkpoint", "callable")  # remat is checkpoint
case("eval-shape-not-callable", lambda: fl.eval_shape(3, x3()), "eval_shape", "callable")
case("jvp-not-callable", lambda: fl.jvp(3, (x3(),), (x3(),)), "jvp", "callable")
case("vjp-not-callable", lambda: fl.vjp(3, x3()), "vjp", "callable")
case("linearize-not-callable", lambda: fl.linearize(3, x3()), "linearize", "callable")
case("linear-transpose-not-callable", lambda: fl.linear_transpose(3, x3()), "linear_transpose", "callable")
case("hvp-not-callable", lambda: fl.hvp(3, (x3(),), (x3(),)), "hvp", "callable")
case("jit-static-argnums", lambda: fl.jit(_f1, static_argnums=3)(x3()), "jit", "static_argnums")
case("jit-static-argnames", lambda: fl.jit(_f1, static_argnames="nope")(x3()), "jit", "nope")
case("jit-object-argument", lambda: fl.jit(_f1)(object()), "jit", "object")
case("jit-unhashable-static", lambda: fl.jit(lambda x, n: x * n[0], static_argnums=1)(x3(), [2]), "jit", "hashable")
case("jit-max-traces", lambda: fl.jit(_f1, max_traces=0)(x3()), "jit", "max_traces")
case("grad-non-scalar", lambda: fl.grad(lambda x: x * 2.0)(x3()), "grad", "scalar", "(3,)")
case("grad-int-input", lambda: fl.grad(_f1)(fl.asarray([1, 2])), "grad", "int64")
case("grad-argnums-range", lambda: fl.grad(_f1, argnums=3)(x3()), "grad", "argnums=3")
case("grad-argnums-str", lambda: fl.grad(_f1, argnums="a")(x3()), "grad", "argnums")
case("grad-argnames-missing", lambda: fl.grad(_f1, argnames="y")(x3()), "grad", "'y'")
case("grad-has-aux-not-pair", lambda: fl.grad(_f1, has_aux=True)(x3()), "grad", "has_aux")
case("grad-str-output", lambda: fl.grad(lambda x: "loss")(x3()), "grad", "str")
case("grad-complex-output", lambda: fl.grad(lambda x: (x * 1j).sum())(x3()), "grad", "complex64")
case("grad-object-arg", lambda: fl.grad(_f1)(object()), "grad", "object")
case("vmap-in-axes-range", lambda: fl.vmap(_f1, in_axes=5)(m23()), "vmap", "in_axes")
case("vmap-in-axes-length", lambda: fl.vmap(_f1, in_axes=(0, 0))(m23()), "vmap", "in_axes")
case("vmap-sizes", lambda: fl.vmap(lambda a, b: a + b)(fl.ones((2, 3)), fl.ones((3, 3))), "vmap", "2", "3")
case("vmap-no-batched", lambda: fl.vmap(_f1, in_axes=None)(x3()), "vmap", "axis_size")
case("vmap-out-axes", lambda: fl.vmap(lambda a: a, out_axes=5)(m23()), "vmap", "out_axes")
case("vmap-chunk-size", lambda: fl.vmap(_f1, chunk_size=0)(m23()), "vmap", "chunk_size")
case("vmap-0d", lambda: fl.vmap(_f1)(fl.asarray(1.0)), "vmap", "shape ()")
case("vmap-in-axes-str", lambda: fl.vmap(_f1, in_axes="a")(m23()), "vmap", "in_axes")
case("jvp-not-tuples", lambda: fl.jvp(_f1, x3(), x3()), "jvp", "tuple")
case("jvp-shapes", lambda: fl.jvp(_f1, (x3(),), (fl.ones(4),)), "jvp", "(4,)", "(3,)")
case("jvp-dtype", lambda: fl.jvp(_f1, (x3(),), (fl.ones(3, dtype=fl.float64),)), "jvp", "float64", "astype")
case("jvp-count", lambda: fl.jvp(_f1, (x3(),), (x3(), x3())), "jvp", "1 primals", "2 tangents")
case("vjp-cotangent-shape", lambda: fl.vjp(lambda x: x * 2.0, x3())[1](fl.ones(4)), "vjp", "(4,)", "(3,)")
case("vjp-cotangent-structure", lambda: fl.vjp(lambda x: x * 2.0, x3())[1]((x3(), x3())), "vjp", "structure")
case("jacfwd-argnums", lambda: fl.jacfwd(fl.sin, argnums=3)(x3()), "jacfwd", "argnums")
case("jacrev-argnums", lambda: fl.jacrev(fl.sin, argnums=3)(x3()), "jacrev", "argnums")
case("hessian-argnums", lambda: fl.hessian(_f1, argnums=(0, 2))(x3()), "hessian", "argnums")
case("jacrev-int-input", lambda: fl.jacrev(fl.sin)(fl.asarray([1, 2])), "jacrev", "int64")
case("hvp-shapes", lambda: fl.hvp(_f1, (x3(),), (fl.ones(4),)), "hvp", "(4,)")
case("linear-transpose-non-linear", lambda: fl.linear_transpose(fl.sin, x3()), "linear_transpose", "'sin'")
case("linearize-tangent-structure", lambda: fl.linearize(fl.sin, x3())[1](x3(), x3()), "linearize", "structure")
case("cond-branch-not-callable", lambda: fl.cond(True, 1, 2, x3()), "cond", "true_fun", "callable")
case("cond-pred-vector", lambda: fl.cond(fl.ones(2, dtype=fl.bool), fl.sin, fl.cos, x3()), "cond", "pred", "(2,)")
case("cond-pred-str", lambda: fl.cond("yes", fl.sin, fl.cos, x3()), "cond", "pred", "str")
case("cond-branch-outputs", lambda: fl.cond(True, lambda a: a, lambda a: a.sum(), x3()), "cond", "f32[3]", "f32[]")
case("switch-index-float", lambda: fl.switch(1.5, [fl.sin, fl.cos], x3()), "switch", "index")
case("switch-empty", lambda: fl.switch(0, [], x3()), "switch", "branch")
case("switch-not-callable", lambda: fl.switch(0, [fl.sin, 3], x3()), "switch", "functions")
case("switch-branch-outputs", lambda: fl.switch(0, [lambda a: a, lambda a: a[:2]], x3()), "switch", "f32[2]")
case("scan-not-callable", lambda: fl.scan(3, 0.0, x3()), "scan", "callable")
case("scan-carry-shape", lambda: fl.scan(lambda c, x: (fl.stack([c, x]), x), 0.0, x3()), "scan", "carry")
case("scan-returns-not-pair", lambda: fl.scan(lambda c, x: c + x, 0.0, x3()), "scan", "pair")
case("scan-xs-lengths", lambda: fl.scan(lambda c, x: (c, x), 0.0, (x3(), fl.ones(4))), "scan", "3", "4")
case("scan-length-mismatch", lambda: fl.scan(lambda c, x: (c, x), 0.0, x3(), length=5), "scan", "length")
case("scan-no-length", lambda: fl.scan(lambda c, x: (c, x), 0.0, None), "scan", "length")
case("scan-0d-xs", lambda: fl.scan(lambda c, x: (c, x), 0.0, fl.asarray(1.0)), "scan", "0-d")
case("while-not-callable", lambda: fl.while_loop(3, lambda c: c, 0.0), "while_loop", "callable")
case("while-cond-vector", lambda: fl.while_loop(lambda c: c < 3.0, lambda c: c + 1.0, x3()), "while_loop",
     "cond_fun", "bool[3]")
case("while-body-shape", lambda: fl.while_loop(lambda c: c.sum() < 3.0, lambda c: fl.concat([c, c]), x3()),
     "while_loop", "body_fun", "f32[6]")
case("while-body-dtype", lambda: fl.while_loop(lambda c: c < 3, lambda c: c + 1.5, fl.asarray(0)), "while_loop",
     "body_fun")
case("fori-bounds-float", lambda: fl.fori_loop(0.5, 3, _loop_body, 0.0), "fori_loop", "lower")
case("fori-body-not-callable", lambda: fl.fori_loop(0, 3, 3, 0.0), "fori_loop", "callable")
case("map-not-callable", lambda: fl.map(3, x3()), "map", "callable")
case("map-batch-size", lambda: fl.map(fl.sin, x3(), batch_size=0), "map", "batch_size")
case("associative-scan-not-callable", lambda: fl.associative_scan(3, x3()), "associative_scan", "callable")
case("associative-scan-axis", lambda: fl.associative_scan(fl.add, x3(), axis=2), "associative_scan", "axis")
case("custom-jvp-defjvp-not-callable", lambda: fl.custom_jvp(fl.sin).defjvp(3), "defjvp", "callable")
case("custom-vjp-defvjp-not-callable", lambda: fl.custom_vjp(fl.sin).defvjp(3, 4), "defvjp", "callable")
case("custom-vjp-no-rule", lambda: fl.grad(lambda x: fl.custom_vjp(fl.sin)(x).sum())(x3()), "custom_vjp", "defvjp")


def _custom_vjp_bad_count():
    f = fl.custom_vjp(lambda a, b: a * b)
    f.defvjp(lambda a, b: (a * b, (a, b)), lambda res, g: (g,))
    return fl.grad(lambda a: f(a, a).sum())(x3())


case("custom-vjp-bwd-count", _custom_vjp_bad_count, "custom_vjp", "bwd", "2")
case("custom-jvp-nondiff-argnums", lambda: fl.custom_jvp(fl.sin, nondiff_argnums=(3,))(x3()), "custom_jvp",
     "nondiff_argnums")
case("checkpoint-static-argnums", lambda: fl.checkpoint(_f1, static_argnums=(2,))(x3()), "checkpoint", "static_argnums")
case("psum-outside-vmap", lambda: fl.psum(x3(), "i"), "psum", "'i'")
case("psum-wrong-name", lambda: fl.vmap(lambda a: fl.psum(a, "j"), axis_name="i")(x3()), "psum", "'j'")
case("axis-index-outside", lambda: fl.axis_index("i"), "axis_index", "'i'")
case("bool-under-jit", lambda: fl.jit(lambda x: x * 2.0 if x.sum() > 0 else x)(x3()), "jit", "'x'", "static_argnames")
case("numpy-under-grad", lambda: fl.grad(lambda x: np.sin(x).sum())(x3()), "grad", "fl.stop_gradient")
case("nonzero-under-jit", lambda: fl.jit(fl.nonzero)(x3()), "nonzero", "jit")
case("no-grad-not-callable", lambda: fl.no_grad()(3), "no_grad", "callable")
case("backward", lambda: x3().sum().backward(), "backward", "nn.value_and_grad", "optimizer.update")
case("eval-jaxpr-arity", lambda: fl.eval_jaxpr(fl.make_jaxpr(_f1)(x3()).jaxpr, [], x3(), x3()), "eval_jaxpr", "2")

# ---------------------------------------------------------------------------------------------------------------
# nn layers

case("nn.linear-negative", lambda: nn.Linear(-1, 2), "Linear", "in_features")
case("nn.linear-float", lambda: nn.Linear(2.5, 3), "Linear", "in_features")
case("nn.linear-input", lambda: nn.Linear(2, 3)(fl.ones((4, 5))), "Linear", "(4, 5)", "2")
case("nn.linear-0d-input", lambda: nn.Linear(2, 3)(fl.asarray(1.0)), "Linear", "shape ()")
case("nn.conv2d-padding-bogus", lambda: nn.Conv2d(1, 1, 3, padding="bogus"), "Conv2d", "padding", "'bogus'")
case("nn.conv2d-stride-zero", lambda: nn.Conv2d(1, 1, 3, stride=0), "Conv2d", "stride")
case("nn.conv2d-kernel-zero", lambda: nn.Conv2d(1, 1, 0), "Conv2d", "kernel_size")
case("nn.conv2d-groups", lambda: nn.Conv2d(3, 4, 3, groups=2), "Conv2d", "groups")
case("nn.conv2d-channels", lambda: nn.Conv2d(1, 1, 3)(fl.ones((1, 2, 5, 5))), "Conv2d", "(1, 2, 5, 5)")
case("nn.conv2d-input-ndim", lambda: nn.Conv2d(1, 1, 3)(fl.ones((5, 5))), "Conv2d", "(5, 5)")
case("nn.conv2d-same-stride", lambda: nn.Conv2d(1, 1, 3, stride=2, padding="same"), "padding='same'", "stride")
case("nn.conv2d-padding-mode", lambda: nn.Conv2d(1, 1, 3, padding_mode="wrap"), "Conv2d", "padding_mode")
case("nn.conv1d-dilation-zero", lambda: nn.Conv1d(1, 1, 3, dilation=0), "Conv1d", "dilation")
case("nn.conv1d-input-small", lambda: nn.Conv1d(1, 1, 5)(fl.ones((1, 1, 3))), "Conv1d", "kernel")
case("nn.conv3d-input-ndim", lambda: nn.Conv3d(1, 1, 3)(fl.ones((1, 5, 5))), "Conv3d", "(N, C, D, H, W)", "(1, 5, 5)")
case("nn.conv-transpose3d-padding-mode", lambda: nn.ConvTranspose3d(1, 1, 3, padding_mode="reflect"),
     "ConvTranspose3d", "'zeros'", "F.pad")
case("F.pad-mode-symmetric", lambda: F.pad(x3(), (1, 1), mode="symmetric"), "pad", "'reflect'", "'symmetric'")
case("F.pad-reflect-too-wide", lambda: F.pad(fl.ones((1, 3)), (3, 0), mode="reflect"), "pad", "reflect", "size 3")
case("F.pad-circular-negative", lambda: F.pad(fl.ones((1, 3)), (-1, 0), mode="circular"), "pad", "circular")
case("F.pad-value-with-mode", lambda: F.pad(fl.ones((1, 3)), (1, 0), mode="replicate", value=2.0), "value",
     "constant")
case("F.pad-widths-type", lambda: F.pad(x3(), 1), "pad", "tuple of ints")
case("F.interpolate-both", lambda: F.interpolate(fl.ones((1, 1, 4)), size=2, scale_factor=2), "interpolate",
     "exactly one")
case("F.interpolate-mode-rank", lambda: F.interpolate(fl.ones((1, 1, 4)), size=2, mode="bilinear"), "bilinear",
     "'linear'")
case("F.interpolate-bicubic", lambda: F.interpolate(fl.ones((1, 1, 4, 4)), size=2, mode="bicubic"), "bicubic",
     "bilinear")
case("F.interpolate-align-nearest", lambda: F.interpolate(fl.ones((1, 1, 4)), size=2, align_corners=True),
     "align_corners", "linear")
case("F.interpolate-rank", lambda: F.interpolate(fl.ones(4), size=2), "interpolate", "(4,)")
case("F.pixel_shuffle-channels", lambda: F.pixel_shuffle(fl.ones((1, 3, 2, 2)), 2), "pixel_shuffle", "3 channels",
     "4")
case("F.pixel_unshuffle-size", lambda: F.pixel_unshuffle(fl.ones((1, 1, 3, 4)), 2), "pixel_unshuffle", "(3, 4)")
case("nn.instance-norm-channels", lambda: nn.InstanceNorm2d(3, affine=True)(fl.ones((1, 2, 4, 4))),
     "InstanceNorm2d", "2 channels", "num_features")
case("nn.instance-norm-rank", lambda: nn.InstanceNorm2d(3)(fl.ones((3, 4))), "InstanceNorm2d", "(3, 4)")
case("F.instance_norm-no-stats", lambda: F.instance_norm(fl.ones((1, 2, 3)), use_input_stats=False),
     "instance_norm", "running_mean")
case("nn.rms-norm-shape", lambda: nn.RMSNorm(3)(fl.ones((2, 4))), "rms_norm", "(3,)", "(2, 4)")
case("nn.lrn-size", lambda: nn.LocalResponseNorm(0), "LocalResponseNorm", "size")
case("nn.transformer-batch", lambda: nn.Transformer(4, 2, 1, 1, 8)(fl.ones((3, 2, 4)), fl.ones((3, 5, 4))),
     "Transformer", "batch", "(3, 2, 4)", "(3, 5, 4)")
case("nn.decoder-activation", lambda: nn.TransformerDecoderLayer(4, 2, activation="tanh"),
     "TransformerDecoderLayer", "'tanh'")
case("nn.upsample-mode", lambda: nn.Upsample(scale_factor=2, mode="cubic"), "Upsample", "mode")
case("rnn.pack-unsorted", lambda: nn.utils.rnn.pack_padded_sequence(fl.ones((3, 2, 1)), [1, 3]),
     "pack_padded_sequence", "decreasing", "enforce_sorted=False")
case("rnn.pack-length-range", lambda: nn.utils.rnn.pack_padded_sequence(fl.ones((3, 2, 1)), [4, 1]),
     "pack_padded_sequence", "between 1 and 3")
case("rnn.pack-traced-lengths",
     lambda: fl.jit(lambda n: nn.utils.rnn.pack_padded_sequence(fl.ones((3, 1, 1)), n))(fl.asarray([2])),
     "lengths", "concrete")
case("rnn.pad-sequence-shapes", lambda: nn.utils.rnn.pad_sequence([fl.ones((2, 3)), fl.ones((2, 4))]),
     "pad_sequence", "(2, 3)", "(2, 4)")
case("rnn.pad-packed-type", lambda: nn.utils.rnn.pad_packed_sequence(fl.ones(3)), "pad_packed_sequence",
     "PackedSequence")
case("tensor.to-bogus", lambda: x3().to(3.5), "Tensor.to", "dtype")
case("tensor.to-device", lambda: x3().to("tpu"), "Tensor.to", "'tpu'")
case("nn.conv-transpose2d-stride", lambda: nn.ConvTranspose2d(1, 1, 3, stride=0), "ConvTranspose2d", "stride")
case("nn.conv-transpose2d-output-padding", lambda: nn.ConvTranspose2d(1, 1, 3, stride=1, output_padding=2),
     "ConvTranspose2d", "output_padding")
case("nn.maxpool2d-kernel-zero", lambda: nn.MaxPool2d(0), "MaxPool2d", "kernel_size")
case("nn.maxpool2d-too-big", lambda: nn.MaxPool2d(5)(fl.ones((1, 1, 3, 3))), "MaxPool2d", "kernel")
case("nn.avgpool2d-stride-zero", lambda: nn.AvgPool2d(2, stride=0), "AvgPool2d", "stride")
case("nn.avgpool1d-padding", lambda: nn.AvgPool1d(2, padding=2), "AvgPool1d", "padding")
case("nn.adaptive-avgpool2d-zero", lambda: nn.AdaptiveAvgPool2d(0), "AdaptiveAvgPool2d", "output_size")
case("nn.batchnorm-negative", lambda: nn.BatchNorm1d(-1), "BatchNorm1d", "num_features")
case("nn.batchnorm-features", lambda: nn.BatchNorm1d(3)(fl.ones((2, 4))), "BatchNorm1d", "4 channels")
case("nn.batchnorm2d-ndim", lambda: nn.BatchNorm2d(3)(fl.ones((2, 3))), "BatchNorm2d", "4D")
case("nn.layernorm-shape", lambda: nn.LayerNorm(4)(m23()), "layer_norm", "(4,)", "(2, 3)")
case("nn.groupnorm-groups", lambda: nn.GroupNorm(3, 4), "GroupNorm", "num_groups")
case("nn.groupnorm-zero-groups", lambda: nn.GroupNorm(0, 4), "GroupNorm", "num_groups", ">= 1")
case("nn.groupnorm-float-groups", lambda: nn.GroupNorm(2.0, 4), "GroupNorm", "num_groups", "int")
case("nn.groupnorm-channels", lambda: nn.GroupNorm(2, -4), "GroupNorm", "num_channels", ">= 1")
case("nn.groupnorm-no-channels", lambda: nn.GroupNorm(2, 0), "GroupNorm", "num_channels", ">= 1")
case("nn.embedding-index", lambda: nn.Embedding(10, 3)(fl.asarray([10])), "embedding", "10")
case("nn.embedding-float", lambda: nn.Embedding(10, 3)(fl.asarray([1.0])), "embedding", "float32")
case("nn.embedding-padding-idx", lambda: nn.Embedding(10, 3, padding_idx=10), "Embedding", "padding_idx")
case("nn.dropout-p", lambda: nn.Dropout(p=1.5), "Dropout", "p")
case("nn.dropout-p-str", lambda: nn.Dropout(p="a"), "Dropout", "p")
case("nn.rnn-input-size", lambda: nn.RNN(3, 4)(fl.ones((5, 2, 7))), "RNN", "input_size", "7")
case("nn.rnn-nonlinearity", lambda: nn.RNN(3, 4, nonlinearity="gelu"), "RNN", "nonlinearity")
case("nn.lstm-layers", lambda: nn.LSTM(3, 4, num_layers=0), "LSTM", "num_layers")
case("nn.gru-hidden", lambda: nn.GRU(3, 0), "GRU", "hidden_size")
case("nn.lstm-cell-input", lambda: nn.LSTMCell(3, 4)(fl.ones((2, 5))), "LSTMCell", "input", "5")
case("nn.mha-heads", lambda: nn.MultiheadAttention(5, 2), "MultiheadAttention", "num_heads")
case("nn.mha-zero-heads", lambda: nn.MultiheadAttention(8, 0), "MultiheadAttention", "num_heads", ">= 1")
case("nn.mha-negative-heads", lambda: nn.MultiheadAttention(8, -2), "MultiheadAttention", "num_heads", ">= 1")
case("nn.mha-embed-dim", lambda: nn.MultiheadAttention(0, 2), "MultiheadAttention", "embed_dim", ">= 1")
case("nn.mha-float-embed-dim", lambda: nn.MultiheadAttention(8.0, 2), "MultiheadAttention", "embed_dim", "int")
case("nn.transformer-layer-heads", lambda: nn.TransformerEncoderLayer(5, 2), "num_heads")
case("nn.transformer-activation", lambda: nn.TransformerEncoderLayer(4, 2, activation="swish"), "activation")
case("nn.flatten-dims", lambda: nn.Flatten(start_dim=5)(m23()), "flatten", "axis 5")
case("nn.unflatten-size", lambda: nn.Unflatten(1, (2, 2))(m23()), "unflatten", "(2, 2)", "3")
case("nn.softmax-dim", lambda: nn.Softmax(dim=5)(m23()), "softmax", "axis")
case("nn.glu-odd", lambda: nn.GLU()(x3()), "glu", "3")
case("nn.hardtanh-range", lambda: nn.Hardtanh(1.0, -1.0), "Hardtanh", "min_val", "max_val")
case("nn.bilinear-inputs", lambda: nn.Bilinear(2, 3, 4)(fl.ones((1, 2)), fl.ones((1, 2))), "bilinear", "3")
case("nn.sequential-non-module", lambda: nn.Sequential(3), "Sequential", "int")
case("nn.modulelist-non-module", lambda: nn.ModuleList([3]), "ModuleList", "int")
case("nn.moduledict-non-module", lambda: nn.ModuleDict({"a": 3}), "ModuleDict", "'a'")
case("nn.parameter-str", lambda: nn.Parameter("abc"), "Parameter", "str")
case("nn.register-buffer-str", lambda: nn.Module().register_buffer("a", "x"), "register_buffer", "'a'")
case("nn.register-parameter-name", lambda: nn.Linear(2, 2).register_parameter("a.b", fl.ones(1)), "register_parameter",
     "'a.b'")
case("nn.load-state-dict-str", lambda: nn.Linear(2, 2).load_state_dict({"weight": "abc", "bias": fl.zeros(2)}),
     "state_dict", "'weight'", "str")
case("nn.load-state-dict-missing", lambda: nn.Linear(2, 2).load_state_dict({"weight": fl.zeros((2, 2))}), "bias")
case("nn.load-state-dict-shape", lambda: nn.Linear(2, 2).load_state_dict({"weight": fl.zeros(2), "bias": fl.zeros(2)}),
     "weight", "(2,)", "(2, 2)")
case("nn.load-state-dict-not-mapping", lambda: nn.Linear(2, 2).load_state_dict([1, 2]), "load_state_dict", "list")
case("nn.module-to-bogus", lambda: nn.Linear(2, 2).to("bogus"), "to", "'bogus'")
case("nn.module-freeze-key", lambda: nn.Linear(2, 2).freeze(keys="nope"), "freeze", "'nope'")
# a Module subclass without forward is an abstract method left undefined: NotImplementedError, as in PyTorch
case("nn.module-call-missing-forward", lambda: nn.Module()(x3()), "forward", allowed=(NotImplementedError,))
case("nn.functional-call-unknown", lambda: nn.functional_call(nn.Linear(2, 2), {"nope": fl.ones(1)}, fl.ones((1, 2))),
     "functional_call", "'nope'")
case("nn.value-and-grad-not-module", lambda: nn.value_and_grad(3, _f1), "value_and_grad", "Module")
case("nn.stack-module-state-mismatch", lambda: nn.stack_module_state([nn.Linear(2, 2), nn.Linear(3, 2)]),
     "stack_module_state", "weight")
case("nn.rng-not-a-key", lambda: nn.rng("abc").__enter__(), "rng", "key")
# layer errors name the expected layout and the fix
case("nn.conv2d-channels-fix", lambda: nn.Conv2d(3, 8, 3)(fl.ones((2, 4, 8, 8))), "Conv2d", "(N, C, H, W) with C=3",
     "(2, 4, 8, 8)", "check in_channels or transpose your input")
case("nn.rnn-batch-first-fix", lambda: nn.GRU(3, 4)(fl.ones((2, 5, 7))), "GRU", "(L, N, 3)", "batch_first=True")
case("nn.batchnorm-ndim-fix", lambda: nn.BatchNorm2d(3)(fl.ones((2, 3))), "BatchNorm2d", "use BatchNorm1d")
case("nn.linear-fix", lambda: nn.Linear(3, 2)(fl.ones((4, 5))), "Linear", "check in_features")
case("nn.groupnorm-fix", lambda: nn.GroupNorm(2, 4)(fl.ones((2, 3, 5))), "GroupNorm", "check num_channels")
case("nn.activation-arguments", lambda: nn.ReLU(True, 3), "ReLU(inplace=False)", "too many positional arguments")

# ---------------------------------------------------------------------------------------------------------------
# nn.functional


def img():
    return fl.ones((1, 1, 4, 4))


case("F.avg-pool2d-stride-zero", lambda: F.avg_pool2d(img(), 2, stride=0), "avg_pool2d", "stride")
case("F.avg-pool2d-kernel-zero", lambda: F.avg_pool2d(img(), 0), "avg_pool2d", "kernel_size")
case("F.avg-pool1d-stride-zero", lambda: F.avg_pool1d(fl.ones((1, 1, 4)), 2, stride=0), "avg_pool1d", "stride")
case("F.max-pool2d-stride-zero", lambda: F.max_pool2d(img(), 2, stride=0), "max_pool2d", "stride")
case("F.max-pool2d-padding", lambda: F.max_pool2d(img(), 2, padding=2), "max_pool2d", "padding")
case("F.max-pool1d-3d-input", lambda: F.max_pool1d(fl.ones(4), 2), "max_pool1d", "(4,)")
case("F.avg-pool2d-divisor", lambda: F.avg_pool2d(img(), 2, divisor_override=0), "avg_pool2d", "divisor_override")
case("F.adaptive-avg-pool2d-size", lambda: F.adaptive_avg_pool2d(img(), (0, 2)), "adaptive_avg_pool2d", "output_size")
case("F.conv2d-weight-channels", lambda: F.conv2d(img(), fl.ones((1, 2, 3, 3))), "conv2d", "channels")
case("F.conv2d-padding-bogus", lambda: F.conv2d(img(), fl.ones((1, 1, 3, 3)), padding="bogus"), "conv2d", "padding")
case("F.conv2d-stride-zero", lambda: F.conv2d(img(), fl.ones((1, 1, 3, 3)), stride=0), "conv2d", "stride")
case("F.conv2d-bias-shape", lambda: F.conv2d(img(), fl.ones((1, 1, 3, 3)), bias=fl.ones(2)), "conv2d", "bias")
case("F.conv-transpose2d-stride", lambda: F.conv_transpose2d(img(), fl.ones((1, 1, 3, 3)), stride=0),
     "conv_transpose2d", "stride")
case("F.unfold-kernel", lambda: F.unfold(img(), 0), "unfold", "kernel_size")
case("F.linear-weight", lambda: F.linear(m23(), fl.ones((4, 2))), "linear", "(4, 2)")
case("F.bilinear-weight", lambda: F.bilinear(fl.ones((1, 2)), fl.ones((1, 3)), fl.ones((4, 3, 3))), "bilinear", "2")
case("F.pad-mode", lambda: F.pad(img(), (1, 1), mode="bogus"), "pad", "mode")
case("F.pad-odd", lambda: F.pad(img(), (1, 1, 1)), "pad", "pad")
case("F.pad-too-long", lambda: F.pad(x3(), (1, 1, 1, 1)), "pad", "at most 1")
case("F.dropout-p", lambda: F.dropout(x3(), p=2.0, key=key()), "dropout", "p")
case("F.embedding-index", lambda: F.embedding(fl.asarray([5]), fl.ones((3, 2))), "embedding", "5")
case("F.one-hot-out-of-range", lambda: F.one_hot(fl.asarray([0, 3]), 3), "one_hot", "3", "num_classes")
case("F.one-hot-float", lambda: F.one_hot(x3(), 3), "one_hot", "float32")
case("F.cross-entropy-target-shape", lambda: F.cross_entropy(m23(), fl.asarray([0, 1, 2])), "cross_entropy", "(3,)")
case("F.cross-entropy-target-range", lambda: F.cross_entropy(m23(), fl.asarray([0, 3])), "cross_entropy", "3",
     "classes")
case("F.cross-entropy-reduction", lambda: F.cross_entropy(m23(), fl.asarray([0, 1]), reduction="avg"), "cross_entropy",
     "reduction")
case("F.cross-entropy-smoothing", lambda: F.cross_entropy(m23(), fl.asarray([0, 1]), label_smoothing=2.0),
     "cross_entropy", "label_smoothing")
case("F.cross-entropy-weight", lambda: F.cross_entropy(m23(), fl.asarray([0, 1]), weight=fl.ones(2)), "cross_entropy",
     "weight")
case("F.cross-entropy-prob-shape", lambda: F.cross_entropy(m23(), fl.ones((2, 2))), "cross_entropy", "(2, 2)")
case("F.nll-loss-float-target", lambda: F.nll_loss(m23(), fl.ones(2)), "nll_loss", "float32")
case("F.mse-shapes", lambda: F.mse_loss(x3(), fl.ones(4)), "mse_loss", "(3,)", "(4,)")
case("F.mse-reduction", lambda: F.mse_loss(x3(), x3(), reduction="avg"), "mse_loss", "reduction")
case("F.l1-shapes", lambda: F.l1_loss(x3(), fl.ones(2)), "l1_loss", "(2,)")
case("F.smooth-l1-beta", lambda: F.smooth_l1_loss(x3(), x3(), beta=-1.0), "smooth_l1_loss", "beta")
case("F.huber-delta", lambda: F.huber_loss(x3(), x3(), delta=0.0), "huber_loss", "delta")
case("F.bce-range", lambda: F.binary_cross_entropy(x3() * 2.0, x3()), "binary_cross_entropy", "[0, 1]")
case("F.bce-logits-shapes", lambda: F.binary_cross_entropy_with_logits(x3(), fl.ones(2)),
     "binary_cross_entropy_with_logits", "(2,)")
case("F.kl-div-reduction", lambda: F.kl_div(x3(), x3(), reduction="avg"), "kl_div", "reduction")
case("F.softmax-dim", lambda: F.softmax(m23(), dim=2), "softmax", "axis")
case("F.log-softmax-dim", lambda: F.log_softmax(m23(), dim=-3), "log_softmax", "axis")
case("F.layer-norm-shape", lambda: F.layer_norm(m23(), (4,)), "layer_norm", "(4,)")
case("F.group-norm-groups", lambda: F.group_norm(fl.ones((2, 4, 3)), 3), "group_norm", "3", "4")
case("F.batch-norm-stats", lambda: F.batch_norm(m23(), fl.zeros(2), fl.ones(3)), "batch_norm", "running_mean")
case("F.sdpa-shapes", lambda: F.scaled_dot_product_attention(fl.ones((2, 4)), fl.ones((3, 5)), fl.ones((3, 4))),
     "scaled_dot_product_attention", "5")
case("F.glu-odd", lambda: F.glu(x3()), "glu", "3")
case("F.gelu-approximate", lambda: F.gelu(x3(), approximate="fast"), "gelu", "approximate")
case("F.normalize-dim", lambda: F.normalize(x3(), dim=1), "normalize", "axis")
case("F.hardtanh-str", lambda: F.hardtanh(x3(), "a"), "hardtanh", "str")
case("F.elu-str", lambda: F.elu("abc"), "elu", "str")

# ---------------------------------------------------------------------------------------------------------------
# optim and schedulers


def params():
    return [fl.ones(2), fl.ones(3)]


def sgd():
    return optim.SGD(params(), lr=0.1)


case("adam-lr-str", lambda: optim.Adam(params(), lr="fast"), "Adam", "lr", "'fast'")
case("adam-lr-negative", lambda: optim.Adam(params(), lr=-1.0), "Adam", "learning rate")
case("adam-betas", lambda: optim.Adam(params(), betas=(1.5, 0.9)), "Adam", "beta")
case("adam-betas-str", lambda: optim.Adam(params(), betas="ab"), "Adam", "betas")
case("adam-eps", lambda: optim.Adam(params(), eps=-1.0), "Adam", "eps")
case("adamw-weight-decay", lambda: optim.AdamW(params(), weight_decay=-1.0), "AdamW", "weight_decay")
case("sgd-momentum", lambda: optim.SGD(params(), lr=0.1, momentum=-1.0), "SGD", "momentum")
case("sgd-nesterov", lambda: optim.SGD(params(), lr=0.1, nesterov=True), "SGD", "Nesterov")
case("sgd-empty", lambda: optim.SGD([], lr=0.1), "SGD", "empty parameter list")
case("sgd-int", lambda: optim.SGD(3, lr=0.1), "SGD", "params", "int")
case("sgd-tensor", lambda: optim.SGD(fl.ones(3), lr=0.1), "SGD", "params", "Tensor")
case("sgd-nested-list", lambda: optim.SGD([params()], lr=0.1), "SGD", "list")
case("sgd-group-no-params", lambda: optim.SGD([{"lr": 0.1}], lr=0.1), "add_param_group", "'params'")
case("sgd-group-duplicate", lambda: optim.SGD([{"params": [p := fl.ones(2)]}, {"params": [p]}], lr=0.1),
     "add_param_group", "more than once")
case("rmsprop-alpha", lambda: optim.RMSprop(params(), alpha=-1.0), "RMSprop", "alpha")
case("adagrad-lr-decay", lambda: optim.Adagrad(params(), lr_decay=-1.0), "Adagrad", "lr_decay")
case("adadelta-rho", lambda: optim.Adadelta(params(), rho=1.5), "Adadelta", "rho")
case("lion-betas", lambda: optim.Lion(params(), betas=(0.9, 2.0)), "Lion", "beta")
case("lbfgs-line-search", lambda: optim.LBFGS(params(), line_search_fn="armijo"), "LBFGS", "line_search_fn")
case("lbfgs-history", lambda: optim.LBFGS(params(), history_size=0), "LBFGS", "history_size")
case("lbfgs-step-no-closure", lambda: optim.LBFGS(params()).step(), "LBFGS", "closure")
case("step-count", lambda: sgd().step([fl.ones(2)]), "SGD", "2 parameters")
case("step-shapes", lambda: sgd().step([fl.ones(3), fl.ones(3)]), "SGD", "(3,)", "(2,)")
case("step-none", lambda: sgd().step(), "SGD.step", "grads")
case("step-str", lambda: sgd().step("grads"), "SGD.step", "str")
case("step-named-model", lambda: optim.SGD(nn.Linear(2, 2).named_parameters(), lr=0.1).step([fl.ones((2, 2))]),
     "SGD.step", "optimizer.update(model")
case("update-not-module", lambda: sgd().update(params(), params()), "SGD.update", "Module")
case("update-other-model", lambda: sgd().update(nn.Linear(2, 2), {}), "SGD", "not a parameter")
case("optimizer-load-state-dict", lambda: sgd().load_state_dict({"state": {}}), "load_state_dict", "param_groups")
case("optimizer-load-state-dict-groups", lambda: sgd().load_state_dict({"state": {}, "param_groups": []}),
     "load_state_dict", "parameter groups")
case("optimizer-unknown-argument", lambda: optim.Adam(params(), momentum=0.9), "Adam(params, lr=0.001",
     "unexpected keyword argument 'momentum'")
case("optimizer-fused", lambda: optim.SGD(params(), fused=1), "SGD", "fused", "True, False or None")
case("optimizer-negative-alpha", lambda: optim.RMSprop(params(), alpha=-0.5), "RMSprop", "alpha", "pass a value >= 0")
case("clip-grad-norm-max", lambda: optim.clip_grad_norm_(params(), "a"), "clip_grad_norm_", "max_norm")
case("clip-grad-norm-type", lambda: optim.clip_grad_norm_(params(), 1.0, norm_type="fro"), "clip_grad_norm_",
     "norm_type")
case("clip-grad-value", lambda: optim.clip_grad_value_(params(), -1.0), "clip_grad_value_", "clip_value")
case("steplr-step-size", lambda: S.StepLR(sgd(), step_size=0), "StepLR", "step_size")
case("steplr-not-optimizer", lambda: S.StepLR(object(), step_size=1), "StepLR", "optimizer", "object")
case("exponentiallr-gamma", lambda: S.ExponentialLR(sgd(), gamma="x"), "ExponentialLR", "gamma")
case("cosine-tmax", lambda: S.CosineAnnealingLR(sgd(), T_max=0), "CosineAnnealingLR", "T_max")
case("lambdalr-not-callable", lambda: S.LambdaLR(sgd(), 3), "LambdaLR", "lr_lambda")
case("lambdalr-count", lambda: S.LambdaLR(sgd(), [lambda e: 1.0, lambda e: 1.0]), "LambdaLR", "lr_lambda")
case("multiplicativelr-not-callable", lambda: S.MultiplicativeLR(sgd(), 3), "MultiplicativeLR", "lr_lambda")
case("onecycle-total-steps", lambda: S.OneCycleLR(sgd(), max_lr=0.1), "OneCycleLR", "total_steps")
case("onecycle-anneal", lambda: S.OneCycleLR(sgd(), 0.1, total_steps=10, anneal_strategy="exp"), "OneCycleLR",
     "anneal_strategy")
case("onecycle-pct", lambda: S.OneCycleLR(sgd(), 0.1, total_steps=10, pct_start=1.5), "OneCycleLR", "pct_start")
case("plateau-mode", lambda: S.ReduceLROnPlateau(sgd(), mode="bogus"), "ReduceLROnPlateau", "mode")
case("plateau-factor", lambda: S.ReduceLROnPlateau(sgd(), factor=1.5), "ReduceLROnPlateau", "factor")
case("plateau-threshold-mode", lambda: S.ReduceLROnPlateau(sgd(), threshold_mode="x"), "ReduceLROnPlateau",
     "threshold_mode")
case("linearlr-start", lambda: S.LinearLR(sgd(), start_factor=0.0), "LinearLR", "start_factor")
case("constantlr-factor", lambda: S.ConstantLR(sgd(), factor=2.0), "ConstantLR", "factor")
case("polynomiallr-power", lambda: S.PolynomialLR(sgd(), power="a"), "PolynomialLR", "power")
case("warm-restarts-t0", lambda: S.CosineAnnealingWarmRestarts(sgd(), T_0=0), "CosineAnnealingWarmRestarts", "T_0")
case("warm-restarts-tmult", lambda: S.CosineAnnealingWarmRestarts(sgd(), T_0=2, T_mult=0),
     "CosineAnnealingWarmRestarts", "T_mult")


def _sequential_bad_milestones():
    o = sgd()
    return S.SequentialLR(o, [S.ConstantLR(o), S.ConstantLR(o)], milestones=[1, 2])


def _chained_two_optimizers():
    return S.ChainedScheduler([S.ConstantLR(sgd()), S.ConstantLR(sgd())])


case("sequentiallr-milestones", _sequential_bad_milestones, "SequentialLR", "milestones")
case("chained-optimizers", _chained_two_optimizers, "ChainedScheduler", "optimizer")
case("scheduler-step-epoch", lambda: S.StepLR(sgd(), 1).step("a"), "step", "epoch")
case("plateau-step-metric", lambda: S.ReduceLROnPlateau(sgd()).step("loss"), "ReduceLROnPlateau", "metrics")

# ---------------------------------------------------------------------------------------------------------------
# serialization


def _tmp(name, data: bytes):
    import tempfile

    path = f"{tempfile.mkdtemp()}/{name}"
    with open(path, "wb") as fh:
        fh.write(data)
    return path


case("save-object", lambda: _save_to("a.safetensors")({"w": object()}), "fl.save", "'w'", "object")
case("save-complex128", lambda: _save_to("a.safetensors")({"w": fl.asarray([1j], dtype=fl.complex128)}), "fl.save",
     "'w'", "complex128")
case("save-tuple-key", lambda: _save_to("a.safetensors")({(1, 2): x3()}), "fl.save", "key")
case("save-tracer", lambda: fl.jit(lambda x: _save_to("a.safetensors")({"w": x}) or x)(x3()), "fl.save", "traced")
case("save-missing-dir", lambda: fl.save({"w": x3()}, "/nonexistent-dir/a.safetensors"), "fl.save",
     "/nonexistent-dir", allowed=(FileNotFoundError, FunclibError))
case("load-missing", lambda: fl.load("/nonexistent-file.safetensors"), "fl.load", "no such file",
     allowed=(FileNotFoundError,))
case("load-empty", lambda: fl.load(_tmp("e.safetensors", b"")), "fl.load", "empty")
case("load-pt-global", lambda: fl.load(_tmp("m.pt", _zip_bytes())), "fl.load", "system", "may be hostile")
case("load-npz", lambda: fl.load(_tmp("a.npz", _npz_bytes())), "fl.load", "NumPy .npz archive")
case("load-pickle", lambda: fl.load(_tmp("o.pkl", pickle.dumps({"a": 1}))), "fl.load", "pickle")
case("load-random", lambda: fl.load(_tmp("r", bytes(range(7, 200)))), "fl.load", "not a safetensors file")
case("load-like-mismatch", lambda: fl.load(_saved({"w": x3()}), like={"w": fl.ones(4)}), "fl.load", "float32[4]")
case("load-like-module", lambda: fl.load(_saved([x3()]), like=nn.Linear(2, 2)), "fl.load", "Linear")
case("load-like-structure", lambda: fl.load(_saved({"w": x3()}), like={"v": x3()}), "fl.load", "'v'")


def _zip_bytes():
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"w": os.system}, protocol=2))
    return buf.getvalue()


def _npz_bytes():
    import io

    buf = io.BytesIO()
    np.savez(buf, a=np.zeros(3))
    return buf.getvalue()


def _saved(tree):
    import tempfile

    path = f"{tempfile.mkdtemp()}/t.safetensors"
    fl.save(tree, path)
    return path


# ---------------------------------------------------------------------------------------------------------------
# testing utilities

case("check-grads-not-callable", lambda: T.check_grads(3, (x3(),)), "check_grads", "callable")
case("check-grads-args", lambda: T.check_grads(_f1, x3()), "check_grads", "args", "tuple")
case("check-grads-order", lambda: T.check_grads(_f1, (x3(),), order=0), "check_grads", "order")
case("check-grads-modes", lambda: T.check_grads(_f1, (x3(),), modes=("sideways",)), "check_grads", "modes")
case("check-jvp-not-callable", lambda: T.check_jvp(_f1, 3, (x3(),)), "check_jvp", "callable")
case("check-vjp-args", lambda: T.check_vjp(_f1, lambda *a: fl.vjp(_f1, *a), x3()), "check_vjp", "args")
case("check-adjoint-args", lambda: T.check_adjoint(_f1, x3()), "check_adjoint", "args")
case("check-custom-rule-modes", lambda: T.check_custom_rule(_f1, (x3(),), modes=("up",)), "check_custom_rule", "modes")
case("assert-allclose-str", lambda: T.assert_allclose(x3(), "abc"), "assert_allclose", "str")
case("strategies-dtype", lambda: T.strategies.tensors(dtype="bogus"), "tensors", "bogus")
case("strategies-shapes", lambda: T.strategies.shapes(min_dims=3, max_dims=1), "shapes", "min_dims", "max_dims")


# ---------------------------------------------------------------------------------------------------------------


def test_the_table_is_large_and_its_ids_unique():
    assert len(CASES) >= 300, len(CASES)
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input_raises_a_clear_error(c: Case):
    try:
        out = c.fn()
    except INTERNAL as e:
        pytest.fail(f"internal {type(e).__name__} from inside funclib: {e}")
    except c.allowed as e:
        msg = str(e)
        missing = [n for n in c.needles if n not in msg]
        assert not missing, f"{type(e).__name__} message lacks {missing}: {msg}"
        return
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"{type(e).__name__} is neither a funclib error nor TypeError/ValueError/IndexError: {e}")
    pytest.fail(f"accepted silently, returned {out!r:.200}")


def test_one_hot_of_an_out_of_range_label_under_jit_is_a_zero_row():
    """Traced labels cannot be checked; like JAX, a label outside [0, num_classes) matches no class."""
    out = fl.jit(lambda t: fl.one_hot(t, 3))(fl.asarray([0, 3, -1]))
    np.testing.assert_array_equal(out.numpy(), [[1, 0, 0], [0, 0, 0], [0, 0, 0]])
