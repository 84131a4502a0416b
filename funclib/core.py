"""The core: abstract values, primitives, the trace context, and the Tensor/Tracer types.

With no transform active the current trace is ``None`` and ``Primitive.bind`` goes straight to the NumPy
implementation. A transform installs a ``Trace`` (which keeps its ``parent``) as current; its ``process`` runs a
primitive's rule with the parent current. A tracer belongs to a trace only if ``tracer._trace is trace``.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import weakref
from typing import Any

import numpy as np

from . import dtypes
from .errors import (
    ConcretizationError,
    DTypeError,
    ImmutableError,
    MissingRuleError,
    OutOfRangeError,
    TracerLeakError,
)
from .kernels import fusion, lowp


class ShapedArray:
    """Abstract value: a shape and a dtype, no data. ``weak_type`` marks values born from Python scalars.

    >>> fl.ShapedArray((2, 3), fl.float32).str_short()
    'f32[2,3]'
    """

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, weak_type: bool = False):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.weak_type = weak_type

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __eq__(self, other):
        return (
            type(other) is ShapedArray and self.shape == other.shape and self.dtype == other.dtype
        )

    def __hash__(self):
        return hash((self.shape, self.dtype))

    def str_short(self) -> str:
        return f"{dtypes.short_name(self.dtype)}[{','.join(map(str, self.shape))}]"

    def __repr__(self):
        return f"ShapedArray({self.str_short()}{', weak' if self.weak_type else ''})"

    def update(self, shape=None, dtype=None) -> ShapedArray:
        return ShapedArray(self.shape if shape is None else shape, self.dtype if dtype is None else dtype)


def aval_of(x) -> ShapedArray:
    """The abstract value of a Tensor, Tracer, NumPy array or Python scalar."""
    t = type(x)
    if t is Tensor:
        v = x._value
        return ShapedArray(v.shape, v.dtype)
    if isinstance(x, Tracer):
        return x.aval
    if t in (bool, int, float, complex):
        return ShapedArray((), dtypes.python_scalar_dtype(x), weak_type=True)
    if isinstance(x, (np.ndarray, np.generic)):
        return ShapedArray(np.shape(x), dtypes.canonicalize(x.dtype))
    if isinstance(x, Tensor) or hasattr(x, "device"):  # a DeviceTensor, or a device buffer
        v = getattr(x, "_value", x)
        return ShapedArray(v.shape, v.dtype)
    raise TypeError(f"{type(x).__name__} is not a funclib array type; convert it with fl.asarray")


# ---------------------------------------------------------------------------------------------------------------
# The trace context


class _TraceState(threading.local):
    trace = None  # None: eager evaluation


_state = _TraceState()


def current_trace():
    return _state.trace


class set_trace:
    """Context manager that makes ``trace`` current (``None`` for eager)."""

    __slots__ = ("trace", "prev")

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self):
        self.prev = _state.trace
        _state.trace = self.trace

    def __exit__(self, *exc):
        _state.trace = self.prev


class Trace:
    """A transform in progress. Subclasses implement ``process`` and, optionally, ``concretize``."""

    name = "a transform"
    parent: Trace | None = None
    # True when a primitive applied to concrete values only would reach the eager impl unchanged through this
    # trace and every parent (JVP, partial evaluation of reverse mode), so callers may go there directly
    eager_below = False

    def process(self, prim: Primitive, args, params):
        raise NotImplementedError

    @property
    def record_source(self) -> bool:
        """Whether jaxpr traces started beneath record each equation's source line (see ``JaxprTrace``)."""
        return self.parent is not None and self.parent.record_source

    def concretize(self, tracer: Tracer, what: str):
        raise ConcretizationError(
            f"Cannot convert a traced {tracer.aval.str_short()} to {what} inside {self.name}. "
            "Use fl.where or fl.cond for data-dependent choices, or make the argument static "
            "(static_argnums/static_argnames in fl.jit)."
        )

    def export(self, tracer: Tracer, what: str):
        """The concrete value to hand to NumPy, DLPack or a list; by default what ``concretize`` gives."""
        return self.concretize(tracer, what)

    def bind_parent(self, prim: Primitive, args, params):
        if self.parent is None:
            # eager impls never consult the trace state (call-like impls that run user code reset it themselves)
            return prim.eager(args, params)
        # written out, not `with set_trace`: once per operation a transform passes on (set_trace measured 2-8%
        # slower on an eager vmap(grad))
        prev = _state.trace
        _state.trace = self.parent
        try:
            return prim.bind(*args, **params)
        finally:
            _state.trace = prev


