"""The jaxpr IR: ``Var``/``Literal``, ``Eqn``, ``Jaxpr``; the tracing trace that builds one; eval and typecheck.

A ``JaxprTrace`` stages every primitive applied to its tracers into equations. With ``forward_known=True`` it is
the partial evaluator of reverse mode: an equation none of whose inputs are its tracers is not staged but bound in
the parent trace, so only the computation that depends on the unknown (tangent) inputs is recorded.
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

import numpy as np

from . import dtypes
from .core import (
    PRIMITIVES,
    Primitive,
    ShapedArray,
    Tensor,
    Trace,
    Tracer,
    _new,
    _state,
    _wrap,
    aval_of,
    set_trace,
)
from .errors import FunclibError


class Var:
    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"Var({self.aval.str_short()})"


class Literal:
    __slots__ = ("val", "aval")

    def __init__(self, val, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self):
        return f"Literal({self.val})"


class Eqn:
    """One primitive application. ``source`` is the user's line that staged it (recorded only when the trace asks
    for it, see ``JaxprTrace.record_source``), else None."""

    __slots__ = ("prim", "inputs", "params", "outputs", "source")

    def __init__(self, prim: Primitive, inputs: list, params: dict, outputs: list[Var], source: str | None = None):
        self.prim = prim
        self.inputs = inputs
        self.params = params
        self.outputs = outputs
        self.source = source


# the folders of the library: a frame outside them is the user's
_LIBRARY_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), d) + os.sep
    for d in ("funclib", "transforms", "kernels", "nn", "optim")
)


def user_source() -> str | None:
    """``file:line in function`` of the innermost caller outside funclib, with the library function it called."""
    f = sys._getframe(1)
    lib = None
    while f is not None and f.f_code.co_filename.startswith(_LIBRARY_DIRS):
        if lib is None and not f.f_code.co_filename.startswith(_LIBRARY_DIRS[:3]):
            lib = f  # the innermost frame of the facade (nn/, optim/): the layer the user called
        f = f.f_back
    if f is None:
        return None
    where = f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}"
    if lib is not None:
        where += f" (via {os.path.basename(lib.f_code.co_filename)}:{lib.f_lineno} in {lib.f_code.co_name})"
    return where


class Jaxpr:
    """A typed, first-order program: ``constvars`` and ``invars`` in, ``eqns``, ``outvars`` out.

    >>> jaxpr = fl.make_jaxpr(lambda x: fl.exp(x).sum())(fl.ones(3)).jaxpr
    >>> [eqn.prim.name for eqn in jaxpr.eqns]
    ['exp', 'reduce_sum']
    """

    __slots__ = ("constvars", "invars", "eqns", "outvars", "cache")

    def __init__(self, constvars, invars, eqns, outvars):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.eqns = list(eqns)
        self.outvars = list(outvars)
        self.cache: dict = {}  # derived artifacts (compiled program, jvp/vmap/transpose jaxprs), keyed by rule

    def __repr__(self):
        return pp_jaxpr(self)

    @property
    def in_avals(self):
        return [v.aval for v in self.invars]

    @property
    def out_avals(self):
        return [v.aval for v in self.outvars]


def use_counts(jaxpr: Jaxpr) -> dict:
    """How many times each variable is read: by an equation's inputs, or as an output of the jaxpr."""
    uses: dict = {}
    for e in jaxpr.eqns:
        for a in e.inputs:
            if type(a) is Var:
                uses[a] = uses.get(a, 0) + 1
    for a in jaxpr.outvars:
        if type(a) is Var:
            uses[a] = uses.get(a, 0) + 1
    return uses


