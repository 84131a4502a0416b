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

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import safetensors

from funclib import dtypes
from funclib import tree as tree_util
from funclib.core import ShapedArray, Tensor, _wrap, aval_of
from funclib.errors import FunclibError
from funclib.jaxpr import ClosedJaxpr, Jaxpr, JaxprTypeError, typecheck

from .._api_util import as_tensor_leaf
from ..jit import _PY_SCALARS, Jitted, jit, jit_p
from ..passes import optimize
from ._batch import batch_leaves, merge, merge_pools, with_batch
from ._codec import Decoder, Encoder, ExportError, normal
from ._trees import describe_tree, mark_sources, rebuild, show_tree

__all__ = ["export", "load", "Exported", "ExportError"]

FORMAT = "funclib.export"
VERSION = 1
_KEY = "funclib.export"


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

        dec = Decoder(pool, batch, self._where)
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
            ok = self._in_specs[spec] = normal(describe_tree(spec, "the arguments")) == self._program["in_tree"]
        if not ok:
            raise TypeError(
                f"exported {self.name}: the arguments have structure {spec}, but the program was exported for "
                f"{show_tree(self._program['in_tree'])}" + _static_note(self._program)
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
        return rebuild(self._program["out_tree"], iter(outs), spec)

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
        in_desc = describe_tree(in_tree, f"{where}'s arguments")
        axes = batch_leaves(batch_axes, args, dyn_args, kwargs, jitted, leaves) if batch_axes is not None else {}
        if not axes:
            closed, out_tree, *_ = jitted._trace_avals(avals, in_tree, args, kwargs)
            closed = optimize(closed)
            enc = Encoder(where)
            jaxpr = normal(enc.jaxpr(_opened(closed.jaxpr)))
            consts = [enc.array(c) for c in closed.consts]
            arrays, fills, batch = dict(enumerate(enc.pool)), {}, None
        else:
            size = avals[next(iter(axes))].shape[next(iter(axes.values()))]
            sizes = [max(size, 2), max(size, 2) + 1, max(size, 2) + 3]
            pools, progs, out_tree = [], [], None
            for s in sizes:
                av = [with_batch(a, axes.get(i), s) for i, a in enumerate(avals)]
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
                enc = Encoder(where)
                progs.append(normal({"jaxpr": enc.jaxpr(_opened(closed.jaxpr)),
                                      "consts": [enc.array(c) for c in closed.consts]}))
                pools.append(enc.pool)
            merged = merge(progs, sizes, [])
            jaxpr, consts = merged["jaxpr"], merged["consts"]
            arrays, fills = merge_pools(pools, sizes, where)
            batch = {"size": size, "axes": [[i, ax] for i, ax in axes.items()]}
        out_desc = normal(describe_tree(out_tree, f"{where}'s result"))
        mark_sources(out_desc, out_tree, in_tree, where)
        program = {
            "name": name,
            "jaxpr": jaxpr,
            "consts": consts,
            "fills": fills,
            "in_tree": normal(in_desc),
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
