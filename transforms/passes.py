"""Graph passes on jaxprs: dead-code elimination, common-subexpression elimination, constant folding and
algebraic simplification (``x*1``, ``x+0``, double transposes, reshape chains, no-op converts, transposes that
only move axes of size 1, which are reshapes, transposes between reshapes that only add and drop axes of size 1,
which are transposes of the unreshaped operand, and products with a diagonal matrix, which are scalings).

Each pass returns a new ``Jaxpr``; ``optimize`` runs them to a fixed point, in the program and in every jaxpr it
carries (loop bodies and predicates, branches, call and custom-rule bodies), keeping each body's signature.
Constant folding evaluates equations whose inputs are all literals and stores small results as literals, larger
ones as new constvars.
"""

from __future__ import annotations

import numpy as np

from funclib.core import ShapedArray, Tensor
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var, eqn_has_effects, has_effects, use_counts
from funclib.primitives.elementwise import mul_p
from funclib.primitives.shape import reshape_p, transpose_p

_FOLD_LIMIT = 1 << 16  # elements: larger constant results stay as computations (they would bloat the program)


def _atom_key(a):
    if type(a) is Literal:
        v = np.asarray(a.val)
        return ("lit", v.dtype.str, v.tobytes())
    return ("var", id(a))


def _param_key(params):
    items = []
    for k, v in sorted(params.items()):
        try:
            hash(v)
            items.append((k, v))
        except TypeError:
            items.append((k, id(v)))
    return tuple(items)


def dce(jaxpr: Jaxpr, effects: bool = True) -> Jaxpr:
    """Drop equations none of whose outputs are used (effects are always used; ``effects=False`` says there are
    none, which saves looking), and let a primitive with a ``dce`` rule drop the outputs of its equations that are
    not."""
    live = {v for v in jaxpr.outvars if type(v) is Var}
    kept = []
    for eqn in reversed(jaxpr.eqns):
        if any(v in live for v in eqn.outputs) or (effects and eqn_has_effects(eqn)):
            if eqn.prim.dce is not None and not all(v in live for v in eqn.outputs):
                eqn = eqn.prim.dce(eqn, [v in live for v in eqn.outputs]) or eqn
            kept.append(eqn)
            live.update(a for a in eqn.inputs if type(a) is Var)
    kept.reverse()
    return Jaxpr(jaxpr.constvars, jaxpr.invars, kept, jaxpr.outvars)


def _is_literal_value(a, value) -> bool:
    if type(a) is not Literal:
        return False
    v = np.asarray(a.val)
    return v.shape == () and v.dtype.kind in "biufc" and v == value


def _swap_dot(dot: Eqn, perm: tuple) -> dict | None:
    """Params for ``dot_general(y, x)`` if ``transpose(dot_general(x, y), perm)`` equals it, else None.

    The transposed gradient of a weight matrix then comes out of BLAS in the layout its consumers read, instead of
    as a strided view that a fused kernel would walk column by column.
    """
    (lc, rc), (lb, rb) = dot.params["dimension_numbers"]
    x, y = dot.inputs
    nb = len(lb)
    nx = x.aval.ndim - len(lc) - nb
    ny = y.aval.ndim - len(rc) - nb
    if perm != tuple(range(nb)) + tuple(range(nb + nx, nb + nx + ny)) + tuple(range(nb, nb + nx)):
        return None
    return {**dot.params, "dimension_numbers": ((tuple(rc), tuple(lc)), (tuple(rb), tuple(lb)))}