class ClosedJaxpr:
    """A jaxpr with the values of its constvars. Printing shows the jaxpr.

    >>> print(fl.make_jaxpr(lambda x: x * 2.0)(fl.ones(2)))
    { lambda ; a:f32[2]. let
        b:f32[2] = mul a 2.0:f32[]
      in (b,) }
    """

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: list):
        self.jaxpr = jaxpr
        self.consts = list(consts)

    def __repr__(self):
        return pp_jaxpr(self.jaxpr)

    def __str__(self):
        return pp_jaxpr(self.jaxpr)

    def _repr_pretty_(self, p, cycle):
        p.text(pp_jaxpr(self.jaxpr))

    @property
    def in_avals(self):
        return self.jaxpr.in_avals

    @property
    def out_avals(self):
        return self.jaxpr.out_avals

    @property
    def eqns(self):
        return self.jaxpr.eqns

    def __call__(self, *args):
        return eval_jaxpr(self.jaxpr, self.consts, *args)


# ---------------------------------------------------------------------------------------------------------------
# Building jaxprs by tracing


class JaxprTracer(Tracer):
    __slots__ = ("_aval", "jvar")

    @property
    def aval(self):
        return self._aval

    @property
    def device(self) -> str:
        """The device of the traced program's arguments (``jit`` traces per device), else ``"cpu"``."""
        return getattr(self._trace, "device", "cpu")

    @property
    def dtype(self):
        return self._aval.dtype

    @property
    def shape(self):
        return self._aval.shape

    @property
    def weak_type(self):
        return self._aval.weak_type


# Python's unary operators and ``x ** n`` keep a scalar a Python scalar: on a weak value they stay weak
_WEAK_UNARY = frozenset({"neg", "abs", "integer_pow"})


