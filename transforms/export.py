"""``fl.export``: save a jitted function as a program file and load it back without its Python source.

``fl.export.export(fl.jit(f))(*example_args)`` traces ``f`` for the examples' shapes and dtypes and returns an
``Exported``: the optimized jaxpr and its constants. ``exp.save(path)`` writes one safetensors file whose
metadata holds the program as JSON (primitive names, parameters through a per-type codec, variable types, the
argument and result trees) and whose tensors are the constants. ``fl.export.load(path)`` parses JSON and raw
bytes only (no pickle, no code from the file), rebuilds the jaxpr primitive by primitive, and typechecks it.
Calling an ``Exported`` binds ``jit`` on that jaxpr, so it runs compiled and composes with ``grad``, ``vmap`` and
``jit`` like any jitted function: derivatives are derived from the saved primitives, not saved.

With ``batch_axes`` one dimension stays symbolic: the function is traced at three batch sizes, and every
integer that changes with the batch size (a dimension, a ``reshape`` size, a literal such as the count a mean
divides by) must be ``a * batch + c``; it is saved as such and filled in at each new batch size, where the
program is checked, optimized and compiled once per size. A structure that depends on the batch size otherwise
is an error at export time.
"""

from __future__ import annotations

import collections
import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import optree
import safetensors

from funclib import dtypes
from funclib import tree as tree_util
from funclib.core import PRIMITIVES, ShapedArray, Tensor, _wrap, aval_of
from funclib.errors import FunclibError
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, JaxprTypeError, Literal, Var, typecheck
from funclib.passes import optimize

from ._api_util import as_tensor_leaf, broadcast_prefix
from .jit import _PY_SCALARS, Jitted, jit, jit_p

__all__ = ["export", "load", "Exported", "ExportError"]

FORMAT = "funclib.export"
VERSION = 1
_KEY = "funclib.export"


class ExportError(FunclibError, ValueError):
    """A function cannot be exported, or an export file cannot be loaded."""


# ---------------------------------------------------------------------------------------------------------------
# Encoding a jaxpr as JSON


def _f(x: float) -> dict:
    return {"f": float(x).hex()}


def _dtype_name(d) -> str:
    return np.dtype(d).name


class _Encoder:
    """Jaxprs to JSON-able values; arrays (constants of the program and of nested closed jaxprs) go to a pool."""

    def __init__(self, where: str):
        self.where = where
        self.pool: list[np.ndarray] = []
        self._ids: dict[int, int] = {}

    def array(self, x) -> int:
        a = x._value if isinstance(x, Tensor) else np.asarray(x)
        k = self._ids.get(id(a))
        if k is None:
            k = self._ids[id(a)] = len(self.pool)
            self.pool.append(a)
        return k

    def aval(self, a: ShapedArray) -> list:
        out = [_dtype_name(a.dtype), list(a.shape)]
        return out + [1] if a.weak_type else out

    def scalar(self, v):
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        if isinstance(v, (int, np.integer)):
            return int(v)
        if isinstance(v, (float, np.floating)) or (isinstance(v, np.generic) and np.dtype(type(v)).kind == "f"):
            return _f(float(v))
        if isinstance(v, (complex, np.complexfloating)):
            return {"c": [float(v.real).hex(), float(v.imag).hex()]}
        raise TypeError(type(v).__name__)

    def literal(self, lit: Literal) -> dict:
        py = type(lit.val) in (bool, int, float, complex)
        val = lit.val if py else np.asarray(lit.val).reshape(()).item()
        if not py and np.asarray(lit.val).dtype.kind == "f":
            val = float(np.asarray(lit.val, dtype=np.float64))
        return {"lit": self.scalar(val), "aval": self.aval(lit.aval), "py": py}

    def jaxpr(self, j: Jaxpr) -> dict:
        ids: dict[Var, int] = {}
        avals: list = []

        def bind(v: Var) -> int:
            ids[v] = len(avals)
            avals.append(self.aval(v.aval))
            return ids[v]

        def atom(a):
            return self.literal(a) if type(a) is Literal else ids[a]

        consts = [bind(v) for v in j.constvars]
        ins = [bind(v) for v in j.invars]
        eqns = []
        for e in j.eqns:
            args = [atom(a) for a in e.inputs]
            params = {k: self.param(v, e.prim.name, k) for k, v in e.params.items()}
            eqns.append([e.prim.name, args, params, [bind(v) for v in e.outputs]])
        return {"vars": avals, "consts": consts, "in": ins, "eqns": eqns, "out": [atom(a) for a in j.outvars]}

    def param(self, v, prim: str, name: str):
        t = type(v)
        if v is None or t in (bool, str, int):
            return v
        if t is float:
            return _f(v)
        if t is complex or isinstance(v, np.generic):
            try:
                return {"s": self.scalar(v)}
            except TypeError:
                pass
        if t is tuple:
            return {"t": [self.param(w, prim, name) for w in v]}
        if t is list:
            return [self.param(w, prim, name) for w in v]
        if t is dict and all(type(k) is str for k in v):
            return {"d": {k: self.param(w, prim, name) for k, w in v.items()}}
        if isinstance(v, np.dtype):
            return {"dtype": _dtype_name(v)}
        if t is ShapedArray:
            return {"aval": self.aval(v)}
        if t is Jaxpr:
            return {"jaxpr": self.jaxpr(v)}
        if t is ClosedJaxpr:
            return {"closed": self.jaxpr(v.jaxpr), "pool": [self.array(c) for c in v.consts]}
        if isinstance(v, (np.ndarray, Tensor)):
            return {"array": self.array(v)}
        what = "a Python function" if callable(v) else f"a {t.__name__}"
        hint = (
            " Functions with custom_jvp/custom_vjp rules or checkpoint keep Python callables in their equations "
            "and cannot be exported yet; export a version without the custom rule."
            if prim.startswith("custom_") or prim == "checkpoint"
            else ""
        )
        raise ExportError(
            f"fl.export: {self.where} has an equation '{prim}' whose parameter {name!r} holds {what} "
            f"({v!r:.60}), which a program file cannot store.{hint}"
        )


