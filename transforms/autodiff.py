"""Forward and reverse mode: ``jvp``, ``linearize``, ``vjp``, ``grad``, ``value_and_grad``, ``linear_transpose``.

Reverse mode is linearize + partial evaluation + transpose: a ``JVPTrace`` runs over a partial evaluator
(``JaxprTrace(forward_known=True)``), so the primal computation runs now (eagerly, or in the enclosing trace) and
only the tangent computation, which is linear, is recorded. Transposing that jaxpr gives the VJP. Forward and
reverse mode share one set of rules, and every order of derivative composes. With no transform active, ``grad``,
``value_and_grad`` and ``vjp`` record the tangents on a ``Tape`` instead (``transforms/tape.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from funclib import dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable, check_int
from funclib.core import (
    ShapedArray,
    Tensor,
    Trace,
    Tracer,
    UndefinedPrimal,
    Zero,
    _new,
    _state,
    _wrap,
    aval_of,
    set_trace,
)
from funclib.errors import ConcretizationError, DTypeError, FunclibError, MissingRuleError, NotLinearError
from funclib.jaxpr import Jaxpr, JaxprTrace, JaxprTracer, Var, eval_jaxpr, trace_to_jaxpr
from funclib.primitives.shape import instantiate, zeros

from ._api_util import as_tensor_leaf, check_argnums, check_float_input, flatten_args, leaf_labels
from .tape import Tape, backward_pass


class JVPTracer(Tracer):
    __slots__ = ("primal", "tangent")

    @property
    def aval(self) -> ShapedArray:
        return aval_of(self.primal)

    @property
    def device(self) -> str:
        return self.primal.device

    # metadata straight from a concrete primal's array (one attribute lookup instead of a chain of properties)
    @property
    def dtype(self):
        p = self.primal
        return p._value.dtype if type(p) is Tensor else p.dtype

    @property
    def shape(self):
        p = self.primal
        return p._value.shape if type(p) is Tensor else p.shape

    @property
    def ndim(self):
        p = self.primal
        return p._value.ndim if type(p) is Tensor else p.ndim


class JVPTrace(Trace):
    name = "jvp"
    tape: Tape | None = None  # set when the tangents are recorded on a Tape (eager reverse mode)

    def __init__(self, parent, name: str = "jvp"):
        self.parent = parent
        self.name = name
        self.eager_below = parent is None or parent.eager_below

    def concretize(self, tracer, what):
        return tracer.primal

    def export(self, tracer, what):
        # NumPy computes without the tangent: a result built from the export would silently get a zero derivative
        raise ConcretizationError(
            f"Cannot convert a {tracer.aval.str_short()} that carries a derivative to {what} inside {self.name}: "
            "NumPy cannot differentiate, so the derivative would silently become zero. Compute with fl.* "
            "operations instead (fl.sin(x), not np.sin(x)); to use the value without its derivative, convert "
            "fl.stop_gradient(x) or x.detach(). (bool(), int(), float() and .item() still work, so Python "
            "control flow such as `if x > 0:` is fine.)"
        )

    def new(self, primal, tangent) -> JVPTracer:
        t = JVPTracer.__new__(JVPTracer)
        t._trace = self
        t.primal = primal
        t.tangent = tangent
        return t

    def process(self, prim, args, params):
        if self.tape is not None and prim.diagonal is not None:
            out = self.tape.elementwise(self, prim, args)
            if out is not None:
                return out
        primals = []
        tangents = []
        nonzero = False
        concrete = True
        foreign = False
        for a in args:
            if type(a) is JVPTracer and a._trace is self:
                p = a.primal
                primals.append(p)
                t = a.tangent
                tangents.append(t)
                if type(t) is not Zero:
                    nonzero = True
                elif type(p) is not Tensor and isinstance(p, Tracer):
                    concrete = False
            else:
                primals.append(a)
                tangents.append(None)
                foreign = True
                if type(a) is not Tensor and isinstance(a, Tracer):
                    concrete = False
        if not nonzero:
            if concrete and self.eager_below:
                return prim.eager(primals, params)
            return self.bind_parent(prim, primals, params)
        if foreign:
            tangents = [Zero.of(p) if t is None else t for p, t in zip(primals, tangents)]
        rule = prim.jvp or prim.rule("jvp")
        # written out, not `with set_trace`: once per operation under jvp/grad (set_trace measured 1-4% slower on
        # eager grad)
        prev = _state.trace
        _state.trace = self.parent
        try:
            out, tout = rule(primals, tangents, **params)
        finally:
            _state.trace = prev
        if prim.multiple_results:
            return [o if type(t) is Zero else self.new(o, t) for o, t in zip(out, tout)]
        if type(tout) is Zero:
            return out
        t = _new(JVPTracer)
        t._trace = self
        t.primal = out
        t.tangent = tout
        return t


def _zero_tangent_aval(aval: ShapedArray) -> ShapedArray:
    return ShapedArray(aval.shape, aval.dtype)


# ---------------------------------------------------------------------------------------------------------------
# jvp


def jvp(fun: Callable, primals: Sequence, tangents: Sequence, has_aux: bool = False):
    """Forward-mode derivative: ``(fun(*primals), J @ tangents)``.

    Args:
      fun: a function of pytrees of tensors.
      primals, tangents: tuples of pytrees with matching structure, shapes and dtypes.
      has_aux: ``fun`` returns ``(out, aux)``; aux is returned as a third value.

    >>> fl.jvp(fl.sin, (fl.tensor(0.0),), (fl.tensor(1.0),))
    (Tensor(0., dtype=float32), Tensor(1., dtype=float32))
    """
    check_callable(fun, "jvp")
    p_leaves, p_tree, t_leaves = check_pairs(primals, tangents, "jvp")
    trace = JVPTrace(_state.trace)
    ins = [trace.new(p, t) if p.dtype in dtypes.INEXACT else p for p, t in zip(p_leaves, t_leaves)]
    args = tree_util.unflatten(p_tree, ins)
    with set_trace(trace):
        result = fun(*args)
    out, aux = _split_aux(result, has_aux, "jvp")
    aux = _aux_primals(trace, aux)
    o_leaves, o_tree = tree_util.flatten(out)
    po, to = [], []
    for o in o_leaves:
        p, t = _unpack(trace, o)
        po.append(p)
        to.append(t)
    res = (tree_util.unflatten(o_tree, po), tree_util.unflatten(o_tree, to))
    return res + (aux,) if has_aux else res


def check_pairs(primals, tangents, op: str):
    """Primals and tangents as matching leaves: ``(primal_leaves, tree, tangent_leaves)``; errors name ``op``."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(f"{op}: primals and tangents must be tuples (one entry per positional argument of fun)")
    if len(primals) != len(tangents):
        raise ValueError(f"{op}: got {len(primals)} primals but {len(tangents)} tangents")
    p_leaves, p_tree = tree_util.flatten(tuple(primals))
    t_leaves, t_tree = tree_util.flatten(tuple(tangents))
    if p_tree != t_tree:
        raise ValueError(f"{op}: primal and tangent structures differ:\n  primals:  {p_tree}\n  tangents: {t_tree}")
    p_leaves = [as_tensor_leaf(p, op) for p in p_leaves]
    t_leaves = [as_tensor_leaf(t, op) for t in t_leaves]
    for i, (p, t) in enumerate(zip(p_leaves, t_leaves)):
        if tuple(p.shape) != tuple(t.shape):
            raise ValueError(f"{op}: tangent {i} has shape {tuple(t.shape)} but its primal has shape {tuple(p.shape)}")
        if p.dtype in dtypes.INEXACT and t.dtype != p.dtype:
            raise DTypeError(
                f"{op}: tangent {i} has dtype {t.dtype.name} but its primal has {p.dtype.name}; a tangent must have "
                f"its primal's dtype: pass tangent.astype(fl.{p.dtype.name}) (or fl.ones_like(primal) for a "
                "direction of ones)"
            )
    return p_leaves, p_tree, t_leaves