class JaxprTrace(Trace):
    """Stages primitives into equations. ``forward_known`` turns it into a partial evaluator (see module doc).

    With ``record_source`` set (inherited by traces started beneath, e.g. loop bodies), each equation records the
    user's line that staged it, for error messages of tools that read jaxprs (ONNX export); off, it costs nothing.
    """

    record_source = False

    # ``jit`` collects here each weak integer converted to a narrower integer dtype, ``(atom, dtype)``, and checks
    # the value at every call: eagerly a Python int out of the dtype's range raises OverflowError
    narrowing: list | None = None

    def __init__(self, parent, *, forward_known: bool = False, name: str = "tracing"):
        if parent is not None and parent.record_source:
            self.record_source = True
        self.parent = parent
        self.forward_known = forward_known
        self.eager_below = forward_known and (parent is None or parent.eager_below)
        self.name = name
        self.eqns: list[Eqn] = []
        self.constvar_of: dict[int, Var] = {}
        self.const_vals: list = []
        self.constvars: list[Var] = []

    def new_arg(self, aval: ShapedArray) -> JaxprTracer:
        t = JaxprTracer.__new__(JaxprTracer)
        t._trace = self
        t._aval = aval
        t.jvar = Var(aval)
        return t

    def _atom(self, x):
        if type(x) is JaxprTracer and x._trace is self:
            return x.jvar
        t = type(x)
        if t in (bool, int, float, complex):
            return Literal(x, aval_of(x))
        if t is Tensor and x._value.ndim == 0:
            return Literal(x._value, ShapedArray((), x._value.dtype))
        if t is np.ndarray and x.ndim == 0:
            return Literal(x, ShapedArray((), dtypes.canonicalize(x.dtype)))
        # a Tensor, an ndarray, or a tracer of an enclosing trace: a constant of this jaxpr
        v = self.constvar_of.get(id(x))
        if v is None:
            v = Var(aval_of(x))
            self.constvar_of[id(x)] = v
            self.const_vals.append(x)
            self.constvars.append(v)
        return v

    def process(self, prim, args, params):
        if self.forward_known:
            for a in args:
                if type(a) is JaxprTracer and a._trace is self:
                    break
            else:
                if self.parent is None:
                    return prim.eager(args, params)
                return self.bind_parent(prim, args, params)
            if prim.partial_eval is not None:
                return prim.partial_eval(self, args, params)
        ins = [a.jvar if type(a) is JaxprTracer and a._trace is self else self._atom(a) for a in args]
        weak = False
        for v in ins:
            if v.aval.weak_type:
                ins, weak = self._weak_operands(prim, ins, params)
                break
        out_avals = (prim.abstract_eval or prim.rule("abstract_eval"))(*[v.aval for v in ins], **params)
        src = user_source() if self.record_source else None
        if weak:
            out_avals = ShapedArray(out_avals.shape, out_avals.dtype, weak_type=True)
        if prim.multiple_results:
            outs = [self.new_arg(a) for a in out_avals]
            self.eqns.append(Eqn(prim, ins, params, [o.jvar for o in outs], src))
            return outs
        out = _new(JaxprTracer)
        out._trace = self
        out._aval = out_avals
        v = out.jvar = Var(out_avals)
        self.eqns.append(Eqn(prim, ins, params, [v], src))
        return out

    # --- weak values: Python scalars traced by jit ------------------------------------------------------------
    def _weak_operands(self, prim, ins: list, params: dict) -> tuple[list, bool]:
        """``prim``'s operands when some are weak, and whether its result is weak.

        Arithmetic among weak values stays weak at full precision, as Python arithmetic on the scalars does; in an
        elementwise op with typed operands a weak one takes their dtype; a conversion (and a call of another
        jitted function) reads the full-precision value; every other use sees what a Python scalar becomes on its
        own, the default dtype of its kind (``fl.sin(0.1)`` is float32 eagerly). A loop, a branch or another
        jitted call passes its operands to jaxprs traced with them as they are, weak ones included."""
        if prim.name == "convert_element_type":
            self._note_narrowing(ins[0], params["new_dtype"])
            return ins, False
        if _runs_jaxprs(prim, params):
            return ins, False
        typed = [v.aval.dtype for v in ins if not v.aval.weak_type]
        if prim.family == "binary" or prim.name in _WEAK_UNARY:
            if not typed:
                d = ins[0].aval.dtype
                for v in ins[1:]:
                    d = dtypes.promote_types(d, v.aval.dtype)
                return [self._cast_atom(v, d, True) for v in ins], True
            if prim.family == "binary":
                return [self._cast_atom(v, typed[0], False) if v.aval.weak_type else v for v in ins], False
        return [self._cast_atom(v, _strong_dtype(v.aval.dtype), False) if v.aval.weak_type else v for v in ins], False

    def _note_narrowing(self, a, dtype) -> None:
        if a.aval.weak_type and a.aval.dtype.kind == "i" and dtype.kind in "iu" and dtype != a.aval.dtype:
            if type(a) is Literal:
                dtypes_fit(int(a.val), dtype)
            elif self.narrowing is not None:
                self.narrowing.append((a, dtype))

    def _cast_atom(self, a, dtype, weak: bool):
        if not weak:
            self._note_narrowing(a, dtype)
        if type(a) is Literal:
            return Literal(np.asarray(a.val, dtype), ShapedArray(a.aval.shape, dtype, weak_type=weak))
        if a.aval.dtype == dtype:
            return a  # only the dtype enters the rules, so a weak value serves a typed use as it is
        out = Var(ShapedArray(a.aval.shape, dtype, weak_type=weak))
        self.eqns.append(Eqn(_convert_p(), [a], {"new_dtype": dtype}, [out]))
        return out

    def cast(self, x: JaxprTracer, dtype, weak: bool) -> JaxprTracer:
        """Stage ``x`` converted to ``dtype``, weakly typed or not."""
        t = self.new_arg(ShapedArray(x.aval.shape, dtype, weak_type=weak))
        self.eqns.append(Eqn(_convert_p(), [self._atom(x)], {"new_dtype": dtype}, [t.jvar]))
        return t

    def strengthen(self, x: JaxprTracer) -> JaxprTracer:
        """What weak ``x`` becomes on its own, as ``fl.asarray`` makes a Python scalar: its kind's default dtype."""
        return self.cast(x, _strong_dtype(x.dtype), False)

    def weak_constant(self, value, dtype) -> JaxprTracer:
        """A Python scalar as a weakly typed literal of ``dtype``, for arithmetic with weak values."""
        t = _new(JaxprTracer)
        t._trace = self
        t._aval = ShapedArray((), dtype, weak_type=True)
        t.jvar = Literal(np.asarray(value, dtype), t._aval)
        return t

    def is_known(self, x) -> bool:
        return not (type(x) is JaxprTracer and x._trace is self)

    def stage(self, prim, args, params, out_avals):
        """Record one equation with given output avals (for partial-eval rules); returns the output tracers."""
        ins = [self._atom(a) for a in args]
        outs = [self.new_arg(a) for a in out_avals]
        self.eqns.append(Eqn(prim, ins, params, [o.jvar for o in outs], user_source() if self.record_source else None))
        return outs

    def to_jaxpr(self, in_tracers, out_vals) -> tuple[Jaxpr, list]:
        outvars = [self._atom(o) for o in out_vals]
        jaxpr = Jaxpr(self.constvars, [t.jvar for t in in_tracers], self.eqns, outvars)
        return jaxpr, list(self.const_vals)