# ---------------------------------------------------------------------------------------------------------------
# Decoding


class _Decoder:
    """JSON back to jaxprs, with symbolic integers ``{"b": [a, c]}`` read as ``a * batch + c``."""

    def __init__(self, pool: Callable[[int], np.ndarray], batch: int | None, where: str):
        self.pool = pool
        self.batch = batch
        self.where = where

    def int(self, v) -> int:
        if type(v) is dict:
            a, c = v["b"]
            if self.batch is None:
                raise ExportError(f"{self.where}: a symbolic size, but the program has no batch dimension")
            return int(a) * self.batch + int(c)
        if type(v) is not int:
            raise TypeError(f"expected an integer, got {v!r:.40}")
        return v

    def dtype(self, name: str) -> np.dtype:
        return dtypes.canonicalize(name)

    def aval(self, a: list) -> ShapedArray:
        shape = tuple(self.int(d) for d in a[1])
        if any(d < 0 for d in shape):
            raise ExportError(
                f"{self.where}: batch size {self.batch} is too small for this program (a dimension would be "
                f"{min(shape)})"
            )
        return ShapedArray(shape, self.dtype(a[0]), weak_type=len(a) > 2 and bool(a[2]))

    def scalar(self, v):
        if type(v) is dict:
            if "f" in v:
                return float.fromhex(v["f"])
            if "c" in v:
                return complex(float.fromhex(v["c"][0]), float.fromhex(v["c"][1]))
            x = self.int(v)
            return float(x) if v.get("float") else x
        if type(v) not in (bool, int):
            raise TypeError(f"expected a number, got {v!r:.40}")
        return v

    def literal(self, d: dict) -> Literal:
        aval = self.aval(d["aval"])
        val = self.scalar(d["lit"])
        if not d["py"]:
            val = np.asarray(val, dtype=aval.dtype)
        return Literal(val, aval)

    def jaxpr(self, d: dict) -> Jaxpr:
        vs = [Var(self.aval(a)) for a in d["vars"]]

        def atom(a):
            return self.literal(a) if type(a) is dict else vs[a]

        eqns = []
        for name, args, params, outs in d["eqns"]:
            prim = PRIMITIVES.get(name)
            if prim is None:
                raise ExportError(
                    f"{self.where}: the program uses the primitive {name!r}, which this version of funclib does "
                    "not have; load it with the funclib that saved it (or a newer one)"
                )
            ps = {k: self.param(v) for k, v in params.items()}
            eqns.append(Eqn(prim, [atom(a) for a in args], ps, [vs[i] for i in outs]))
        return Jaxpr([vs[i] for i in d["consts"]], [vs[i] for i in d["in"]], eqns, [atom(a) for a in d["out"]])

    def param(self, v):
        t = type(v)
        if v is None or t in (bool, str, int):
            return v
        if t is list:
            return [self.param(w) for w in v]
        if t is not dict or len(v) < 1:
            raise TypeError(f"unknown parameter encoding {v!r:.40}")
        if "b" in v:
            return self.scalar(v)
        if "f" in v:
            return float.fromhex(v["f"])
        if "s" in v:
            return self.scalar(v["s"])
        if "t" in v:
            return tuple(self.param(w) for w in v["t"])
        if "d" in v:
            return {k: self.param(w) for k, w in v["d"].items()}
        if "dtype" in v:
            return self.dtype(v["dtype"])
        if "aval" in v:
            return self.aval(v["aval"])
        if "jaxpr" in v:
            return self.jaxpr(v["jaxpr"])
        if "closed" in v:
            return ClosedJaxpr(self.jaxpr(v["closed"]), [_wrap(self.pool(k)) for k in v["pool"]])
        if "array" in v:
            return self.pool(v["array"])
        raise TypeError(f"unknown parameter encoding {v!r:.40}")