# ---------------------------------------------------------------------------------------------------------------
# Primitives

PRIMITIVES: dict[str, Primitive] = {}

_RULES = ("impl", "abstract_eval", "jvp", "transpose", "vmap")


class Primitive:
    """An operation with its rules, attached by decorators right under its definition.

    >>> sin_p = Primitive("sin")
    >>> @sin_p.def_impl
    ... def _(x): return np.sin(x)
    """

    # a call whose impl evaluates funclib operations on its operands, and so runs on whatever device they live on
    runs_on_devices = False
    # an effect (a debug callback, a runtime check) is run for what it does, not for its outputs: the jaxpr passes
    # never drop, merge or constant-fold it, nor move it past another effect (``jaxpr.eqn_has_effects``)
    effect = False
    # unary and binary rows: the NumPy function and the per-operand tangent functions, ``(np_fn, jvp)`` or
    # ``(np_fn, dx, dy)``. An elementwise derivative is diagonal (up to broadcasting), so eager reverse mode
    # applies them to cotangents directly
    diagonal: tuple | None = None

    def __init__(self, name: str, *, multiple_results: bool = False, linear: bool = False):
        if name in PRIMITIVES:
            raise ValueError(f"a primitive named {name!r} is already registered")
        self.name = name
        self.multiple_results = multiple_results
        self.linear = linear
        self.impl = None
        self.abstract_eval = None
        self.jvp = None
        self.transpose = None
        self.vmap = None
        # higher-order primitives (jit's call, cond, scan, ...) split themselves under partial evaluation
        self.partial_eval = None
        # a call primitive that runs its body its own way under jit: ``jit_step(eqn, body_program) -> step``
        # (None: its impl); ``body_program(closed_jaxpr)`` compiles a body for the same device
        self.jit_step = None
        # ``dce(eqn, used_outputs) -> Eqn | None``: the equation computing only the used outputs (a loop whose
        # body stops producing per-step values nobody reads), for ``passes.dce``
        self.dce = None
        # why a rule is absent on purpose, e.g. {"jvp": "integer output"}; the meta-test accepts only these
        self.no_rule: dict[str, str] = {}
        self.kernel: str | None = None  # name of the fused-kernel scalar op, if any (jit lowering)
        self.lowering: fusion.Lowering | None = None
        self.family = "other"
        frame = sys._getframe(1)
        self.defined_in = os.path.relpath(frame.f_globals.get("__file__", "?"), _ROOT)
        PRIMITIVES[name] = self

    def __repr__(self):
        return self.name

    def def_impl(self, f):
        self.impl = f
        return f

    def def_abstract_eval(self, f):
        self.abstract_eval = f
        return f

    def def_jvp(self, f):
        self.jvp = f
        return f

    def def_transpose(self, f):
        self.transpose = f
        return f

    def def_vmap(self, f):
        self.vmap = f
        return f

    def def_lowering(self, lowering: fusion.Lowering) -> fusion.Lowering:
        """How jit's fused kernels compute this elementwise primitive: its scalar expression, handed to the kernel
        layer as op ``self.kernel`` (``kernels.fusion.register_op``)."""
        self.kernel = self.kernel or self.name
        self.lowering = lowering
        fusion.register_op(self.kernel, lowering)
        return lowering

    def def_partial_eval(self, f):
        """``f(trace, args, params) -> outputs``: stage only the part that depends on unknown inputs."""
        self.partial_eval = f
        return f

    def rule(self, kind: str):
        r = getattr(self, kind)
        if r is None:
            has = ", ".join(k for k in _RULES if getattr(self, k) is not None)
            why = self.no_rule.get(kind)
            reason = f" ({why})" if why else ""
            raise MissingRuleError(
                f"primitive '{self.name}' has no {kind} rule{reason} (it has: {has}); "
                f"add @{self.name}_p.def_{kind} in {self.defined_in}",
                self,
                kind,
            )
        return r

    def bind(self, *args, **params):
        trace = _state.trace
        if trace is None:
            return self.eager(args, params)
        return trace.process(self, args, params)

    def eager(self, args, params):
        vals = []
        for a in args:
            t = type(a)
            if t is Tensor:
                vals.append(a._value)
            elif t is DeviceTensor:
                return _device_eager(self, args, params)
            elif isinstance(a, Tracer):
                raise TracerLeakError(
                    f"'{self.name}' got a traced value ({a.aval.str_short()}) outside of the transform that "
                    "created it. A tracer leaked: do not store traced values in globals or on objects, "
                    "return them from the transformed function instead."
                )
            else:
                vals.append(a)
        try:
            out = self.impl(*vals, **params)
        except (ValueError, TypeError, IndexError):
            # the abstract rule explains bad shapes/dtypes in funclib's terms; NumPy's own message otherwise
            if self.abstract_eval is not None:
                self.abstract_eval(*[aval_of(v) for v in vals], **params)
            raise
        if self.multiple_results:
            return [_wrap(o) for o in out]
        return _wrap(out)