def _unpack(trace, o):
    if type(o) is JVPTracer and o._trace is trace:
        return o.primal, _tangent_out(o.tangent, o.primal)
    o = as_tensor_leaf(o, "jvp output")
    return o, _tangent_out(Zero(aval_of(o)), o)


def _tangent_out(t, primal):
    if type(t) is Zero:
        a = aval_of(primal)
        # integer/bool outputs get a zero tangent of the same shape and dtype (documented stand-in for float0)
        return zeros(ShapedArray(a.shape, a.dtype))
    return t


def _aux_primals(trace, aux):
    """Auxiliary outputs carry no tangent: strip this trace's tracers so none leaks out of the transform."""
    if aux is None:
        return None
    if type(aux) is JVPTracer:
        return aux.primal if aux._trace is trace else aux
    return tree_util.map(lambda a: a.primal if type(a) is JVPTracer and a._trace is trace else a, aux)


def _split_aux(result, has_aux, name):
    if not has_aux:
        return result, None
    if not (isinstance(result, (tuple, list)) and len(result) == 2):
        raise TypeError(f"{name}(has_aux=True): the function must return a pair (output, aux)")
    return result[0], result[1]


# ---------------------------------------------------------------------------------------------------------------
# linearize and transpose


class _Linearized:
    """The result of tracing the tangent map: a linear jaxpr over the tangent inputs."""

    __slots__ = ("jaxpr", "consts", "in_avals", "out_avals", "tape", "tape_ins", "tape_outs")

    def __init__(self, jaxpr, consts, in_avals, out_avals, tape=None, tape_ins=(), tape_outs=()):
        self.jaxpr = jaxpr
        self.consts = consts
        self.in_avals = in_avals
        self.out_avals = out_avals
        self.tape = tape
        self.tape_ins = tape_ins
        self.tape_outs = tape_outs