# ---------------------------------------------------------------------------------------------------------------
# Argument and result trees


_SIMPLE = {
    optree.PyTreeKind.TUPLE: "tuple",
    optree.PyTreeKind.LIST: "list",
    optree.PyTreeKind.DICT: "dict",
    optree.PyTreeKind.ORDEREDDICT: "odict",
}


def _key(k, where: str):
    if k is None or type(k) in (bool, int, str):
        return k
    if type(k) is float:
        return _f(k)
    if type(k) is tuple:
        return {"t": [_key(w, where) for w in k]}
    raise ExportError(
        f"fl.export: {where} has a dict key of type {type(k).__name__} ({k!r:.40}), which cannot be saved"
    )


def _unkey(k):
    if type(k) is dict:
        return float.fromhex(k["f"]) if "f" in k else tuple(_unkey(w) for w in k["t"])
    return k


def _tree_desc(spec, where: str) -> Any:
    """A JSON description of a tree structure. Classes (modules, dataclasses, namedtuples, registered nodes) are
    described by their qualified name and entries, not stored: they are matched, never rebuilt from the file."""
    kind = spec.kind
    children = [_tree_desc(c, where) for c in spec.children()]
    if kind == optree.PyTreeKind.LEAF:
        return "*"
    if kind == optree.PyTreeKind.NONE:
        return None
    if kind in _SIMPLE:
        out = {_SIMPLE[kind]: children}
        if kind in (optree.PyTreeKind.DICT, optree.PyTreeKind.ORDEREDDICT):
            out["keys"] = [_key(k, where) for k in spec.entries()]
        return out
    t = spec.type
    out = {"node": f"{t.__module__}.{t.__qualname__}", "keys": [_key(k, where) for k in spec.entries()],
           "children": children}
    if kind == optree.PyTreeKind.NAMEDTUPLE:
        out["fields"] = list(t._fields)
    return out


def _normal(x):
    return json.loads(json.dumps(x))


def _subtrees(spec, path=()):
    yield path, spec
    for i, c in enumerate(spec.children()):
        yield from _subtrees(c, path + (i,))


def _mark_sources(out_desc, out_spec, in_spec, where: str):
    """For each class node of the result, the path of an argument subtree with the same structure, from which a
    call rebuilds it (a train step returns the model it was given)."""
    ins = [(p, s) for p, s in _subtrees(in_spec) if s.kind not in (optree.PyTreeKind.LEAF, optree.PyTreeKind.NONE)]

    def go(desc, spec, path):
        if isinstance(desc, dict) and "node" in desc:
            for p, s in ins:
                if s == spec:
                    desc["from_arg"] = list(p)
                    return
            if "fields" not in desc:
                raise ExportError(
                    f"fl.export: {where} returns a {desc['node']} (at result path {list(path)}) that is not shaped "
                    "like any argument, so a loaded program could not rebuild it without its class; return plain "
                    "containers (dicts, lists, tuples) or the object it was given"
                )
            return
        for i, (d, c) in enumerate(zip(_children(desc), spec.children())):
            go(d, c, path + (i,))

    go(out_desc, out_spec, ())


def _children(desc) -> list:
    if not isinstance(desc, dict):
        return []
    for k in ("tuple", "list", "dict", "odict", "children"):
        if k in desc:
            return desc[k]
    return []


_NAMEDTUPLES: dict[tuple, type] = {}


