"""The kernel cache on disk: private whatever the umask, refused when others could write it, and never trusted
blindly (a cut-short, random or misplaced file is recompiled). Tests that read the disk run in fresh interpreters,
so that no kernel comes from the in-memory table."""

import json
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from funclib.kernels import diskcache

import funclib as fl

# two kernels (an elementwise nest and a reduction); prints results, numba's disk-cache hits/misses, warnings
_SCRIPT = textwrap.dedent(
    """
    import json, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        import numpy as np, funclib as fl
        from funclib.kernels import diskcache
        f = fl.jit(lambda x: fl.tanh(x * 2.0 + 1.0) * x - 0.5)
        g = fl.jit(lambda x: fl.sum(fl.exp(x) * x))
        x = fl.asarray(np.linspace(-1, 1, 64, dtype=np.float32))
        vals = [np.asarray(f(x)).tolist(), float(g(x))]
    stats = [k.stats for k in diskcache._loaded.values()]
    print(json.dumps({
        "vals": vals,
        "kernels": len(stats),
        "hits": sum(sum(s.cache_hits.values()) for s in stats),
        "misses": sum(sum(s.cache_misses.values()) for s in stats),
        "warnings": [str(w.message) for w in caught if issubclass(w.category, fl.errors.KernelCacheWarning)],
    }))
    """
)


def _env(cache) -> dict:
    return dict(os.environ, FUNCLIB_CACHE_DIR=str(cache))


def _result(returncode: int, stdout: str, stderr: str) -> dict:
    assert returncode == 0, stderr
    assert "Traceback" not in stderr, stderr
    return json.loads(stdout.strip().splitlines()[-1])


def _run(cache) -> dict:
    r = subprocess.run([sys.executable, "-c", _SCRIPT], env=_env(cache), capture_output=True, text=True)
    return _result(r.returncode, r.stdout, r.stderr)


def _modes(root) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def _valid(path) -> bool:
    with open(path, "rb") as f:
        return diskcache._unseal(f.read()) is not None


def test_cache_is_private_under_umask_000_with_concurrent_writers(tmp_path):
    """Two processes with umask 000 compile the same kernels into a new cache at once; a third loads them."""
    cache = tmp_path / "made" / "by" / "funclib"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _SCRIPT],
            env=_env(cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: os.umask(0),
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    first = [_result(p.returncode, *out) for p, out in zip(procs, outputs)]
    assert first[0]["vals"] == first[1]["vals"]
    assert all(o["warnings"] == [] and o["kernels"] == 2 for o in first)
    for p in (tmp_path / "made", tmp_path / "made" / "by", cache):
        assert stat.S_IMODE(p.stat().st_mode) == 0o700, p
    modes = _modes(cache)
    assert sum(n.endswith(".py") for n in modes) == 2 and sum(n.endswith(".nbc") for n in modes) >= 2, modes
    # every file 0600; no temporary left, no subdirectory (Python's bytecode, numba's __pycache__)
    assert all(m == 0o600 for m in modes.values()), modes
    assert all(n.startswith(("k_", "funclib.kernels.")) and n.endswith((".py", ".nbc")) for n in modes), modes
    assert any(n.startswith("funclib.kernels.vmath.") for n in modes), modes  # funclib's own numba functions too
    assert all(_valid(cache / n) for n in modes if n.endswith(".nbc"))
    again = _run(cache)
    assert again["vals"] == first[0]["vals"]
    assert again["hits"] == 2 and again["misses"] == 0
    assert _modes(cache) == modes


def _damage(path, how: str, rng) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(rng.integers(0, 256, len(data), dtype=np.uint8).tobytes())


def test_damaged_cache_files_are_detected_and_rebuilt(tmp_path):
    cache = tmp_path / "c"
    ref = _run(cache)
    sources = sorted(cache.glob("k_*.py"))
    compiled = sorted(cache.glob("*.nbc"))
    texts = {p: p.read_bytes() for p in sources}
    rng = np.random.default_rng(0)
    kernels = [p for p in compiled if p.name.startswith("k_")]
    # funclib's own functions (vmath's) share the code path: damaged in the first round only, to save compiling
    damages = (("truncated", "random"), ("random", "truncated"), ("empty", "empty"))
    for i, (how_source, how_compiled) in enumerate(damages):
        for p in sources:
            _damage(p, how_source, rng)
        for p in compiled if i == 0 else kernels:
            _damage(p, how_compiled, rng)
        out = _run(cache)
        assert out["vals"] == ref["vals"] and out["warnings"] == [], how_compiled
        assert out["hits"] == 0 and out["misses"] >= 2, (how_compiled, out)
        assert all(p.read_bytes() == texts[p] for p in sources), how_source
        assert all(_valid(p) for p in compiled), how_compiled
    # a whole, valid file of another kernel under this kernel's name belongs to another key: a miss, not a swap
    kernels = [p for p in kernels if ".kernel." in p.name]
    assert len(kernels) == 2
    a, b = kernels[0].read_bytes(), kernels[1].read_bytes()
    kernels[0].write_bytes(b)
    kernels[1].write_bytes(a)
    out = _run(cache)
    assert out["vals"] == ref["vals"] and out["hits"] == 0 and out["misses"] >= 2
    # every file repaired
    out = _run(cache)
    assert out["hits"] == 2 and out["misses"] == 0 and all(_valid(p) for p in compiled)


# -- refused and unusable directories (in this process: each test uses a new path and a new kernel source) --------

_n_sources = iter(range(10**6))


def _source() -> tuple[str, float]:
    """A kernel module no other test loads (its constant differs), so load_kernel consults the directory."""
    c = next(_n_sources) + 0.25
    src = textwrap.dedent(
        f"""
        import numba

        @numba.njit(nogil=True)
        def kernel(x):
            return x * 2.0 + {c!r}
        """
    )
    return src, 2.0 + c


def _load_with(monkeypatch, cache) -> list:
    """Load and run two new kernels with ``cache`` as the cache dir; returns the KernelCacheWarnings."""
    monkeypatch.setenv("FUNCLIB_CACHE_DIR", str(cache))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            src, expected = _source()
            assert diskcache.load_kernel(src)(1.0) == expected
    return [w for w in caught if issubclass(w.category, fl.errors.KernelCacheWarning)]


def _refused(monkeypatch, cache, reason: str, unchanged: bool = True) -> None:
    before = _modes(cache) if unchanged and os.path.isdir(cache) else None
    caught = _load_with(monkeypatch, cache)  # the kernels compile in memory and run
    assert len(caught) == 1, [str(w.message) for w in caught]  # one warning for the process, not one per kernel
    msg = str(caught[0].message)
    assert reason in msg and str(cache) in msg and "FUNCLIB_CACHE_DIR" in msg, msg
    assert caught[0].filename == __file__  # it points at the caller's line, not into funclib
    if before is not None:
        assert _modes(cache) == before  # nothing written there


def test_private_directory_is_used(monkeypatch, tmp_path):
    cache = tmp_path / "ok"
    assert _load_with(monkeypatch, cache) == []
    assert len(list(cache.glob("k_*.py"))) == 2 and len(list(cache.glob("*.nbc"))) == 2
    assert diskcache.load_kernel(_source()[0]).stats.cache_path == str(cache)


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o722])
def test_directory_writable_by_others_is_refused(monkeypatch, tmp_path, mode):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(mode)
    _refused(monkeypatch, cache, "writable by group or others")


