"""The program format: a jaxpr as JSON-able values and back.

Each jaxpr is a table of variable types and equations ``[primitive name, inputs, params, outputs]``; parameters go
through a per-type codec (ints, floats as hex, tuples, dicts, dtypes, avals, nested jaxprs); arrays (constants of the
program and of nested closed jaxprs) go to a pool stored as tensors beside the JSON. Decoding rebuilds equations from
the primitive registry and reads symbolic sizes ``{"b": [a, c]}`` as ``a * batch + c``.

>>> import funclib as fl
>>> closed = fl.make_jaxpr(lambda x: fl.sin(x) * 2.0)(fl.ones(3))
>>> enc = Encoder("f")
>>> saved = normal(enc.jaxpr(closed.jaxpr))
>>> saved["eqns"][1]  # [primitive, inputs (variable 1 and a literal 2.0), params, outputs]
['mul', [1, {'lit': {'f': '0x1.0000000000000p+1'}, 'aval': ['float32', []], 'py': False}], {}, [2]]
>>> [e.prim.name for e in Decoder(enc.pool.__getitem__, None, "f").jaxpr(saved).eqns]
['sin', 'mul']
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np

from funclib import dtypes
from funclib.core import PRIMITIVES, ShapedArray, Tensor, _wrap
from funclib.errors import FunclibError
from funclib.jaxpr import ClosedJaxpr, Eqn, Jaxpr, Literal, Var


class ExportError(FunclibError, ValueError):
    """A function cannot be exported, or an export file cannot be loaded."""


def encode_float(x: float) -> dict:
    return {"f": float(x).hex()}


def _dtype_name(d) -> str:
    return np.dtype(d).name


class Encoder:
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
            return encode_float(float(v))
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
            return encode_float(v)
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


class Decoder:
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


def normal(x):
    """``x`` as it reads back from JSON (tuples become lists, keys strings)."""
    return json.loads(json.dumps(x))
