"""``jit``: trace once per input signature, optimize the jaxpr, lower it to fused kernels, run from a cache.

``jit_p`` is a call primitive with every rule, so ``grad(jit(f))``, ``jit(grad(f))``, ``vmap(jit(f))`` and nested
jits compose: each rule derives a new jaxpr (JVP, batched, partially evaluated, transposed) — cached on the jaxpr —
and binds ``jit_p`` again, so derivatives and batched versions run compiled as well.
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from funclib import config, dtypes
from funclib import tree as tree_util
from funclib.checks import check_callable
from funclib.core import (
    Primitive,
    ShapedArray,
    Tensor,
    Tracer,
    Zero,
    _state,
    _wrap,
    aval_of,
    is_undefined,
    is_weak,
    set_trace,
)
from funclib.errors import ConcretizationError, FunclibError
from funclib.jaxpr import (
    ClosedJaxpr,
    Jaxpr,
    JaxprTrace,
    JaxprTracer,
    Var,
    dtypes_fit,
    eval_jaxpr,
    partial_eval_jaxpr,
    trace_to_jaxpr,
)
from funclib.primitives.shape import instantiate, zeros

from . import device_calls
from ._api_util import as_tensor_leaf, check_argnames, leaf_labels, static_both_ways, tensor_tree_signature
from .autodiff import backward_pass, jvp
from .background import Eager, program_runner, running_eagerly, wait_programs
from .batching import named_axes, vmap
from .lowering import compile_program
from .passes import dce, optimize
from .program import Program

log = logging.getLogger("funclib.jit")


def _ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``, ..."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_PY_SCALARS = (bool, int, float, complex)


class RetraceError(FunclibError, RuntimeError):
    """A jitted function was traced more often than its ``max_traces`` allows."""


# ---------------------------------------------------------------------------------------------------------------
# The call primitive

jit_p = Primitive("jit", multiple_results=True, linear=True)  # linear when its body is (transpose checks)
jit_p.family = "call"
jit_p.batch_named = True  # its vmap rule takes the named axis (transforms/batching.py)


def _closed_to_open(closed: ClosedJaxpr) -> tuple[Jaxpr, list]:
    """Turn constvars into leading invars so constants travel as explicit arguments (visible to outer traces)."""
    j = closed.jaxpr
    return Jaxpr([], list(j.constvars) + list(j.invars), j.eqns, j.outvars), list(closed.consts)


def _program(jaxpr: Jaxpr) -> Program:
    prog = jaxpr.cache.get("program")
    if prog is None:
        with _compile_lock:
            prog = jaxpr.cache.get("program")
            if prog is None:
                prog = compile_program(jaxpr, name=jaxpr.cache.get("fun_name", "program"))
                jaxpr.cache["program"] = prog
    return prog


_compile_lock = threading.RLock()


def _impl_program(jaxpr: Jaxpr):
    # inside a program running eagerly while its kernels compile, a nested jit runs eagerly too
    return Eager(jaxpr) if running_eagerly() else program_runner(jaxpr, _program, _compile_lock)


jit_p.def_impl(device_calls.call_impl(_impl_program))  # for the CPU, or the arguments' device
jit_p.runs_on_devices = True


@jit_p.def_abstract_eval
def _jit_abstract(*avals, jaxpr, name):
    if len(avals) != len(jaxpr.invars):
        raise TypeError(f"jit({name}): expected {len(jaxpr.invars)} arguments, got {len(avals)}")
    return [v.aval for v in jaxpr.outvars]


def _eval_fn(jaxpr):
    def f(*xs):
        return eval_jaxpr(jaxpr, [], *xs)

    return f


def _trace_new(fn, avals, name) -> Jaxpr:
    j, consts, _ = trace_to_jaxpr(fn, avals, name=name)
    jo, cs = _closed_to_open(ClosedJaxpr(j, consts))
    if cs:
        # constants captured while deriving (e.g. zeros) become literal-free leading inputs; bake them in
        return _bake(jo, cs)
    return jo


def _bake(jaxpr: Jaxpr, consts: list) -> Jaxpr:
    """Keep a derived jaxpr closed over concrete constants: they become constvars with values in the cache."""
    n = len(consts)
    if any(isinstance(c, Tracer) for c in consts):
        # derived jaxprs only read their own inputs, so a traced constant means a rule leaked one
        raise FunclibError("jit: a derived jaxpr captured a traced constant; this is a bug in a primitive rule")
    out = Jaxpr(jaxpr.invars[:n], jaxpr.invars[n:], jaxpr.eqns, jaxpr.outvars)
    out.cache["consts"] = [c._value if isinstance(c, Tensor) else np.asarray(c) for c in consts]
    return out


def _call(jaxpr: Jaxpr, args, name):
    consts = jaxpr.cache.get("consts")
    if jaxpr.constvars:
        # lift baked constants back to explicit leading arguments for binding
        opened = jaxpr.cache.get("opened")
        if opened is None:
            opened = Jaxpr([], list(jaxpr.constvars) + list(jaxpr.invars), jaxpr.eqns, jaxpr.outvars)
            jaxpr.cache["opened"] = opened
        return jit_p.bind(*device_calls.call_consts(jaxpr, consts, args), *args, jaxpr=opened, name=name)
    return jit_p.bind(*args, jaxpr=jaxpr, name=name)


def _derive(jaxpr: Jaxpr, key, build):
    d = jaxpr.cache.get(key)
    if d is None:
        d = build()
        jaxpr.cache[key] = d
    return d


@jit_p.def_jvp
def _jit_jvp(primals, tangents, *, jaxpr, name):
    n = len(primals)
    float_mask = tuple(aval_of(p).dtype in dtypes.INEXACT for p in primals)

    def build():
        def f(*pt):
            ps, ts = pt[:n], pt[n:]
            it = iter(ts)
            full_t = [next(it) if m else zeros(aval_of(p)) for p, m in zip(ps, float_mask)]
            outs, touts = jvp(_eval_fn(jaxpr), tuple(ps), tuple(full_t))
            return list(outs) + list(touts)

        avals = [aval_of(p) for p in primals] + [aval_of(p) for p, m in zip(primals, float_mask) if m]
        return _trace_new(f, avals, f"jvp({name})")

    jj = _derive(jaxpr, ("jvp", float_mask), build)
    ts = [instantiate(t) for t, m in zip(tangents, float_mask) if m]
    res = _call(jj, list(primals) + ts, f"jvp({name})")
    k = len(jaxpr.outvars)
    outs, touts = res[:k], res[k:]
    return outs, [t if o.dtype in dtypes.INEXACT else Zero(aval_of(o)) for o, t in zip(outs, touts)]


@jit_p.def_vmap
def _jit_vmap(args, dims, *, jaxpr, name, axis=None, lanes=None):
    size = next((a.shape[d] for a, d in zip(args, dims) if d is not None), lanes)
    dims = tuple(dims)

    def build():
        # inside a named axis, collectives in the body reduce over it
        f = vmap(_eval_fn(jaxpr), in_axes=dims, axis_size=size, axis_name=axis)
        return _trace_new(f, [aval_of(a) for a in args], f"vmap({name})")

    named = None if axis is None else (axis.name, axis.size, axis.chunks is not None)
    bj = _derive(jaxpr, ("vmap", dims, size, tuple(aval_of(a) for a in args), named), build)
    outs = _call(bj, list(args), f"vmap({name})")
    return outs, [0] * len(outs)


@jit_p.def_partial_eval
def _jit_partial_eval(trace: JaxprTrace, args, params):
    jaxpr, name = params["jaxpr"], params["name"]
    unknowns = tuple(not trace.is_known(a) for a in args)
    known_j, unknown_j, out_unk, n_res = _derive(
        jaxpr, ("pe", unknowns), lambda: partial_eval_jaxpr(jaxpr, list(unknowns))
    )
    known_args = [a for a, u in zip(args, unknowns) if not u]
    unknown_args = [a for a, u in zip(args, unknowns) if u]
    known_out = (
        trace.bind_parent(jit_p, known_args, {"jaxpr": known_j, "name": name})
        if known_j.eqns or known_j.outvars
        else []
    )
    n_known = len(known_out) - n_res
    k_outs, res = list(known_out[:n_known]), list(known_out[n_known:])
    u_outs = trace.stage(
        jit_p, res + unknown_args, {"jaxpr": unknown_j, "name": name}, [v.aval for v in unknown_j.outvars]
    )
    ki, ui = iter(k_outs), iter(u_outs)
    return [next(ui) if u else next(ki) for u in out_unk]


@jit_p.def_transpose
def _jit_transpose(cts, *args, jaxpr, name):
    lin = tuple(is_undefined(a) for a in args)
    res_vals = [a for a, u in zip(args, lin) if not u]
    lin_avals = [a.aval for a, u in zip(args, lin) if u]

    def build():
        view = Jaxpr(
            [v for v, u in zip(jaxpr.invars, lin) if not u],
            [v for v, u in zip(jaxpr.invars, lin) if u],
            jaxpr.eqns,
            jaxpr.outvars,
        )
        k = len(res_vals)

        def f(*xs):
            out = backward_pass(view, list(xs[:k]), list(xs[k:]))
            return [zeros(a) if c is None else c for c, a in zip(out, lin_avals)]

        avals = [aval_of(r) for r in res_vals] + [v.aval for v in jaxpr.outvars]
        return _trace_new(f, avals, f"transpose({name})")

    tj = _derive(jaxpr, ("transpose", lin), build)
    cts = [zeros(v.aval) if type(c) is Zero else c for c, v in zip(cts, jaxpr.outvars)]
    lin_cts = iter(_call(tj, res_vals + cts, f"transpose({name})"))
    return [next(lin_cts) if u else None for u in lin]


# ---------------------------------------------------------------------------------------------------------------
# The user-facing wrapper


class _Entry:
    __slots__ = ("jaxpr", "consts", "out_tree", "closed", "program", "desc", "weak_out", "int_checks")

    def __init__(self, jaxpr, consts, out_tree, closed, desc, weak_out, int_checks):
        self.jaxpr = jaxpr
        self.consts = consts
        self.out_tree = out_tree
        self.closed = closed
        self.program = None
        self.desc = desc
        # which outputs are Python scalars eagerly (arithmetic on scalar arguments alone); None if none is
        self.weak_out = weak_out if any(weak_out) else None
        # (jaxpr computing values of Python int arguments, the integer dtype each meets), or None
        self.int_checks = int_checks


def _int_checks(jaxpr: Jaxpr, narrowing: list):
    """What ``_check_ints`` evaluates: the weak integers that meet a narrower integer dtype, computed from the
    arguments (only scalar arithmetic on Python int arguments leads there)."""
    if not narrowing:
        return None
    j = dce(Jaxpr([], jaxpr.invars, jaxpr.eqns, [v for v, _ in narrowing]))
    read = {a for e in j.eqns for a in e.inputs if type(a) is Var} | set(j.outvars)
    return j, [i for i, v in enumerate(j.invars) if v in read], [d for _, d in narrowing]


def _check_ints(entry: _Entry, leaves: list, name: str) -> None:
    j, needed, dts = entry.int_checks
    args = [leaves[i] if i in needed else None for i in range(len(leaves))]
    if not any(isinstance(leaves[i], Tracer) for i in needed):
        with set_trace(None):
            vals = eval_jaxpr(j, [], *args)
        for v, d in zip(vals, dts):
            dtypes_fit(int(v.item()), d, f"jit({name}): ")
        return
    # Python ints of an enclosing jit: computed there, and checked at each of its calls
    for v, d in zip(eval_jaxpr(j, [], *args), dts):
        if type(v) is JaxprTracer and v._trace.narrowing is not None:
            v._trace.narrowing.append((v.jvar, d))


def _outputs(outs, weak_out) -> list:
    if weak_out is None:
        return [_wrap(o) for o in outs]
    return [o.item() if w else _wrap(o) for o, w in zip(outs, weak_out)]


class Jitted:
    """A jit-compiled function. Call it like the original; ``.lower(*args)`` shows what runs."""

    def __init__(self, fun, static_argnums, static_argnames, max_traces, donate_argnums):
        self.fun = fun
        try:
            self._sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None
        self.static_argnums, self.static_argnames = static_both_ways(self._sig, static_argnums, static_argnames)
        self.max_traces = max_traces
        self._cache: dict = {}
        # (shape, dtype) of each argument when all are positional Tensors -> (program, constant arrays, output
        # tree, whether that tree is one leaf): the common call skips flattening and key building, which after a
        # large kernel runs on cold caches
        self._fast: dict = {}
        self._fast_ok = not self.static_argnums and not self.static_argnames
        self._history: list = []
        self._lock = threading.RLock()
        self.num_traces = 0
        # not `updated`: merging fun.__dict__ would let a wrapper's attributes (custom_jvp's `fun`) replace ours
        functools.update_wrapper(self, fun, updated=())
        if not hasattr(self, "__name__"):  # a callable object (a Module, a functools.partial) has no __name__
            self.__name__ = self.__qualname__ = type(fun).__name__

    # --- signature ----------------------------------------------------------------------------------------------
    def _arg_name(self, i):
        if self._sig is not None:
            params = list(self._sig.parameters)
            if i < len(params):
                return params[i]
        return f"#{i}"

    def _split(self, args, kwargs):
        static = []
        for i in self.static_argnums:
            if i >= len(args):
                if self._arg_name(i) in self.static_argnames:
                    continue  # passed by keyword (handled below) or left at its default
                raise TypeError(
                    f"jit: static_argnums includes {i} but only {len(args)} positional arguments were given"
                )
            static.append(("pos", i, args[i]))
        for k in self.static_argnames:
            if k in kwargs:
                static.append(("kw", k, kwargs[k]))
        for kind, where, v in static:
            try:
                hash(v)
            except TypeError:
                label = f"argument {where!r}" if kind == "kw" else f"argument {self._arg_name(where)!r} (#{where})"
                raise TypeError(
                    f"jit: static {label} has an unhashable value of type {type(v).__name__}; static values are "
                    "cache keys, so pass a hashable value (a tuple instead of a list, a frozen dataclass) or make "
                    "it a traced argument"
                ) from None
        dyn_args = tuple(a for i, a in enumerate(args) if i not in self.static_argnums)
        dyn_kwargs = {k: v for k, v in kwargs.items() if k not in self.static_argnames}
        leaves, in_tree = tree_util.flatten((dyn_args, dyn_kwargs))
        conv = []
        sig = []
        for x in leaves:
            if type(x) is Tensor or isinstance(x, Tracer):
                conv.append(x)
                sig.append((tuple(x.shape), x.dtype, x.weak_type))
            elif type(x) in _PY_SCALARS:
                # weakly typed and at full precision until it meets a dtype, as the scalar is eagerly
                d = dtypes.weak_dtype(x)
                try:
                    conv.append(_wrap(np.asarray(x, d)))
                except OverflowError:
                    raise OverflowError(
                        f"jit({self.__name__}): the Python integer {x} does not fit int64; pass it as a tensor or "
                        "mark the argument static"
                    ) from None
                sig.append(((), d, True))
            else:
                x = as_tensor_leaf(x, f"jit({self.__name__})")
                conv.append(x)
                sig.append((tuple(x.shape), x.dtype, False))
        # Python floats, creation functions and samplers without dtype= are traced in the default float dtype
        # collectives bake the sizes of the named vmap axes around the call into the program, and traced code may
        # ask ``x.device`` (to make a constant there), so a program is traced per device
        statics = tuple((k, w, v) for k, w, v in static)
        key = (in_tree, tuple(sig), statics, dtypes.float_default(), named_axes(), device_calls.device_of(conv))
        return key, conv, in_tree, dyn_args, static

    # --- tracing ------------------------------------------------------------------------------------------------
    def _trace(self, key, leaves, in_tree, args, kwargs, static):
        in_avals = [ShapedArray(shape, d, weak_type=w) for shape, d, w in key[1]]
        names = self._leaf_names(in_tree, args, kwargs)
        closed, out_tree, weak_out, checks = self._trace_avals(in_avals, in_tree, args, kwargs, key[5])
        closed = optimize(closed)
        open_j, consts = _closed_to_open(closed)
        # for messages about the compiled program (ranks that traced it differently)
        open_j.cache["arg_names"] = [f"<constant {i}>" for i in range(len(consts))] + names
        open_j.cache["fun_name"] = self.__name__
        return _Entry(open_j, consts, out_tree, closed, self._desc(key, names), weak_out, checks)

    def _trace_avals(self, in_avals, in_tree, args, kwargs, device="cpu"):
        """The unoptimized jaxpr for flattened dynamic arguments of these types (``in_tree`` as from flattening
        ``(dynamic args, dynamic kwargs)``; ``args``/``kwargs`` supply the static values), the output tree, which
        outputs are weak Python scalars, and the range checks of weak integers narrowed by the program."""
        store = {}

        def flat(*xs):
            dyn_args, dyn_kwargs = tree_util.unflatten(in_tree, list(xs))
            it = iter(dyn_args)
            full = [args[i] if i in self.static_argnums else next(it) for i in range(len(args))]
            kw = {k: kwargs[k] for k in self.static_argnames if k in kwargs}
            kw.update(dyn_kwargs)
            out = self.fun(*full, **kw)
            o, t = tree_util.flatten(out)
            store["tree"] = t
            outs = []
            for v in o:
                if type(v) in _PY_SCALARS:
                    v = trace.weak_constant(v, dtypes.weak_dtype(v))
                # a value computed from scalar arguments alone stays a Python scalar, as it is eagerly
                outs.append(v if is_weak(v) else as_tensor_leaf(v, f"jit({self.__name__}) output"))
            return outs

        trace = JitTrace(_state.trace, self._leaf_names(in_tree, args, kwargs), self.__name__, device)
        ins = [trace.new_arg(a) for a in in_avals]
        with set_trace(trace):
            outs = flat(*ins)
        jaxpr, consts = trace.to_jaxpr(ins, outs)
        weak_out = tuple(o.weak_type for o in outs)
        return ClosedJaxpr(jaxpr, consts), store["tree"], weak_out, _int_checks(jaxpr, trace.narrowing)

    def _leaf_names(self, in_tree, args, kwargs):
        dyn_pos = [i for i in range(len(args)) if i not in self.static_argnums]
        dyn_kw = sorted(k for k in kwargs if k not in self.static_argnames)  # dicts flatten in key order
        return leaf_labels(self.fun, args, dyn_pos, kwargs, dyn_kw)

    def _desc(self, key, names):
        in_tree, leaf_sig, static, default = key[:4]
        d = {"tree": str(in_tree), "default": default.name}
        for name, size in key[4]:
            d[f"vmap axis {name!r}"] = f"size {size}"
        if key[5] != "cpu":
            d["device"] = key[5]
        for n, (shape, dt, weak) in zip(names, leaf_sig):
            d[n] = f"a Python {type(dtypes.weak_sample(dt)).__name__}" if weak else ShapedArray(shape, dt).str_short()
        for kind, w, v in static:
            d[f"static {self._arg_name(w) if kind == 'pos' else w}"] = repr(v)
        return d

    def _explain(self, desc) -> str:
        if not self._history:
            return "first trace"
        prev = self._history[-1]
        changes = []
        for k in sorted(set(prev) | set(desc)):
            a, b = prev.get(k), desc.get(k)
            if a != b:
                if k == "tree":
                    changes.append(f"the argument structure changed from {a} to {b}")
                elif k == "default":
                    changes.append(f"the default float dtype (fl.set_default_dtype) changed from {a} to {b}")
                else:
                    label = repr(k) if k.isidentifier() else k  # a leaf path reads as written: p['w']
                    changes.append(f"argument {label} changed from {a or 'absent'} to {b or 'absent'}")
        return "; ".join(changes) or "no visible change (a previous trace was evicted)"

    def _lookup(self, args, kwargs):
        key, leaves, in_tree, _, static = self._split(args, kwargs)
        entry = self._cache.get(key)
        if entry is None:
            with self._lock:
                entry = self._cache.get(key)
                if entry is None:
                    names = self._leaf_names(in_tree, args, kwargs)
                    desc = self._desc(key, names)
                    why = self._explain(desc)
                    if self.max_traces is not None and self.num_traces >= self.max_traces:
                        raise RetraceError(
                            f"jit({self.__name__}) would trace a {_ordinal(self.num_traces + 1)} time, over "
                            f"max_traces={self.max_traces}: {why}. Keep shapes/dtypes/static values stable, or "
                            "raise max_traces."
                        )
                    if self._history and config.explain_retraces:
                        log.warning("jit(%s) retracing: %s", self.__name__, why)
                    entry = self._trace(key, leaves, in_tree, args, kwargs, static)
                    self.num_traces += 1
                    self._history.append(desc)
                    self._cache[key] = entry
        return entry, leaves

    def __call__(self, *args, **kwargs):
        if config.disable_jit:
            return self.fun(*args, **kwargs)
        fast = None
        if self._fast_ok and not kwargs and _state.trace is None:
            sig, vals = tuple([(a._value.shape, a._value.dtype) for a in args if type(a) is Tensor]), None
            if len(sig) != len(args):
                sig = device_calls.device_signature(args)  # keyed by devices too
                if sig is None:  # a pytree of tensors: a train step's parameters and optimizer state
                    sig, vals = tensor_tree_signature(args, named_axes())
            if sig is not None:
                sig = (sig, dtypes.float_default())
                hit = self._fast.get(sig)
                if hit is not None:
                    program, consts, out_tree, one, weak_out = hit
                    outs = program.run(consts + (vals if vals is not None else [a._value for a in args]))
                    if one:
                        return _wrap(outs[0])
                    return tree_util.unflatten(out_tree, _outputs(outs, weak_out))
                fast = sig
        entry, leaves = self._lookup(args, kwargs)
        if entry.int_checks is not None:
            _check_ints(entry, leaves, self.__name__)
        if _state.trace is None and not device_calls.on_device(leaves):
            prog = entry.program
            if prog is None:
                # the program, or a BackgroundProgram running eagerly while its kernels compile
                prog = entry.program = program_runner(entry.jaxpr, _program, _compile_lock)
            consts = [c._value if isinstance(c, Tensor) else c for c in entry.consts]
            if fast is not None and entry.int_checks is None:
                one = entry.out_tree.is_leaf() and entry.weak_out is None
                self._fast[fast] = (prog, consts, entry.out_tree, one, entry.weak_out)
            outs = prog.run(consts + [x._value for x in leaves])
            return tree_util.unflatten(entry.out_tree, _outputs(outs, entry.weak_out))
        outs = jit_p.bind(*device_calls.device_consts(entry, leaves), *leaves, jaxpr=entry.jaxpr, name=self.__name__)
        device_calls.remember(self._fast, fast, entry, leaves)
        return tree_util.unflatten(entry.out_tree, list(outs))

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait until every signature called so far runs its compiled program (see
        ``fl.config.background_compile``): the kernels compiling in the background are finished and loaded.
        False if ``timeout`` seconds passed first.

        >>> import funclib as fl
        >>> f = fl.jit(lambda x: fl.exp(x) * 2.0)
        >>> y = f(fl.ones(3))  # may run eagerly while its kernel compiles in a worker process
        >>> f.wait_compiled(timeout=120)
        True
        """
        return wait_programs([e.program for e in list(self._cache.values())], timeout)

    def lower(self, *args, **kwargs) -> Lowered:
        """The optimized jaxpr and the generated kernels for these arguments (a device's kernels for arguments
        on a CUDA device)."""
        entry, leaves = self._lookup(args, kwargs)
        return Lowered(entry, device_calls.program_on(entry.jaxpr, leaves) or _program(entry.jaxpr), self.__name__)

    def trace(self, *args, **kwargs) -> ClosedJaxpr:
        """The optimized jaxpr for these arguments."""
        entry, _ = self._lookup(args, kwargs)
        return entry.closed

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return f"<jit {self.__name__}>"


