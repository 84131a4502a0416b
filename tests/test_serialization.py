"""fl.save / fl.load: round trips of trees, dtypes and non-tensor leaves; Module and optimizer checkpoints;
atomic writes; truncated, corrupt and mismatched files; plain safetensors files; PyTorch interop (when torch is
installed)."""

from __future__ import annotations

import json
import math
import os
import struct

import funclib.nn as nn
import funclib.optim as optim
import ml_dtypes
import numpy as np
import pytest

import funclib as fl
from funclib import random as R

try:
    import torch
except ImportError:
    torch = None


def assert_same(a, b):
    if isinstance(a, fl.Tensor):
        assert isinstance(b, fl.Tensor) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(
            np.asarray(a).astype(np.float64) if a.dtype == fl.bfloat16 else np.asarray(a),
            np.asarray(b).astype(np.float64) if b.dtype == fl.bfloat16 else np.asarray(b),
        )
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b and type(a) is type(b)


def test_round_trip_dtypes_and_leaves(tmp_path):
    rng = np.random.default_rng(0)
    tree = {
        "f32": fl.asarray(rng.standard_normal((3, 4)).astype(np.float32)),
        "f64": fl.asarray(rng.standard_normal(5)),
        "f16": fl.asarray(rng.standard_normal(2).astype(np.float16)),
        "bf16": fl.asarray(rng.standard_normal(3).astype(ml_dtypes.bfloat16)),
        "i64": fl.asarray(np.arange(6).reshape(2, 3)),
        "u8": fl.asarray(np.arange(4, dtype=np.uint8)),
        "bool": fl.asarray(np.array([True, False])),
        "scalar": fl.asarray(3.5),
        "empty": fl.zeros((0, 3)),
        "nested": [fl.ones(2), (1, 2.5, None, "text", True), {"inf": math.inf, "nan": math.nan, "neg": -0.1}],
        7: "int key",
        "np": np.arange(3.0),
    }
    path = tmp_path / "tree.safetensors"
    fl.save(tree, path)
    back = fl.load(path)
    want = dict(tree)
    want["np"] = fl.asarray(np.arange(3.0))
    assert_same(want, back)
    assert back["scalar"].shape == () and back["empty"].shape == (0, 3)
    with pytest.raises(TypeError, match="cannot store a function"):
        fl.save({"f": lambda: 0}, path)
    with pytest.raises(TypeError, match="dict keys"):
        fl.save({(1, 2): fl.ones(1)}, path)
    assert_same(want, fl.load(path))  # the failed saves left the file alone


def test_module_state_dict_round_trip(tmp_path):
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    model(fl.ones((2, 1, 4, 4)))
    path = tmp_path / "model.safetensors"
    fl.save(model.state_dict(), path)
    other = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    other.load_state_dict(fl.load(path))
    x = fl.asarray(np.random.default_rng(1).standard_normal((3, 1, 4, 4)).astype(np.float32))
    np.testing.assert_array_equal(other.eval()(x).numpy(), model.eval()(x).numpy())
    assert int(other[1].num_batches_tracked) == 1
    fl.save(model, tmp_path / "module.safetensors")  # a Module is stored as its state_dict
    restored = fl.load(tmp_path / "module.safetensors", like=other)
    assert restored is not other and type(restored) is nn.Sequential
    np.testing.assert_array_equal(restored(x).numpy(), model(x).numpy())
    with pytest.raises(nn.StateDictError, match=r"(?s)Unexpected key.*size mismatch for 0.weight"):
        fl.load(path, like=nn.Sequential(nn.Linear(8, 3)))


def test_checkpoint_with_optimizer_resumes_identically(tmp_path):
    model = nn.Linear(3, 2, key=R.key(0))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    x = fl.ones((4, 3))
    step = nn.value_and_grad(model, lambda: (model(x) ** 2).mean())
    for _ in range(3):
        opt.update(model, step()[1])
    fl.save(
        {"model": model.state_dict(), "optim": opt.state_dict(), "epoch": 3}, tmp_path / "ckpt.safetensors"
    )
    ck = fl.load(tmp_path / "ckpt.safetensors")
    model2 = nn.Linear(3, 2)
    model2.load_state_dict(ck["model"])
    opt2 = optim.Adam(model2.parameters(), lr=1.0)
    opt2.load_state_dict(ck["optim"])
    assert ck["epoch"] == 3 and opt2.param_groups[0]["betas"] == (0.9, 0.999)
    step2 = nn.value_and_grad(model2, lambda: (model2(x) ** 2).mean())
    for _ in range(2):
        opt.update(model, step()[1])
        opt2.update(model2, step2()[1])
    np.testing.assert_array_equal(model.weight.numpy(), model2.weight.numpy())


def test_like_checks_structure(tmp_path):
    tree = {"a": fl.ones((2, 2)), "b": [fl.zeros(3)]}
    path = tmp_path / "t.safetensors"
    fl.save(tree, path)
    assert_same(tree, fl.load(path, like=tree))
    with pytest.raises(fl.SerializationError, match="does not match"):
        fl.load(path, like={"a": fl.ones((2, 2))})
    with pytest.raises(fl.SerializationError, match=r"float32\[2, 2\] but `like` has float32\[3, 3\]"):
        fl.load(path, like={"a": fl.ones((3, 3)), "b": [fl.zeros(3)]})


