"""Collectives over a named vmap axis: psum, pmax, pmin, all_gather, axis_index (pmean is psum / size).

Their batching rules need the named axis, so ``BatchTrace`` handles them: for its own ``axis_name`` it calls
``prim.vmap(args, dims, axis_size=..., **params)``; other names pass through to the enclosing traces. Bound with
no vmap of that name active, they raise a clear error.
"""

from __future__ import annotations

import numpy as np

from ..core import Primitive, ShapedArray, Zero, aval_of, is_undefined
from ..errors import FunclibError
from ._util import bdim_to_front


class UnboundAxisError(FunclibError, NameError):
    """A collective named an axis that no enclosing vmap defines."""


def _unbound(name):
    def impl(*args, axis_name, **params):
        raise UnboundAxisError(
            f"{name}: no enclosing vmap has axis_name={axis_name!r}; wrap the call in "
            f"fl.vmap(..., axis_name={axis_name!r})"
        )

    return impl


def _collective(name, linear=False):
    p = Primitive(name, linear=linear)
    p.family = "collective"
    p.collective = True
    p.def_impl(_unbound(name))
    return p


psum_p = _collective("psum", linear=True)
psum_p.def_abstract_eval(lambda x, *, axis_name: ShapedArray(x.shape, x.dtype))


@psum_p.def_jvp
def _psum_jvp(primals, tangents, *, axis_name):
    out = psum_p.bind(primals[0], axis_name=axis_name)
    t = tangents[0]
    return out, Zero(aval_of(out)) if type(t) is Zero else psum_p.bind(t, axis_name=axis_name)


# every lane's output is the sum over lanes, so each input lane's cotangent is the sum of all lanes' cotangents
psum_p.def_transpose(lambda ct, x, *, axis_name: [psum_p.bind(ct, axis_name=axis_name)])


@psum_p.def_vmap
def _psum_vmap(args, dims, *, axis_name, axis_size):
    from .reduce import reduce_sum

    (x,), (d,) = args, dims
    if d is None:
        return x * axis_size, None
    return reduce_sum(x, (d,)), None


def _extremum(name, red):
    p = _collective(name)
    p.no_rule["transpose"] = "not linear"
    p.def_abstract_eval(lambda x, *, axis_name: ShapedArray(x.shape, x.dtype))

    @p.def_jvp
    def _jvp(primals, tangents, *, axis_name):
        from .elementwise import convert, equal

        (x,), (t,) = primals, tangents
        out = p.bind(x, axis_name=axis_name)
        if type(t) is Zero:
            return out, Zero(aval_of(out))
        # ties share the derivative equally, as for reduce_max
        mask = convert(equal(x, out), x.dtype)
        num = psum_p.bind(t * mask, axis_name=axis_name)
        return out, num / psum_p.bind(mask, axis_name=axis_name)

    @p.def_vmap
    def _vmap(args, dims, *, axis_name, axis_size):
        (x,), (d,) = args, dims
        if d is None:
            return x, None
        return red(x, (d,)), None

    return p


def _rmax(x, axes):
    from .reduce import reduce_max

    return reduce_max(x, axes)


def _rmin(x, axes):
    from .reduce import reduce_min

    return reduce_min(x, axes)


pmax_p = _extremum("pmax", _rmax)
pmin_p = _extremum("pmin", _rmin)

all_gather_p = _collective("all_gather", linear=True)


@all_gather_p.def_abstract_eval
def _ag_abstract(x, *, axis_name, axis_size):
    return ShapedArray((axis_size,) + x.shape, x.dtype)


@all_gather_p.def_jvp
def _ag_jvp(primals, tangents, *, axis_name, axis_size):
    out = all_gather_p.bind(primals[0], axis_name=axis_name, axis_size=axis_size)
    t = tangents[0]
    return out, Zero(aval_of(out)) if type(t) is Zero else all_gather_p.bind(
        t, axis_name=axis_name, axis_size=axis_size
    )


@all_gather_p.def_transpose
def _ag_transpose(ct, x, *, axis_name, axis_size):
    # lane i's input appears as row i of every lane's output: its cotangent is row i of the summed cotangents
    from .indexing import gather
    from .shape import reshape

    total = psum_p.bind(ct, axis_name=axis_name)
    i = axis_index_p.bind(axis_name=axis_name)
    row = gather(total, reshape(i, (1,)), (0,))
    assert is_undefined(x)
    return [row]


@all_gather_p.def_vmap
def _ag_vmap(args, dims, *, axis_name, axis_size):
    from .shape import broadcast_in_dim

    (x,), (d,) = args, dims
    if d is None:
        return broadcast_in_dim(x, (axis_size,) + tuple(x.shape), tuple(range(1, x.ndim + 1))), None
    return bdim_to_front(x, d), None


axis_index_p = _collective("axis_index")
axis_index_p.no_rule["transpose"] = "has no inputs"
axis_index_p.no_rule["jvp"] = "has no inputs (and an integer output)"
axis_index_p.def_abstract_eval(lambda *, axis_name: ShapedArray((), np.dtype(np.int64)))


@axis_index_p.def_jvp
def _ai_jvp(primals, tangents, *, axis_name):
    out = axis_index_p.bind(axis_name=axis_name)
    return out, Zero(aval_of(out))


@axis_index_p.def_vmap
def _ai_vmap(args, dims, *, axis_name, axis_size):
    from .shape import iota

    return iota(np.int64, (axis_size,), 0), 0


def psum(x, axis_name):
    """Sum ``x`` over the lanes of the vmap named ``axis_name`` (every lane gets the total).

    >>> fl.vmap(lambda v: fl.psum(v, "i"), axis_name="i")(fl.arange(3.0))
    Tensor([3., 3., 3.], dtype=float32)
    """
    return psum_p.bind(x, axis_name=axis_name)


def pmean(x, axis_name):
    """Mean of ``x`` over the lanes of the named vmap axis."""
    from .elementwise import convert

    n = psum_p.bind(convert(_ones_like_scalar(x), x.dtype), axis_name=axis_name)
    return psum_p.bind(x, axis_name=axis_name) / n


def _ones_like_scalar(x):
    from ..core import _wrap

    return _wrap(np.ones((), x.dtype))


def pmax(x, axis_name):
    """Maximum of ``x`` over the lanes of the named vmap axis."""
    return pmax_p.bind(x, axis_name=axis_name)


def pmin(x, axis_name):
    """Minimum of ``x`` over the lanes of the named vmap axis."""
    return pmin_p.bind(x, axis_name=axis_name)


def all_gather(x, axis_name, *, axis_size: int | None = None):
    """Every lane's ``x`` stacked along a new leading axis (of the named axis' size)."""
    if axis_size is None:
        axis_size = axis_size_of(axis_name)
    return all_gather_p.bind(x, axis_name=axis_name, axis_size=int(axis_size))


def axis_size_of(axis_name) -> int:
    """The size of the enclosing vmap axis called ``axis_name``."""
    from ..core import current_trace

    t = current_trace()
    while t is not None:
        if getattr(t, "axis_name", None) == axis_name:
            return t.axis_size
        t = t.parent
    raise UnboundAxisError(f"no enclosing vmap has axis_name={axis_name!r}")


def axis_index(axis_name):
    """This lane's index along the named vmap axis."""
    return axis_index_p.bind(axis_name=axis_name)