def _simplify(eqn: Eqn, producers: dict, uses: dict):
    """Return an atom that replaces the equation's (single) output, a rewritten equation, or None."""
    name = eqn.prim.name
    ins = eqn.inputs
    out = eqn.outputs[0] if eqn.outputs else None
    if out is None or eqn.prim.multiple_results:
        return None

    def same_aval(a):
        return a.aval.shape == out.aval.shape and a.aval.dtype == out.aval.dtype

    if name == "mul":
        x, y = ins
        if _is_literal_value(y, 1) and same_aval(x):
            return x
        if _is_literal_value(x, 1) and same_aval(y):
            return y
    elif name in ("add", "sub"):
        x, y = ins
        if _is_literal_value(y, 0) and same_aval(x):
            return x
        if name == "add" and _is_literal_value(x, 0) and same_aval(y):
            return y
    elif name == "div":
        x, y = ins
        if _is_literal_value(y, 1) and same_aval(x):
            return x
    elif name == "neg":
        p = producers.get(ins[0])
        if p is not None and p.prim.name == "neg":
            return p.inputs[0]
    elif name == "convert_element_type":
        if ins[0].aval.dtype == eqn.params["new_dtype"]:
            return ins[0]
    elif name == "reshape":
        x = ins[0]
        if x.aval.shape == tuple(eqn.params["new_sizes"]):
            return x
        p = producers.get(x)
        if p is not None and p.prim.name == "reshape":
            src = p.inputs[0]
            if src.aval.shape == tuple(eqn.params["new_sizes"]):
                return src
            return Eqn(eqn.prim, [src], eqn.params, eqn.outputs, eqn.source)
        if p is not None and p.prim.name == "transpose":
            return _unit_axes_transpose(eqn, p, producers)
    elif name == "transpose":
        perm = tuple(eqn.params["permutation"])
        if perm == tuple(range(len(perm))):
            return ins[0]
        p = producers.get(ins[0])
        if p is not None and p.prim.name == "dot_general" and uses.get(ins[0]) == 1:
            swapped = _swap_dot(p, perm)
            if swapped is not None:
                return Eqn(p.prim, [p.inputs[1], p.inputs[0]], swapped, eqn.outputs, p.source)
        if p is not None and p.prim.name == "transpose":
            inner = tuple(p.params["permutation"])
            composed = tuple(inner[i] for i in perm)
            if composed == tuple(range(len(composed))):
                return p.inputs[0]
            return Eqn(eqn.prim, [p.inputs[0]], {"permutation": composed}, eqn.outputs, eqn.source)
        shape = ins[0].aval.shape
        moved = [i for i in perm if shape[i] != 1]
        if moved == sorted(moved):
            # only axes of size 1 move: the elements keep their order, so it is a reshape, which joins the
            # reshapes around it (vmapped matrix-vector products leave such transposes of their size-1 axes)
            as_reshape = Eqn(reshape_p, [ins[0]], {"new_sizes": tuple(out.aval.shape)}, eqn.outputs, eqn.source)
            return _simplify(as_reshape, producers, uses) or as_reshape
    elif name == "broadcast_in_dim":
        x = ins[0]
        if x.aval.shape == tuple(eqn.params["shape"]) and tuple(eqn.params["broadcast_dimensions"]) == tuple(
            range(x.aval.ndim)
        ):
            return x
    return None


def _non_unit(shape) -> tuple:
    return tuple(n for n in shape if n != 1)


def _unit_axes_transpose(eqn: Eqn, t: Eqn, producers: dict) -> Eqn | None:
    """``reshape(transpose(reshape(src)))`` where the inner reshape only inserts axes of size 1 and neither
    ``src`` nor the result has any: the transpose of ``src`` itself. Jacobians and vmap leave such sandwiches, and
    a loop over an axis of size 1 innermost is a scalar copy per element in a generated kernel."""
    r = producers.get(t.inputs[0])
    out_shape = tuple(eqn.params["new_sizes"])
    if r is None or r.prim.name != "reshape" or 1 in out_shape:
        return None
    src = r.inputs[0]
    mid = t.inputs[0].aval.shape
    if 1 in src.aval.shape or _non_unit(mid) != src.aval.shape:
        return None
    axis_of = {i: k for k, i in enumerate(i for i, n in enumerate(mid) if n != 1)}
    perm = tuple(axis_of[i] for i in t.params["permutation"] if mid[i] != 1)
    if tuple(src.aval.shape[k] for k in perm) != out_shape:
        return None
    return Eqn(transpose_p, [src], {"permutation": perm}, eqn.outputs, eqn.source)