def linearize_flat(
    fun_flat: Callable, primals: list, diff_mask: list[bool], name: str = "linearize", transpose_only: bool = False
):
    """Run ``fun_flat(*primals) -> (list_out, aux)`` with tangents recorded for the inputs in ``diff_mask``.

    Returns ``(out_primals, linearized, aux)``. With ``transpose_only`` (the result is only transposed, never
    evaluated forward) and no transform active, the tangents are recorded on a ``Tape`` instead of a jaxpr.
    """
    parent = _state.trace
    if transpose_only and parent is None:
        return _linearize_on_tape(fun_flat, primals, diff_mask, name)
    pe = JaxprTrace(parent, forward_known=True, name=name)
    jt = JVPTrace(pe, name=name)
    tan_ins = []
    ins = []
    for p, d in zip(primals, diff_mask):
        if d:
            a = aval_of(p)
            t = pe.new_arg(ShapedArray(a.shape, a.dtype))
            tan_ins.append(t)
            ins.append(jt.new(p, t))
        else:
            ins.append(p)
    with set_trace(jt):
        outs, aux = fun_flat(*ins)
    out_primals, out_tangents = [], []
    with set_trace(pe):
        for o in outs:
            if type(o) is JVPTracer and o._trace is jt:
                out_primals.append(o.primal)
                out_tangents.append(instantiate(o.tangent))
            else:
                o = as_tensor_leaf(o, f"{name} (the function's output)")
                out_primals.append(o)
                out_tangents.append(zeros(_zero_tangent_aval(aval_of(o))))
    jaxpr, consts = pe.to_jaxpr(tan_ins, out_tangents)
    aux = _aux_primals(jt, aux)
    lin = _Linearized(jaxpr, consts, [t.aval for t in tan_ins], [aval_of(o) for o in out_primals])
    return out_primals, lin, aux


def _linearize_on_tape(fun_flat, primals, diff_mask, name):
    tape = Tape(name, JVPTracer)
    jt = JVPTrace(tape, name=name)
    jt.tape = tape
    tan_ins, ins = [], []
    for p, d in zip(primals, diff_mask):
        if d:
            a = aval_of(p)
            t = tape.new(ShapedArray(a.shape, a.dtype))
            tan_ins.append(t)
            ins.append(jt.new(p, t))
        else:
            ins.append(p)
    with set_trace(jt):
        outs, aux = fun_flat(*ins)
    out_primals, out_tangents = [], []
    for o in outs:
        if type(o) is JVPTracer and o._trace is jt:
            out_primals.append(o.primal)
            out_tangents.append(o.tangent)
        else:
            out_primals.append(as_tensor_leaf(o, f"{name} (the function's output)"))
            out_tangents.append(None)
    lin = _Linearized(None, None, [t.aval for t in tan_ins], [aval_of(o) for o in out_primals], tape, tan_ins)
    lin.tape_outs = out_tangents
    return out_primals, lin, _aux_primals(jt, aux)


def _backward(lin: _Linearized, cts: list, plain_products: bool = False) -> list:
    if lin.tape is None:
        return backward_pass(lin.jaxpr, lin.consts, cts, plain_products)
    env = lin.tape.backward(lin.tape_outs, cts, plain_products)
    return [env.get(t.index) for t in lin.tape_ins]


