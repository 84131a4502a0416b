"""Transposition: ``backward_pass`` over a linear jaxpr, and the ``Tape`` that eager reverse mode records instead.

Reverse mode under a transform (``jit(grad(f))``, ``grad(grad(f))``, ``vmap(grad(f))``) linearizes into a jaxpr
and transposes it with ``backward_pass``. With no transform active the inputs are concrete, and staging a jaxpr
only to walk it backwards once is the dominant cost of an eager gradient. There ``grad``, ``value_and_grad`` and
``vjp`` run the function under a ``JVPTrace`` whose tangents are ``LinearTracer``s of a ``Tape``: each primitive
applied to a tangent appends one step (the primitive, its parameters and its concrete operands), and the backward
pass calls the transpose rules on those steps in reverse order, as PyTorch's and HIPS autograd's tapes do.

Elementwise unary and binary primitives of one real floating dtype skip the tangent computation altogether: their
derivative is diagonal (up to broadcasting), so it is its own transpose, and the step keeps the primal operands
and result to apply the row's tangent function to the cotangent (summed back over broadcast axes). Primitives
that split themselves under partial evaluation (jit's call, control flow, ``checkpoint``, custom rules' calls)
are staged with a partial evaluator of their own, one small jaxpr per step, and transposed with
``backward_pass``; so every rule works on the tape exactly as in the staged path.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from funclib import dtypes
from funclib.core import ShapedArray, Tensor, Trace, Tracer, UndefinedPrimal, Zero, _new, _state, _wrap, aval_of
from funclib.jaxpr import Jaxpr, JaxprTrace, JaxprTracer, Literal, Var
from funclib.primitives.elementwise import PRODUCTS, add, mul_p, safe_mul_p
from funclib.primitives.shape import unbroadcast

_REAL = frozenset(dtypes.REAL_FLOATING)
# kinds of steps
_UNARY, _BINARY, _LINEAR, _JAXPR = range(4)


def backward_pass(jaxpr: Jaxpr, consts: list, cts_out: list, plain_products: bool = False) -> list:
    """Transpose a jaxpr that is linear in its invars: cotangents of the outputs -> cotangents of the inputs.

    ``plain_products`` transposes ``safe_mul`` as a plain product (see ``autodiff._transpose_linearized``).
    """
    env: dict[Var, Any] = dict(zip(jaxpr.constvars, consts))
    linear = set(jaxpr.invars)
    lin_eqns = []
    for eqn in jaxpr.eqns:
        for v in eqn.inputs:
            if type(v) is Var and v in linear:
                lin_eqns.append(eqn)
                linear.update(eqn.outputs)
                break
        else:  # non-linear bookkeeping (e.g. a mask built from constants): evaluate it forward
            vals = [v.val if type(v) is Literal else env[v] for v in eqn.inputs]
            out = eqn.prim.bind(*vals, **eqn.params)
            for v, o in zip(eqn.outputs, out if eqn.prim.multiple_results else [out]):
                env[v] = o
    ct_env: dict[Var, Any] = {}
    for v, ct in zip(jaxpr.outvars, cts_out):
        if type(v) is Var and v in linear and ct is not None and type(ct) is not Zero:
            prev = ct_env.get(v)
            ct_env[v] = ct if prev is None else add(prev, ct)
    for eqn in reversed(lin_eqns):
        if eqn.prim.multiple_results:
            cts = [ct_env.pop(v, None) for v in eqn.outputs]
            if all(c is None for c in cts):
                continue
            # symbolic zeros: a loop's rule then reads no (length, ...) array of them
            ct = [Zero(v.aval) if c is None else c for v, c in zip(eqn.outputs, cts)]
        else:
            ct = ct_env.pop(eqn.outputs[0], None)
            if ct is None:
                continue
        args = []
        for v in eqn.inputs:
            if type(v) is Literal:
                # rules (and custom_vjp bwd functions) see tensors, not the raw NumPy value of a 0-d literal
                args.append(_wrap(v.val) if type(v.val) is np.ndarray else v.val)
            elif v in linear:
                args.append(UndefinedPrimal(v.aval))
            else:
                args.append(env[v])
        prim = mul_p if plain_products and eqn.prim is safe_mul_p else eqn.prim
        rule = prim.transpose or prim.rule("transpose")
        in_cts = rule(ct, *args, **eqn.params)
        for v, c in zip(eqn.inputs, in_cts):
            if c is None or type(v) is not Var or v not in linear or type(c) is Zero:
                continue
            prev = ct_env.get(v)
            ct_env[v] = c if prev is None else add(prev, c)
    return [ct_env.get(v) for v in jaxpr.invars]


class LinearTracer(Tracer):
    """A tangent recorded on a ``Tape``: an abstract value and the number of the value on the tape."""

    __slots__ = ("_aval", "_like", "index")

    @property
    def aval(self) -> ShapedArray:
        a = self._aval
        if a is None:
            v = self._like._value
            a = self._aval = ShapedArray(v.shape, v.dtype)
        return a

    @property
    def device(self) -> str:
        like = self._like
        return "cpu" if like is None else like.device


class Tape(Trace):
    """Records the linear map of an eager function as it runs (the parent of the ``JVPTrace`` of ``grad``).

    >>> tape = Tape("grad")
    >>> tape.new(ShapedArray((3,), np.dtype("float32"))).index
    0
    """

    eager_below = True

    def __init__(self, name: str, tracer_type: type = Tracer):
        self.name = name
        self.tracer_type = tracer_type  # the primal tracers' type, for ``elementwise``
        self.steps: list[tuple] = []
        self.count = 0

    def new(self, aval: ShapedArray) -> LinearTracer:
        t = _new(LinearTracer)
        t._trace = self
        t._aval = aval
        t._like = None
        t.index = self.count
        self.count += 1
        return t

    def process(self, prim, args, params):
        linear = False
        plain = True
        for a in args:
            t = type(a)
            if t is LinearTracer and a._trace is self:
                linear = True
            elif t is not Tensor:
                plain = False
        if not linear:
            return prim.eager(args, params)
        if not plain or prim.partial_eval is not None or prim.transpose is None:
            return self._stage(prim, args, params)
        avals = [a.aval if type(a) is LinearTracer else aval_of(a) for a in args]
        out = (prim.abstract_eval or prim.rule("abstract_eval"))(*avals, **params)
        # steps hold numbers and avals, never tracers: a tracer refers to its tape, and a cycle would leave every
        # residual to the garbage collector
        ins = [None if type(a) is LinearTracer else a for a in args]
        lin = [(i, a.index, a.aval) for i, a in enumerate(args) if type(a) is LinearTracer]
        if prim.multiple_results:
            outs = [self.new(a) for a in out]
            self.steps.append((_LINEAR, prim, params, ins, lin, [(o.index, o.aval) for o in outs]))
            return outs
        t = self.new(out)
        self.steps.append((_LINEAR, prim, params, ins, lin, t.index))
        return t

    def _stage(self, prim, args, params):
        """One step as a jaxpr of its own: a partial evaluator computes what it can now and stages the rest."""
        pe = JaxprTrace(None, forward_known=True, name=self.name)
        ins, lin_in, pe_in = [], [], []
        for a in args:
            if type(a) is LinearTracer and a._trace is self:
                t = pe.new_arg(a.aval)
                lin_in.append(a)
                pe_in.append(t)
                ins.append(t)
            else:
                ins.append(a)
        prev = _state.trace
        _state.trace = pe
        try:
            out = prim.bind(*ins, **params)
        finally:
            _state.trace = prev
        outs = out if prim.multiple_results else [out]
        unknown = [o for o in outs if type(o) is JaxprTracer and o._trace is pe]
        if not unknown:
            return out
        jaxpr, consts = pe.to_jaxpr(pe_in, unknown)
        lin_out = {id(o): self.new(o.aval) for o in unknown}
        self.steps.append((_JAXPR, jaxpr, consts, [a.index for a in lin_in], [o.index for o in lin_out.values()]))
        outs = [lin_out.get(id(o), o) for o in outs]
        return outs if prim.multiple_results else outs[0]

    def elementwise(self, jt, prim, args):
        """The result of a unary or binary row under ``jt`` (the ``JVPTrace`` over this tape) on concrete operands
        of one real floating dtype, with its diagonal step recorded; ``None`` for other operands (the JVP rule
        runs then, and explains any error)."""
        fns = prim.diagonal
        if len(args) == 1:
            a = args[0]
            if type(a) is not self.tracer_type or a._trace is not jt:
                return None
            x = a.primal
            if type(x) is not Tensor:
                return None
            v = x._value
            if v.dtype not in _REAL:
                return None
            try:
                w = fns[0](v)
            except Exception:
                return None
            if type(w) is not np.ndarray:
                w = np.asarray(w)  # NumPy returns a scalar for 0-d operands
            if w.dtype is not v.dtype:
                return None
            out = _new(Tensor)
            out._value = w
            t = a.tangent
            if type(t) is not LinearTracer:  # a symbolic zero or a constant: nothing flows back through it
                return out
            self.steps.append((_UNARY, fns[1], x, out, t.index, self.count))
            return self._result(jt, out)
        a, b = args
        jtype = self.tracer_type
        if type(a) is jtype and a._trace is jt:
            x, tx = a.primal, a.tangent
        elif type(a) is Tensor:
            x, tx = a, None
        else:
            return None
        if type(b) is jtype and b._trace is jt:
            y, ty = b.primal, b.tangent
        elif type(b) is Tensor:
            y, ty = b, None
        else:
            return None
        if type(x) is not Tensor or type(y) is not Tensor:
            return None
        v = x._value
        d = v.dtype
        if d not in _REAL or y._value.dtype is not d:
            return None
        try:
            w = fns[0](v, y._value)
        except Exception:
            return None
        if type(w) is not np.ndarray:
            w = np.asarray(w)
        if w.dtype is not d:
            return None
        out = _new(Tensor)
        out._value = w
        ix = tx.index if type(tx) is LinearTracer and fns[1] is not None else None
        iy = ty.index if type(ty) is LinearTracer and fns[2] is not None else None
        if ix is None and iy is None:
            return out
        self.steps.append((_BINARY, fns[1], fns[2], x, y, out, ix, iy, self.count))
        return self._result(jt, out)

    def _result(self, jt, out):
        """``out`` as a tracer of ``jt`` whose tangent is the tape's next value, its aval made only if a rule asks
        (``new`` and ``jt.new`` written out: this runs once per elementwise operation)."""
        lt = _new(LinearTracer)
        lt._trace = self
        lt._aval = None
        lt._like = out
        lt.index = self.count
        self.count += 1
        r = _new(self.tracer_type)
        r._trace = jt
        r.primal = out
        r.tangent = lt
        return r

    def backward(self, outs: list, cts: list, plain_products: bool = False) -> dict[int, Any]:
        """Cotangents of the tape's values (by ``index``) from those of ``outs`` (``LinearTracer``s or zeros).

        ``plain_products`` computes ``safe_mul`` as a plain product, also inside the rows' tangent functions."""
        if not plain_products:
            return self._backward(outs, cts, False)
        PRODUCTS.plain = True
        try:
            return self._backward(outs, cts, True)
        finally:
            PRODUCTS.plain = False

    def _backward(self, outs, cts, plain_products):
        env: dict[int, Any] = {}
        for o, c in zip(outs, cts):
            if type(o) is LinearTracer and c is not None and type(c) is not Zero:
                _accumulate(env, o.index, c)
        pop = env.pop
        get = env.get
        for step in reversed(self.steps):
            kind = step[0]
            if kind is _UNARY:
                _, fn, x, y, i, o = step
                c = pop(o, None)
                if c is not None:
                    g = fn(x, y, c)
                    prev = get(i)
                    env[i] = g if prev is None else add(prev, g)
            elif kind is _BINARY:
                _, fx, fy, x, y, out, ix, iy, o = step
                c = pop(o, None)
                if c is None:
                    continue
                if ix is not None:
                    g = fx(x, y, out, c)
                    if g.shape != x._value.shape:
                        g = _sum_to(g, x)
                    prev = get(ix)
                    env[ix] = g if prev is None else add(prev, g)
                if iy is not None:
                    g = fy(x, y, out, c)
                    if g.shape != y._value.shape:
                        g = _sum_to(g, y)
                    prev = get(iy)
                    env[iy] = g if prev is None else add(prev, g)
            elif kind is _LINEAR:
                _linear_step(env, step, plain_products)
            else:
                _, jaxpr, consts, ins, louts = step
                cs = [env.pop(o, None) for o in louts]
                if all(c is None for c in cs):
                    continue
                for i, c in zip(ins, backward_pass(jaxpr, consts, cs, plain_products)):
                    if c is not None and type(c) is not Zero:
                        _accumulate(env, i, c)
        return env


def _linear_step(env, step, plain_products):
    _, prim, params, ins, lin, outs = step
    if prim.multiple_results:
        cs = [env.pop(i, None) for i, _ in outs]
        if all(c is None for c in cs):
            return
        ct = [Zero(a) if c is None else c for (_, a), c in zip(outs, cs)]
    else:
        ct = env.pop(outs, None)
        if ct is None:
            return
    ins = list(ins)
    for pos, _, aval in lin:
        ins[pos] = UndefinedPrimal(aval)
    if plain_products and prim is safe_mul_p:
        prim = mul_p
    in_cts = prim.transpose(ct, *ins, **params)
    for pos, i, _ in lin:
        c = in_cts[pos]
        if c is not None and type(c) is not Zero:
            _accumulate(env, i, c)


def _sum_to(g, x):
    shape = x._value.shape
    return g if g.shape == shape else unbroadcast(g, ShapedArray(shape, x._value.dtype))


def _accumulate(env, i, c):
    prev = env.get(i)
    env[i] = c if prev is None else add(prev, c)


__all__ = ["LinearTracer", "Tape", "backward_pass"]