_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _device_eager(prim: Primitive, args, params):
    """``prim`` on operands one of which lives on a CUDA device: run there, or raise naming the primitive."""
    from .kernels import devices  # reached only once a tensor lives on a device

    if any(isinstance(a, Tracer) for a in args):
        raise TracerLeakError(f"'{prim.name}' got a traced value outside of the transform that created it")
    vals = [a._value if isinstance(a, Tensor) else a for a in args]
    device = devices.operands_device(prim.name, vals)
    if prim.runs_on_devices:
        out = prim.impl(*vals, **_consts_on(params, device))
        if device != devices.CPU:  # an output the body computed from constants alone was made on the host
            out = [devices.transfer(o, device) if type(o) is np.ndarray else o for o in out] \
                if prim.multiple_results else devices.transfer(out, device) if type(out) is np.ndarray else out
    else:  # an elementwise kernel is generated for its result dtype
        elementwise = prim.family in ("unary", "binary", "select")
        out_dtype = prim.abstract_eval(*map(aval_of, vals), **params).dtype if elementwise else None
        out = devices.run_on_device(prim, vals, params, device, out_dtype)
    return [_wrap(o) for o in out] if prim.multiple_results else _wrap(out)


def _consts_on(params: dict, device: str) -> dict:
    """``params`` with the constants of every closed jaxpr in them (a call's body, a cond's branches: values with
    ``jaxpr`` and ``consts``) moved to ``device``, so that the body's operations see one device."""
    from .kernels import devices  # reached only once a tensor lives on a device

    def closed(v) -> bool:
        return hasattr(v, "jaxpr") and hasattr(v, "consts")

    def move(v):
        if closed(v):
            if not any(isinstance(c, (np.ndarray, Tensor)) and not devices.is_broadcast_scalar(getattr(c, "_value", c))
                       for c in v.consts):
                return v
            return type(v)(v.jaxpr, [_wrap(c).to_device(device) if isinstance(c, (np.ndarray, Tensor)) else c
                                     for c in v.consts])
        if type(v) in (tuple, list) and any(closed(x) for x in v):
            return type(v)(move(x) for x in v)
        return v

    return {k: move(v) for k, v in params.items()} if device != devices.CPU else params


class Zero:
    """A symbolic zero tangent or cotangent: costs nothing and is instantiated only when needed."""

    __slots__ = ("_aval", "_like")

    def __init__(self, aval: ShapedArray):
        self._aval = aval
        self._like = None

    @staticmethod
    def of(x) -> Zero:
        """The zero tangent of value ``x``; its aval is computed only if asked for."""
        z = _new(Zero)
        z._aval = None
        z._like = x
        return z

    @property
    def aval(self) -> ShapedArray:
        if self._aval is None:
            a = aval_of(self._like)
            self._aval = ShapedArray(a.shape, a.dtype)
        return self._aval

    def __repr__(self):
        return f"Zero({self.aval.str_short()})"


