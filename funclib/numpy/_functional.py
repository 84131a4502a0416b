"""Functions of functions: ``vectorize``, ``apply_along_axis`` and ``apply_over_axes``, built on ``fl.vmap``.

NumPy runs these as Python loops over the elements; here the function is traced once and batched, so it must
be written with array operations (a Python ``if`` on a value raises a ConcretizationError naming the fix).
"""

from __future__ import annotations

import builtins
import functools
import re

import numpy as np

from .. import dtypes
from ..primitives import shape as S
from ..primitives._util import broadcast_shapes
from ..primitives.elementwise import convert
from ..transforms import vmap
from ._ufunc import ufunc
from ._util import NoValue, asarray, axis_int

__all__ = ["vectorize", "frompyfunc", "apply_along_axis", "apply_over_axes"]

_DIM = r"\w+"
_CORE = rf"(?:{_DIM}(?:,{_DIM})*)?"
_ARG = rf"\({_CORE}\)"
_ARGS = rf"{_ARG}(?:,{_ARG})*"
_SIGNATURE = re.compile(rf"^{_ARGS}->{_ARGS}$")


def _parse(signature: str):
    sig = signature.replace(" ", "")
    if not _SIGNATURE.match(sig):
        raise ValueError(f"numpy.vectorize: not a valid gufunc signature: {signature!r}")
    ins, outs = sig.split("->")
    parse = lambda side: [tuple(re.findall(_DIM, arg)) for arg in re.findall(_ARG, side)]
    return parse(ins), parse(outs)


def _vmap():
    return vmap