def test_atomic_write_keeps_old_file(tmp_path, monkeypatch):
    import safetensors

    path = tmp_path / "ckpt.safetensors"
    fl.save({"w": fl.ones(3)}, path)

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(safetensors, "serialize_file", boom)
    with pytest.raises(OSError, match="disk full"):
        fl.save({"w": fl.zeros(3)}, path)
    monkeypatch.undo()
    np.testing.assert_array_equal(fl.load(path)["w"].numpy(), np.ones(3))
    assert os.listdir(tmp_path) == ["ckpt.safetensors"]  # no temporary file left behind


def _write(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


def test_truncated_corrupt_and_mismatched_files(tmp_path):
    good = tmp_path / "good.safetensors"
    fl.save({"w": fl.ones((4, 4)), "n": 1}, good)
    data = good.read_bytes()
    bad = tmp_path / "bad.safetensors"
    _write(bad, data[:-7])
    with pytest.raises(fl.SerializationError, match="truncated or corrupt"):
        fl.load(bad)
    _write(bad, data[:4])
    with pytest.raises(fl.SerializationError, match="truncated or not a safetensors file"):
        fl.load(bad)
    _write(bad, struct.pack("<Q", 10**6) + data[8:100])
    with pytest.raises(fl.SerializationError, match="header announces"):
        fl.load(bad)
    _write(bad, struct.pack("<Q", 5) + b"{oops" + b"\0" * 8)
    with pytest.raises(fl.SerializationError, match="corrupt header"):
        fl.load(bad)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    tree = json.loads(header["__metadata__"]["funclib.tree"])
    tree["dict"][0][1]["tensor"] = "missing"
    header["__metadata__"]["funclib.tree"] = json.dumps(tree)
    h = json.dumps(header).encode()
    _write(bad, struct.pack("<Q", len(h)) + h + data[8 + n :])
    with pytest.raises(fl.SerializationError, match="does not contain"):
        fl.load(bad)
    header["__metadata__"]["funclib.tree"] = json.dumps({"pickle": "os.system('echo pwned')"})
    h = json.dumps(header).encode()
    _write(bad, struct.pack("<Q", len(h)) + h + data[8 + n :])
    with pytest.raises(fl.SerializationError, match="unknown node"):
        fl.load(bad)
    with pytest.raises(FileNotFoundError, match="no such file"):
        fl.load(tmp_path / "nope.safetensors")


def test_plain_safetensors_files_load_as_dicts(tmp_path):
    from safetensors.numpy import save_file

    save_file(
        {"layer.weight": np.ones((2, 3), np.float32), "layer.bias": np.zeros(2, np.float32)},
        str(tmp_path / "plain.safetensors"),
    )
    sd = fl.load(tmp_path / "plain.safetensors")
    assert set(sd) == {"layer.weight", "layer.bias"} and sd["layer.weight"].shape == (2, 3)
    m = nn.Module()
    m.layer = nn.Linear(3, 2)
    m.load_state_dict(sd)
    np.testing.assert_array_equal(m.layer.weight.numpy(), np.ones((2, 3)))


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_torch_interop_both_ways(tmp_path):
    from safetensors.torch import load_file, save_file

    torch.manual_seed(0)
    tnet = torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 2)
    )
    tnet(torch.randn(8, 4))
    save_file(tnet.state_dict(), str(tmp_path / "torch.safetensors"))
    fnet = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.ReLU(), nn.Linear(3, 2))
    fnet.load_state_dict(fl.load(tmp_path / "torch.safetensors"))
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    tnet.eval()
    fnet.eval()
    np.testing.assert_allclose(
        fnet(fl.asarray(x)).numpy(), tnet(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    fl.save(fnet.state_dict(), tmp_path / "ours.safetensors")
    back = load_file(str(tmp_path / "ours.safetensors"))
    tnet2 = torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.ReLU(), torch.nn.Linear(3, 2)
    )
    tnet2.load_state_dict(back)
    assert back["1.num_batches_tracked"].dtype == torch.int64 and back["1.num_batches_tracked"].shape == ()


def test_files_that_are_not_safetensors_say_what_they_are(tmp_path):
    import pickle

    def load_error(name, data):
        p = tmp_path / name
        _write(p, data)
        with pytest.raises(fl.SerializationError) as e:
            fl.load(p)
        return str(e.value)

    msg = load_error("obj.pkl", pickle.dumps({"w": [1.0]}, protocol=4))
    assert "is a Python pickle (protocol 4)" in msg and "never unpickles" in msg, msg
    assert "is empty (0 bytes)" in load_error("empty.safetensors", b"")
    npy = tmp_path / "a.npy"
    np.save(npy, np.zeros(3))
    assert "NumPy .npy file" in load_error("a.bin", npy.read_bytes())
    npz = tmp_path / "a.npz"
    np.savez(npz, a=np.zeros(3))
    assert "NumPy .npz archive" in load_error("b.bin", npz.read_bytes())
    assert "HDF5" in load_error("k.h5", b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    assert "gzip" in load_error("g.gz", b"\x1f\x8b\x08" + b"\0" * 64)
    rng = np.random.default_rng(0)
    for i in range(20):  # random bytes: never "truncated", never an internal error
        data = rng.bytes(int(rng.integers(8, 300)))
        if data[8:9] == b"{" or data[:2] == b"PK" or data[:1] == b"\x80":
            continue
        msg = load_error(f"r{i}", data)
        assert "is not a safetensors file" in msg or "is a" in msg, msg
    assert "is not a safetensors file" in load_error("t.txt", b"hello world, this is text")