def _diagonal(a, producers: dict, known: dict, eyes: dict):
    """``(g, n)`` if ``a`` is ``diag(g)`` up to axes of size 1: a reshape adding or dropping only such axes of
    ``E * g`` (``mul``/``safe_mul``), ``E`` a constant identity matrix of size n and ``g`` of shape (n,), (1, n) or
    (n, 1). vmapped JVPs and VJPs of standard-basis vectors (``jacfwd``, ``hessian``) multiply by such matrices."""
    p = producers.get(a)
    while p is not None and p.prim.name == "reshape" and _non_unit(p.inputs[0].aval.shape) == _non_unit(a.aval.shape):
        a = p.inputs[0]
        p = producers.get(a)
    if p is None or p.prim.name not in ("mul", "safe_mul") or a.aval.ndim != 2:
        return None
    n = a.aval.shape[0]
    if a.aval.shape != (n, n):
        return None
    for e, g in (p.inputs, p.inputs[::-1]):
        if type(e) is not Var or e not in known or type(g) is not Var:
            continue
        if g.aval.shape not in ((n,), (1, n), (n, 1)) or e.aval.shape != (n, n):
            continue
        c = known[e]
        is_eye = eyes.get(id(c))
        if is_eye is None:
            is_eye = eyes[id(c)] = bool(np.array_equal(c, np.eye(n, dtype=c.dtype)))
        if is_eye:
            return g, n
    return None


def _diagonal_dot(eqn: Eqn, producers: dict, known: dict, eyes: dict) -> list | None:
    """``dot_general(x, diag(g))`` (either side) as ``x * g`` along the contracted axis, moved to where the
    diagonal's free axis sits in the output: n multiplications per row of ``x`` instead of n squared."""
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    if lb or rb or len(lc) != 1 or eqn.params.get("preferred_element_type") is not None:
        return None
    out = eqn.outputs[0]
    for side in (1, 0):
        d, x = eqn.inputs[side], eqn.inputs[1 - side]
        dc, xc = (rc[0], lc[0]) if side == 1 else (lc[0], rc[0])
        if type(d) is not Var or type(x) is not Var or d.aval.dtype != x.aval.dtype:
            continue
        found = _diagonal(d, producers, known, eyes)
        if found is None or d.aval.shape[dc] == 1:
            continue
        g, n = found
        xshape = tuple(x.aval.shape)
        dtype = x.aval.dtype
        # the diagonal's other axis of size n is its only free one that is not of size 1
        gv = Var(ShapedArray(tuple(n if i == xc else 1 for i in range(len(xshape))), dtype))
        scaled = Var(ShapedArray(xshape, dtype))
        free = [i for i in range(len(xshape)) if i != xc]
        perm = tuple(free + [xc]) if side == 1 else tuple([xc] + free)
        moved = Var(ShapedArray(tuple(xshape[i] for i in perm), dtype))
        src = eqn.source
        return [
            Eqn(reshape_p, [g], {"new_sizes": gv.aval.shape}, [gv], src),
            Eqn(mul_p, [x, gv], {}, [scaled], src),
            Eqn(transpose_p, [scaled], {"permutation": perm}, [moved], src),
            Eqn(reshape_p, [moved], {"new_sizes": tuple(out.aval.shape)}, [out], src),
        ]
    return None