class UndefinedPrimal:
    """Marks a linear input of an equation during transposition."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self):
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined(x) -> bool:
    return type(x) is UndefinedPrimal


# ---------------------------------------------------------------------------------------------------------------
# Tensor and Tracer

_new = object.__new__


def _wrap(v) -> Tensor:
    """Wrap a NumPy result (a device buffer as a ``DeviceTensor``). Internal buffers are never handed out
    writable, so no copy or flag flip is needed."""
    if type(v) is not np.ndarray:
        if getattr(v, "device", "cpu") != "cpu":
            return _wrap_any(v)
        v = np.asarray(v)
    t = _new(Tensor)
    t._value = v
    return t


class Tensor:
    """An immutable n-dimensional array backed by NumPy on the CPU.

    Create one with ``fl.asarray`` / ``fl.tensor``; update functionally with ``x.at[idx].set(v)``.

    >>> x = fl.tensor([1.0, 2.0])
    >>> x * 2
    Tensor([2., 4.], dtype=float32)
    """

    __slots__ = ("_value", "__weakref__")
    __array_priority__ = 100
    weak_type = False  # True only for a traced Python scalar (see ``is_weak``)

    def __init__(self, data, dtype=None):
        self._value = array_from(data, dtype)

    # --- metadata -------------------------------------------------------------------------------------------
    @property
    def aval(self) -> ShapedArray:
        return aval_of(self)

    @property
    def dtype(self) -> np.dtype:
        return self._value.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def device(self) -> str:
        """Where the buffer lives: ``"cpu"`` or ``"cuda:N"``."""
        return "cpu"

    def to_device(self, device, /, *, stream=None) -> Tensor:
        """This tensor on ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``): the same tensor if it is there, else a
        copy (the one way data moves between devices).

        >>> fl.tensor([1.0]).to_device("cpu")
        Tensor([1.], dtype=float32)
        """
        from .kernels import devices  # device names and transfers

        target = devices.canonical(device, "Tensor.to_device")
        if target is None or target == self.device:
            return self
        return _wrap_any(devices.transfer(self._value, target))

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor; use .item() or .shape")
        return self.shape[0]

    def __repr__(self):
        if isinstance(self, Tracer):
            return f"{type(self).__name__}<{self.aval.str_short()}>"
        body = np.array2string(self._value, separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={self.dtype.name})"

    __str__ = __repr__

    # --- conversions ----------------------------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A read-only NumPy view of the data (no copy)."""
        v = self._value.view()
        v.flags.writeable = False
        return v

    def __array__(self, dtype=None, copy=None):
        v = self.numpy()
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        if copy:
            return v.copy()
        return v

    def __array_namespace__(self, /, *, api_version=None):
        if api_version not in (None, "2021.12", "2022.12", "2023.12"):
            raise ValueError(f"funclib implements the Array API 2023.12, not {api_version!r}")
        return sys.modules[__package__]  # the package holding this module: imported before it, so never partial

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Export the buffer through DLPack, shared (``copy=True`` copies).

        DLPack 1.0 consumers (NumPy, PyTorch) receive it marked read-only; NumPy honours the mark, PyTorch
        ignores it, so writing to ``torch.from_dlpack(x)`` changes ``x``: clone it first. Consumers of the older
        protocol (JAX) cannot be told, and get the buffer unmarked, as JAX exports its own immutable arrays;
        memory funclib does not own (a memory-mapped checkpoint, ``fl.from_numpy``) is copied for them, except a
        tensor made by ``fl.from_dlpack`` of a JAX array, which goes back as JAX's own buffer (the round trip
        shares memory). JAX copies buffers that are not 64-byte aligned, which NumPy's allocations usually are not,
        so funclib's own results usually reach JAX as a copy. bfloat16 cannot be
        exported: NumPy, which produces the capsule, has no DLPack code for it.
        """
        kw = {} if dl_device is None else {"dl_device": dl_device}
        if max_version is not None and tuple(max_version) >= (1, 0):
            return self.numpy().__dlpack__(stream=stream, max_version=max_version, copy=copy, **kw)
        v = self._value
        source = _dlpack_source(v)
        if source is not None and not copy:
            # memory imported from an immutable producer goes back out as that producer exports it, so a round trip
            # (JAX -> funclib -> JAX) shares the buffer
            return source.__dlpack__(stream=stream, **kw)
        if copy or not v.flags.writeable:
            if copy is False:
                raise BufferError(
                    "Tensor.__dlpack__: this tensor's memory is read-only and the consumer speaks a DLPack version "
                    "before 1.0, which cannot mark it so; allow a copy (copy=None)"
                )
            v = np.array(v)
        return v.__dlpack__(stream=stream, **kw)

    def __dlpack_device__(self):
        return self._value.__dlpack_device__()

    def item(self):
        if self.size != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return self._value.item()

    def tolist(self):
        return self._value.tolist()

    def __bool__(self):
        if self.size != 1:
            raise ValueError(
                f"The truth value of a tensor with shape {self.shape} is ambiguous; use fl.any(x) or fl.all(x)"
            )
        return bool(self._value)

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __complex__(self):
        return complex(self._scalar("complex"))

    def __index__(self):
        if self.dtype not in dtypes.INTEGER:
            raise TypeError(f"only integer tensors can be used as an index, got {self.dtype.name}")
        return int(self._scalar("index"))

    def _scalar(self, what):
        if self.size != 1:
            raise TypeError(f"only one-element tensors can be converted to Python {what}, got shape {self.shape}")
        if what != "complex" and self.dtype.kind == "c":
            raise TypeError(f"cannot convert a complex tensor to Python {what}; use fl.real(x) or fl.abs(x)")
        return self._value.reshape(())[()]

    def __hash__(self):
        raise TypeError("Tensor is unhashable (== is elementwise); use id(x) or x.item() as a key")

    def __setitem__(self, key, value, /):
        raise ImmutableError(
            "Tensors are immutable: x[idx] = v is not supported. Use x = x.at[idx].set(v), which returns a "
            "new tensor (under fl.jit it updates in place when x is not used afterwards)."
        )

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (_from_numpy, (np.array(self._value),))


def _from_numpy(a, device="cpu"):
    return _wrap(a) if device == "cpu" else _wrap(a).to_device(device)


def _wrap_any(v) -> Tensor:
    """Wrap a buffer of any device: a NumPy result as ``_wrap`` does, a device buffer as a ``DeviceTensor``."""
    if type(v) is np.ndarray or getattr(v, "device", "cpu") == "cpu":
        return _wrap(v)
    t = _new(DeviceTensor)
    t._value = v
    return t


class DeviceTensor(Tensor):
    """A Tensor whose buffer lives on a CUDA device (``x.device == "cuda:0"``).

    Operations on it run on its device; converting it to NumPy, DLPack on the host or a list needs an explicit
    ``x.to_device("cpu")``, except for single values (``item()``, ``float(x)``, ``bool(x)``), which are copied.

    >>> x = fl.ones(3, device="cuda")  # doctest: +SKIP
    >>> (x * 2).to_device("cpu")  # doctest: +SKIP
    Tensor([2., 2., 2.], dtype=float32)
    """

    __slots__ = ()

    @property
    def device(self) -> str:
        return self._value.device

    def _host(self) -> np.ndarray:
        from .kernels import devices  # device transfers

        return devices.transfer(self._value, "cpu")

    def numpy(self):
        self._value.__array__()  # raises, naming the device and the fix

    def __array__(self, dtype=None, copy=None):
        self._value.__array__()

    def __repr__(self):
        body = np.array2string(self._host(), separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={self.dtype.name}, device={self.device!r})"

    __str__ = __repr__

    def item(self):
        if self.size != 1:
            raise ValueError(f"item() needs a tensor with one element, got shape {self.shape}")
        return self._host().item()

    def tolist(self):
        return self._host().tolist()

    def __bool__(self):
        if self.size != 1:
            raise ValueError(
                f"The truth value of a tensor with shape {self.shape} is ambiguous; use fl.any(x) or fl.all(x)"
            )
        return bool(self._host())

    def _scalar(self, what):
        if self.size != 1:
            raise TypeError(f"only one-element tensors can be converted to Python {what}, got shape {self.shape}")
        return self._host().reshape(())[()]

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule (``kDLCUDA``) over this tensor's device memory, for ``torch.from_dlpack``,
        ``jax.dlpack.from_dlpack``, ``cupy.from_dlpack``: no copy, so the consumer must not write to it (``copy=True``
        exports a copy made on the device). The capsule is the unversioned ``DLManagedTensor`` every consumer reads.
        """
        from .kernels import devices, dlpack  # device exchange: only for tensors on a device

        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(
                f"Tensor.__dlpack__: the tensor lives on {self.device}, the consumer asked for DLPack device "
                f"{tuple(dl_device)}; move it first with x.to_device('cpu') (or read it through "
                "__cuda_array_interface__ on the GPU)"
            )
        v = devices.share_foreign(self, "Tensor.__dlpack__", copy=True) if copy else self._value
        devices.synchronize(self.device)  # the consumer's stream then sees the finished values
        return dlpack.to_capsule(v.pointer, v.shape, v.dtype, self.__dlpack_device__(), owner=v)

    def __dlpack_device__(self):
        return (2, int(self.device.split(":")[1]))  # kDLCUDA

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._value.__cuda_array_interface__

    def __reduce__(self):
        return (_from_numpy, (self._host(), self.device))