def _runs_jaxprs(prim, params: dict) -> bool:
    if prim.family == "call":
        return True
    for v in params.values():
        if isinstance(v, (list, tuple)) and v:
            v = v[0]
        if isinstance(v, (Jaxpr, ClosedJaxpr)):
            return True
    return False


def dtypes_fit(value: int, dtype: np.dtype, where: str = "") -> None:
    """Raise the eager OverflowError for a Python integer outside ``dtype``'s range."""
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise OverflowError(
            f"{where}Python integer {value} is out of range for {dtype.name} [{info.min}, {info.max}]; cast the "
            "tensor to a wider dtype first"
        )


def _strong_dtype(weak: np.dtype) -> np.dtype:
    return dtypes.python_scalar_dtype(dtypes.weak_sample(weak))


def _convert_p() -> Primitive:
    return PRIMITIVES["convert_element_type"]  # defined in primitives/, which imports this module


def trace_to_jaxpr(fun, in_avals: list[ShapedArray], name: str = "tracing") -> tuple[Jaxpr, list, Any]:
    """Trace ``fun(*tracers) -> list of values`` into a jaxpr. Returns ``(jaxpr, consts, out)``."""
    trace = JaxprTrace(_state.trace, name=name)
    ins = [trace.new_arg(a) for a in in_avals]
    with set_trace(trace):
        outs = fun(*ins)
    jaxpr, consts = trace.to_jaxpr(ins, outs)
    return jaxpr, consts, outs


# ---------------------------------------------------------------------------------------------------------------
# Interpretation and checking


def eval_jaxpr(jaxpr: Jaxpr, consts, *args) -> list:
    """Evaluate ``jaxpr`` by binding each equation at the current trace (so it works under every transform).

    >>> closed = fl.make_jaxpr(lambda x: fl.sin(x) * 2.0)(fl.tensor(0.5))
    >>> fl.eval_jaxpr(closed.jaxpr, closed.consts, fl.tensor(0.5))
    [Tensor(0.9588511, dtype=float32)]
    """
    env: dict[Var, Any] = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    if len(args) != len(jaxpr.invars):
        raise TypeError(f"eval_jaxpr: the jaxpr takes {len(jaxpr.invars)} inputs, got {len(args)}")
    for v, x in zip(jaxpr.invars, args):
        env[v] = x
    for eqn in jaxpr.eqns:
        ins = [a.val if type(a) is Literal else env[a] for a in eqn.inputs]
        out = eqn.prim.bind(*ins, **eqn.params)
        if eqn.prim.multiple_results:
            for v, o in zip(eqn.outputs, out):
                env[v] = o
        else:
            env[eqn.outputs[0]] = out
    return [_literal_value(a) if type(a) is Literal else env[a] for a in jaxpr.outvars]


def _literal_value(lit: Literal):
    return _wrap(np.asarray(lit.val, dtype=lit.aval.dtype))


class JaxprTypeError(FunclibError, TypeError):
    """A jaxpr is not well typed."""