def test_parent_writable_by_others_is_refused_unless_sticky(monkeypatch, tmp_path):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)
    _refused(monkeypatch, parent / "cache", "parent writable by group or others")
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    assert _load_with(monkeypatch, sticky / "cache") == []
    assert list((sticky / "cache").glob("*.nbc"))


def test_directory_of_another_user_is_refused(monkeypatch, tmp_path):
    if os.geteuid() == 0:
        cache = tmp_path / "theirs"
        cache.mkdir(mode=0o700)
        os.chown(cache, 65534, 65534)
        _refused(monkeypatch, cache, "owned by another user")
    else:
        _refused(monkeypatch, "/", "owned by another user", unchanged=False)


def test_unusable_paths_fall_back_to_memory(monkeypatch, tmp_path):
    (tmp_path / "file").write_text("")
    _refused(monkeypatch, tmp_path / "file", "is not a directory")
    _refused(monkeypatch, tmp_path / "file" / "cache", "cannot be created")
    if os.geteuid() != 0:  # root writes through permissions
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        _refused(monkeypatch, ro, "is not writable")


def test_failed_write_falls_back_to_memory_with_one_warning(monkeypatch, tmp_path):
    def fail(path, data):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(diskcache, "write_atomic", fail)
    _refused(monkeypatch, tmp_path / "c", "cannot be written (Read-only file system)")


def test_funclib_functions_recompile_when_the_vector_math_changes(monkeypatch):
    # threefry's samplers and the eager ufuncs inline vmath's functions, so their cached machine code is stale when
    # vmath.py changes even though their own module did not
    from funclib.kernels import threefry, ufuncs

    class Codegen:
        def magic_tuple(self):
            return ("cpu",)

    for fn in (threefry.normal32, ufuncs._erf_scalar):
        py_func = getattr(fn, "py_func", fn)
        cache = diskcache.DiskCache(py_func, py_func.__module__, diskcache._source_stamp(py_func))
        before = cache._key("sig", Codegen())
        monkeypatch.setattr(diskcache, "VMATH_VERSION", "another vmath")
        assert cache._key("sig", Codegen()) != before
        monkeypatch.undo()