def _rebuild(desc, leaves, in_spec):
    if desc == "*":
        return next(leaves)
    if desc is None:
        return None
    if "tuple" in desc:
        return tuple(_rebuild(d, leaves, in_spec) for d in desc["tuple"])
    if "list" in desc:
        return [_rebuild(d, leaves, in_spec) for d in desc["list"]]
    if "dict" in desc or "odict" in desc:
        kind = "dict" if "dict" in desc else "odict"
        items = [(_unkey(k), _rebuild(d, leaves, in_spec)) for k, d in zip(desc["keys"], desc[kind])]
        return dict(items) if kind == "dict" else collections.OrderedDict(items)
    if "from_arg" in desc:
        spec = in_spec
        for i in desc["from_arg"]:
            spec = spec.children()[i]
        return spec.unflatten([next(leaves) for _ in range(spec.num_leaves)])
    key = (desc["node"], tuple(desc["fields"]))
    cls = _NAMEDTUPLES.get(key)
    if cls is None:
        cls = _NAMEDTUPLES[key] = collections.namedtuple(desc["node"].rsplit(".", 1)[-1], desc["fields"])
    return cls(*[_rebuild(d, leaves, in_spec) for d in desc["children"]])


# ---------------------------------------------------------------------------------------------------------------
# Symbolic batch dimension: merging traces at several sizes


def _merge(vals: list, sizes: list[int], where: list):
    a = vals[0]
    if all(v == a and type(v) is type(a) for v in vals[1:]):
        return a
    if all(type(v) is int for v in vals):
        return _fit(vals, sizes, where)
    if all(type(v) is dict for v in vals) and all(v.keys() == a.keys() for v in vals):
        if a.keys() == {"f"}:
            nums = [float.fromhex(v["f"]) for v in vals]
            if not all(x == int(x) for x in nums):
                raise ExportError(
                    f"fl.export: the value {nums[0]!r} (at {_where(where)}, batch size {sizes[0]}; {nums[1]!r} at "
                    f"batch size {sizes[1]}) depends on the batch size but is not an integer linear in it (e.g. "
                    "the unbiased variance factor n/(n-1) of a BatchNorm in training mode); export with a fixed "
                    "batch size (no batch_axes)"
                )
            return {**_fit([int(x) for x in nums], sizes, where), "float": True}
        return {k: _merge([v[k] for v in vals], sizes, where + [k]) for k in a}
    if all(type(v) is list for v in vals) and all(len(v) == len(a) for v in vals):
        if where[-2:-1] == ["eqns"] and a and type(a[0]) is str:
            where = where + [f"({a[0]})"]
        return [_merge([v[i] for v in vals], sizes, where + [i]) for i in range(len(a))]
    raise ExportError(
        f"fl.export: the program's structure depends on the batch size (at {_where(where)}: {vals[0]!r:.60} at "
        f"batch {sizes[0]}, {vals[1]!r:.60} at batch {sizes[1]}); export without batch_axes (a fixed shape)"
    )


def _fit(vals: list[int], sizes: list[int], where: list) -> dict:
    a = (vals[1] - vals[0]) // (sizes[1] - sizes[0])
    c = vals[0] - a * sizes[0]
    if any(a * s + c != v for v, s in zip(vals, sizes)):
        raise ExportError(
            f"fl.export: a value of the program changes with the batch size but not linearly (at {_where(where)}: "
            f"{vals} at batch sizes {sizes}); export without batch_axes (a fixed shape)"
        )
    return {"b": [a, c]}


def _where(path: list) -> str:
    out = []
    it = iter(path)
    for p in it:
        if p == "eqns":
            i = next(it, None)
            out.append(f"equation {i}")
        elif p == "vars":
            out.append(f"variable {next(it, '?')}")
        elif isinstance(p, str) and p.startswith("("):
            out[-1] += f" {p}"
        elif isinstance(p, str) and (p in ("lit", "aval", "consts", "in", "out", "jaxpr", "closed") or
                                     p.startswith("constant")):
            out.append(p)
        elif isinstance(p, str) and p not in ("t", "d", "f", "s", "c", "b", "dtype", "array", "pool"):
            out.append(f"parameter {p!r}")
    return " / ".join(out) or "the program"


