"""The operator and method table of ``Tensor`` (and so of every tracer), installed once at import.

Operators map straight to the namespace functions (``Tensor.__add__ is fl.add``), so ``x + y`` costs no extra
Python frame over ``fl.add(x, y)``.
"""

from __future__ import annotations

from .. import dtypes
from ..core import Tensor
from ..primitives.elementwise import convert, stop_gradient
from . import elementwise as E
from . import indexing as I
from . import linalg_basic as L
from . import manipulation as M
from . import reductions as R


def _r(fn):
    def reflected(self, other, /):
        return fn(other, self)

    reflected.__name__ = f"__r{fn.__name__}__"
    return reflected


def _astype(self, dtype, /, *, copy: bool = True, device=None):
    """Cast to ``dtype``."""
    return convert(self, dtypes.canonicalize(dtype))


def _reshape(self, *shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return M.reshape(self, shape)


def _transpose(self, *axes):
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return M.transpose(self, axes or None)


def _view(self, *shape):
    return _reshape(self, *shape)


def _permute(self, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    return M.permute_dims(self, dims)


def _squeeze(self, axis=None):
    return M.squeeze(self, axis)


def _unsqueeze(self, dim):
    return M.expand_dims(self, axis=dim)


def _matmul(a, b, /):
    return L.matmul(a, b)


_PLAIN = frozenset({Tensor, int, float, bool, complex})


def _deferring(fn):
    """``fn`` as a binary operator that leaves a ``funclib.sparse`` right operand to its reflected method
    (``dense @ sparse`` is the sparse matrix's ``__rmatmul__``)."""

    def method(self, other, /):
        if type(other) not in _PLAIN and getattr(type(other), "_fl_sparse", False):
            return NotImplemented
        return fn(self, other)

    method.__name__ = fn.__name__
    return method


def _T(self):
    if self.ndim != 2:
        raise ValueError(f"Tensor.T needs a 2-D tensor, got shape {tuple(self.shape)}; use .mT or permute_dims")
    return M.permute_dims(self, (1, 0))


def _abs(self):
    return E.abs(self)


def _neg(self):
    return E.negative(self)


def _pos(self):
    return E.positive(self)


def _invert(self):
    return E.bitwise_invert(self)


def _size_method(self, dim=None):
    return self.shape if dim is None else self.shape[dim]


def _pow(a, b, /):
    return E.pow(a, b)


def _rpow(a, b, /):
    return E.pow(b, a)


def _sum(self, axis=None, dtype=None, keepdims=False, *, dim=None, keepdim=None):
    return R.sum(self, axis=axis if dim is None else dim, dtype=dtype,
                 keepdims=keepdims if keepdim is None else keepdim)


def _mean(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
    return R.mean(self, axis=axis if dim is None else dim, keepdims=keepdims if keepdim is None else keepdim)


def _red(fn):
    def method(self, axis=None, keepdims=False, *, dim=None, keepdim=None):
        return fn(self, axis=axis if dim is None else dim, keepdims=keepdims if keepdim is None else keepdim)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _var(self, axis=None, correction=0.0, keepdims=False):
    return R.var(self, axis=axis, correction=correction, keepdims=keepdims)


def _std(self, axis=None, correction=0.0, keepdims=False):
    return R.std(self, axis=axis, correction=correction, keepdims=keepdims)


def _argred(fn):
    def method(self, axis=None, keepdims=False):
        return fn(self, axis=axis, keepdims=keepdims)

    method.__name__ = fn.__name__
    return method


def _at(self):
    return I._AtHelper(self)


def _flatten(self, start_dim=0, end_dim=-1):
    return M.flatten(self, start_dim, end_dim)


def _clip(self, min=None, max=None):
    return E.clip(self, min, max)


def _dot_method(self, other):
    return L.matmul(self, other)


def _cumsum(self, axis=0):
    return R.cumulative_sum(self, axis=axis)


def _detach(self):
    """The same values with no derivative (``fl.stop_gradient``), as PyTorch's ``detach``.

    >>> fl.grad(lambda x: x * x.detach())(fl.tensor(3.0))
    Tensor(3., dtype=float32)
    """
    return stop_gradient(self)


def _backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    raise TypeError(
        "Tensor.backward(): funclib tensors are immutable values that record no graph, so gradients are returned "
        "by a function instead of being stored on tensors. The equivalent of `loss.backward(); optimizer.step()` "
        "is:\n"
        "    loss, grads = nn.value_and_grad(model, loss_fn)(model, x, y)\n"
        "    optimizer.update(model, grads)\n"
        "(with `import funclib.nn as nn`); for a function of tensors use fl.grad(f)(x) or fl.value_and_grad(f)(x)."
    )


_METHODS = {
    "__add__": E.add,
    "__radd__": _r(E.add),
    "__sub__": E.subtract,
    "__rsub__": _r(E.subtract),
    "__mul__": E.multiply,
    "__rmul__": _r(E.multiply),
    "__truediv__": E.divide,
    "__rtruediv__": _r(E.divide),
    "__floordiv__": E.floor_divide,
    "__rfloordiv__": _r(E.floor_divide),
    "__mod__": E.remainder,
    "__rmod__": _r(E.remainder),
    "__pow__": _pow,
    "__rpow__": _rpow,
    "__matmul__": _deferring(_matmul),
    "__rmatmul__": _r(_matmul),
    "__and__": E.bitwise_and,
    "__rand__": _r(E.bitwise_and),
    "__or__": E.bitwise_or,
    "__ror__": _r(E.bitwise_or),
    "__xor__": E.bitwise_xor,
    "__rxor__": _r(E.bitwise_xor),
    "__lshift__": E.bitwise_left_shift,
    "__rlshift__": _r(E.bitwise_left_shift),
    "__rshift__": E.bitwise_right_shift,
    "__rrshift__": _r(E.bitwise_right_shift),
    "__lt__": E.less,
    "__le__": E.less_equal,
    "__gt__": E.greater,
    "__ge__": E.greater_equal,
    "__eq__": E.equal,
    "__ne__": E.not_equal,
    "__abs__": _abs,
    "__neg__": _neg,
    "__pos__": _pos,
    "__invert__": _invert,
    "__getitem__": I.getitem,
    "astype": _astype,
    "reshape": _reshape,
    "view": _view,
    "transpose": _transpose,
    "permute": _permute,
    "permute_dims": M.permute_dims,
    "squeeze": _squeeze,
    "unsqueeze": _unsqueeze,
    "expand_dims": M.expand_dims,
    "flatten": _flatten,
    "ravel": M.ravel,
    "sum": _sum,
    "mean": _mean,
    "prod": _red(R.prod),
    "max": _red(R.max),
    "min": _red(R.min),
    "all": _red(R.all),
    "any": _red(R.any),
    "var": _var,
    "std": _std,
    "argmax": _argred(R.argmax),
    "argmin": _argred(R.argmin),
    "cumsum": _cumsum,
    "clip": _clip,
    "dot": _dot_method,
    "matmul": _matmul,
    "exp": E.exp,
    "log": E.log,
    "sqrt": E.sqrt,
    "abs": _abs,
    "sin": E.sin,
    "cos": E.cos,
    "tanh": E.tanh,
    "sigmoid": E.sigmoid,
    "conj": E.conj,
    "round": E.round,
    "floor": E.floor,
    "ceil": E.ceil,
    "swapaxes": M.swapaxes,
    "moveaxis": M.moveaxis,
    "flip": M.flip,
    "repeat": M.repeat,
    "size_of": _size_method,
    "detach": _detach,
    "backward": _backward,
}

_PROPERTIES = {
    "T": _T,
    "mT": M.matrix_transpose,
    "at": _at,
    "real": E.real,
    "imag": E.imag,
}


def install() -> None:
    for name, fn in _METHODS.items():
        setattr(Tensor, name, fn)
    for name, fn in _PROPERTIES.items():
        setattr(Tensor, name, property(fn))


install()
