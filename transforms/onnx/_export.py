"""``fl.onnx.export``: trace like ``jit``, inline calls, find the dynamic sizes, lower each equation, save."""

from __future__ import annotations

import inspect
import itertools
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from funclib import tree as tree_util
from funclib.core import ShapedArray, Tensor, _state, set_trace
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, JaxprTrace, Var

from .._api_util import as_tensor_leaf
from ..autodiff import jvp
from ..control_flow._common import call
from ..jit import JitTrace
from ..passes import optimize
from ._dims import Symbolic, align
from ._errors import ExportError
from ._lower import Lowering, elem_type, require_onnx

_CALLS = ("jit", "custom_jvp_call", "custom_vjp_call", "custom_lin", "checkpoint", "custom_linear_solve")


def _is_module(obj) -> bool:
    """A Module by its duck type: a callable with ``eval``/``train`` whose pytree leaves are its tensors."""
    return callable(obj) and callable(getattr(obj, "eval", None)) and callable(getattr(obj, "train", None))


def export(
    f_or_module: Callable,
    example_args: Any,
    path: str | os.PathLike | None = None,
    *,
    dynamic_axes: Mapping[str, Mapping[int, str] | Sequence[int]] | Sequence | None = None,
    opset: int = 18,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
):
    """Export a function or an ``nn.Module`` to an ONNX model, from the optimized program that ``fl.jit`` runs.

    A Module is exported in eval mode (its mode is restored afterwards) with its parameters and buffers as named
    initializers (``"0.weight"``, as in ``state_dict``). Each primitive is lowered by its rule in
    ``fl.onnx.ONNX_RULES``; one without a rule raises ``ExportError`` naming it and the line that produced it.

    Args:
      f_or_module: a function of tensors (pytrees of them) or a Module.
      example_args: the positional arguments (a tuple; a single tensor is one argument). Their shapes and dtypes
        are the graph's, except the dynamic axes.
      path: where to write the ``.onnx`` file (atomically); ``None`` only returns the model.
      dynamic_axes: ``{input_name: {axis: "name"}}`` (or a list of axes, named ``"<input>_dim<axis>"``), or a
        sequence with one such entry (or None) per input. Inputs are named after the function's parameters
        (``x``; pytree arguments get ``x[0]``, ``x[1]``, ...). Axes with one name have one size. The graph
        computes every size derived from them, so it runs at other sizes.
      opset: the ONNX opset (18 or later).
      input_names / output_names: names for the flattened inputs and outputs (default: parameter names and
        ``output_0``, ``output_1``, ...).

    Returns:
      the ``onnx.ModelProto``.

    >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    >>> proto = fl.onnx.export(model, (fl.ones((3, 4)),), "mlp.onnx", dynamic_axes={"input": {0: "batch"}})
    >>> [i.name for i in proto.graph.input]
    ['input']
    """
    require_onnx()
    if opset < 18:
        raise ValueError(
            f"fl.onnx.export: opset {opset} is too old; the lowerings use opset 18 operators (18 or later)"
        )
    if _state.trace is not None:
        raise ExportError("fl.onnx.export: call it outside of transformed functions (it traces the function itself)")
    args = tuple(example_args) if isinstance(example_args, (tuple, list)) else (example_args,)
    module = f_or_module if _is_module(f_or_module) else None
    was_training = getattr(module, "training", None) if module is not None else None
    if module is not None:
        module.eval()  # before flattening: the mode is static data of the pytree
    try:
        return _export(module, f_or_module, args, path, dynamic_axes, opset, input_names, output_names)
    finally:
        if module is not None and isinstance(was_training, bool):
            module.train(was_training)