def _transpose_linearized(lin: _Linearized, cts: list) -> list:
    out = None
    if _state.trace is None:
        # Eagerly, first with safe_mul's products plain: they differ from safe ones only where a zero meets an
        # infinity, giving NaN instead of 0. Without a NaN in the result every such value was masked on the way
        # (by a where), and the result is the safe one bit for bit; with one, the pass runs again with safe
        # products. This spares the common case a finiteness check per product.
        with np.errstate(invalid="ignore", divide="ignore"):
            out = _backward(lin, cts, plain_products=True)
        if any(c is not None and type(c) is Tensor and np.isnan(c._value).any() for c in out):
            out = None
    if out is None:
        out = _backward(lin, cts)
    return [zeros(a) if c is None else c for c, a in zip(out, lin.in_avals)]


# ---------------------------------------------------------------------------------------------------------------
# public reverse-mode API


def linearize(fun: Callable, *primals):
    """``(fun(*primals), f_jvp)`` where ``f_jvp(*tangents)`` evaluates the linear map without re-running ``fun``.

    >>> y, f_jvp = fl.linearize(fl.sin, fl.tensor(0.0))
    >>> f_jvp(fl.tensor(2.0))
    Tensor(2., dtype=float32)
    """
    check_callable(fun, "linearize")
    leaves, in_tree = tree_util.flatten(tuple(primals))
    leaves = [as_tensor_leaf(x, "linearize") for x in leaves]
    mask = [x.dtype in dtypes.INEXACT for x in leaves]
    store = {}

    def flat(*xs):
        out = fun(*tree_util.unflatten(in_tree, list(xs)))
        o, t = tree_util.flatten(out)
        store["tree"] = t
        return o, None

    outs, lin, _ = linearize_flat(flat, leaves, mask)
    out_tree = store["tree"]

    def f_jvp(*tangents):
        t_leaves, t_tree = tree_util.flatten(tuple(tangents))
        if t_tree != in_tree:
            raise ValueError(f"linearize: tangent structure {t_tree} does not match the primals' {in_tree}")
        ts = [as_tensor_leaf(t, "linearize") for t, m in zip(t_leaves, mask) if m]

        return tree_util.unflatten(out_tree, eval_jaxpr(lin.jaxpr, lin.consts, *ts))

    return tree_util.unflatten(out_tree, outs), f_jvp


def vjp(fun: Callable, *primals, has_aux: bool = False):
    """``(fun(*primals), vjp_fn)``; ``vjp_fn(cotangent)`` returns a tuple of cotangents, one per primal.

    ``vjp_fn`` can be called many times. Integer inputs get zero cotangents of their own dtype.

    >>> y, f_vjp = fl.vjp(fl.sin, fl.tensor(0.0))
    >>> f_vjp(fl.tensor(1.0))
    (Tensor(1., dtype=float32),)
    """
    check_callable(fun, "vjp")
    leaves, in_tree = tree_util.flatten(tuple(primals))
    leaves = [as_tensor_leaf(x, "vjp") for x in leaves]
    mask = [x.dtype in dtypes.INEXACT for x in leaves]
    store = {}

    def flat(*xs):
        res = fun(*tree_util.unflatten(in_tree, list(xs)))
        out, aux = _split_aux(res, has_aux, "vjp")
        o, t = tree_util.flatten(out)
        store["tree"] = t
        return o, aux

    outs, lin, aux = linearize_flat(flat, leaves, mask, name="vjp", transpose_only=True)
    out_tree = store["tree"]

    def vjp_fn(ct):
        c_leaves, c_tree = tree_util.flatten(ct)
        if c_tree != out_tree:
            raise ValueError(f"vjp: cotangent structure {c_tree} does not match the output's {out_tree}")
        cts = []
        for i, (c, a) in enumerate(zip(c_leaves, lin.out_avals)):
            c = as_tensor_leaf(c, "vjp")
            if tuple(c.shape) != a.shape:
                raise ValueError(f"vjp: cotangent {i} has shape {tuple(c.shape)}, the output has shape {a.shape}")
            cts.append(c)
        in_cts = _transpose_linearized(lin, cts)
        it = iter(in_cts)
        full = [next(it) if m else zeros(aval_of(x)) for x, m in zip(leaves, mask)]
        return tree_util.unflatten(in_tree, full)

    res = (tree_util.unflatten(out_tree, outs), vjp_fn)
    return res + (aux,) if has_aux else res


def value_and_grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    argnames: str | Sequence[str] | None = None,
) -> Callable:
    """A function returning ``(fun(*args), gradient)``. See ``grad`` for the arguments.

    >>> fl.value_and_grad(lambda x: (x ** 2).sum())(fl.tensor([1.0, 2.0]))
    (Tensor(5., dtype=float32), Tensor([2., 4.], dtype=float32))
    """
    return _value_and_grad(fun, argnums, has_aux, holomorphic, argnames, "value_and_grad")