class Lowered:
    """What ``jit`` runs for one signature: ``.jaxpr`` (optimized), ``.kernels`` (generated sources),
    ``.fallbacks`` (primitives that run their NumPy impl), ``as_text()`` for everything."""

    def __init__(self, entry, program, name):
        self.jaxpr = entry.closed
        self.program = program
        self.name = name

    @property
    def kernels(self) -> list[str]:
        return self.program.kernel_sources()

    @property
    def fallbacks(self) -> list[str]:
        return self.program.fallbacks()

    def as_text(self) -> str:
        parts = [f"# jit({self.name}): optimized jaxpr", str(self.jaxpr), "", "# program", self.program.describe()]
        for src in self.kernels:
            parts += ["", src]
        return "\n".join(parts)

    def __str__(self):
        return self.as_text()


class JitTrace(JaxprTrace):
    """The tracing trace of ``jit``; it knows the argument names for concretization errors."""

    def __init__(self, parent, arg_names, fun_name, device="cpu"):
        super().__init__(parent, name=f"jit({fun_name})")
        self.arg_names = arg_names
        self.device = device  # of the arguments: what the traced values report as ``x.device``
        self.in_vars: list = []
        self.narrowing = []

    def new_arg(self, aval):
        t = super().new_arg(aval)
        if len(self.in_vars) < len(self.arg_names):
            self.in_vars.append(t.jvar)
        return t

    def concretize(self, tracer, what):
        names = self._provenance(tracer)
        shown = ", ".join(repr(n) if n.isidentifier() else n for n in names)  # a leaf path reads as written
        src = f" (it depends on argument {shown})" if names else ""
        first = names[0].split("[")[0].split(".")[0] if names else "x"
        raise ConcretizationError(
            f"Cannot convert a traced {tracer.aval.str_short()} to {what} inside {self.name}{src}. "
            f"Use fl.where or fl.cond for data-dependent choices, or mark the argument static: "
            f"fl.jit(f, static_argnames=({first!r},))."
        )

    def _provenance(self, tracer) -> list[str]:
        if not (type(tracer) is JaxprTracer and tracer._trace is self):
            return []
        target = {tracer.jvar}
        for eqn in reversed(self.eqns):
            if any(v in target for v in eqn.outputs):
                target.update(a for a in eqn.inputs if type(a) is Var)
        return [n for n, v in zip(self.arg_names, self.in_vars) if v in target]


