"""The jit lowering's seams: the plan follows the emitter's capabilities, every kernel, allocation and unfused
equation goes through the emitter, and the modules' examples run."""

import doctest
import importlib

import numpy as np
import pytest
from funclib.kernels.backend import Emitter, Kernel
from funclib.kernels.numba_cpu import CPU
from funclib.transforms import steps
from funclib.transforms.lowering import body_program, compile_program
from funclib.transforms.plan import plan_program

import funclib as fl


class Recording:
    """An emitter that is the CPU's, except that it records what the lowering asks of it and may refuse ops."""

    def __init__(self, name="recording", refuse=()):
        self.name = name
        self.carrier = CPU.carrier
        self.refuse = set(refuse)
        self.calls: list[str] = []

    def supports(self, op, dtypes_in, dtype_out):
        return op not in self.refuse and CPU.supports(op, dtypes_in, dtype_out)

    def __getattr__(self, attr):
        fn = getattr(CPU, attr)

        def record(*args, **kwargs):
            self.calls.append(attr)
            return fn(*args, **kwargs)

        return record


def _jaxpr(f, *args):
    return fl.jit(f).trace(*args).jaxpr


def _model(x, w, h0, xs):
    y = fl.softmax(fl.tanh(x @ w) * 2.0 + 1.0, axis=-1)

    def body(h, xi):
        h = fl.tanh(h * 0.5 + xi)
        return h, h

    h, hs = fl.scan(body, h0, xs)
    return y, h, fl.sum(hs, axis=0)


def _args():
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (3, 5), (2,), (6, 2))]


def test_cpu_is_an_emitter():
    assert isinstance(CPU, Emitter)
    jaxpr = _jaxpr(lambda x: fl.exp(x) + 1.0, fl.zeros((2, 3)))
    region = plan_program(jaxpr, CPU).steps[0].what
    shapes = [region.in_shapes[0]]
    kernel = CPU.fused_kernel(region.kernel_spec(*region.collapse(shapes)), 3)
    assert isinstance(kernel, Kernel) and "def kernel(" in kernel.source


def test_every_kernel_and_allocation_goes_through_the_emitter(monkeypatch):
    monkeypatch.setattr(fl.config, "whole_programs", False)  # each kind of step is what is checked
    args = _args()
    emitter = Recording()
    prog = compile_program(_jaxpr(_model, *map(fl.asarray, args)), emitter=emitter)
    got = prog.run(args)
    want = fl.jit(_model)(*map(fl.asarray, args))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.numpy())
    calls = set(emitter.calls)
    # the matmul and the scan's body go through primitive/loop_kernel; softmax is staged; the rest is fused
    assert {"fused_kernel", "staged_kernel", "loop_kernel", "primitive", "empty"} <= calls, calls


def test_the_plan_follows_the_emitter_capabilities():
    f = lambda x: fl.exp(x) * 2.0 + fl.sin(x)  # noqa: E731
    jaxpr = _jaxpr(f, fl.zeros((3, 4)))
    assert [s.kind for s in plan_program(jaxpr, CPU).steps] == ["fused"]
    emitter = Recording(refuse={"exp"})
    plan = plan_program(jaxpr, emitter)
    assert [(s.kind, s.label) for s in plan.steps] == [("eqn", "exp"), ("fused", "fused[mul, sin, add]")]
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    (got,) = compile_program(jaxpr, emitter=emitter).run([x])
    np.testing.assert_allclose(got, f(fl.asarray(x)).numpy(), rtol=2e-7)


def test_body_programs_are_compiled_once_per_emitter():
    cj = fl.make_jaxpr(lambda x: fl.exp(x) * 2.0)(fl.zeros(3))
    a, b = Recording("a"), Recording("b")
    assert body_program(cj, a) is body_program(cj, a)
    assert body_program(cj, b) is not body_program(cj, a)


@pytest.mark.parametrize(
    "module",
    [
        "funclib.kernels.backend",
        "funclib.kernels.numba_cpu",
        "funclib.transforms.plan",
        "funclib.transforms.program",
        "funclib.transforms.lowering",
        "funclib.transforms.export._codec",
        "funclib.transforms.export._batch",
    ],
)
def test_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0, result


def _adam_like(p, m, g):
    m = 0.9 * m + 0.1 * g
    return p - 0.01 * m / (fl.sqrt(m * m) + 1e-8), m


def _adam_args(seed, shape=(300, 256)):  # 300 KiB per array: recycled (see NumbaCPU.recycler)
    rng = np.random.default_rng(seed)
    return [fl.asarray(rng.standard_normal(shape).astype(np.float32)) for _ in range(3)]


def test_outputs_a_caller_keeps_are_never_recycled():
    f = fl.jit(_adam_like)
    kept = []
    for seed in range(4):
        args = _adam_args(seed)
        out = f(*args)
        view = out[1].numpy()[5:7]  # a view keeps its base alive, so the base is not handed out again
        kept.append((out, view, [o.numpy().copy() for o in out], view.copy()))
    for seed, (out, view, values, view_value) in enumerate(kept):
        want = _adam_like(*_adam_args(seed))
        for o, v, w in zip(out, values, want):
            np.testing.assert_array_equal(o.numpy(), v)
            np.testing.assert_allclose(v, w.numpy(), rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(view, view_value)


def test_state_loop_reuses_buffers_and_stays_correct():
    f = fl.jit(_adam_like)
    p, m, g = _adam_args(0)
    ep, em = p, m
    addresses = set()
    for _ in range(6):
        p, m = f(p, m, g)
        ep, em = _adam_like(ep, em, g)
        addresses.add(p.numpy().ctypes.data)
    np.testing.assert_allclose(p.numpy(), ep.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.numpy(), em.numpy(), rtol=1e-5, atol=1e-6)
    # the previous call's result is this call's input, the one before is free again: two buffers take turns
    assert len(addresses) <= 3, addresses


def test_concurrent_calls_get_their_own_buffers():
    import threading

    f = fl.jit(_adam_like)
    f(*_adam_args(0))
    errors = []

    def work(seed):
        args = _adam_args(seed)
        want = [w.numpy() for w in _adam_like(*args)]
        for _ in range(15):
            got = f(*args)
            for g, w in zip(got, want):
                if not np.allclose(g.numpy(), w, rtol=1e-6, atol=1e-7):
                    errors.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_only_the_program_results_keep_buffers_between_calls(monkeypatch):
    # an intermediate's buffer is freed within the call: recycling it would keep every activation alive between
    # calls (and undo checkpoint's savings); a result's buffer is the one a `state = step(state)` loop reuses
    monkeypatch.setattr(fl.config, "whole_programs", False)

    def f(x, w):
        h = fl.tanh(x) * 2.0  # 256 KiB, read by the matmul only
        return fl.sin(h @ w) * 3.0  # 256 KiB, the result

    x, w = np.ones((256, 256), np.float32), np.eye(256, dtype=np.float32)
    prog = compile_program(_jaxpr(f, fl.asarray(x), fl.asarray(w)))
    fused = [fn for fn, *_ in prog.steps if isinstance(fn, steps.FusedStep)]
    assert len(fused) == 2
    assert fused[0].recyclers == [None]
    assert fused[1].recyclers[0] is not None
    (got,) = prog.run([x, w])
    np.testing.assert_allclose(got, np.sin(np.tanh(x) * 2) * 3, rtol=1e-5)
