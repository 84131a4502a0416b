"""funclib.distributed on real ranks: scripts in tests/distributed/ run under mpiexec on the loopback (127.0.0.1
only), each launch with a timeout, many checks per launch (starting ranks costs about a second).

The scripts exit non-zero on the first failed check; an uncaught exception aborts every rank, so a failure can
never hang the suite past the timeout.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "distributed"
HAVE_MPI = importlib.util.find_spec("mpi4py") is not None
needs_mpi = pytest.mark.skipif(not HAVE_MPI, reason="needs the dist extra: pip install funclib[dist]")


def _env() -> dict:
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        env[var] = "1"
    return env


def run(args: list[str], timeout: float) -> tuple[int, str, float]:
    """Run a command in its own process group; on timeout the whole group is killed and the test fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(),
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"{' '.join(args)} still running after {timeout} s (a hang):\n{out[-3000:]}")
    return proc.returncode, out, time.perf_counter() - start


def launch(script: str, n: int, timeout: float = 240) -> str:
    if n == 1:
        cmd = [sys.executable, str(HERE / script)]
    else:
        cmd = [sys.executable, "-m", "funclib.distributed.launch", "-n", str(n), str(HERE / script)]
    rc, out, _ = run(cmd, timeout)
    assert rc == 0, f"{script} on {n} ranks exited with {rc}:\n{out[-6000:]}"
    for k in range(n):
        assert f"rank {k}: " in out, out[-3000:]
    return out


@needs_mpi
@pytest.mark.parametrize("n", [1, 2, 4])
def test_every_collective_matches_one_process(n):
    launch("collectives.py", n)


@needs_mpi
@pytest.mark.parametrize("n", [1, 2, 4])
def test_data_parallel_and_sharded_training_match_one_process(n):
    launch("training.py", n)