def _merge_pools(pools: list[list[np.ndarray]], sizes: list[int], where: str) -> tuple[dict, dict]:
    """Constants must be the same at every batch size, or be filled with one value (zeros of a batch shape).
    Returns ``(arrays, fills)`` by pool index."""
    if len({len(p) for p in pools}) != 1:
        raise ExportError(f"fl.export: {where} captures a different number of constants at different batch sizes")
    arrays, fills = {}, {}
    for k, arrs in enumerate(zip(*pools)):
        a0 = arrs[0]
        if all(a is a0 or (a.shape == a0.shape and a.dtype == a0.dtype and np.array_equal(a, a0)) for a in arrs):
            arrays[k] = a0
            continue
        first = [a.reshape(-1)[0] for a in arrs if a.size]
        uniform = (
            len(first) == len(arrs)
            and all(a.dtype == a0.dtype and a.ndim == a0.ndim and np.all(a == f) for a, f in zip(arrs, first))
            and all(f == first[0] for f in first)
        )
        if not uniform:
            raise ExportError(
                f"fl.export: {where} captures a constant whose value depends on the batch size (constant {k}: "
                f"{aval_of(arrs[0]).str_short()} at batch {sizes[0]}, {aval_of(arrs[1]).str_short()} at batch "
                f"{sizes[1]}); compute it inside the function from its arguments, or export without batch_axes"
            )
        shape = _merge([list(a.shape) for a in arrs], sizes, [f"constant {k}"])
        fills[str(k)] = {"fill": _Encoder(where).scalar(first[0].item()), "shape": shape, "dtype": a0.dtype.name}
    return arrays, fills


# ---------------------------------------------------------------------------------------------------------------
# Exported programs