def jit(
    fun: Callable | None = None,
    *,
    static_argnums: int | Sequence[int] = (),
    static_argnames: str | Sequence[str] = (),
    max_traces: int | None = None,
    donate_argnums: Sequence[int] = (),
) -> Any:
    """Compile ``fun``: trace it per input signature to a jaxpr, optimize it, and run fused numba kernels.

    Args:
      fun: a function of pytrees of tensors and Python scalars. A Python scalar is traced as it behaves eagerly:
        weakly typed and at full precision (``x * 0.1`` is ``0.1`` rounded once, to ``x``'s dtype), its own
        arithmetic staying a Python scalar (returned as one), anything else seeing the default dtype of its kind.
        Only its type is part of the cache key, so a new value does not retrace.
      static_argnums / static_argnames: arguments that are Python values (hashable) and part of the cache key.
      max_traces: raise ``RetraceError`` instead of tracing more than this many times.

    Set ``fl.config.explain_retraces = True`` (or ``FUNCLIB_EXPLAIN_RETRACES=1``) to log why each retrace happened.

    >>> f = fl.jit(lambda x: fl.sin(x) * 2.0)
    >>> f(fl.ones(3))
    Tensor([1.6829419, 1.6829419, 1.6829419], dtype=float32)
    >>> fl.jit(lambda x, s: x * s)(fl.ones(1, dtype=fl.float64), 0.1)
    Tensor([0.1], dtype=float64)
    """
    if fun is None:
        return functools.partial(
            jit,
            static_argnums=static_argnums,
            static_argnames=static_argnames,
            max_traces=max_traces,
            donate_argnums=donate_argnums,
        )
    check_callable(fun, "jit")
    sn = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    sa = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    check_argnames(fun, sa, "jit")
    return Jitted(fun, sn, sa, max_traces, donate_argnums)
