"""``spmd``: a named axis over the processes of the MPI world.

Each rank already holds its own values, so the axis batches nothing: ``SpmdTrace`` is a frame in the trace chain
that carries no tracers. It does two things. Collectives naming its axis get the ``ProcessAxis`` object in place
of the name, then go on to the parent trace unchanged: bound eagerly, the impl runs MPI; staged by ``jit``, the
equation keeps the axis and the compiled program runs MPI between its kernels. And higher-order primitives (a
``jit`` call, loops, conds) have the name replaced inside their bodies, while Python callables they carry (custom
rules) run inside a frame of the same axis. Every other rule (JVP, transpose, batching) is the primitive's own,
so ``grad``, ``vmap`` and ``jit`` compose with the process axis as they do with a vmap axis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from funclib.checks import check_callable
from funclib.core import Trace, _state
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr
from funclib.primitives.collectives import ExternalAxis, binds_collective

from ._comm import ProcessAxis, world


def _resolve_axes(axes: tuple, axis: ProcessAxis) -> tuple:
    return tuple(axis if not isinstance(a, ExternalAxis) and a == axis.name else a for a in axes)


def _carries_code(v) -> bool:
    """Whether a parameter holds a body (jaxprs) or a callable run later (custom rules)."""
    if isinstance(v, (Jaxpr, ClosedJaxpr)):
        return True
    if isinstance(v, tuple):
        return any(isinstance(x, (Jaxpr, ClosedJaxpr)) for x in v)
    return callable(v) and not isinstance(v, type)


def _rewrite_jaxpr(j: Jaxpr, axis: ProcessAxis) -> Jaxpr:
    if not binds_collective(j, axis.name):
        return j
    key = ("spmd", axis)
    done = j.cache.get(key)
    if done is None:
        eqns = [Eqn(e.prim, e.inputs, _rewrite_params(e.prim, e.params, axis), e.outputs, e.source) for e in j.eqns]
        done = Jaxpr(j.constvars, j.invars, eqns, j.outvars)
        for k in ("consts", "arg_names", "fun_name"):
            if k in j.cache:
                done.cache[k] = j.cache[k]
        j.cache[key] = done
    return done


def _rewrite_value(v, axis):
    if isinstance(v, Jaxpr):
        return _rewrite_jaxpr(v, axis)
    if isinstance(v, ClosedJaxpr):
        inner = _rewrite_jaxpr(v.jaxpr, axis)
        return v if inner is v.jaxpr else ClosedJaxpr(inner, v.consts)
    if isinstance(v, tuple) and any(isinstance(x, (Jaxpr, ClosedJaxpr)) for x in v):
        return tuple(_rewrite_value(x, axis) for x in v)
    if _carries_code(v):
        return _framed(v, axis)
    return v


def _rewrite_params(prim, params: dict, axis: ProcessAxis) -> dict:
    if getattr(prim, "collective", False):
        return {**params, "axes": _resolve_axes(params["axes"], axis)}
    return {k: _rewrite_value(v, axis) for k, v in params.items()}


def _framed(fn: Callable, axis: ProcessAxis) -> Callable:
    """``fn`` run inside a frame of ``axis`` (the custom rules a primitive carries run later, under any trace)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        prev = _state.trace
        _state.trace = SpmdTrace(prev, axis)
        try:
            return fn(*args, **kwargs)
        finally:
            _state.trace = prev

    return run


class SpmdTrace(Trace):
    """A frame of the trace chain that binds one axis name to the processes of the MPI world."""

    def __init__(self, parent, axis: ProcessAxis):
        self.parent = parent
        self.axis = axis  # axis_size_of finds it here
        self.name = f"spmd({axis.name!r})"

    def process(self, prim, args, params):
        if getattr(prim, "collective", False):
            if self.axis.name in params["axes"]:
                params = {**params, "axes": _resolve_axes(params["axes"], self.axis)}
        elif any(_carries_code(v) for v in params.values()):
            params = _rewrite_params(prim, params, self.axis)
        return self.bind_parent(prim, args, params)


def spmd(fun: Callable, axis_name="data") -> Callable:
    """Run ``fun`` with ``axis_name`` naming the processes of the MPI world: every rank runs ``fun`` on its own
    values, and collectives on that name (``fl.psum``, ``pmean``, ``pmax``, ``pmin``, ``all_gather``,
    ``psum_scatter``, ``ppermute``, ``axis_index``) combine the ranks' values with MPI.

    Collectives keep their derivative and batching rules (a ``psum``'s transpose is a ``psum``), so ``fl.grad``
    through them is right; under ``fl.jit`` they run between the compiled kernels, in program order, and every
    call first checks that all ranks run the same program. A vmap axis can be used alongside:
    ``fl.psum(x, ("data", "batch"))`` inside ``fl.vmap(..., axis_name="batch")``.

    Args:
      fun: the per-rank function (pytrees in, pytrees out).
      axis_name: the name collectives use for the process axis (default ``"data"``).

    Returns:
      A function with ``fun``'s signature. Initializes MPI on first call (``fl.distributed.init``).

    >>> step = fl.distributed.spmd(lambda x: fl.pmean(x, "data"))
    >>> step(fl.ones(3))  # on one process: the mean over one rank
    Tensor([1., 1., 1.], dtype=float32)
    """
    check_callable(fun, "spmd")
    try:
        hash(axis_name)
    except TypeError:
        raise TypeError(f"spmd: axis_name must be hashable (e.g. a string), got {axis_name!r}") from None
    if axis_name is None or isinstance(axis_name, tuple):
        raise TypeError(f"spmd: axis_name must be one name such as 'data', got {axis_name!r}")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        axis = world().axis(axis_name)
        prev = _state.trace
        _state.trace = SpmdTrace(prev, axis)
        try:
            return fun(*args, **kwargs)
        finally:
            _state.trace = prev

    return wrapped
