"""Loading a 64 MiB PyTorch checkpoint (a state_dict of 16 float32 (1024, 1024) weights and 16 biases).

funclib: ``fl.load(path)`` (and ``mmap=True``). Peers: ``torch.load(path, weights_only=True)`` (and
``mmap=True``), which need PyTorch, also to write the file; NumPy's variant is reading the file's bytes, the floor
any reader pays. The file is written once per process, so every read after the first comes from the page cache.
Cases for the zip format and for the legacy format (``_use_new_zipfile_serialization=False``).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import numpy as np

from benchmarks._harness import Case, optional

_DIR: list[str] = []


def _checkpoint(torch, legacy: bool) -> str:
    if not _DIR:
        _DIR.append(tempfile.mkdtemp(prefix="pt_load-"))
        atexit.register(shutil.rmtree, _DIR[0], True)
    path = os.path.join(_DIR[0], "legacy.pt" if legacy else "zip.pt")
    if not os.path.exists(path):
        g = torch.Generator().manual_seed(0)
        sd = {}
        for i in range(16):
            sd[f"layer{i}.weight"] = torch.randn(1024, 1024, generator=g)
            sd[f"layer{i}.bias"] = torch.randn(1024, generator=g)
        torch.save(sd, path, _use_new_zipfile_serialization=not legacy)
    return path


def _read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def _check(outputs):
    ours = outputs["funclib"]
    for k, v in outputs["torch"].items():
        np.testing.assert_array_equal(np.asarray(ours[k]), v.numpy(), err_msg=k)


def _setup(legacy: bool, mmap: bool):
    import funclib as fl

    torch = optional("torch")
    path = _checkpoint(torch, legacy)
    variants = {
        "funclib": lambda: fl.load(path, mmap=mmap),
        "numpy": (lambda: np.memmap(path, mode="r")) if mmap else (lambda: _read_bytes(path)),
        "torch": lambda: torch.load(path, weights_only=True, mmap=mmap),
    }
    return variants


def cases() -> list[Case]:
    if optional("torch") is None:
        return []
    return [
        Case(
            f"{'legacy' if legacy else 'zip'} format, 64 MiB{', mmap' if mmap else ''}",
            setup=lambda legacy=legacy, mmap=mmap: _setup(legacy, mmap),
            calls=1 if not mmap else 20,
            rounds=11,
            check=_check,
        )
        for legacy, mmap in ((False, False), (False, True), (True, False))
    ]