def _value_and_grad(fun, argnums, has_aux, holomorphic, argnames, op: str) -> Callable:
    check_callable(fun, op)
    for n in (argnums,) if not isinstance(argnums, (tuple, list)) else argnums:
        check_int(n, op, "argnums")
    single = isinstance(argnums, int) and argnames is None

    def vg(*args, **kwargs):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        names = (argnames,) if isinstance(argnames, str) else tuple(argnames or ())
        if argnames is not None and argnums == 0 and not isinstance(argnums, tuple):
            nums = ()
        nums = check_argnums(argnums, len(args), op, "argnums") if nums else ()
        for nm in names:
            if nm not in kwargs:
                raise ValueError(
                    f"{op}: argnames includes {nm!r} but it was not passed as a keyword argument "
                    f"(got keywords {sorted(kwargs)})"
                )
        diff = [args[i] for i in nums] + [kwargs[k] for k in names]
        d_leaves, d_tree = tree_util.flatten(diff)
        d_leaves = [as_tensor_leaf(x, op) for x in d_leaves]
        if not all(x.dtype in dtypes.INEXACT for x in d_leaves):
            labels = leaf_labels(fun, args, nums, kwargs, names)
            for label, x in zip(labels, d_leaves):
                check_float_input(x, op, f"differentiated input {label}", holomorphic)

        def flat(*xs):
            vals = tree_util.unflatten(d_tree, list(xs))
            a = list(args)
            kw = dict(kwargs)
            for j, n in enumerate(nums):
                a[n] = vals[j]
            for j, k in enumerate(names):
                kw[k] = vals[len(nums) + j]
            res = fun(*a, **kw)
            out, aux = _split_aux(res, has_aux, op)
            return [out], aux

        outs, lin, aux = linearize_flat(flat, d_leaves, [True] * len(d_leaves), name=op, transpose_only=True)
        out = outs[0]
        if not isinstance(out, Tensor):
            try:
                out = as_tensor_leaf(out, op)
            except TypeError:
                raise TypeError(
                    f"{op} requires the function to return a scalar tensor, got {type(out).__name__}; "
                    "use fl.vjp or fl.jacrev for other outputs"
                ) from None
        if out.shape != ():
            raise TypeError(
                f"{op} requires a scalar output, got shape {tuple(out.shape)}; reduce it (e.g. .sum()) or use "
                "fl.vjp / fl.jacrev"
            )
        if out.dtype in dtypes.COMPLEX and not holomorphic:
            raise DTypeError(
                f"{op} requires a real-valued output, got {out.dtype.name}; pass holomorphic=True for holomorphic "
                "functions"
            )
        if out.dtype not in dtypes.INEXACT:
            raise DTypeError(f"{op} requires a floating-point output, got {out.dtype.name}")
        ct = _wrap(np.array(1, out.dtype))
        if out.device != "cpu":  # the seed lives where the function computed, so the backward pass stays there
            ct = ct.to_device(out.device)
        grads = tree_util.unflatten(d_tree, _transpose_linearized(lin, [ct]))
        if argnames is None:
            g = grads[0] if single else tuple(grads[: len(nums)])
        elif not nums:
            g = dict(zip(names, grads)) if not isinstance(argnames, str) else grads[0]
        else:
            g = (tuple(grads[: len(nums)]), dict(zip(names, grads[len(nums) :])))
        return ((out, aux), g) if has_aux else (out, g)

    _copy_meta(vg, fun, "value_and_grad")
    return vg


def grad(
    fun: Callable,
    argnums: int | Sequence[int] = 0,
    has_aux: bool = False,
    holomorphic: bool = False,
    argnames: str | Sequence[str] | None = None,
) -> Callable:
    """The gradient of a scalar function.

    Args:
      fun: returns a real scalar (or ``(scalar, aux)`` with ``has_aux``).
      argnums: positional argument(s) to differentiate (int or tuple). Default 0.
      has_aux: ``fun`` returns ``(out, aux)``; the gradient function returns ``(grad, aux)``.
      holomorphic: allow complex outputs of holomorphic functions.
      argnames: keyword argument name(s) to differentiate; with argnames only, ``argnums`` is ignored
        unless given as a tuple. Gradients of keyword arguments come back as a dict (or alone for a str).

    Real-valued functions of complex inputs follow JAX's convention: the result is the conjugate of the
    steepest-ascent direction (``grad(f)(z).conj()`` points uphill).

    >>> fl.grad(lambda x: fl.sin(x))(fl.tensor(0.0))
    Tensor(1., dtype=float32)
    """
    vg = _value_and_grad(fun, argnums, has_aux, holomorphic, argnames, "grad")

    def g(*args, **kwargs):
        res, gr = vg(*args, **kwargs)
        return (gr, res[1]) if has_aux else gr

    _copy_meta(g, fun, "grad")
    return g


