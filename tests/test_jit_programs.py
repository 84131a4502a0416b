"""Random programs: ``jit`` must give what eager gives.

Each program is drawn from a seed: a few inputs of small shapes (sometimes a Python float too), then 6-16 steps,
each applying one operation to values picked from everything computed so far (often an old one, so views of a
fused kernel's outputs are read after later kernels ran). The operations cover elementwise math, broadcasting
against other values, constants, Python scalars and the float argument; views (flip, slices with negative steps,
transposes, reshapes, broadcasts, expand/squeeze); gathers, concatenation and stacking; reductions over leading,
trailing and all axes, with and without keepdims; row operations that lower to staged kernels (softmax,
log-softmax, normalization, ``x - max(x)``, a row value used both as itself and through its keepdims reshape);
matmuls, type conversions and short ``scan`` loops (native loop kernels). The function returns the last value and
a few earlier ones (some through a view), so kernels have several outputs. For one program in four the jitted
gradient of a weighted sum of the outputs is compared with the eager one as well.

Values are kept bounded (a value that could grow large is squashed first) and conditions only read exact input
values, so eager and jitted results differ only by rounding: each result is compared with a tolerance of about
1e4 ulps of its magnitude bound, far below what reading a wrong buffer or stride gives.

Tiers:

* default (``make test``): ``DEFAULT_PROGRAMS`` programs per dtype, float32 and float64;
* slow: ``FUNCLIB_JIT_PROGRAMS=N`` runs N programs per dtype (seeds 0 to N-1, the default ones included), e.g.
  ``FUNCLIB_JIT_PROGRAMS=1500 pytest tests/test_jit_programs.py``. Each program compiles a few kernels: about a
  second per program on a cold kernel cache.

A failure prints the program, one step a line; its test id (``[float64-1234]``) reruns it.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import funclib as fl

DEFAULT_PROGRAMS = 14
N_PROGRAMS = int(os.environ.get("FUNCLIB_JIT_PROGRAMS", DEFAULT_PROGRAMS))
SQUASH_ABOVE = 8.0  # a value whose magnitude bound exceeds this is squashed before it is used again
_SHAPES = [(4,), (5,), (3, 4), (4, 4), (1, 4), (4, 1), (2, 3, 4), (2, 1, 4), (3, 2, 2), (2, 4, 3)]

# elementwise math: (function, bound of |f(x)| given a bound b of |x|)
_UNARY = {
    "tanh": (fl.tanh, lambda b: 1.0),
    "sin": (fl.sin, lambda b: 1.0),
    "cos": (fl.cos, lambda b: 1.0),
    "gauss": (lambda x: fl.exp(-(x * x)), lambda b: 1.0),
    "log1p_sq": (lambda x: fl.log1p(x * x), lambda b: math.log1p(b * b)),
    "soft_abs": (lambda x: fl.sqrt(x * x + 0.5), lambda b: b + 1.0),
    "sqrt_abs": (lambda x: fl.sqrt(fl.abs(x)), lambda b: math.sqrt(b)),
    "abs": (fl.abs, lambda b: b),
    "neg": (lambda x: -x, lambda b: b),
    "square": (lambda x: x**2, lambda b: b * b),
    "cube": (lambda x: x**3, lambda b: b**3),
    "sigmoid": (fl.sigmoid, lambda b: 1.0),
    "erf": (fl.erf, lambda b: 1.0),
    "asinh": (fl.asinh, lambda b: b),
    "cosh_tanh": (lambda x: fl.cosh(fl.tanh(x)), lambda b: 1.6),
    "expm1_tanh": (lambda x: fl.expm1(fl.tanh(x)), lambda b: 1.8),
    "affine": (lambda x: x * 0.75 + 0.25, lambda b: 0.75 * b + 0.25),
    "rsub": (lambda x: 2.0 - x, lambda b: b + 2.0),
    "half": (lambda x: x / 2.0, lambda b: b / 2),
}
_SQUASH = ["tanh", "sin", "gauss", "sigmoid", "erf"]

_BINARY = {
    "add": (lambda x, y: x + y, lambda a, b: a + b),
    "sub": (lambda x, y: x - y, lambda a, b: a + b),
    "mul": (lambda x, y: x * y, lambda a, b: a * b),
    "maximum": (fl.maximum, max),
    "minimum": (fl.minimum, max),
    "div": (lambda x, y: x / (y * y + 1.0), lambda a, b: a),
    "pow": (lambda x, y: (x * x + 0.5) ** fl.tanh(y), lambda a, b: max(a * a + 0.5, 2.0)),
    "hypot": (fl.hypot, lambda a, b: a + b),
}


class _Val:
    __slots__ = ("shape", "bound", "exact")

    def __init__(self, shape, bound, exact=False):
        self.shape = tuple(shape)
        self.bound = float(bound)
        self.exact = exact  # an input or a view/gather of one: read bit for bit by eager and jit, safe in conditions


def _apply(name, xs, p):
    """Run one step on funclib values ``xs`` (the same code eagerly and under jit)."""
    if name in _UNARY:
        return _UNARY[name][0](xs[0])
    if name in _BINARY:
        return _BINARY[name][0](xs[0], xs[1])
    if name == "const":
        return fl.asarray(p["value"])
    if name == "scalar":
        return _BINARY[p["op"]][0](xs[0], p["c"]) if p["left"] else _BINARY[p["op"]][0](p["c"], xs[0])
    if name == "scalar_arg":  # with the program's Python float argument, Python arithmetic on it included
        c = xs[1] * 0.5 + 0.25
        return _BINARY[p["op"]][0](xs[0], c) if p["left"] else _BINARY[p["op"]][0](c, xs[0])
    if name == "scan":
        return _scan(xs[0], p)
    if name == "flip":
        return fl.flip(xs[0], axis=p["axis"])
    if name == "slice":
        return xs[0][tuple(slice(*s) for s in p["index"])]
    if name == "transpose":
        return fl.permute_dims(xs[0], p["perm"])
    if name == "reshape":
        return fl.reshape(xs[0], p["shape"])
    if name == "broadcast":
        return fl.broadcast_to(xs[0], p["shape"])
    if name == "expand":
        return fl.expand_dims(xs[0], axis=p["axis"])
    if name == "squeeze":
        return fl.squeeze(xs[0], axis=p["axis"])
    if name == "take":
        return fl.take(xs[0], fl.asarray(p["idx"]), axis=p["axis"])
    if name == "gather":
        return xs[0][fl.asarray(p["i0"]), fl.asarray(p["i1"])]
    if name == "concat":
        return fl.concat(xs, axis=p["axis"])
    if name == "stack":
        return fl.stack(xs, axis=p["axis"])
    if name == "where":
        return fl.where(xs[0] > p["t"], xs[1], xs[2])
    if name == "reduce":
        fn = {"sum": fl.sum, "max": fl.max, "min": fl.min, "mean": fl.mean}[p["kind"]]
        return fn(xs[0], axis=p["axis"], keepdims=p["keepdims"])
    if name == "rowop":
        x, kind = xs[0], p["kind"]
        if kind == "softmax":
            return fl.softmax(x, axis=-1)
        if kind == "log_softmax":
            return fl.log_softmax(x, axis=-1)
        if kind == "logsumexp":
            return fl.logsumexp(x, axis=-1, keepdims=p["keepdims"])
        if kind == "center_max":
            return x - fl.max(x, axis=-1, keepdims=True)
        if kind == "scale_mean":
            return x * fl.mean(x, axis=-1, keepdims=True)
        if kind == "norm":
            m = fl.mean(x, axis=-1, keepdims=True)
            return (x - m) / fl.sqrt(fl.mean((x - m) ** 2, axis=-1, keepdims=True) + 0.5)
        raise AssertionError(kind)
    if name == "matmul":
        return xs[0] @ xs[1]
    if name == "astype":
        return xs[0].astype(p["dtype"]).astype(p["back"])
    raise AssertionError(name)


class RandomProgram:
    """A program drawn from ``seed``: ``inputs`` (NumPy arrays), ``steps`` and ``outputs``; call it on Tensors."""

    def __init__(self, seed: int, dtype):
        self.seed = seed
        self.dtype = np.dtype(dtype)
        self.rng = np.random.default_rng(seed)
        self.vals: list[_Val] = []
        self.steps: list = []  # (name, input ids, params)
        rng = self.rng
        self.inputs = []
        for _ in range(int(rng.integers(1, 4))):
            shape = _SHAPES[rng.integers(len(_SHAPES))]
            self.inputs.append(rng.standard_normal(shape).astype(self.dtype))
            self.vals.append(_Val(shape, 4.0, exact=True))
        self.extra_outputs: list[int] = []  # values a step asks to return
        self.scalar_arg = None  # a Python float argument (weakly typed under jit), used by "scalar" steps
        if rng.random() < 0.3:
            self.scalar_arg = len(self.inputs)
            self.inputs.append(float(rng.uniform(-2, 2)))
            self.vals.append(_Val((), 2.0, exact=True))
        for _ in range(int(rng.integers(6, 17))):
            self._step()
        n = len(self.vals)
        outs = [n - 1] + self.extra_outputs[-2:]
        outs += [int(i) for i in rng.choice(n, size=min(n, int(rng.integers(1, 5))), replace=False)]
        self.outputs = []
        for i in dict.fromkeys(outs):
            if rng.random() < 0.3 and self.vals[i].shape:
                i = self._view(i)
            self.outputs.append(i)

    # --- drawing ----------------------------------------------------------------------------------------------
    def _emit(self, name, ins, params, shape, bound, exact=False) -> int:
        self.steps.append((name, tuple(ins), params))
        self.vals.append(_Val(shape, bound, exact))
        return len(self.vals) - 1

    def _pick(self, pred=lambda v: True) -> int | None:
        ok = [i for i, v in enumerate(self.vals) if i != self.scalar_arg and pred(v)]
        if not ok:
            return None
        if self.rng.random() < 0.6:
            return ok[-1 - int(self.rng.integers(min(3, len(ok))))]
        return ok[int(self.rng.integers(len(ok)))]

    def _bounded(self, i: int) -> int:
        v = self.vals[i]
        if v.bound <= SQUASH_ABOVE:
            return i
        name = _SQUASH[self.rng.integers(len(_SQUASH))]
        return self._emit(name, [i], {}, v.shape, 1.0)

    def _const(self, shape) -> int:
        value = (self.rng.standard_normal(shape) * 0.5).astype(self.dtype)
        return self._emit("const", [], {"value": value}, shape, float(np.abs(value).max(initial=0.0)))

    def _step(self):
        kinds = ["unary", "binary", "scalar", "view", "view", "reduce", "rowop", "rowchain", "rowchain", "take",
                 "gather", "concat", "stack", "where", "matmul", "astype", "scan"]
        while not getattr(self, f"_draw_{kinds[self.rng.integers(len(kinds))]}")():
            pass

    def _draw_unary(self) -> bool:
        i = self._bounded(self._pick())
        name = list(_UNARY)[self.rng.integers(len(_UNARY))]
        v = self.vals[i]
        self._emit(name, [i], {}, v.shape, _UNARY[name][1](v.bound))
        return True

    def _broadcast_partner(self, shape) -> int:
        """A value (existing, a new constant, or one of lower rank) that broadcasts with ``shape``."""
        rng = self.rng

        def fits(v):
            try:
                return np.broadcast_shapes(v.shape, shape) == shape
            except ValueError:
                return False

        if rng.random() < 0.6:
            j = self._pick(fits)
            if j is not None:
                return j
        sub = list(shape)
        for a in range(len(sub)):
            if rng.random() < 0.4:
                sub[a] = 1
        sub = tuple(sub[int(rng.integers(len(sub) + 1)) :]) if sub else ()
        return self._const(sub)

    def _draw_binary(self) -> bool:
        i = self._bounded(self._pick())
        shape = self.vals[i].shape
        j = self._bounded(self._broadcast_partner(shape))
        if self.rng.random() < 0.5:
            i, j = j, i
        name = list(_BINARY)[self.rng.integers(len(_BINARY))]
        a, b = self.vals[i], self.vals[j]
        self._emit(name, [i, j], {}, np.broadcast_shapes(a.shape, b.shape), _BINARY[name][1](a.bound, b.bound))
        return True

    def _draw_scalar(self) -> bool:
        i = self._bounded(self._pick())
        op = ["add", "sub", "mul", "maximum", "minimum"][self.rng.integers(5)]
        v = self.vals[i]
        left = bool(self.rng.random() < 0.5)
        if self.scalar_arg is not None and self.rng.random() < 0.5:
            bound = _BINARY[op][1](v.bound, 2.0)
            self._emit("scalar_arg", [i, self.scalar_arg], {"op": op, "left": left}, v.shape, bound)
            return True
        c = float(self.rng.choice([0.5, -1.25, 2.0, 0.1]))
        self._emit("scalar", [i], {"op": op, "c": c, "left": left}, v.shape, _BINARY[op][1](v.bound, abs(c)))
        return True

    def _view(self, i: int) -> int:
        """A random view of value ``i`` (flip, slice, transpose, reshape, broadcast, expand, squeeze)."""
        rng = self.rng
        v = self.vals[i]
        shape, r = v.shape, len(v.shape)
        kind = ["flip", "slice", "transpose", "reshape", "broadcast", "expand", "squeeze"][rng.integers(7)]
        if r == 0 and kind in ("flip", "slice", "transpose", "squeeze"):
            kind = "expand"
        if kind == "flip":
            axis = int(rng.integers(r)) if rng.random() < 0.8 else None
            return self._emit("flip", [i], {"axis": axis}, shape, v.bound, v.exact)
        if kind == "slice":
            index, out = [], []
            for n in shape:
                step = int(rng.choice([1, 1, 2, -1, -1, -2]))
                start = int(rng.integers(n))
                if step > 0:
                    stop = int(rng.integers(start + 1, n + 1))
                else:
                    stop = int(rng.integers(-1, start))
                    stop = None if stop < 0 else stop
                index.append((start, stop, step))
                out.append(len(range(n)[slice(start, stop, step)]))
            return self._emit("slice", [i], {"index": tuple(index)}, out, v.bound, v.exact)
        if kind == "transpose":
            perm = tuple(int(a) for a in rng.permutation(r))
            return self._emit("transpose", [i], {"perm": perm}, [shape[a] for a in perm], v.bound, v.exact)
        if kind == "reshape":
            new = _reshape_target(shape, rng)
            return self._emit("reshape", [i], {"shape": new}, new, v.bound, v.exact)
        if kind == "broadcast":
            ones = [a for a, n in enumerate(shape) if n == 1]
            if ones and rng.random() < 0.6:
                new = list(shape)
                new[ones[rng.integers(len(ones))]] = int(rng.integers(2, 4))
            else:
                new = [int(rng.integers(2, 4))] + list(shape)
            return self._emit("broadcast", [i], {"shape": tuple(new)}, new, v.bound, v.exact)
        if kind == "squeeze":
            ones = [a for a, n in enumerate(shape) if n == 1]
            if ones:
                a = ones[rng.integers(len(ones))]
                return self._emit("squeeze", [i], {"axis": a}, shape[:a] + shape[a + 1 :], v.bound, v.exact)
        axis = int(rng.integers(r + 1))
        return self._emit("expand", [i], {"axis": axis}, shape[:axis] + (1,) + shape[axis:], v.bound, v.exact)

    def _draw_view(self) -> bool:
        i = self._pick(lambda v: len(v.shape) < 4 and math.prod(v.shape) <= 48)
        if i is None:
            return False
        self._view(i)
        return True

    def _draw_reduce(self) -> bool:
        i = self._pick(lambda v: len(v.shape) > 0)
        if i is None:
            return False
        rng = self.rng
        v = self.vals[i]
        r = len(v.shape)
        choice = rng.integers(4)
        if choice == 0:
            axis = None
        elif choice == 1:
            axis = int(rng.integers(r))
        elif choice == 2:
            axis = tuple(range(r - int(rng.integers(1, r + 1)), r))  # trailing axes: a staged row reduction
        else:
            axis = tuple(range(int(rng.integers(1, r + 1))))  # leading axes
        kind = ["sum", "max", "min", "mean"][rng.integers(4)]
        keep = bool(rng.random() < 0.4)
        axes = range(r) if axis is None else ([axis] if isinstance(axis, int) else axis)
        shape = tuple(1 if a in axes else n for a, n in enumerate(v.shape) if keep or a not in axes)
        size = math.prod(v.shape[a] for a in axes)
        bound = v.bound * size if kind == "sum" else v.bound
        i = self._bounded(i) if kind == "sum" else i
        self._emit("reduce", [i], {"kind": kind, "axis": axis, "keepdims": keep}, shape, bound)
        return True

    def _draw_rowop(self) -> bool:
        i = self._pick(lambda v: len(v.shape) > 0 and v.shape[-1] > 1)
        if i is None:
            return False
        i = self._bounded(i)
        v = self.vals[i]
        kind = ["softmax", "log_softmax", "logsumexp", "center_max", "scale_mean", "norm"][self.rng.integers(6)]
        keep = bool(self.rng.random() < 0.5)
        shape = v.shape
        if kind == "logsumexp" and not keep:
            shape = shape[:-1]
        elif kind == "logsumexp":
            shape = shape[:-1] + (1,)
        bound = {"softmax": 1.0, "norm": 2 * v.bound / math.sqrt(0.5), "scale_mean": v.bound**2}.get(
            kind, 2 * v.bound + math.log(v.shape[-1])
        )
        self._emit("rowop", [i], {"kind": kind, "keepdims": keep}, shape, bound)
        return True

    def _draw_rowchain(self) -> bool:
        """Row values by hand: a trailing reduction without keepdims, math on the result, its keepdims reshape and
        an op combining that with the full value; each stays available, so several may leave one staged kernel."""
        i = self._pick(lambda v: len(v.shape) > 0 and v.shape[-1] > 1)
        if i is None:
            return False
        rng = self.rng
        i = self._bounded(i)
        v = self.vals[i]
        r = len(v.shape)
        k = int(rng.integers(1, r + 1))
        axis = tuple(range(r - k, r))
        kind = ["sum", "max", "min", "mean"][rng.integers(4)]
        size = math.prod(v.shape[r - k :])
        row = v.shape[: r - k]
        red = self._emit("reduce", [i], {"kind": kind, "axis": axis, "keepdims": False}, row,
                         v.bound * (size if kind == "sum" else 1))
        if rng.random() < 0.6:
            red = self._bounded(red)
            name = list(_UNARY)[rng.integers(len(_UNARY))]
            red = self._emit(name, [red], {}, row, _UNARY[name][1](self.vals[red].bound))
        keep = row + (1,) * k
        e = self._emit("reshape", [red], {"shape": keep}, keep, self.vals[red].bound)
        if rng.random() < 0.4:  # both leave the kernel: the row value and its keepdims reshape
            self.extra_outputs += [red, e]
        e = self._bounded(e)
        name = ["add", "sub", "mul", "maximum", "div"][rng.integers(5)]
        self._emit(name, [i, e], {}, v.shape, _BINARY[name][1](v.bound, self.vals[e].bound))
        return True

    def _draw_scan(self) -> bool:
        """A short loop whose body mixes the carry with constants, a view of it and a row statistic; the final
        carry (or the stacked per-step values) joins the pool."""
        i = self._pick(lambda v: 1 <= len(v.shape) <= 2 and math.prod(v.shape) <= 16)
        if i is None:
            return False
        rng = self.rng
        i = self._bounded(i)
        shape = self.vals[i].shape
        length = int(rng.integers(1, 6))
        kinds = ["affine", "flip", "center", "matmul", "slice_roll"]
        body = [str(rng.choice(kinds)) for _ in range(rng.integers(1, 4))]
        consts = {
            "a": (rng.uniform(0.5, 1.0, shape)).astype(self.dtype),
            "b": (rng.standard_normal(shape[-1:]) * 0.5).astype(self.dtype),
            "m": (rng.standard_normal((shape[-1], shape[-1])) / shape[-1]).astype(self.dtype),
        }
        ys = bool(rng.random() < 0.5)
        out_shape = (length,) + shape if ys else shape
        p = {"length": length, "body": tuple(body), "reverse": bool(rng.random() < 0.3), "ys": ys, **consts}
        self._emit("scan", [i], p, out_shape, 2.0)
        return True

    def _draw_take(self) -> bool:
        i = self._pick(lambda v: len(v.shape) > 0)
        if i is None:
            return False
        v = self.vals[i]
        axis = int(self.rng.integers(len(v.shape)))
        idx = self.rng.integers(0, v.shape[axis], size=int(self.rng.integers(1, 5)))
        shape = v.shape[:axis] + (len(idx),) + v.shape[axis + 1 :]
        self._emit("take", [i], {"idx": idx, "axis": axis}, shape, v.bound, v.exact)
        return True

    def _draw_gather(self) -> bool:
        i = self._pick(lambda v: len(v.shape) >= 2)
        if i is None:
            return False
        v = self.vals[i]
        k = int(self.rng.integers(1, 5))
        i0 = self.rng.integers(0, v.shape[0], size=k)
        i1 = self.rng.integers(0, v.shape[1], size=k)
        self._emit("gather", [i], {"i0": i0, "i1": i1}, (k,) + v.shape[2:], v.bound, v.exact)
        return True

    def _same_shape_partner(self, i: int) -> int:
        shape = self.vals[i].shape
        j = self._pick(lambda v: v.shape == shape)
        if j is None or self.rng.random() < 0.3:
            j = self._emit("flip", [i], {"axis": None}, shape, self.vals[i].bound, self.vals[i].exact)
        return j

    def _draw_concat(self) -> bool:
        i = self._pick(lambda v: len(v.shape) > 0 and math.prod(v.shape) <= 32)
        if i is None:
            return False
        j = self._same_shape_partner(i)
        v = self.vals[i]
        axis = int(self.rng.integers(len(v.shape)))
        shape = v.shape[:axis] + (2 * v.shape[axis],) + v.shape[axis + 1 :]
        exact = v.exact and self.vals[j].exact
        self._emit("concat", [i, j], {"axis": axis}, shape, max(v.bound, self.vals[j].bound), exact)
        return True

    def _draw_stack(self) -> bool:
        i = self._pick(lambda v: len(v.shape) < 3 and math.prod(v.shape) <= 32)
        if i is None:
            return False
        j = self._same_shape_partner(i)
        v = self.vals[i]
        axis = int(self.rng.integers(len(v.shape) + 1))
        shape = v.shape[:axis] + (2,) + v.shape[axis:]
        exact = v.exact and self.vals[j].exact
        self._emit("stack", [i, j], {"axis": axis}, shape, max(v.bound, self.vals[j].bound), exact)
        return True

    def _draw_where(self) -> bool:
        c = self._pick(lambda v: v.exact)
        shape = self.vals[c].shape
        a = self._broadcast_partner(shape)
        b = self._broadcast_partner(shape)
        t = float(self.rng.choice([0.0, 0.5, -0.3]))
        self._emit("where", [c, a, b], {"t": t}, shape, max(self.vals[a].bound, self.vals[b].bound))
        return True

    def _draw_matmul(self) -> bool:
        i = self._pick(lambda v: len(v.shape) >= 1)
        if i is None:
            return False
        i = self._bounded(i)
        v = self.vals[i]
        k = v.shape[-1]
        n = int(self.rng.integers(1, 5))
        j = self._pick(lambda w: w.shape == (k, n) and w.bound <= SQUASH_ABOVE)
        if j is None:
            j = self._const((k, n))
        shape = v.shape[:-1] + (n,)
        self._emit("matmul", [i, j], {}, shape, k * v.bound * self.vals[j].bound)
        return True

    def _draw_astype(self) -> bool:
        i = self._pick()
        other = np.float64 if self.dtype == np.float32 else np.float32
        v = self.vals[i]
        self._emit("astype", [i], {"dtype": np.dtype(other).name, "back": self.dtype.name}, v.shape, v.bound)
        return True

    # --- running ----------------------------------------------------------------------------------------------
    def __call__(self, *args):
        env = list(args)
        for name, ins, params in self.steps:
            env.append(_apply(name, [env[i] for i in ins], params))
        return tuple(env[i] for i in self.outputs)

    def listing(self) -> str:
        n = len(self.inputs)
        lines = [f"program seed={self.seed} dtype={self.dtype.name}"]
        lines += [
            f"  v{i} = input {a!r}" if isinstance(a, float) else f"  v{i} = input {a.shape}"
            for i, a in enumerate(self.inputs)
        ]
        for k, (name, ins, params) in enumerate(self.steps):
            shown = {}
            for key, val in params.items():
                if isinstance(val, np.ndarray):  # index arrays in full, constants by shape
                    val = val.tolist() if val.dtype.kind == "i" else f"<{val.dtype.name}{list(val.shape)}>"
                shown[key] = val
            v = self.vals[n + k]
            args = ", ".join(f"v{i}" for i in ins)
            lines.append(f"  v{n + k} = {name}({args}) {shown or ''}  # {v.shape}, |v| <= {v.bound:.3g}")
        lines.append(f"  return {', '.join(f'v{i}' for i in self.outputs)}")
        return "\n".join(lines)


def _scan(x, p):
    a, b, m = fl.asarray(p["a"]), fl.asarray(p["b"]), fl.asarray(p["m"])

    def body(c, _):
        for op in p["body"]:
            if op == "affine":
                c = fl.tanh(c * a + b)
            elif op == "flip":
                c = (c + fl.flip(c, axis=-1)) * 0.5
            elif op == "center":
                c = c - fl.mean(c, axis=-1, keepdims=True)
            elif op == "matmul":
                c = fl.tanh(c @ m)
            else:
                c = fl.concat([c[..., 1:], c[..., :1]], axis=-1) * 0.9
        return c, fl.sin(c[..., ::-1]) if p["ys"] else None

    carry, ys = fl.scan(body, x, None, length=p["length"], reverse=p["reverse"])
    return ys if p["ys"] else carry


def _reshape_target(shape, rng) -> tuple:
    n = math.prod(shape)
    r = len(shape)
    options = [(n,)] if r != 1 else []
    a = int(rng.integers(r + 1))
    options.append(shape[:a] + (1,) + shape[a:])
    if r >= 2:
        a = int(rng.integers(r - 1))
        options.append(shape[:a] + (shape[a] * shape[a + 1],) + shape[a + 2 :])
    for a, m in enumerate(shape):
        divs = [d for d in range(2, m) if m % d == 0]
        if divs:
            d = divs[rng.integers(len(divs))]
            options.append(shape[:a] + (d, m // d) + shape[a + 1 :])
    if 1 in shape and r > 1:
        a = shape.index(1)
        options.append(shape[:a] + shape[a + 1 :])
    return tuple(options[rng.integers(len(options))])


def _args(prog: RandomProgram) -> list:
    return [a if isinstance(a, float) else fl.asarray(a) for a in prog.inputs]


def _compare(e, j, tol, where):
    e, j = np.asarray(e), np.asarray(j)
    assert e.dtype == j.dtype and e.shape == j.shape, f"{where}: eager {e.dtype}{e.shape}, jit {j.dtype}{j.shape}"
    e64, j64 = e.astype(np.float64), j.astype(np.float64)
    err = np.abs(e64 - j64)
    same = (e64 == j64) | (np.isnan(e64) & np.isnan(j64))  # equal infinities (a derivative at a kink) agree too
    bad = ~(same | (err <= tol))
    assert not bad.any(), (
        f"{where}\njit differs from eager by {np.nanmax(np.where(bad, err, 0)):.3g} (tolerance {tol:.3g}) at "
        f"{np.argwhere(bad)[:5].tolist()}:\neager {e.ravel()[:8]}\njit   {j.ravel()[:8]}"
    )


def check(prog: RandomProgram, grad: bool = False) -> None:
    """Compare ``jit(prog)`` with ``prog`` (and with ``grad``, the jitted gradient of a weighted sum of the
    outputs with the eager one)."""
    args = _args(prog)
    eager = prog(*args)
    jitted = fl.jit(prog)(*args)
    eps = np.finfo(prog.dtype).eps
    for k, (e, j) in enumerate(zip(eager, jitted)):
        i = prog.outputs[k]
        _compare(e, j, 1e4 * eps * max(1.0, prog.vals[i].bound), f"output {k} (v{i})\n{prog.listing()}")
    if not grad:
        return
    pos = [i for i, a in enumerate(args) if isinstance(a, fl.Tensor)]
    wrng = np.random.default_rng(prog.seed + 1_000_003)
    weights = [wrng.uniform(-1, 1, np.shape(e)).astype(prog.dtype) for e in eager]

    def loss(*arrays):
        full = list(args)
        for i, a in zip(pos, arrays):
            full[i] = a
        total = 0.0
        for o, w in zip(prog(*full), weights):
            if isinstance(o, fl.Tensor):
                total = total + fl.sum(o * fl.asarray(w))
        return total

    g = fl.grad(loss, argnums=tuple(range(len(pos))))
    arrays = [args[i] for i in pos]
    for k, (e, j) in enumerate(zip(g(*arrays), fl.jit(g)(*arrays))):
        scale = max(1.0, float(np.nanmax(np.abs(np.where(np.isfinite(e.numpy()), e.numpy(), 0)), initial=0.0)))
        _compare(e, j, 1e4 * eps * scale, f"gradient of input v{pos[k]}\n{prog.listing()}")


@pytest.mark.parametrize("seed", range(N_PROGRAMS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_random_program_jit_equals_eager(dtype, seed):
    check(RandomProgram(seed, dtype), grad=seed % 4 == 0)


def test_the_generator_covers_views_of_fused_outputs_and_staged_groups(monkeypatch):
    """Programs use every kind of step; the default tier's include staged kernels and kernels with several
    outputs."""
    monkeypatch.setattr(fl.config, "whole_programs", False)  # the program's steps are what is counted
    names = {name for seed in range(200) for name, _, _ in RandomProgram(seed, "float64").steps}
    assert names >= set(_UNARY) | set(_BINARY) | {
        "flip", "slice", "transpose", "reshape", "broadcast", "expand", "squeeze", "take", "gather", "concat",
        "stack", "where", "reduce", "rowop", "matmul", "astype", "scalar", "scalar_arg", "const", "scan",
    }, names
    staged = multi = 0
    for dtype in ("float32", "float64"):
        for seed in range(DEFAULT_PROGRAMS):
            prog = RandomProgram(seed, dtype)
            text = fl.jit(prog).lower(*_args(prog)).as_text().split("# program")[1]
            fused = [line for line in text.splitlines() if "fused[" in line]
            staged += any("reduce_" in line for line in fused)
            multi += any(line.split("=")[0].count(",") >= 1 for line in fused)
    assert staged >= 5 and multi >= 5, (staged, multi)
