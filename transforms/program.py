"""``Program``: a planned program with its executable steps, run as generated straight-line Python.

>>> import numpy as np
>>> import funclib as fl
>>> from funclib.transforms.lowering import compile_program
>>> prog = compile_program(fl.jit(lambda x: fl.exp(x) * 2.0).trace(fl.zeros(2)).jaxpr)
>>> print(prog.describe())
[1] = fused[exp, mul][0]
>>> prog.run([np.zeros(2, np.float32)])
[array([2., 2.], dtype=float32)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from funclib.kernels.backend import Emitter

from .plan import ProgramPlan


class Program:
    """``run(args)`` runs the steps in order over numbered slots; ``kernels`` are the steps with generated source
    (what ``jit(f).lower(...)`` shows), ``fallbacks()`` the primitives running their NumPy impl."""

    __slots__ = ("in_slots", "out_slots", "consts", "steps", "describe_lines", "kernels", "fallback_names", "_run")

    def __init__(self, plan: ProgramPlan, fns: Sequence[Callable], emitter: Emitter):
        self.in_slots = list(plan.in_slots)
        self.out_slots = list(plan.out_slots)
        self.consts = [(s, emitter.asarray(v)) for s, v in plan.consts]  # (slot, value on the device)
        self.steps = [(fn, st.ins, st.outs, st.multi, st.frees) for fn, st in zip(fns, plan.steps)]
        self.describe_lines = [f"{st.outs} = {st.label}{st.ins}" for st in plan.steps]
        self.kernels = [fn for fn in fns if hasattr(fn, "source")]
        self.fallback_names = set(plan.fallbacks)
        self._run = None

    def run(self, args: list) -> list:
        """The outputs for ``args`` (one array per input slot)."""
        run = self._run
        if run is None:
            run = self._run = self._straight_line()
        return run(args)

    def _straight_line(self):
        """``run`` as generated straight-line Python: one local per slot, one line per step, ``del`` after a value's
        last use. An interpreted loop over ``steps`` with an environment list cost 4-6 us more per call."""
        const_slots = {s for s, _ in self.consts}
        ns: dict = {f"k{s}": v for s, v in self.consts}

        def name(s):
            return f"k{s}" if s in const_slots else f"v{s}"

        lines = ["def run(args):"]
        if self.in_slots:
            lines.append(f"    {''.join(name(s) + ', ' for s in self.in_slots)}= args")
        for i, (fn, ins, outs, multi, frees) in enumerate(self.steps):
            ns[f"f{i}"] = fn
            call = f"f{i}({', '.join(name(s) for s in ins)})"
            target = "".join(name(s) + ", " for s in outs) if multi else name(outs[0])
            lines.append(f"    {target} = {call}" if target else f"    {call}")
            dead = [name(s) for s in frees if s not in const_slots]
            if dead:
                lines.append(f"    del {', '.join(dead)}")
        lines.append(f"    return [{', '.join(name(s) for s in self.out_slots)}]")
        exec(compile("\n".join(lines), "<funclib program>", "exec"), ns)
        return ns["run"]

    def kernel_sources(self) -> list[str]:
        return [k.source for k in self.kernels]

    def fallbacks(self) -> list[str]:
        return sorted(self.fallback_names)

    def describe(self) -> str:
        return "\n".join(self.describe_lines)