def typecheck(jaxpr: Jaxpr) -> None:
    """Replay every equation's abstract eval; raise ``JaxprTypeError`` on the first mismatch.

    >>> fl.typecheck(fl.make_jaxpr(lambda x: x + 1.0)(fl.ones(3)).jaxpr)  # passes: returns None
    """
    defined = set(jaxpr.constvars) | set(jaxpr.invars)
    if len(defined) != len(jaxpr.constvars) + len(jaxpr.invars):
        raise JaxprTypeError("a variable is bound twice among the jaxpr's inputs")
    for i, eqn in enumerate(jaxpr.eqns):
        for a in eqn.inputs:
            if type(a) is Var and a not in defined:
                raise JaxprTypeError(f"equation {i} ({eqn.prim.name}) uses an undefined variable")
        out = eqn.prim.rule("abstract_eval")(*[a.aval for a in eqn.inputs], **eqn.params)
        outs = out if eqn.prim.multiple_results else [out]
        if len(outs) != len(eqn.outputs):
            raise JaxprTypeError(
                f"equation {i} ({eqn.prim.name}) has {len(eqn.outputs)} outputs, rule says {len(outs)}"
            )
        for o, v in zip(outs, eqn.outputs):
            if o != v.aval:
                raise JaxprTypeError(
                    f"equation {i} ({eqn.prim.name}): output declared {v.aval.str_short()}, "
                    f"abstract eval gives {o.str_short()}"
                )
            if v in defined:
                raise JaxprTypeError(f"equation {i} ({eqn.prim.name}) rebinds a variable")
            defined.add(v)
        for sub in _sub_jaxprs(eqn.params):
            typecheck(sub)
    for a in jaxpr.outvars:
        if type(a) is Var and a not in defined:
            raise JaxprTypeError("an output of the jaxpr is undefined")


def _sub_jaxprs(params):
    for v in params.values():
        if isinstance(v, Jaxpr):
            yield v
        elif isinstance(v, ClosedJaxpr):
            yield v.jaxpr
        elif isinstance(v, (tuple, list)):
            for w in v:
                if isinstance(w, Jaxpr):
                    yield w
                elif isinstance(w, ClosedJaxpr):
                    yield w.jaxpr


def has_effects(jaxpr: Jaxpr) -> bool:
    """Whether running ``jaxpr`` has an effect (see ``Primitive.effect``), in its sub-jaxprs too."""
    found = jaxpr.cache.get("effects")
    if found is None:
        found = jaxpr.cache["effects"] = any(eqn_has_effects(e) for e in jaxpr.eqns)
    return found


def eqn_has_effects(eqn: Eqn) -> bool:
    """Whether ``eqn`` must run even if its outputs are unused: an effectful primitive, a call whose body has an
    effect, or a custom rule whose traced function had one (recorded as ``effects`` in its store)."""
    if eqn.prim.effect:
        return True
    for v in eqn.params.values():  # exact types: this runs for every equation in every round of the passes
        t = type(v)
        if t is tuple or t is list:
            for w in v:
                tw = type(w)
                if (tw is Jaxpr and has_effects(w)) or (tw is ClosedJaxpr and has_effects(w.jaxpr)):
                    return True
        elif (t is Jaxpr and has_effects(v)) or (t is ClosedJaxpr and has_effects(v.jaxpr)):
            return True
        elif t is dict and v.get("effects"):
            return True
    return False