class Exported:
    """A saved (or savable) compiled program: call it, ``save`` it, differentiate and vmap it.

    Attributes:
        name: the exported function's name.
        in_avals / out_avals: argument and result types (at the example batch size if it has a batch axis).
        batch_axes: ``{argument leaf index: axis}`` of the symbolic batch dimension (empty if none).

    Example:
        >>> exp = fl.export.export(fl.jit(lambda x: fl.sin(x) * 2.0))(fl.ones(3))
        >>> exp.save("/tmp/sin2.flx")
        >>> fl.export.load("/tmp/sin2.flx")(fl.zeros(3))
        Tensor([0., 0., 0.], dtype=float32)
    """

    def __init__(self, program: dict, arrays: dict[int, np.ndarray], where: str):
        self._program = program
        self._arrays = arrays
        self._where = where
        self.name: str = program["name"]
        batch = program.get("batch")
        self.batch_axes: dict[int, int] = {int(i): int(ax) for i, ax in (batch or {}).get("axes", [])}
        self._example_batch = batch["size"] if batch else None
        self._instances: dict = {}
        self._in_specs: dict = {}
        j, consts = self._instance(self._example_batch)
        self.in_avals = [v.aval for v in j.invars[len(consts) :]]
        self.out_avals = [v.aval for v in j.outvars]

    def _instance(self, batch: int | None):
        """The program at one batch size: (open jaxpr taking constants then arguments, constants as Tensors)."""
        inst = self._instances.get(batch)
        if inst is not None:
            return inst
        fills = self._program.get("fills") or {}

        def pool(k: int) -> np.ndarray:
            if k in self._arrays:
                return self._arrays[k]
            f = fills[str(k)]
            return np.full(tuple(dec.int(d) for d in f["shape"]), dec.scalar(f["fill"]), dtype=dec.dtype(f["dtype"]))

        dec = _Decoder(pool, batch, self._where)
        try:
            j = dec.jaxpr(self._program["jaxpr"])
            consts = [pool(k) for k in self._program["consts"]]
        except ExportError:
            raise
        except (KeyError, TypeError, IndexError, ValueError, AttributeError) as e:
            raise ExportError(f"{self._where}: the program description is corrupt ({type(e).__name__}: {e})") from None
        n = len(consts)
        if len(j.invars) < n:
            raise ExportError(f"{self._where}: the program description is corrupt (fewer inputs than constants)")
        try:
            typecheck(j)
        except (JaxprTypeError, FunclibError, TypeError, ValueError) as e:
            raise ExportError(f"{self._where}: the program does not typecheck{_at(batch)}: {e}") from None
        if self._program.get("optimize_on_load"):
            closed = optimize(ClosedJaxpr(Jaxpr(j.invars[:n], j.invars[n:], j.eqns, j.outvars), consts))
            j = _opened(closed.jaxpr)
            consts = list(closed.consts)
        inst = self._instances[batch] = (j, [c if isinstance(c, Tensor) else _wrap(c) for c in consts])
        return inst

    @property
    def jaxpr(self) -> ClosedJaxpr:
        """The program (at the example batch size), as a closed jaxpr."""
        j, consts = self._instance(self._example_batch)
        n = len(consts)
        return ClosedJaxpr(Jaxpr(j.invars[:n], j.invars[n:], j.eqns, j.outvars), consts)

    def __call__(self, *args, **kwargs):
        leaves, spec = tree_util.flatten((args, kwargs))
        ok = self._in_specs.get(spec)
        if ok is None:
            ok = self._in_specs[spec] = _normal(_tree_desc(spec, "the arguments")) == self._program["in_tree"]
        if not ok:
            raise TypeError(
                f"exported {self.name}: the arguments have structure {spec}, but the program was exported for "
                f"{_show_tree(self._program['in_tree'])}" + _static_note(self._program)
            )
        where = f"exported {self.name}"
        leaves = [
            _wrap(np.asarray(x, dtypes.weak_dtype(x))) if type(x) in _PY_SCALARS else as_tensor_leaf(x, where)
            for x in leaves
        ]
        batch = None
        if self.batch_axes:
            sizes = {i: leaves[i].shape[ax] if ax < len(leaves[i].shape) else None for i, ax in self.batch_axes.items()}
            batch = next(iter(sizes.values()))
            if batch is None or any(s != batch for s in sizes.values()):
                raise ValueError(
                    f"exported {self.name}: the batch axes of the arguments have different sizes "
                    f"({ {i: s for i, s in sizes.items()} }); they share one batch dimension"
                )
        j, consts = self._instance(batch)
        want = [v.aval for v in j.invars[len(consts) :]]
        for i, (x, a) in enumerate(zip(leaves, want)):
            if tuple(x.shape) != a.shape or x.dtype != a.dtype:
                raise TypeError(
                    f"exported {self.name}: argument leaf {i} is {aval_of(x).str_short()} but the program takes "
                    f"{a.str_short()}" + (" (its batch axis may differ)" if self.batch_axes else "")
                )
        outs = jit_p.bind(*consts, *leaves, jaxpr=j, name=self.name)
        return _rebuild(self._program["out_tree"], iter(outs), spec)

    def save(self, path: str | os.PathLike) -> None:
        """Write the program to ``path`` (one file, replaced atomically)."""
        tensors, table = {}, {}
        for k, a in self._arrays.items():
            a = np.ascontiguousarray(a)
            table[str(k)] = [a.dtype.name, list(a.shape)]
            if a.dtype == np.complex128:  # safetensors has no complex128: its float64 pairs
                a = a.view(np.float64).reshape(a.shape + (2,))
            tensors[f"c{k}"] = a
        record = {"version": VERSION, **self._program, "arrays": table}
        meta = {"format": FORMAT, _KEY: json.dumps(record, separators=(",", ":"))}
        specs = {
            n: safetensors.TensorSpec(
                dtype=a.dtype.name, shape=tuple(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes
            )
            for n, a in tensors.items()
        }
        path = os.fspath(path)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".flx", dir=os.path.dirname(os.path.abspath(path)))
        os.close(fd)
        try:
            safetensors.serialize_file(specs, tmp, meta)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise

    def __repr__(self):
        j = self._program["jaxpr"]
        n = len(self._program["consts"])
        ins = ", ".join(_sym_str(j, a) for a in j["in"][n:])
        outs = ", ".join(_sym_str(j, a) for a in j["out"])
        return f"Exported({self.name}: ({ins}) -> ({outs}))"


def _sym_str(j: dict, atom) -> str:
    """A saved type with its symbolic batch dimension shown as ``b``."""
    aval = atom["aval"] if type(atom) is dict else j["vars"][atom]

    def dim(d):
        if type(d) is int:
            return str(d)
        a, c = d["b"]
        return ("b" if a == 1 else f"{a}b") + (f"{c:+d}" if c else "")

    return f"{dtypes.short_name(dtypes.canonicalize(aval[0]))}[{','.join(dim(d) for d in aval[1])}]"


def _at(batch) -> str:
    return "" if batch is None else f" at batch size {batch}"


def _static_note(program) -> str:
    st = program.get("static")
    return f". Static arguments were fixed at export ({st}); pass only the others" if st else ""


def _show_tree(desc) -> str:
    if desc == "*":
        return "*"
    if desc is None:
        return "None"
    if "tuple" in desc:
        inner = ", ".join(_show_tree(d) for d in desc["tuple"])
        return f"({inner}{',' if len(desc['tuple']) == 1 else ''})"
    if "list" in desc:
        return "[" + ", ".join(_show_tree(d) for d in desc["list"]) + "]"
    if "dict" in desc or "odict" in desc:
        kids = desc.get("dict", desc.get("odict"))
        return "{" + ", ".join(f"{_unkey(k)!r}: {_show_tree(d)}" for k, d in zip(desc["keys"], kids)) + "}"
    return f"{desc['node']}(" + ", ".join(_show_tree(d) for d in desc["children"]) + ")"