def _copy_meta(wrapper, fun, what):
    name = getattr(fun, "__name__", type(fun).__name__)
    wrapper.__name__ = f"{what}({name})"
    wrapper.__qualname__ = wrapper.__name__
    wrapper.__doc__ = getattr(fun, "__doc__", None)
    wrapper.__wrapped__ = fun


def linear_transpose(fun: Callable, *primals) -> Callable:
    """The transpose of a linear function, traced at the shapes/dtypes of ``primals``.

    >>> t = fl.linear_transpose(lambda x: 2.0 * x, fl.tensor([1.0, 1.0]))
    >>> t(fl.tensor([1.0, 3.0]))
    (Tensor([2., 6.], dtype=float32),)
    """

    check_callable(fun, "linear_transpose")
    leaves, in_tree = tree_util.flatten(tuple(primals))
    leaves = [as_tensor_leaf(x, "linear_transpose") for x in leaves]
    store = {}

    def flat(*xs):
        out = fun(*tree_util.unflatten(in_tree, list(xs)))
        o, t = tree_util.flatten(out)
        store["tree"] = t
        return o

    jaxpr, consts, outs = trace_to_jaxpr(flat, [aval_of(x) for x in leaves], name="linear_transpose")
    out_tree = store["tree"]
    _check_linear(jaxpr, len(leaves))

    def transposed(ct):
        c_leaves, c_tree = tree_util.flatten(ct)
        if c_tree != out_tree:
            raise ValueError(f"linear_transpose: cotangent structure {c_tree} != output structure {out_tree}")
        try:
            res = backward_pass(jaxpr, consts, [as_tensor_leaf(c, "linear_transpose") for c in c_leaves])
        except NotLinearError as e:
            raise NotLinearError(f"linear_transpose: the function is not linear in its input: {e}") from None
        except MissingRuleError as e:
            # inside a nested jaxpr (jit, cond, scan): a primitive without a transpose on purpose is not linear
            if e.kind != "transpose" or "transpose" not in e.prim.no_rule:
                raise
            raise _not_linear(e.prim, "") from None
        res = [zeros(aval_of(x)) if r is None else r for r, x in zip(res, leaves)]
        return tree_util.unflatten(in_tree, res)

    return transposed


def _not_linear(prim, where: str) -> NotLinearError:
    return NotLinearError(
        f"linear_transpose: the function is not linear in its input: it applies '{prim.name}' "
        f"({prim.no_rule.get('transpose', 'no transpose rule')}) to a value computed from {where or 'the input'}. "
        "linear_transpose needs a function built from linear operations of its inputs (sums, scaling by "
        "constants, products with constant matrices, reshapes, indexing); for the derivative of a non-linear "
        "function use fl.vjp, or fl.linearize and then fl.linear_transpose of the linear map it returns."
    )


def _check_linear(jaxpr: Jaxpr, n_inputs: int) -> None:
    """Name the first primitive without a transpose rule applied to a value that depends on an input."""
    dep: dict[Var, set[int]] = {v: {i} for i, v in enumerate(jaxpr.invars)}
    for eqn in jaxpr.eqns:
        srcs = set()
        for v in eqn.inputs:
            if type(v) is Var and v in dep:
                srcs |= dep[v]
        if not srcs:
            continue
        if eqn.prim.transpose is None:
            where = "" if n_inputs == 1 else f"input {', '.join(map(str, sorted(srcs)))}"
            raise _not_linear(eqn.prim, where)
        for o in eqn.outputs:
            dep[o] = srcs


class GradientError(FunclibError, TypeError):
    """A gradient was requested where none is defined."""


__all__ = [
    "jvp",
    "linearize",
    "vjp",
    "grad",
    "value_and_grad",
    "linear_transpose",
    "JVPTrace",
    "JVPTracer",
    "flatten_args",
    "JaxprTracer",
    "UndefinedPrimal",
]
