"""Timing harness: variants of one computation timed in interleaved rounds in one process.

Every case builds its variants (``funclib``, ``numpy`` and, when installed, ``torch``/``jax``), optionally
checks that they agree, warms each up with one untimed block, then times ``rounds`` blocks of ``calls`` calls
per variant. Rounds go round-robin over the variants, starting one later each round, so background load and
frequency changes hit all of them alike. The report gives the per-call median and minimum of each variant and
the ratio of funclib's median to each peer's (above 1: funclib is slower), as a table and as JSON in
``benchmarks/results/<name>.json``.

Example, ``benchmarks/neg.py``, run with ``python -m benchmarks neg``::

    import numpy as np

    import funclib as fl
    from benchmarks._harness import Case, allclose

    def cases():
        def setup():
            x = np.ones(16, np.float32)
            t = fl.asarray(x)
            return {"funclib": lambda: -t, "numpy": lambda: -x}

        return [Case("neg f32[16]", setup, calls=1000, check=allclose())]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import gc
import importlib
import importlib.metadata
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "XLA_FLAGS",
    "OPENBLAS_CORETYPE",
)
_VERSIONED = ("funclib", "numpy", "numba", "ml_dtypes", "optree", "torch", "jax", "jaxlib")

_notes: list[str] = []
ALL_CPUS: set[int] | None = None  # the CPUs the process may use; ``__main__`` pins timing to one of them
_imported: dict[str, Any] = {}


@dataclasses.dataclass
class Case:
    """One benchmark case.

    Args:
        name: the label in the table and the JSON.
        setup: builds the inputs and returns ``{variant: zero-argument callable}``; include "funclib" and
            "numpy", and "torch"/"jax" when ``optional`` finds them.
        calls: calls per timed block; a block's time divided by ``calls`` is one per-call sample.
        rounds: timed blocks per variant.
        check: optional ``check({variant: output})``, run once before timing; it raises if variants disagree
            (see ``allclose``).
    """

    name: str
    setup: Callable[[], dict[str, Callable[[], Any]]]
    calls: int = 1000
    rounds: int = 15
    check: Callable[[dict[str, Any]], None] | None = None


@dataclasses.dataclass
class Result:
    name: str
    calls: int
    rounds: int
    samples: dict[str, list[float]]

    def median(self, variant: str) -> float:
        return statistics.median(self.samples[variant])

    def ratios(self) -> dict[str, float]:
        if "funclib" not in self.samples:
            return {}
        ours = self.median("funclib")
        return {f"funclib/{v}": ours / self.median(v) for v in self.samples if v != "funclib"}

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "calls_per_block": self.calls,
            "rounds": self.rounds,
            "per_call_s": {
                v: {"median": statistics.median(s), "min": min(s), "samples": s}
                for v, s in self.samples.items()
            },
            "ratios_of_medians": self.ratios(),
        }


def optional(name: str) -> Any:
    """Import a peer library (``"torch"``, ``"jax.numpy"``, ...) pinned to one thread; None if not installed.

    A missing library adds a note to the report instead of failing: its variants are simply left out.
    """
    if name in _imported:
        return _imported[name]
    top = name.split(".")[0]
    try:
        mod = importlib.import_module(name)
    except ImportError:
        mod = None
        note = f"{top} is not installed: its variants are skipped"
        if note not in _notes:
            _notes.append(note)
    else:
        if top == "torch":
            torch = sys.modules["torch"]
            torch.set_num_threads(1)
            try:
                torch.set_num_interop_threads(1)
            except RuntimeError:  # only allowed before torch starts parallel work
                pass
    _imported[name] = mod
    return mod


def to_numpy(x: Any) -> np.ndarray:
    """Any variant's output as a NumPy array (torch tensors are detached and moved to the CPU)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
    return np.asarray(x)


def allclose(
    rtol: float = 1e-6, atol: float = 0.0, reference: str = "numpy"
) -> Callable[[dict[str, Any]], None]:
    """A ``check`` that every variant's output is close to the ``reference`` variant's."""

    def check(outputs: dict[str, Any]) -> None:
        ref = to_numpy(outputs[reference])
        for variant, out in outputs.items():
            got = to_numpy(out)
            if got.shape != ref.shape:
                raise AssertionError(
                    f"variant {variant!r} has shape {got.shape}, {reference!r} has {ref.shape}"
                )
            np.testing.assert_allclose(
                got.astype(np.float64),
                ref.astype(np.float64),
                rtol=rtol,
                atol=atol,
                err_msg=f"variant {variant!r} disagrees with {reference!r}",
            )

    return check


# wall time, or the CPU time of the whole process (every thread, a peer's worker threads included), which a
# machine shared with other jobs inflates far less: a process waiting for a core accrues none
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_clock = {"name": "wall"}


def _block(fn: Callable[[], Any], calls: int) -> float:
    clock = CLOCKS[_clock["name"]]
    t0 = clock()
    for _ in itertools.repeat(None, calls):
        fn()
    return (clock() - t0) / calls