# ---------------------------------------------------------------------------------------------------------------
# export / load


def export(fun: Callable, *, batch_axes: Any = None) -> Callable[..., Exported]:
    """Trace ``fun`` for example arguments into a program that can be saved and loaded without its source.

    Args:
        fun: a ``fl.jit`` function (a plain function is jitted). Static arguments are fixed at export: the
            exported program takes the others.
        batch_axes: None (all shapes fixed), an int (that axis of every argument leaf is the batch dimension),
            or a tuple with one entry per positional argument (an int, None, or a pytree prefix of the argument,
            as vmap's ``in_axes``). All batch axes share one symbolic size.

    Returns:
        A function of example arguments (only their shapes and dtypes are used) returning an ``Exported``.

    Example:
        >>> predict = fl.jit(lambda w, x: fl.tanh(x @ w))
        >>> exp = fl.export.export(predict, batch_axes=(None, 0))(fl.ones((3, 2)), fl.ones((8, 3)))
        >>> exp.save("/tmp/predict.flx")
        >>> fl.export.load("/tmp/predict.flx")(fl.ones((3, 2)), fl.ones((5, 3))).shape
        (5, 2)
    """
    jitted = fun if isinstance(fun, Jitted) else jit(fun)

    def build(*args, **kwargs) -> Exported:
        name = jitted.__name__
        where = f"jit({name})"
        key, leaves, in_tree, dyn_args, static = jitted._split(args, kwargs)
        # Python scalars are weakly typed at full precision, as jit traces them
        avals = [ShapedArray(shape, d, weak_type=w) for shape, d, w in key[1]]
        in_desc = _tree_desc(in_tree, f"{where}'s arguments")
        axes = _batch_leaves(batch_axes, args, dyn_args, kwargs, jitted, leaves) if batch_axes is not None else {}
        if not axes:
            closed, out_tree, *_ = jitted._trace_avals(avals, in_tree, args, kwargs)
            closed = optimize(closed)
            enc = _Encoder(where)
            jaxpr = _normal(enc.jaxpr(_opened(closed.jaxpr)))
            consts = [enc.array(c) for c in closed.consts]
            arrays, fills, batch = dict(enumerate(enc.pool)), {}, None
        else:
            size = avals[next(iter(axes))].shape[next(iter(axes.values()))]
            sizes = [max(size, 2), max(size, 2) + 1, max(size, 2) + 3]
            pools, progs, out_tree = [], [], None
            for s in sizes:
                av = [_with_batch(a, axes.get(i), s) for i, a in enumerate(avals)]
                try:
                    closed, t, *_ = jitted._trace_avals(av, in_tree, args, kwargs)
                except (FunclibError, TypeError, ValueError, IndexError) as e:
                    if s == size:
                        raise
                    raise ExportError(
                        f"fl.export: {where} works at batch size {size} but tracing it at batch size {s} failed "
                        f"({type(e).__name__}: {e}); export without batch_axes (a fixed shape)"
                    ) from e
                out_tree = out_tree or t
                if t != out_tree:
                    raise ExportError(f"fl.export: {where}'s result structure depends on the batch size")
                enc = _Encoder(where)
                progs.append(_normal({"jaxpr": enc.jaxpr(_opened(closed.jaxpr)),
                                      "consts": [enc.array(c) for c in closed.consts]}))
                pools.append(enc.pool)
            merged = _merge(progs, sizes, [])
            jaxpr, consts = merged["jaxpr"], merged["consts"]
            arrays, fills = _merge_pools(pools, sizes, where)
            batch = {"size": size, "axes": [[i, ax] for i, ax in axes.items()]}
        out_desc = _normal(_tree_desc(out_tree, f"{where}'s result"))
        _mark_sources(out_desc, out_tree, in_tree, where)
        program = {
            "name": name,
            "jaxpr": jaxpr,
            "consts": consts,
            "fills": fills,
            "in_tree": _normal(in_desc),
            "out_tree": out_desc,
            "batch": batch,
            # a symbolic program is saved as traced: constant folding at one batch size would fix shapes
            "optimize_on_load": bool(axes),
            "static": ", ".join(f"{k}={v!r:.40}" for _, k, v in static) if static else "",
        }
        return Exported(program, arrays, f"exported {name}")

    return build