def is_weak(x) -> bool:
    """Whether ``x`` is a Python scalar traced by ``jit``: weakly typed and held at full precision (float64,
    int64, complex128 or bool) until it meets a dtype, as the Python scalar would be eagerly."""
    return getattr(x, "weak_type", False) is True


def strengthen(x):
    """``x``, or for a weak value the Tensor its Python scalar becomes on its own (``fl.asarray(0.1)``: the default
    dtype of its kind), for every use other than arithmetic with Python operators."""
    return x._trace.strengthen(x) if is_weak(x) else x


class Tracer(Tensor):
    """A value seen by a transform. Subclasses hold whatever their trace needs; all have an ``aval``.

    >>> def f(x):
    ...     print(isinstance(x, fl.Tracer), x.aval.str_short())
    ...     return x * 2
    >>> fl.grad(f)(fl.tensor(1.0))
    True f32[]
    Tensor(2., dtype=float32)
    """

    __slots__ = ("_trace",)

    @property
    def aval(self) -> ShapedArray:
        raise NotImplementedError

    @property
    def dtype(self):
        return self.aval.dtype

    @property
    def shape(self):
        return self.aval.shape

    @property
    def ndim(self) -> int:
        return self.aval.ndim

    @property
    def size(self) -> int:
        return self.aval.size

    def to_concrete(self, what: str):
        """The concrete value under this tracer, or a ConcretizationError that names the transform."""
        return self._trace.concretize(self, what)

    def numpy(self):
        return np.asarray(self._trace.export(self, "a NumPy array (.numpy())").numpy())

    def __array__(self, dtype=None, copy=None):
        return self._trace.export(self, "a NumPy array").__array__(dtype=dtype, copy=copy)

    def __bool__(self):
        return bool(self.to_concrete("bool"))

    def __float__(self):
        return float(self.to_concrete("float"))

    def __int__(self):
        return int(self.to_concrete("int"))

    def __complex__(self):
        return complex(self.to_concrete("complex"))

    def __index__(self):
        return self.to_concrete("an index").__index__()

    def item(self):
        return self.to_concrete("a Python scalar (.item())").item()

    def tolist(self):
        return self._trace.export(self, "a list (.tolist())").tolist()

    def __dlpack__(self, *a, **k):
        return self._trace.export(self, "DLPack").__dlpack__(*a, **k)

    def __dlpack_device__(self):
        return (1, 0)

    def __reduce__(self):
        raise TypeError(f"cannot pickle a traced value {self.aval.str_short()}")