def run_case(case: Case, rounds: int | None = None) -> Result:
    """Check, warm up and time one case. What is timed is the compiled program: a jitted function's first call runs
    eagerly while its kernels compile in the background, so the warm-up starts once they are in use."""
    fns = case.setup()
    if case.check is not None:
        case.check({v: f() for v, f in fns.items()})
    else:
        for f in fns.values():
            f()
    fl = sys.modules.get("funclib")
    if fl is not None:
        fl.config.wait_for_compilation()
    for f in fns.values():
        _block(f, case.calls)
    if fl is not None and fl.config.whole_program_hot_calls > 0:
        # a program of many steps becomes hot after whole_program_hot_calls calls, compiles as one function in the
        # background, then is timed against its steps for a few calls: time what it settles on
        more = fl.config.whole_program_hot_calls - case.calls
        for v, f in fns.items():
            if v.startswith("funclib") and more > 0:
                _block(f, more)
        if not fl.config.wait_for_compilation(timeout=0):
            fl.config.wait_for_compilation()
            for v, f in fns.items():
                if v.startswith("funclib"):
                    _block(f, max(case.calls, 8))
    rounds = rounds or case.rounds
    names = list(fns)
    samples: dict[str, list[float]] = {v: [] for v in names}
    for r in range(rounds):
        gc.collect()
        k = r % len(names)
        for v in names[k:] + names[:k]:
            samples[v].append(_block(fns[v], case.calls))
    return Result(case.name, case.calls, rounds, samples)


def _fmt_time(s: float) -> str:
    for unit, scale in (("ns", 1e-9), ("us", 1e-6), ("ms", 1e-3)):
        if s < 1000 * scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s:.3g} s"


def format_table(title: str, results: Sequence[Result]) -> str:
    variants: list[str] = []
    for res in results:
        variants += [v for v in res.samples if v not in variants]
    ratio_cols: list[str] = []
    for res in results:
        ratio_cols += [r for r in res.ratios() if r not in ratio_cols]
    header = ["case"] + [f"{v} median (min)" for v in variants] + ratio_cols
    rows = [header]
    for res in results:
        row = [res.name]
        for v in variants:
            s = res.samples.get(v)
            row.append(f"{_fmt_time(statistics.median(s))} ({_fmt_time(min(s))})" if s else "-")
        ratios = res.ratios()
        row += [f"{ratios[c]:.2f}x" if c in ratios else "-" for c in ratio_cols]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [title]
    for i, row in enumerate(rows):
        lines.append(
            "  ".join(
                cell.ljust(w) if j == 0 else cell.rjust(w) for j, (cell, w) in enumerate(zip(row, widths))
            )
        )
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=BENCH_DIR, capture_output=True, text=True, timeout=5, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def environment() -> dict[str, Any]:
    """Machine, library versions and thread settings, for the JSON record."""
    versions = {}
    for dist in _VERSIONED:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "threads": {k: os.environ.get(k) for k in THREAD_VARS},
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "versions": versions,
        "git_commit": _git_commit(),
    }


def available() -> list[str]:
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.stem.startswith("_"))


def run_module(
    name: str, rounds: int | None = None, name_filter: str = "", save: bool = True
) -> list[Result]:
    """Run ``benchmarks/<name>.py``: print its table and write ``results/<name>.json``."""
    module = importlib.import_module(f"benchmarks.{name}")
    if not hasattr(module, "cases"):
        if not hasattr(module, "main"):
            raise SystemExit(f"benchmarks/{name}.py defines neither cases() nor main()")
        print(f"== {name} (standalone script, not timed by the harness)", flush=True)
        argv, sys.argv = sys.argv, [str(BENCH_DIR / f"{name}.py")]
        pinned = os.sched_getaffinity(0) if ALL_CPUS else None
        try:
            if ALL_CPUS:
                # standalone scripts start processes of their own (ranks, compile workers, fresh interpreters),
                # which inherit the mask: they get every core, as a user's would
                os.sched_setaffinity(0, ALL_CPUS)
            module.main()
        finally:
            sys.argv = argv
            if pinned is not None:
                os.sched_setaffinity(0, pinned)
        return []
    _notes.clear()
    started = datetime.datetime.now(datetime.UTC)
    results = []
    for case in module.cases():
        if name_filter and name_filter not in case.name:
            continue
        results.append(run_case(case, rounds))
        print(f"  {case.name}: done", file=sys.stderr, flush=True)
    clock = "" if _clock["name"] == "wall" else f", {_clock['name']} time"
    print(format_table(f"== {name}: time per call, median (min) over interleaved rounds{clock}", results))
    for note in _notes:
        print(f"note: {note}")
    if save and results:
        RESULTS_DIR.mkdir(exist_ok=True)
        record = {
            "benchmark": name,
            "started": started.isoformat(timespec="seconds"),
            "environment": environment(),
            "notes": list(_notes),
            "clock": _clock["name"],
            "cases": [r.to_json() for r in results],
        }
        path = RESULTS_DIR / f"{name}.json"
        path.write_text(json.dumps(record, indent=1))
        print(f"wrote {path.relative_to(BENCH_DIR.parent)}")
    print(flush=True)
    return results


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description="Run funclib benchmarks.")
    ap.add_argument("names", nargs="+", help=f"benchmark names ({', '.join(available())}) or 'all'")
    ap.add_argument("--rounds", type=int, default=None, help="timed blocks per variant (default: per case)")
    ap.add_argument("--filter", default="", help="only cases whose name contains this text")
    ap.add_argument("--no-save", action="store_true", help="do not write results/<name>.json")
    ap.add_argument(
        "--clock",
        choices=sorted(CLOCKS),
        default="wall",
        help="wall time (default) or the process's CPU time over all its threads (steadier on a loaded machine)",
    )
    args = ap.parse_args(argv)
    _clock["name"] = args.clock
    names = available() if "all" in args.names else list(args.names)
    unknown = [n for n in names if n not in available()]
    if unknown:
        ap.error(f"no benchmark named {', '.join(unknown)}; available: {', '.join(available())}")
    run_all = "all" in args.names
    for name in names:
        try:
            run_module(name, args.rounds, args.filter, not args.no_save)
        except SystemExit as e:
            # under 'all', a benchmark this machine cannot run (gpu.py without a GPU) says why and the rest run
            if not run_all or not isinstance(e.code, str):
                raise
            print(f"== {name}: skipped: {e.code}\n", flush=True)
    return 0