def simplify_cse_fold(
    jaxpr: Jaxpr, consts: list, fold_limit: int = _FOLD_LIMIT, effects: bool = True
) -> tuple[Jaxpr, list]:
    """One forward pass of simplification, constant folding and CSE. Folded results of more than ``fold_limit``
    elements stay computations (0-d results always fold, into literals). Effects are left alone (``effects=False``
    says there are none)."""
    subst: dict = {}
    producers: dict = {}
    seen: dict = {}
    eqns = []
    constvars = list(jaxpr.constvars)
    consts = list(consts)

    def r(a):
        while type(a) is Var and a in subst:
            a = subst[a]
        return a

    uses = use_counts(jaxpr)

    known: dict = {}
    for v, c in zip(constvars, consts):
        if isinstance(c, np.ndarray) or type(c) is Tensor:
            known[v] = c._value if type(c) is Tensor else c

    def value(a):
        return np.asarray(a.val, dtype=a.aval.dtype) if type(a) is Literal else known[a]

    eyes: dict = {}

    for eqn in jaxpr.eqns:
        eqn = Eqn(eqn.prim, [r(a) for a in eqn.inputs], eqn.params, eqn.outputs, eqn.source)
        if effects and eqn_has_effects(eqn):  # run at run time, every time: no folding, no merging with its twin
            eqns.append(eqn)
            continue
        # constant folding: all inputs known, no sub-jaxprs, an impl that needs no traces
        if (
            all(type(a) is Literal or a in known for a in eqn.inputs)
            and eqn.prim.impl is not None
            and getattr(eqn.prim, "family", "") not in ("call", "collective", "control", "random")
            and all(v.aval.size <= fold_limit or v.aval.ndim == 0 for v in eqn.outputs)
        ):
            try:
                vals = eqn.prim.impl(*[value(a) for a in eqn.inputs], **eqn.params)
            except Exception:  # noqa: BLE001 - leave the equation for run time to report its own error
                vals = None
            if vals is not None:
                vals = vals if eqn.prim.multiple_results else [vals]
                for v, val in zip(eqn.outputs, vals):
                    arr = np.asarray(val, dtype=v.aval.dtype)
                    if arr.ndim == 0:
                        subst[v] = Literal(arr, ShapedArray((), v.aval.dtype))
                    else:
                        cv = Var(v.aval)
                        constvars.append(cv)
                        consts.append(arr)
                        known[cv] = arr
                        subst[v] = cv
                continue
        if eqn.prim.name == "dot_general" and known:
            scaling = _diagonal_dot(eqn, producers, known, eyes)
            if scaling is not None:
                for e in scaling:
                    producers[e.outputs[0]] = e
                eqns += scaling
                continue
        res = _simplify(eqn, producers, uses)
        if isinstance(res, Eqn):
            eqn = res
        elif res is not None:
            subst[eqn.outputs[0]] = res
            continue
        key = (eqn.prim.name, tuple(_atom_key(a) for a in eqn.inputs), _param_key(eqn.params))
        prev = seen.get(key)
        if prev is not None:
            for v, w in zip(eqn.outputs, prev.outputs):
                subst[v] = w
            continue
        seen[key] = eqn
        for v in eqn.outputs:
            producers[v] = eqn
        eqns.append(eqn)
    out = Jaxpr(constvars, jaxpr.invars, eqns, [r(v) for v in jaxpr.outvars])
    return out, consts


def _optimize_bodies(jaxpr: Jaxpr, max_rounds: int, fold_limit: int, memo: dict) -> Jaxpr:
    """``jaxpr`` with every ``ClosedJaxpr`` in its equations' parameters optimized (a body shared by several
    equations stays shared)."""

    def opt(v):
        if type(v) is ClosedJaxpr:
            got = memo.get(id(v))
            if got is None:
                got = memo[id(v)] = (v, optimize(v, max_rounds, fold_limit, memo))
            return got[1]
        if type(v) in (list, tuple) and v and all(type(b) is ClosedJaxpr for b in v):
            return type(v)(opt(b) for b in v)
        return v

    eqns = []
    changed = False
    for eqn in jaxpr.eqns:
        params = {k: opt(v) for k, v in eqn.params.items()}
        if any(params[k] is not eqn.params[k] for k in params):
            changed = True
            eqn = Eqn(eqn.prim, eqn.inputs, params, eqn.outputs, eqn.source)
        eqns.append(eqn)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, eqns, jaxpr.outvars) if changed else jaxpr


def optimize(
    closed: ClosedJaxpr, max_rounds: int = 4, fold_limit: int = _FOLD_LIMIT, _memo: dict | None = None
) -> ClosedJaxpr:
    """Simplify, fold, CSE and DCE to a fixed point (bounded), in the program and in every body it carries.
    Returns a new ClosedJaxpr.

    ``fold_limit``: the largest folded array (in elements) kept as a constant; larger ones stay computations.
    """
    # bodies first: a body's constants folded or dead outputs simplified then show in the enclosing program
    jaxpr = _optimize_bodies(closed.jaxpr, max_rounds, fold_limit, {} if _memo is None else _memo)
    consts = list(closed.consts)
    effects = has_effects(jaxpr)  # the passes never add one, so a program without effects is not searched again
    for _ in range(max_rounds):
        n = len(jaxpr.eqns)
        jaxpr, consts = simplify_cse_fold(jaxpr, consts, fold_limit, effects)
        jaxpr = dce(jaxpr, effects)
        if len(jaxpr.eqns) == n:
            break
    # drop constvars that DCE made dead
    used = {a for e in jaxpr.eqns for a in e.inputs if type(a) is Var} | {v for v in jaxpr.outvars if type(v) is Var}
    keep = [(v, c) for v, c in zip(jaxpr.constvars, consts) if v in used]
    jaxpr = Jaxpr([v for v, _ in keep], jaxpr.invars, jaxpr.eqns, jaxpr.outvars)
    return ClosedJaxpr(jaxpr, [c for _, c in keep])