# id(array) -> (weakref to the array, the DLPack producer whose memory it is): producers whose arrays are immutable
_DLPACK_SOURCES: dict[int, tuple[weakref.ref, Any]] = {}
_IMMUTABLE_PRODUCERS = ("jax", "jaxlib")


def remember_dlpack_source(arr: np.ndarray, source: Any) -> None:
    """Record that ``arr`` is the whole buffer of ``source``, a DLPack producer whose arrays never change (JAX), so
    exporting ``arr`` to a consumer of the pre-1.0 protocol can hand out ``source``'s own capsule instead of a
    copy."""
    if type(source).__module__.split(".")[0] not in _IMMUTABLE_PRODUCERS:
        return
    key = id(arr)
    _DLPACK_SOURCES[key] = (weakref.ref(arr, lambda _, k=key: _DLPACK_SOURCES.pop(k, None)), source)


def _dlpack_source(arr: np.ndarray) -> Any:
    hit = _DLPACK_SOURCES.get(id(arr))
    return hit[1] if hit is not None and hit[0]() is arr else None


def concrete_or_none(x):
    """The concrete Tensor behind ``x`` if there is one (e.g. the primal under ``grad``), else ``None``."""
    while isinstance(x, Tracer):
        try:
            x = x.to_concrete("a concrete value")
        except ConcretizationError:
            return None
    return x