@needs_mpi
def test_a_rank_that_raises_ends_every_rank_with_its_error(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text(
        "import funclib as fl\n"
        "D = fl.distributed\n"
        "D.spmd(lambda v: fl.psum(v, 'data'))(fl.ones(2))\n"
        "if D.rank() == 1:\n"
        "    raise ValueError('rank one broke on purpose')\n"
        "D.spmd(lambda v: fl.psum(v, 'data'))(fl.ones(2))  # rank 0 would wait here forever without the abort\n"
        "print('rank 0 went on')\n"
    )
    rc, out, took = run([sys.executable, "-m", "funclib.distributed.launch", "-n", "2", str(script)], timeout=120)
    assert rc != 0, out
    assert "ValueError: rank one broke on purpose" in out and "rank 1 of 2" in out, out
    assert "went on" not in out
    # without a launcher's python -m mpi4py: init() installed the abort
    rc, out, _ = run([find("mpiexec"), "-n", "2", "-iface", "lo", "-host", "127.0.0.1", sys.executable, str(script)],
                     timeout=120)
    assert rc != 0 and "rank one broke on purpose" in out, out


def find(name: str) -> str:
    from funclib.distributed.launch import find_mpiexec

    return find_mpiexec(gforker=name.endswith("gforker"))


def test_import_funclib_does_not_load_mpi():
    code = "import sys, funclib, funclib.nn, funclib.optim; print('mpi4py' in sys.modules)"
    rc, out, _ = run([sys.executable, "-c", code], timeout=120)
    assert rc == 0 and out.strip().endswith("False"), out


def test_without_the_extra_every_entry_point_names_it():
    code = (
        "import sys; sys.modules['mpi4py'] = None\n"
        "import funclib as fl, funclib.nn as nn, funclib.optim as optim\n"
        "for call in (fl.distributed.init, lambda: fl.distributed.spmd(lambda x: x)(1.0),\n"
        "             lambda: nn.parallel.DistributedDataParallel(nn.Linear(2, 1)),\n"
        "             lambda: nn.parallel.FullyShardedDataParallel(nn.Linear(2, 1)),\n"
        "             lambda: optim.ZeroRedundancyOptimizer(nn.Linear(2, 1), optim.SGD, lr=0.1)):\n"
        "    try:\n"
        "        call()\n"
        "        print('no error')\n"
        "    except fl.distributed.DistributedError as e:\n"
        "        assert 'pip install funclib[dist]' in str(e), e\n"
        "print('all named the extra')\n"
    )
    rc, out, _ = run([sys.executable, "-c", code], timeout=120)
    assert rc == 0 and "all named the extra" in out and "no error" not in out, out
    rc, out, _ = run([sys.executable, "-c", "import sys; sys.modules['mpi4py'] = None\n"
                      "from funclib.distributed.launch import main; sys.exit(main(['-n', '2', 'x.py']))"], timeout=120)
    assert rc == 2 and "pip install funclib[dist]" in out, out


def test_sampler_shards_cover_the_dataset_once_per_epoch():
    from funclib.distributed import DistributedSampler

    for n_items, ranks, drop in [(10, 3, False), (10, 3, True), (7, 2, False), (0, 2, False), (5, 8, False)]:
        shards = [DistributedSampler(n_items, num_replicas=ranks, rank=k, seed=1, drop_last=drop) for k in range(ranks)]
        for s in shards:
            s.set_epoch(2)
        got = [list(s) for s in shards]
        assert len({len(g) for g in got}) == 1 and all(len(g) == len(s) for g, s in zip(got, shards))
        flat = [i for g in got for i in g]
        if drop:
            assert len(set(flat)) == len(flat) == (n_items // ranks) * ranks
        else:
            assert set(flat) == set(range(n_items)) and len(flat) == -(-n_items // ranks) * ranks
    a, b = DistributedSampler(10, num_replicas=2, rank=0), DistributedSampler(10, num_replicas=2, rank=0)
    b.set_epoch(1)
    assert list(a) != list(b), "a new epoch must reshuffle"
    with pytest.raises(ValueError, match="rank 2 is outside 0..1"):
        DistributedSampler(10, num_replicas=2, rank=2)


def test_bad_arguments_name_the_function_and_the_fix():
    import funclib as fl

    with pytest.raises(TypeError, match="spmd: axis_name must be one name"):
        fl.distributed.spmd(lambda x: x, axis_name=("a", "b"))
    with pytest.raises(ValueError, match="ppermute: lane 0 is the source of more than one pair"):
        fl.vmap(lambda v: fl.ppermute(v, "i", [(0, 1), (0, 2)]), axis_name="i")(fl.ones(3))
    with pytest.raises(ValueError, match="outside axis 'i' of size 3"):
        fl.vmap(lambda v: fl.ppermute(v, "i", [(0, 3)]), axis_name="i")(fl.ones(3))
    with pytest.raises(ValueError, match=r"psum_scatter: the leading axis .* size 3"):
        fl.vmap(lambda v: fl.psum_scatter(v, "i"), axis_name="i")(fl.ones((3, 2)))
    with pytest.raises(fl.errors.FunclibError, match="run in chunks"):
        fl.vmap(lambda v: fl.ppermute(v, "i", [(0, 1)]), axis_name="i", chunk_size=2)(fl.ones(3))
    from funclib.primitives.collectives import UnboundAxisError

    with pytest.raises(UnboundAxisError, match="fl.distributed.spmd"):
        fl.psum(fl.ones(2), "data")
    import funclib.nn as nn

    for wrapper in (nn.parallel.DistributedDataParallel, nn.parallel.FullyShardedDataParallel):
        with pytest.raises(ValueError, match=f"{wrapper.__name__}: batch_layout must be 'strided'.*got 'rows'"):
            wrapper(nn.Linear(2, 1), batch_layout="rows")


def test_pooled_buffers_are_reused_only_when_nothing_refers_to_them(monkeypatch):
    import numpy as np

    import funclib as fl
    from funclib.core import _wrap
    from funclib.distributed._pool import MAX_PER_SIZE, MIN_BYTES, BufferPool

    monkeypatch.setattr(fl.config, "distributed_buffer_pool_mb", 1)
    pool = BufferPool()
    shape = (MIN_BYTES // 4,)
    derived = {
        "a slice": lambda a: a[3:7],
        "a reshaped transpose": lambda a: a.reshape(2, -1).T,
        "a tensor's numpy view": lambda a: _wrap(a).numpy(),  # a collective's output becomes a tensor so
        "a tensor": _wrap,
        "a memoryview": memoryview,
        "np.frombuffer": lambda a: np.frombuffer(a, np.uint8),
    }
    for what, derive in derived.items():
        a = pool.take(shape, np.float32)
        assert a.shape == shape and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
        addr = a.ctypes.data
        survivor = derive(a)
        del a
        others = [pool.take(shape, np.float32) for _ in range(3)]
        assert all(b.ctypes.data != addr for b in others), f"handed out again while {what} of it was alive"
        del survivor, others
        assert pool.take(shape, np.float32).ctypes.data == addr, f"not reused once {what} was gone"
    c = pool.take((MIN_BYTES // 16, 2), np.float64)  # the same size in bytes, another dtype and shape
    assert c.shape == (MIN_BYTES // 16, 2) and c.dtype == np.float64 and c.flags.c_contiguous

    # bounded: at most MAX_PER_SIZE buffers of one size, and the memory limit, evicting the least recently used
    held = [pool.take(shape, np.float32) for _ in range(MAX_PER_SIZE + 2)]
    assert pool.held_bytes == MAX_PER_SIZE * MIN_BYTES
    del held, c
    big = pool.take((3 << 18,), np.uint8)  # 768 KiB: frees the least recently used buffers to fit under 1 MiB
    assert pool.held_bytes <= 1 << 20 and big.size == 3 << 18
    assert pool.take((2 << 20,), np.uint8).size == 2 << 20  # over the limit: plain memory, not held
    assert pool.held_bytes <= 1 << 20
    assert pool.take((16,), np.float32).base is None  # under MIN_BYTES: plain memory
    monkeypatch.setattr(fl.config, "distributed_buffer_pool_mb", 0)
    assert pool.take(shape, np.float32).base is None  # 0 turns reuse off
    pool.clear()
    assert pool.held_bytes == 0


def test_pool_evicts_a_free_buffer_behind_one_in_use(monkeypatch):
    import numpy as np

    import funclib as fl
    from funclib.distributed._pool import MIN_BYTES, BufferPool

    monkeypatch.setattr(fl.config, "distributed_buffer_pool_mb", 1)
    pool = BufferPool()
    kept, dropped = pool.take((MIN_BYTES,), np.uint8), pool.take((MIN_BYTES,), np.uint8)
    kept[:] = 7
    del dropped
    big = pool.take(((1 << 20) - MIN_BYTES,), np.uint8)  # fits only once the free buffer, second of its size, goes
    assert big.size == (1 << 20) - MIN_BYTES and pool.held_bytes == 1 << 20
    assert (kept == 7).all()


def test_pooled_buffers_are_reused_only_when_unreferenced_and_large_ones_sit_on_huge_page_boundaries():
    import mmap

    import numpy as np

    from funclib.distributed._pool import HUGE_PAGE, BufferPool

    pool = BufferPool()
    big = pool.take((HUGE_PAGE // 4 + 3,), np.float32)  # 2 MB and 12 bytes
    if hasattr(mmap, "MADV_HUGEPAGE"):
        assert big.ctypes.data % HUGE_PAGE == 0
    big[:] = 7.0
    row = big[5:9]
    del big
    again = pool.take((HUGE_PAGE // 4 + 3,), np.float32)
    assert again.ctypes.data != row.ctypes.data - 20 and row.tolist() == [7.0] * 4, "a live view's memory was reused"
    held = pool.held_bytes
    del row, again
    for _ in range(3):
        out = pool.take((HUGE_PAGE // 4 + 3,), np.float32)
        out[-1] = 1.0
        del out
    assert pool.held_bytes == held
    small = pool.take((100,), np.float64)  # below the pool's minimum: plain memory
    assert small.shape == (100,) and pool.held_bytes == held