def _export(module, f_or_module, args, path, dynamic_axes, opset, input_names, output_names):
    onnx = require_onnx()
    if module is not None:
        pairs, mtree = tree_util.flatten_with_path(module)
        param_names = [tree_util.keystr(p, simple=True) for p, _ in pairs]
        params = [as_tensor_leaf(v, "fl.onnx.export (module parameter)") for _, v in pairs]
        fn = getattr(module, "forward", module)
        fname = type(module).__name__
    else:
        mtree, param_names, params, fn = None, [], [], f_or_module
        fname = getattr(f_or_module, "__name__", "function")
    leaves, arg_tree = tree_util.flatten(args)
    leaves = [as_tensor_leaf(x, "fl.onnx.export (example argument)") for x in leaves]
    names = list(input_names) if input_names is not None else _arg_names(fn, args)
    if len(names) != len(leaves):
        raise ValueError(
            f"fl.onnx.export: {len(names)} input names for {len(leaves)} input tensors (the flattened example_args)"
        )
    if len(set(names) | set(param_names)) != len(names) + len(param_names):
        raise ValueError(f"fl.onnx.export: input names must be unique and differ from parameter names: {names}")
    axes = _parse_dynamic_axes(dynamic_axes, names, leaves)

    def flat(*xs):
        p, a = xs[: len(params)], xs[len(params) :]
        call_args = tree_util.unflatten(arg_tree, list(a))
        target = tree_util.unflatten(mtree, list(p)) if module is not None else fn
        return [as_tensor_leaf(v, "fl.onnx.export output") for v in tree_util.leaves(target(*call_args))]

    symbols = sorted({s for d in axes.values() for s in d.values()})
    sizes = {}
    for i, d in axes.items():
        for ax, s in d.items():
            sizes.setdefault(s, leaves[i].shape[ax])
    points = [
        {s: sizes[s] * (2 if on else 1) for s, on in zip(symbols, mask)}
        for mask in itertools.product((0, 1), repeat=len(symbols))
    ]
    if symbols:
        points.append({s: 3 * sizes[s] for s in symbols})
    traces = []
    for pt in points:
        avals = [ShapedArray(x.shape, x.dtype) for x in params]
        for i, x in enumerate(leaves):
            shape = list(x.shape)
            for ax, s in axes.get(i, {}).items():
                shape[ax] = pt[s]
            avals.append(ShapedArray(tuple(shape), x.dtype))
        try:
            traces.append(_trace(flat, avals, param_names + names, fname, fold_limit=0 if symbols else None))
        except ExportError:
            raise
        except Exception as e:
            if pt is points[0]:
                raise
            raise ExportError(
                f"fl.onnx.export: tracing {fname} with the dynamic axes at sizes {pt} (to find what depends on "
                f"them) failed: {type(e).__name__}: {e}. The function must work at other sizes of those axes."
            ) from e
    sym = align(traces, points, symbols) if symbols else Symbolic()
    closed = traces[0]
    model = _build(onnx, closed, sym, opset, params, param_names, leaves, names, axes, output_names, fname)
    if path is not None:
        _save(onnx, model, os.fspath(path))
    return model