def is_tensorlike(x: Any) -> bool:
    return isinstance(x, Tensor)


# ---------------------------------------------------------------------------------------------------------------
# Conversion of concrete values

PY_SCALARS = (bool, int, float, complex)


def array_from(obj, dtype=None, *, copy: bool | None = None, op: str = "asarray") -> np.ndarray:
    """The NumPy array of a concrete value, as ``fl.asarray`` builds a Tensor from it.

    A Tensor gives its own buffer; a writable NumPy array is copied (nobody may change a Tensor behind its back)
    and a read-only one shared; Python scalars and nested sequences take funclib's default dtypes (float32,
    int64, complex64); DLPack, ``__array__`` and buffer-protocol objects are read through NumPy. A traced value
    has no array yet and raises ``TypeError`` (``fl.asarray`` keeps it traced, stacking a sequence of them).

    >>> array_from([1.0, 2.0])
    array([1., 2.], dtype=float32)
    """
    want = dtypes.canonicalize(dtype) if dtype is not None else None
    if isinstance(obj, Tensor):
        if isinstance(obj, Tracer):
            raise TypeError(_traced_message(op, f"a traced {obj.aval.str_short()}"))
        v = obj._value
        if want is None or v.dtype == want:
            return v
        if copy is False:
            raise ValueError(f"{op}: converting {v.dtype.name} to {want.name} needs a copy, but copy=False")
        check_no_imaginary(v.dtype in dtypes.COMPLEX, want, op)
        return numpy_cast(v, want)
    if type(obj) in PY_SCALARS:
        d = want or dtypes.python_scalar_dtype(obj)
        check_scalar_fits(obj, d, op)
        check_no_imaginary(type(obj) is complex, d, op)
        return numpy_cast(obj, d)
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        if arr.dtype not in dtypes._KNOWN and arr.dtype.byteorder not in ("=", "|"):
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if arr.dtype not in dtypes._KNOWN:
            raise DTypeError(f"{op}: NumPy dtype {arr.dtype} is not supported by funclib")
        if want is not None and arr.dtype != want:
            if copy is False:
                raise ValueError(f"{op}: the dtype conversion needs a copy, but copy=False")
            check_no_imaginary(arr.dtype in dtypes.COMPLEX, want, op)
            return numpy_cast(arr, want)
        if isinstance(obj, np.generic) or not arr.flags.writeable:
            return arr.copy() if copy else arr
        if copy is False:
            raise ValueError(
                f"{op}: copy=False would share a writable NumPy buffer with an immutable Tensor; make the "
                "array read-only first (arr.flags.writeable = False) or allow a copy"
            )
        return arr.copy()
    if hasattr(obj, "__dlpack__") and not isinstance(obj, (list, tuple)):
        arr = np.from_dlpack(obj)
        return array_from(arr if not arr.flags.writeable else arr.copy(), dtype, op=op)
    if isinstance(obj, (list, tuple)):
        if holds_tracer(obj):
            raise TypeError(_traced_message(op, "a sequence holding traced values"))
        if any(isinstance(e, Tensor) for e in _leaves(obj)):
            obj = _tensors_to_numpy(obj)
        d = want or _python_dtype(obj)
        try:
            arr = numpy_cast(obj, d)
        except (ValueError, OverflowError) as e:
            raise ValueError(f"{op}: cannot convert the sequence to a tensor: {e}") from None
        if d is None and arr.dtype not in dtypes._KNOWN:
            raise DTypeError(f"{op}: the sequence holds values of unsupported type (NumPy dtype {arr.dtype})")
        return arr
    if hasattr(obj, "__array__"):
        return array_from(np.asarray(obj), dtype, copy=copy, op=op)
    try:
        view = memoryview(obj)
    except TypeError:
        view = None
    if view is not None:
        # buffer protocol: shared when read-only (bytes), else copied like a writable NumPy array
        return array_from(np.asarray(view), dtype, copy=copy, op=op)
    raise TypeError(
        f"{op}: cannot convert {type(obj).__name__} to a Tensor; pass a Tensor, a NumPy array, a Python "
        "scalar, a buffer or a nested list of them"
    )


