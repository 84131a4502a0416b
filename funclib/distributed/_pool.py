"""Output buffers for collectives across processes, reused once every tensor made from them is gone.

A fresh output per Allreduce costs a page fault and a zeroed page for every 4 KB it receives (for 64 MB, about a
third of the Allreduce itself), which a loop that drops each result before the next call does not need to pay.

The pool hands out each buffer as ``np.frombuffer(memoryview(owner))``. NumPy records that memoryview as the
array's base, and a view's base collapses only through arrays (to the nearest one that owns its memory or has a
non-array base), so every view, slice or reshape of the result references the handed-out array itself, as does
anything that exports its buffer. A weak reference to that array is therefore dead exactly when nothing can
read or write the memory any more; until then the buffer is never handed out again.

Buffers of 2 MB and more are mapped aligned to 2 MB and advised for transparent huge pages (Linux), so the kernel
backs them with whole 2 MB pages where it can: a 4 MB Allreduce received into 4 KB pages took about 1.6x as long as
into 2 MB pages (2 ranks, MPICH), and ``np.empty`` leaves such a buffer's coverage to chance (its start is not
aligned, and NumPy advises only from 4 MB on).
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref

import numpy as np

from funclib import config

MIN_BYTES = 1 << 16  # below this, malloc reuses memory on its own: a pooled buffer would cost more than it saves
HUGE_PAGE = 2 << 20
MAX_PER_SIZE = 8  # buffers of one size kept (a step holds few collective outputs of one size alive at a time)


class BufferPool:
    """Receive buffers keyed by size in bytes, at most ``fl.config.distributed_buffer_pool_mb`` held in all."""

    def __init__(self):
        self._by_size: dict[int, list[list]] = {}  # nbytes -> [owner, weakref to the handed-out array or None, tick]
        self._held = 0
        self._tick = 0
        self._lock = threading.Lock()

    @property
    def held_bytes(self) -> int:
        """Memory the pool holds, in use or free."""
        return self._held

    def take(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A C-contiguous array of ``shape`` and ``dtype`` with undefined contents, owned by the caller until it
        (and every view of it) is garbage."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        limit = int(config.distributed_buffer_pool_mb * (1 << 20))
        if nbytes < MIN_BYTES or nbytes > limit:
            return np.empty(shape, dtype)
        with self._lock:
            self._tick += 1
            entries = self._by_size.setdefault(nbytes, [])
            for e in entries:
                if e[1] is None or e[1]() is None:
                    return self._hand_out(e, shape, dtype)
            if len(entries) >= MAX_PER_SIZE:
                return np.empty(shape, dtype)
            if self._held + nbytes > limit and not self._evict(self._held + nbytes - limit):
                return np.empty(shape, dtype)
            e = [_allocate(nbytes), None, 0]
            entries.append(e)
            self._held += nbytes
            return self._hand_out(e, shape, dtype)

    def _hand_out(self, e: list, shape: tuple, dtype: np.dtype) -> np.ndarray:
        out = np.frombuffer(memoryview(e[0]), dtype)
        e[1] = weakref.ref(out)
        e[2] = self._tick
        return out.reshape(shape)

    def _evict(self, need: int) -> bool:
        """Drop free buffers, least recently used first, until ``need`` bytes are released; False if it cannot."""
        free = sorted(
            ((e[2], size, e) for size, entries in self._by_size.items() for e in entries
             if e[1] is None or e[1]() is None),
            key=lambda t: t[0],
        )
        released = 0
        for _, size, e in free:
            if released >= need:
                break
            entries = self._by_size[size]
            del entries[next(i for i, x in enumerate(entries) if x is e)]  # by identity: == would compare arrays
            self._held -= size
            released += size
        return released >= need

    def clear(self) -> None:
        """Drop every buffer: free ones are released, those in use live on with their tensors (each handed-out
        array references its memory) and are not reused."""
        with self._lock:
            self._by_size.clear()
            self._held = 0


def _allocate(nbytes: int) -> np.ndarray:
    """``nbytes`` of uint8, starting on a 2 MB boundary of memory advised for huge pages where the platform allows."""
    if nbytes < HUGE_PAGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.empty(nbytes, np.uint8)
    m = mmap.mmap(-1, nbytes + HUGE_PAGE, flags=mmap.MAP_PRIVATE)  # private: shared memory gets no huge pages
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except OSError:  # a kernel without transparent huge pages: ordinary pages
        pass
    whole = np.frombuffer(m, np.uint8)
    start = -whole.ctypes.data % HUGE_PAGE
    return whole[start : start + nbytes]