def strip_effects(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` without its effectful equations (for recomputing values that an earlier run already produced,
    whose effects happened then); equations feeding only those are kept, the passes remove them."""
    if not has_effects(jaxpr):
        return jaxpr
    eqns = []
    for e in jaxpr.eqns:
        if e.prim.effect:
            continue
        params = e.params
        if any(isinstance(v, (Jaxpr, ClosedJaxpr, tuple, list)) for v in params.values()):
            params = {k: _strip_param(v) for k, v in params.items()}
        eqns.append(Eqn(e.prim, e.inputs, params, e.outputs, e.source))
    out = Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars)
    if "consts" in jaxpr.cache:
        out.cache["consts"] = jaxpr.cache["consts"]
    return out


def _strip_param(v):
    if isinstance(v, Jaxpr):
        return strip_effects(v)
    if isinstance(v, ClosedJaxpr):
        return ClosedJaxpr(strip_effects(v.jaxpr), v.consts)
    if isinstance(v, (tuple, list)):
        return type(v)(_strip_param(w) for w in v)
    return v


# ---------------------------------------------------------------------------------------------------------------
# Pretty-printing


def _names():
    letters = "abcdefghijklmnopqrstuvwxyz"
    for n in itertools.count(1):
        for combo in itertools.product(letters, repeat=n):
            yield "".join(combo)


def _fmt_param(v) -> str:
    if isinstance(v, np.dtype):
        return v.name
    if isinstance(v, (Jaxpr, ClosedJaxpr)):
        return "{...}"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _fmt_literal(lit: Literal) -> str:
    val = np.asarray(lit.val)
    if val.dtype == np.bool_:
        s = str(bool(val))
    elif val.dtype.kind in "iu":
        s = str(int(val))
    else:
        s = repr(val.item()) if val.dtype.kind != "V" else str(val)
    return f"{s}:{lit.aval.str_short()}"


def _has_jaxpr(v) -> bool:
    if isinstance(v, (tuple, list)):
        return any(isinstance(w, (Jaxpr, ClosedJaxpr)) for w in v)
    return isinstance(v, (Jaxpr, ClosedJaxpr))


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0) -> str:
    names: dict[Var, str] = {}
    gen = _names()

    def name(v):
        if type(v) is Literal:
            return _fmt_literal(v)
        if v not in names:
            names[v] = next(gen)
        return names[v]

    def binder(v):
        return f"{name(v)}:{v.aval.str_short()}"

    pad = " " * indent
    consts = " ".join(binder(v) for v in jaxpr.constvars)
    ins = " ".join(binder(v) for v in jaxpr.invars)
    lines = [f"{pad}{{ lambda {consts + ' ' if consts else ''}; {ins}. let"]
    for eqn in jaxpr.eqns:
        lhs = " ".join(binder(v) for v in eqn.outputs)
        shown = {k: v for k, v in eqn.params.items() if not _has_jaxpr(v)}
        ps = ", ".join(f"{k}={_fmt_param(v)}" for k, v in shown.items())
        rhs = f"{eqn.prim.name}{'[' + ps + ']' if ps else ''} {' '.join(name(a) for a in eqn.inputs)}".rstrip()
        lines.append(f"{pad}    {lhs} = {rhs}")
        for k, sub in eqn.params.items():
            subs = (
                [sub]
                if isinstance(sub, (Jaxpr, ClosedJaxpr))
                else ([s for s in sub if isinstance(s, (Jaxpr, ClosedJaxpr))] if isinstance(sub, (tuple, list)) else [])
            )
            for s in subs:
                inner = s.jaxpr if isinstance(s, ClosedJaxpr) else s
                lines.append(f"{pad}      {k}=")
                lines.append(pp_jaxpr(inner, indent + 8))
    outs = ", ".join(name(v) for v in jaxpr.outvars)
    lines.append(f"{pad}  in ({outs}{',' if len(jaxpr.outvars) == 1 else ''}) }}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Partial evaluation of a jaxpr


def partial_eval_jaxpr(jaxpr: Jaxpr, in_unknowns: list[bool], instantiate: list[bool] | bool = False):
    """Split ``jaxpr`` into a known part and an unknown part.

    Returns ``(known, unknown, out_unknowns, num_res)``: ``known`` takes the known inputs (constvars of ``jaxpr``
    are known and stay constvars) and returns the known outputs followed by ``num_res`` residuals; ``unknown``
    takes the residuals followed by the unknown inputs and returns the unknown outputs. ``instantiate`` forces
    outputs to be unknown (computed by the unknown part) even when they are known.

    Equations of higher-order primitives (loops, branches) are split by their own partial-eval rules, so that
    their known work stays on the known side.
    """
    n_out = len(jaxpr.outvars)
    inst = [instantiate] * n_out if isinstance(instantiate, bool) else list(instantiate)
    if any(e.prim.partial_eval is not None for e in jaxpr.eqns):
        return _partial_eval_traced(jaxpr, in_unknowns, inst)
    unknown_vars: set[Var] = {v for v, u in zip(jaxpr.invars, in_unknowns) if u}
    known_eqns, unknown_eqns = [], []
    for eqn in jaxpr.eqns:
        if any(type(a) is Var and a in unknown_vars for a in eqn.inputs):
            unknown_eqns.append(eqn)
            unknown_vars.update(eqn.outputs)
        else:
            known_eqns.append(eqn)
    out_unknowns = [(type(v) is Var and v in unknown_vars) or force for v, force in zip(jaxpr.outvars, inst)]
    # residuals: known values that the unknown side reads (including known outputs forced to be unknown)
    res: list[Var] = []
    seen: set[Var] = set()
    unknown_inputs = [v for v, u in zip(jaxpr.invars, in_unknowns) if u]

    def need(v):
        if type(v) is Var and v not in unknown_vars and v not in seen:
            seen.add(v)
            res.append(v)

    for eqn in unknown_eqns:
        for a in eqn.inputs:
            need(a)
    for v, u in zip(jaxpr.outvars, out_unknowns):
        if u:
            need(v)
    known_outs = [v for v, u in zip(jaxpr.outvars, out_unknowns) if not u]
    known = Jaxpr(
        jaxpr.constvars,
        [v for v, u in zip(jaxpr.invars, in_unknowns) if not u],
        known_eqns,
        known_outs + res,
    )
    # the unknown side gets fresh residual binders so the two jaxprs share no variables
    rename = {v: Var(v.aval) for v in res}

    def r(a):
        return rename.get(a, a) if type(a) is Var else a

    new_unknown_eqns = [Eqn(e.prim, [r(a) for a in e.inputs], e.params, e.outputs, e.source) for e in unknown_eqns]
    unknown = Jaxpr(
        [],
        [rename[v] for v in res] + unknown_inputs,
        new_unknown_eqns,
        [r(v) for v, u in zip(jaxpr.outvars, out_unknowns) if u],
    )
    return known, unknown, out_unknowns, len(res)


def _partial_eval_traced(jaxpr: Jaxpr, in_unknowns: list[bool], inst: list[bool]):
    """``partial_eval_jaxpr`` by re-tracing under a partial evaluator, which runs the partial-eval rules."""
    known = JaxprTrace(None, name="partial eval (known)")
    pe = JaxprTrace(known, forward_known=True, name="partial eval")
    consts = [known.new_arg(v.aval) for v in jaxpr.constvars]
    ins = [pe.new_arg(v.aval) if u else known.new_arg(v.aval) for v, u in zip(jaxpr.invars, in_unknowns)]
    with set_trace(pe):
        outs = eval_jaxpr(jaxpr, consts, *ins)
    out_unknowns = [not pe.is_known(o) or bool(f) for o, f in zip(outs, inst)]
    u_ins = [x for x, u in zip(ins, in_unknowns) if u]
    uj, res = pe.to_jaxpr(u_ins, [o for o, u in zip(outs, out_unknowns) if u])
    k_ins = [x for x, u in zip(ins, in_unknowns) if not u]
    kj, kconsts = known.to_jaxpr(k_ins, [o for o, u in zip(outs, out_unknowns) if not u] + res)
    if kconsts:
        raise FunclibError(
            f"partial_eval_jaxpr: a partial-eval rule captured a constant array "
            f"({aval_of(kconsts[0]).str_short()}); rules must build constants with primitives (iota, "
            "broadcast_in_dim, ...) so that the known side stays closed"
        )
    known_j = Jaxpr([c.jvar for c in consts], kj.invars, kj.eqns, kj.outvars)
    unknown_j = Jaxpr([], list(uj.constvars) + list(uj.invars), uj.eqns, uj.outvars)
    return known_j, unknown_j, out_unknowns, len(res)