_LOWP = frozenset(dtypes.LOW_PRECISION)


def numpy_cast(obj, d: np.dtype | None) -> np.ndarray:
    """``np.asarray(obj, dtype=d)``, saturating into float8 and wrapping into int4 as ``astype`` does."""
    if d in _LOWP:
        return lowp.astype(np.asarray(obj), d)
    return np.asarray(obj, dtype=d)


def holds_tracer(seq) -> bool:
    """Whether a nested list/tuple holds a traced value anywhere."""
    return any(isinstance(e, Tracer) for e in _leaves(seq))


def check_scalar_fits(v, d: np.dtype, op: str = "asarray") -> None:
    """Raise ``OutOfRangeError`` if the Python int ``v`` does not fit the integer dtype ``d``."""
    if (d in dtypes.INTEGER or d in dtypes.INT4) and isinstance(v, int) and not isinstance(v, bool):
        info = dtypes.iinfo(d)
        if not info.min <= v <= info.max:
            raise OutOfRangeError(
                f"{op}: Python int {v} does not fit in {d.name} [{info.min}, {info.max}]; pass a wider dtype"
            )


def _traced_message(op: str, what: str) -> str:
    return (
        f"{op}: {what} has no concrete value inside a transform; use fl.asarray, which keeps traced values traced "
        "(and stacks a sequence of them), or return the value from the transformed function for a concrete Tensor"
    )


def check_no_imaginary(is_complex: bool, d: np.dtype, op: str) -> None:
    """Refuse a conversion of complex values to the real dtype ``d`` (it would drop the imaginary part)."""
    if is_complex and d not in dtypes.COMPLEX:
        raise DTypeError(
            f"{op}: converting complex values to {d.name} would drop the imaginary part; use fl.real(x) or fl.abs(x)"
        )


def _leaves(obj):
    if isinstance(obj, (list, tuple)):
        for e in obj:
            yield from _leaves(e)
    else:
        yield obj


def _tensors_to_numpy(obj):
    if isinstance(obj, (list, tuple)):
        return [_tensors_to_numpy(e) for e in obj]
    if isinstance(obj, Tensor):
        return obj.numpy()
    return obj


def _python_dtype(obj) -> np.dtype | None:
    """The Array API default dtype for nested Python scalars (None if ``obj`` holds non-Python values)."""
    kinds = set()

    def walk(o):
        if isinstance(o, (list, tuple)):
            return all(walk(e) for e in o)
        if type(o) in PY_SCALARS:
            kinds.add(type(o))
            return True
        return False

    if not walk(obj):
        return None
    if complex in kinds:
        return dtypes.complex_default()
    if float in kinds:
        return dtypes.float_default()
    if int in kinds:
        return dtypes.default_int
    if bool in kinds:
        return dtypes.bool_
    return dtypes.float_default()  # empty list