def _arg_names(fn, args) -> list[str]:
    try:
        pnames = [
            p.name
            for p in inspect.signature(fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        pnames = []
    out = []
    for i, a in enumerate(args):
        base = pnames[i] if i < len(pnames) and not _is_var(fn, pnames[i]) else f"input_{i}"
        n = len(tree_util.leaves(a))
        out.extend([base] if n == 1 else [f"{base}[{k}]" for k in range(n)])
    return out


def _is_var(fn, name) -> bool:
    try:
        return inspect.signature(fn).parameters[name].kind is inspect.Parameter.VAR_POSITIONAL
    except (TypeError, ValueError, KeyError):
        return False


def _parse_dynamic_axes(spec, names, leaves) -> dict[int, dict[int, str]]:
    if not spec:
        return {}
    if not isinstance(spec, Mapping):
        spec = list(spec)
        if len(spec) != len(names):
            raise ValueError(
                f"fl.onnx.export: dynamic_axes as a sequence needs one entry (or None) per input, {len(names)} for "
                f"{names}; got {len(spec)}"
            )
        spec = {n: a for n, a in zip(names, spec) if a}
    out: dict[int, dict[int, str]] = {}
    for key, axes in spec.items():
        if key not in names:
            raise ValueError(f"fl.onnx.export: dynamic_axes names {key!r}, which is not an input; inputs: {names}")
        i = names.index(key)
        key = names[i]
        rank = leaves[i].ndim
        items = axes.items() if isinstance(axes, Mapping) else [(a, None) for a in axes]
        d = {}
        for ax, sym in items:
            if not isinstance(ax, int) or not -rank <= ax < rank:
                raise ValueError(
                    f"fl.onnx.export: dynamic axis {ax!r} of input {key!r} is out of range for rank {rank}"
                )
            ax %= rank
            d[ax] = str(sym) if sym is not None else f"{key}_dim{ax}"
            if leaves[i].shape[ax] < 2:
                raise ValueError(
                    f"fl.onnx.export: input {key!r} has size {leaves[i].shape[ax]} along dynamic axis {ax}; give an "
                    "example of size 2 or more there (a size-1 axis broadcasts, so it would trace a different program)"
                )
        out[i] = d
    seen: dict[str, int] = {}
    for i, d in out.items():
        for ax, s in d.items():
            n = leaves[i].shape[ax]
            if seen.setdefault(s, n) != n:
                raise ValueError(
                    f"fl.onnx.export: dynamic axis {s!r} has size {seen[s]} in one input and {n} in {names[i]!r}; "
                    "axes that share a name must have one size"
                )
    return out


# ---------------------------------------------------------------------------------------------------------------
# Tracing


def _new_trace(names, fname):
    t = JitTrace(None, names, fname)
    t.name = f"fl.onnx.export({fname})"
    t.record_source = True
    return t


def _trace(flat, avals, names, fname, fold_limit) -> ClosedJaxpr:
    trace = _new_trace(names, fname)
    ins = [trace.new_arg(a) for a in avals]
    with set_trace(trace):
        outs = flat(*ins)
    jaxpr, consts = trace.to_jaxpr(ins, outs)
    kw = {} if fold_limit is None else {"fold_limit": fold_limit}
    closed = optimize(ClosedJaxpr(jaxpr, consts), **kw)
    inlined, new_consts = _inline(closed.jaxpr, list(closed.consts))
    if new_consts is not False:
        closed = optimize(ClosedJaxpr(inlined, new_consts), **kw)
    return closed


def _trace_fun(fun, avals):
    """Trace a callable of flat tensors (a custom rule's primal) into (jaxpr, consts), recording sources."""
    trace = JaxprTrace(None, name="fl.onnx.export")
    trace.record_source = True
    ins = [trace.new_arg(a) for a in avals]
    with set_trace(trace):
        outs = fun(*ins)
    return trace.to_jaxpr(ins, list(outs))


def _call_body(eqn: Eqn, avals) -> tuple[Jaxpr, list]:
    p = eqn.params
    name = eqn.prim.name
    if name == "jit":
        j = p["jaxpr"]
        return j, list(j.cache.get("consts", [])) if j.constvars else []
    if name in ("custom_jvp_call", "custom_vjp_call"):
        return _trace_fun(lambda *xs: p["fun"](*xs), avals)
    if name == "checkpoint":  # rematerialization only matters to a backward pass
        return p["jaxpr"].jaxpr, list(p["jaxpr"].consts)
    if name == "custom_linear_solve":  # its value is the solve's; the other jaxprs serve derivatives
        lengths = p["const_lengths"]
        start, n_consts = sum(lengths[:2]), sum(lengths)
        solve = p["jaxprs"][2]
        return _trace_fun(
            lambda *xs: call(solve, *xs[start : start + lengths[2]], *xs[n_consts:]), avals
        )
    # custom_lin evaluated forwards is the JVP of the primal function
    n_res = p["n_res"]

    def composite(*args):
        rest = list(args[n_res:])
        k = len(rest) // 2
        return list(jvp(lambda *xs: p["fun"](*xs), tuple(rest[:k]), tuple(rest[k:]))[1])

    return _trace_fun(composite, avals)


def _inline(jaxpr: Jaxpr, consts: list):
    """Replace calls (nested ``jit``, custom derivative rules) by their bodies, in sub-jaxprs too.

    Returns ``(jaxpr, consts or False)``: ``False`` when nothing changed.
    """
    constvars, consts = list(jaxpr.constvars), list(consts)
    eqns: list[Eqn] = []
    subst: dict = {}
    changed = False

    def r(a):
        return subst.get(a, a) if type(a) is Var else a

    for e in jaxpr.eqns:
        ins = [r(a) for a in e.inputs]
        if e.prim.name in _CALLS:
            changed = True
            body, bconsts = _call_body(e, [a.aval for a in ins])
            body, more = _inline(body, bconsts)
            bconsts = more if more is not False else bconsts
            m: dict = {}
            for v, c in zip(body.constvars, bconsts):
                nv = Var(v.aval)
                constvars.append(nv)
                consts.append(c)
                m[v] = nv
            for v, a in zip(body.invars, ins):
                m[v] = a
            for be in body.eqns:
                outs = [Var(o.aval) for o in be.outputs]
                m.update(zip(be.outputs, outs))
                eqns.append(
                    Eqn(
                        be.prim,
                        [m.get(a, a) if type(a) is Var else a for a in be.inputs],
                        be.params,
                        outs,
                        be.source or e.source,
                    )
                )
            for o, bo in zip(e.outputs, body.outvars):
                subst[o] = m.get(bo, bo) if type(bo) is Var else bo
            continue
        params = dict(e.params)
        for k, v in e.params.items():
            nv, ch = _inline_param(v)
            if ch:
                params[k] = nv
                changed = True
        eqns.append(Eqn(e.prim, ins, params, e.outputs, e.source))
    if not changed:
        return jaxpr, False
    return Jaxpr(constvars, jaxpr.invars, eqns, [r(a) for a in jaxpr.outvars]), consts


def _inline_param(v):
    if isinstance(v, ClosedJaxpr):
        j, c = _inline(v.jaxpr, list(v.consts))
        return (ClosedJaxpr(j, c), True) if c is not False else (v, False)
    if isinstance(v, (tuple, list)) and any(isinstance(w, ClosedJaxpr) for w in v):
        parts = [_inline_param(w) for w in v]
        if any(ch for _, ch in parts):
            return type(v)(w for w, _ in parts), True
    return v, False


# ---------------------------------------------------------------------------------------------------------------
# Building the model


def _build(onnx, closed, sym: Symbolic, opset, params, param_names, leaves, names, axes, output_names, fname):
    helper = onnx.helper
    ctx = Lowering(sym, opset)
    jaxpr = closed.jaxpr
    args: list[str] = []
    for p, nm in zip(params, param_names):
        args.append(ctx.const(p._value if isinstance(p, Tensor) else np.asarray(p), name=nm))
    for i, (x, nm) in enumerate(zip(leaves, names)):
        dyn = axes.get(i, {})
        dims = [dyn.get(a, n) for a, n in enumerate(x.shape)]
        ctx.main.inputs.append(helper.make_tensor_value_info(nm, elem_type(x.dtype, f"input {nm!r}"), dims))
        args.append(nm)
        for ax, s in dyn.items():
            if s not in ctx.symbol_value:
                ctx.symbol_value[s] = ctx.node("Shape", [nm], start=ax, end=ax + 1)
    outs = ctx.lower_jaxpr(jaxpr, list(closed.consts), args)
    n_out = len(outs)
    onames = list(output_names) if output_names is not None else [f"output_{i}" for i in range(n_out)]
    if len(onames) != n_out:
        raise ValueError(f"fl.onnx.export: {len(onames)} output names for {n_out} outputs")
    if set(onames) & (set(names) | set(param_names)):
        raise ValueError("fl.onnx.export: output names must differ from input and parameter names")
    for o, nm, atom in zip(outs, onames, jaxpr.outvars):
        ctx.main.nodes.append(helper.make_node("Identity", [o], [nm]))
        ctx.main.outputs.append(ctx.value_info(nm, atom))
    nodes, inits = _dce(ctx.main.nodes, ctx.initializers, onames)
    ctx.main.nodes = nodes
    graph = ctx.graph_proto(ctx.main, inits)
    graph.name = fname
    opsets = [helper.make_opsetid("", opset)]
    model = helper.make_model(
        graph, opset_imports=opsets, producer_name="funclib", ir_version=helper.find_min_ir_version_for(opsets)
    )
    onnx.checker.check_model(model)
    return model


def _subgraph_reads(node) -> set:
    """Names a node's subgraphs read from the enclosing scopes."""
    reads = set()
    for a in node.attribute:
        graphs = [a.g] if a.HasField("g") else list(a.graphs)
        for g in graphs:
            defined = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                defined.update(n.output)
            for n in g.node:
                reads.update(i for i in n.input if i and i not in defined)
                reads.update(r for r in _subgraph_reads(n) if r not in defined)
            reads.update(o.name for o in g.output if o.name not in defined)
    return reads


def _dce(nodes, initializers, outputs):
    """Drop nodes whose results nobody reads (e.g. im2col patches a Conv replaced) and unused initializers."""
    live = set(outputs)
    kept = []
    for n in reversed(nodes):
        if any(o in live for o in n.output):
            kept.append(n)
            live.update(i for i in n.input if i)
            live.update(_subgraph_reads(n))
    kept.reverse()
    return kept, [t for t in initializers if t.name in live]


def _save(onnx, model, path: str) -> None:
    size = sum(t.ByteSize() for t in model.graph.initializer)
    if size >= 2**31 - 2**24:
        raise ExportError(
            f"fl.onnx.export: the model's initializers take {size / 2**30:.1f} GiB, over the 2 GiB a single ONNX "
            "file can hold; saving weights as external data is not implemented yet (return the model with path=None "
            "and save it with onnx.save_model(..., save_as_external_data=True))"
        )
    data = model.SerializeToString()
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".onnx", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