def _opened(j: Jaxpr) -> Jaxpr:
    """Constants as leading inputs: the saved program takes them first, then the arguments."""
    return Jaxpr([], list(j.constvars) + list(j.invars), j.eqns, j.outvars)


def _with_batch(a: ShapedArray, axis: int | None, size: int) -> ShapedArray:
    if axis is None:
        return a
    shape = list(a.shape)
    shape[axis] = size
    return ShapedArray(tuple(shape), a.dtype)


def _batch_leaves(batch_axes, args, dyn_args, kwargs, jitted, leaves) -> dict[int, int]:
    if isinstance(batch_axes, list):
        batch_axes = tuple(batch_axes)
    if isinstance(batch_axes, tuple):
        if len(batch_axes) != len(args):
            raise ValueError(
                f"fl.export: batch_axes has {len(batch_axes)} entries but the function got {len(args)} positional "
                "arguments"
            )
        if any(batch_axes[i] is not None for i in jitted.static_argnums):
            raise ValueError("fl.export: static arguments cannot have a batch axis (give them None)")
        pos = tuple(a for i, a in enumerate(batch_axes) if i not in jitted.static_argnums)
    else:
        pos = batch_axes
    dyn_kwargs = {k: v for k, v in kwargs.items() if k not in jitted.static_argnames}
    try:
        per_leaf = broadcast_prefix((pos, tree_util.map(lambda _: None, dyn_kwargs)), (dyn_args, dyn_kwargs))
    except ValueError as e:
        raise ValueError(f"fl.export: batch_axes {batch_axes!r} is not a pytree prefix of the arguments: {e}") from None
    out = {}
    for i, (x, ax) in enumerate(zip(leaves, per_leaf)):
        if ax is None:
            continue
        if type(ax) is not int:
            raise TypeError(f"fl.export: batch_axes entries must be int or None, got {ax!r}")
        nd = len(x.shape)
        if not -nd <= ax < nd:
            raise ValueError(f"fl.export: batch axis {ax} is out of range for argument leaf {i} of shape {x.shape}")
        out[i] = ax % nd
    sizes = {x.shape[ax] for i, ax in out.items() for x in [leaves[i]]}
    if len(sizes) > 1:
        raise ValueError(f"fl.export: the batch axes have different sizes {sorted(sizes)}; they must share one")
    return out


def load(path: str | os.PathLike) -> Exported:
    """Load a program saved by ``Exported.save``. Reads JSON and raw bytes only: no code from the file runs.

    Raises:
        ExportError: the file is not an export file, is from a newer format version, uses primitives this funclib
            lacks, or is corrupt.

    Example:
        >>> g = fl.export.load("/tmp/sin2.flx")  # doctest: +SKIP
        >>> fl.grad(lambda x: fl.sum(g(x)))(fl.zeros(3))  # doctest: +SKIP
        Tensor([2., 2., 2.], dtype=float32)
    """
    path = os.fspath(path)
    where = f"fl.export.load: {path!r}"
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"fl.export.load: no such file {path!r}") from None
    try:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + n])
        meta = header.get("__metadata__") or {}
        entries = dict(safetensors.deserialize(data))
    except (ValueError, UnicodeDecodeError, AttributeError, safetensors.SafetensorError) as e:
        raise ExportError(f"{where} is not an export file (not safetensors: {e})") from None
    if meta.get("format") != FORMAT or _KEY not in meta:
        raise ExportError(f"{where} is a safetensors file but not a funclib export (no program); use fl.load for it")
    try:
        program = json.loads(meta[_KEY])
    except json.JSONDecodeError as e:
        raise ExportError(f"{where} has a corrupt program description ({e})") from None
    version = program.get("version") if isinstance(program, dict) else None
    if not isinstance(version, int) or version > VERSION:
        raise ExportError(
            f"{where} was written in export format version {version!r}, newer than this funclib reads "
            f"(version {VERSION}); upgrade funclib to load it"
        )
    try:
        arrays = {}
        for k, (dt, shape) in program.pop("arrays").items():
            e = entries[f"c{k}"]
            d = dtypes.canonicalize(dt)
            raw = np.frombuffer(bytes(e["data"]), dtype=np.float64 if d == np.complex128 else d)
            arrays[int(k)] = (raw.view(d) if d == np.complex128 else raw).reshape(shape)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ExportError(f"{where} has a corrupt constant table ({type(e).__name__}: {e})") from None
    return Exported(program, arrays, where)