class vectorize:
    """A function of scalars (or, with ``signature``, of core arrays such as ``'(n),(n)->()'``) applied over
    the broadcast leading axes of its arguments by ``fl.vmap``, so it traces once and differentiates.
    ``excluded`` names positions or keywords passed through unchanged; ``otypes`` casts the outputs.

    >>> f = fnp.vectorize(lambda a, b: a * b + 1.0)
    >>> f(fnp.array([1.0, 2.0]), fnp.array([[1.0], [3.0]])).shape
    (2, 2)
    """

    def __init__(self, pyfunc=NoValue, otypes=None, doc=None, excluded=None, cache=False, signature=None):
        self.pyfunc = pyfunc
        self.otypes = otypes
        self.excluded = set(excluded or ())
        self.signature = signature
        self._sig = _parse(signature) if signature is not None else None
        if pyfunc is not NoValue:
            functools.update_wrapper(self, pyfunc)
        if doc is not None:
            self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        if self.pyfunc is NoValue:
            return vectorize(args[0], otypes=self.otypes, excluded=self.excluded, signature=self.signature)
        static_pos = {i for i in self.excluded if isinstance(i, int)}
        static_kw = {k: v for k, v in kwargs.items() if k in self.excluded}
        dyn_kw = {k: v for k, v in kwargs.items() if k not in self.excluded}
        names = list(dyn_kw)
        dyn = [asarray(a, "vectorize") for i, a in enumerate(args) if i not in static_pos] + [
            asarray(dyn_kw[k], "vectorize") for k in names]
        n_pos = len(args)

        def call(*xs):
            it = iter(xs)
            full = [args[i] if i in static_pos else next(it) for i in range(n_pos)]
            kw = dict(static_kw)
            kw.update({k: next(it) for k in names})
            return self.pyfunc(*full, **kw)

        if self._sig is None:
            core_in = [()] * len(dyn)
        else:
            core_in = list(self._sig[0])
            if len(core_in) != len(dyn):
                raise TypeError(f"numpy.vectorize: the signature {self.signature!r} has {len(core_in)} inputs, "
                                f"got {len(dyn)} arguments")
        sizes: dict[str, int] = {}
        batch_shapes = []
        for x, core in zip(dyn, core_in):
            if x.ndim < len(core):
                raise ValueError(f"numpy.vectorize: an input of shape {tuple(x.shape)} has fewer dimensions than "
                                 f"its core dimensions {core}")
            for name, n in zip(core, x.shape[x.ndim - len(core):]):
                if sizes.setdefault(name, n) != n:
                    raise ValueError(f"numpy.vectorize: core dimension {name!r} has sizes {sizes[name]} and {n}")
            batch_shapes.append(tuple(x.shape[: x.ndim - len(core)]))
        batch = broadcast_shapes(*batch_shapes, op="numpy.vectorize") if batch_shapes else ()
        nb = len(batch)
        squeezed, present = [], []
        for x, bs, core in zip(dyn, batch_shapes, core_in):
            bs = (1,) * (nb - len(bs)) + bs
            keep = [bs[d] == batch[d] for d in range(nb)]
            shape = tuple(n for n, k in zip(bs, keep) if k) + tuple(x.shape[x.ndim - len(core):])
            squeezed.append(S.reshape(x, shape))
            present.append(keep)
        f = call
        for d in reversed(range(nb)):
            f = _vmap()(f, in_axes=tuple(0 if p[d] else None for p in present))
        out = f(*squeezed)
        return self._finish(out)

    def _finish(self, out):
        multiple = isinstance(out, tuple)
        outs = list(out) if multiple else [out]
        if self._sig is not None and len(self._sig[1]) != len(outs):
            raise ValueError(f"numpy.vectorize: the signature {self.signature!r} has {len(self._sig[1])} outputs, "
                             f"the function returned {len(outs)}")
        if self.otypes is not None:
            types = list(self.otypes)
            if len(types) != len(outs):
                raise ValueError(f"numpy.vectorize: {len(types)} otypes for {len(outs)} outputs")
            outs = [convert(o, dtypes.canonicalize(np.dtype(t))) for o, t in zip(outs, types)]
        return tuple(outs) if multiple else outs[0]


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis`` (batched with ``fl.vmap``); its
    output's dimensions replace that axis.

    >>> fnp.apply_along_axis(lambda v: v[0] + v[-1], 1, fnp.array([[1, 2, 3], [4, 5, 6]]))
    Tensor([ 4, 10], dtype=int64)
    """
    x = asarray(arr, "apply_along_axis")
    ax = axis_int(axis, x.ndim, "apply_along_axis")
    moved = S.transpose(x, tuple(i for i in range(x.ndim) if i != ax) + (ax,))
    lead = tuple(moved.shape[:-1])
    flat = S.reshape(moved, (-1, x.shape[ax]))
    if flat.shape[0] == 0:
        raise ValueError("numpy.apply_along_axis: cannot apply a function to 1-D slices of an empty array")
    res = _vmap()(lambda v: asarray(func1d(v, *args, **kwargs), "apply_along_axis"))(flat)
    out_core = tuple(res.shape[1:])
    res = S.reshape(res, lead + out_core)
    k = len(out_core)
    perm = tuple(range(ax)) + tuple(range(len(lead), len(lead) + k)) + tuple(range(ax, len(lead)))
    return S.transpose(res, perm) if perm != tuple(range(res.ndim)) else res


def apply_over_axes(func, a, axes):
    """``func(a, axis)`` applied for each axis in turn; a result that lost the axis gets it back (size 1).

    >>> fnp.apply_over_axes(fnp.sum, fnp.ones((2, 3, 4)), [0, 2]).shape
    (1, 3, 1)
    """
    x = asarray(a, "apply_over_axes")
    axes = (axes,) if isinstance(axes, (builtins.int, np.integer)) else tuple(axes)
    for ax in axes:
        ax = axis_int(ax, x.ndim, "apply_over_axes")
        res = asarray(func(x, ax), "apply_over_axes")
        if res.ndim == x.ndim:
            x = res
        elif res.ndim == x.ndim - 1:
            x = S.expand_dims(res, [ax])
        else:
            raise ValueError("numpy.apply_over_axes: function is not returning an array of the correct shape")
    return x



def frompyfunc(func, /, nin, nout, *, identity=None):
    """A ``ufunc`` from a Python function of ``nin`` scalars returning ``nout`` values, applied elementwise
    with broadcasting through ``vectorize`` (so it traces). NumPy's result is an object array; here it is a
    Tensor of whatever dtype the function computes.

    >>> hyp = fnp.frompyfunc(lambda a, b: fnp.sqrt(a * a + b * b), 2, 1)
    >>> hyp.outer(fnp.array([3.0]), fnp.array([4.0, 0.0]))
    Tensor([[5., 3.]], dtype=float32)
    """

    nin, nout = int(nin), int(nout)
    if nin < 1 or nout < 1:
        raise ValueError(f"numpy.frompyfunc: nin and nout must be positive, got {nin} and {nout}")
    vec = vectorize(func)

    def call(*args):
        if len(args) != nin:
            raise TypeError(f"numpy.frompyfunc: the ufunc takes {nin} arguments, got {len(args)}")
        out = vec(*args)
        if nout > 1 and (not isinstance(out, tuple) or len(out) != nout):
            raise ValueError(f"numpy.frompyfunc: the function must return {nout} values")
        return out

    call.__name__ = call.__qualname__ = getattr(func, "__name__", "frompyfunc")
    call.__doc__ = getattr(func, "__doc__", None)
    return ufunc(call, nin, nout, identity=identity)
