"""``fl.load`` of PyTorch checkpoints: the fixture files of tests/fixtures/pt (written by PyTorch with
``make_fixtures.py`` there) load to exactly the values PyTorch saved, and hostile files are refused with an error
naming what they asked for, without running anything. PyTorch is not needed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections import OrderedDict
from pathlib import Path

import funclib.nn as nn
import ml_dtypes
import numpy as np
import pytest

import funclib as fl
from funclib import SerializationError, UnsafePickleError

HERE = Path(__file__).resolve().parent
FIX = HERE / "fixtures" / "pt"
EXPECTED = json.loads((FIX / "expected.json").read_text())
ARRAYS = np.load(FIX / "expected.npz", allow_pickle=False)

_DTYPES = {
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
    "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu,
}


def _dtype(name: str) -> np.dtype:
    return np.dtype(_DTYPES.get(name, name))


def _check(got, want, where: str) -> None:
    """``got`` (from fl.load) is exactly the tree ``want`` describes: containers, plain values, tensor bits."""
    (kind, v), *_ = want.items()
    if kind == "tensor":
        d = _dtype(want["dtype"])
        if d not in fl.dtypes._KNOWN:  # float8_e8m0fnu: no funclib dtype
            assert type(got) is np.ndarray and not got.flags.writeable, where
        else:
            assert type(got) is fl.Tensor, f"{where}: {type(got).__name__}"
        arr = np.asarray(got)
        assert arr.dtype == d and list(arr.shape) == want["shape"], f"{where}: {arr.dtype}{arr.shape}"
        bits = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
        np.testing.assert_array_equal(bits, ARRAYS[v], err_msg=where)
    elif kind in ("dict", "odict"):
        assert type(got) is (OrderedDict if kind == "odict" else dict), f"{where}: {type(got).__name__}"
        keys = [k.get("str", k.get("int")) for k, _ in v]
        assert list(got) == keys, where
        for (_, child), key in zip(v, keys):
            _check(got[key], child, f"{where}/{key}")
    elif kind in ("list", "tuple"):
        assert type(got) is (list if kind == "list" else tuple) and len(got) == len(v), where
        for i, (g, child) in enumerate(zip(got, v)):
            _check(g, child, f"{where}/{i}")
    elif kind == "value":
        assert got is v, where
    elif kind == "int":
        assert type(got) is int and got == int(v), where
    elif kind == "float":
        assert type(got) is float and got.hex() == v, where
    elif kind == "complex":
        assert got == complex(float.fromhex(v[0]), float.fromhex(v[1])), where
    elif kind == "str":
        assert got == v, where
    elif kind == "bytes":
        assert got == bytes.fromhex(v), where
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_loads_exactly(name):
    _check(fl.load(FIX / name), EXPECTED[name], name)


@pytest.mark.parametrize("name", ["dtypes_zip.pt", "views_zip.pt", "cnn_state_dict.pt"])
def test_mmap_gives_the_same_values(name):
    _check(fl.load(FIX / name, mmap=True), EXPECTED[name], name)


def test_format_is_recognized_by_bytes_not_name(tmp_path):
    p = tmp_path / "weights.safetensors"
    shutil.copy(FIX / "views_zip.pt", p)
    _check(fl.load(p), EXPECTED["views_zip.pt"], "renamed")


def test_loaded_tensors_are_read_only_and_share_the_file_buffer():
    tree = fl.load(FIX / "views_zip.pt")
    base, view = tree["base"].numpy(), tree["offset_slice"].numpy()
    assert not base.flags.writeable and not view.flags.writeable
    assert np.shares_memory(base, view)  # one storage, as saved: views are not copied
    with pytest.raises(ValueError):
        view[0] = 1.0


def test_views_keep_their_strides():
    tree = fl.load(FIX / "views_zip.pt")
    assert tree["transposed"].numpy().strides == (4, 24)
    assert tree["expanded"].numpy().strides == (0, 0)
    assert tree["scalar_from_index"].shape == () and float(tree["scalar_from_index"]) == 3.5


def test_loaded_tensors_compute():
    tree = fl.load(FIX / "views_zip.pt")
    t = tree["transposed"]
    np.testing.assert_array_equal((t * 2.0).numpy(), t.numpy() * 2)
    np.testing.assert_array_equal(fl.jit(lambda x: fl.sum(x * x, axis=0))(t).numpy(), (t.numpy() ** 2).sum(0))
    g = fl.grad(lambda x: fl.sum(fl.sin(x)))(tree["block"])
    np.testing.assert_allclose(g.numpy(), np.cos(tree["block"].numpy()), rtol=1e-6)


def _digits_cnn() -> nn.Module:
    sys.path.insert(0, str(HERE.parent / "examples"))
    try:
        from train_digits import make_cnn
    finally:
        sys.path.pop(0)
    return make_cnn(fl.random.key(1))


def test_state_dict_loads_into_the_twin_model():
    model = _digits_cnn()
    sd = fl.load(FIX / "cnn_state_dict.pt")
    model.load_state_dict(sd)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), sd[k].numpy(), err_msg=k)
    assert int(model.state_dict()["1.num_batches_tracked"]) == 3
    model.eval()
    x = fl.asarray(np.random.default_rng(0).standard_normal((2, 1, 8, 8)).astype(np.float32))
    assert model(x).shape == (2, 10)
    # the template form gives a loaded copy
    loaded = fl.load(FIX / "cnn_state_dict.pt", like=_digits_cnn())
    np.testing.assert_array_equal(loaded[0].weight.numpy(), sd["0.weight"].numpy())


# ---------------------------------------------------------------------------------------------------------------
# Hostile files: refused, naming what they asked for; nothing runs


HOSTILE = {
    "hostile_module.pt": (UnsafePickleError, "torch.nn.modules.linear.Linear"),
    "hostile_reduce_system.pt": (UnsafePickleError, "posix.system"),
    "hostile_reduce_eval.pt": (UnsafePickleError, "__builtin__.eval"),
    "hostile_legacy_header.pt": (UnsafePickleError, "posix.system"),
    "hostile_setitems_list.pt": (UnsafePickleError, "SETITEMS to a list"),
    "hostile_setitems_tensor.pt": (UnsafePickleError, "SETITEMS to a tensor"),
    "hostile_build_tensor.pt": (UnsafePickleError, "BUILD .* to a tensor"),
    "hostile_storage_too_big.pt": (SerializationError, "declares 1000 elements .* holds 16 bytes"),
    "hostile_legacy_count.pt": (SerializationError, "declared with 4 elements but its data says 4000"),
    "hostile_view_past_storage.pt": (SerializationError, "reaches element 11 of storage '0', which holds 4"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_is_refused(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the payloads would create their pwned_* files
    err, pattern = HOSTILE[name]
    with pytest.raises(err, match=pattern) as info:
        fl.load(FIX / name)
    assert name in str(info.value)
    if err is UnsafePickleError and "global" in str(info.value):
        assert "run code" in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_hostile_payloads_are_real():
    """The payload files do run code when unpickled without restrictions (the refusals above are meaningful)."""
    with zipfile.ZipFile(FIX / "hostile_reduce_system.pt") as z:
        pkl = z.read([n for n in z.namelist() if n.endswith("data.pkl")][0])
    assert b"posix\nsystem" in pkl and b"touch pwned_system" in pkl


def test_loading_never_imports_torch_or_runs_payloads(tmp_path):
    script = f"""
import sys, glob
import funclib as fl
for f in sorted(glob.glob({str(FIX)!r} + "/*.pt")):
    try:
        fl.load(f)
    except fl.SerializationError:
        pass
assert "torch" not in sys.modules, "funclib imported torch"
"""
    subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True, timeout=120)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------------------------
# Corrupt files


def _rewrite(src: Path, dst: Path, edit) -> None:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info))
            if data is not None:
                zout.writestr(info.filename, data)


def test_missing_storage_entry(tmp_path):
    p = tmp_path / "x.pt"
    _rewrite(FIX / "views_zip.pt", p, lambda n, d: None if "/data/" in n else d)
    with pytest.raises(SerializationError, match="refers to storage .* does not contain"):
        fl.load(p)


def test_truncated_files(tmp_path):
    for name in ("views_zip.pt", "views_legacy.pt"):
        data = (FIX / name).read_bytes()
        for cut in (20, len(data) // 2, len(data) - 3):
            p = tmp_path / f"cut_{cut}_{name}"
            p.write_bytes(data[:cut])
            with pytest.raises(SerializationError, match=name.split(".")[0] or "truncated"):
                fl.load(p)


def test_truncated_pickle(tmp_path):
    p = tmp_path / "x.pt"
    _rewrite(FIX / "views_zip.pt", p, lambda n, d: d[:-30] if n.endswith("data.pkl") else d)
    with pytest.raises(SerializationError, match="truncated|corrupt"):
        fl.load(p)


def test_unknown_opcode_is_named(tmp_path):
    p = tmp_path / "x.pt"
    # INST builds an instance of any class by name
    _rewrite(FIX / "views_zip.pt", p, lambda n, d: b"\x80\x02(iposix\nsystem\n." if n.endswith("data.pkl") else d)
    with pytest.raises(UnsafePickleError, match="opcode INST"):
        fl.load(p)


def test_cycle_is_refused(tmp_path):
    p = tmp_path / "x.pt"
    # a list appended to itself
    _rewrite(FIX / "views_zip.pt", p, lambda n, d: b"\x80\x02]q\x00h\x00a." if n.endswith("data.pkl") else d)
    with pytest.raises(SerializationError, match="cycle"):
        fl.load(p)


def test_unsupported_torch_dtype_names_it(tmp_path):
    p = tmp_path / "x.pt"
    # dtypes_zip's first float8 tensor, relabelled as complex32 (same pickle otherwise)
    _rewrite(FIX / "dtypes_zip.pt", p, lambda n, d: d.replace(b"ctorch\nfloat8_e4m3fn\n", b"ctorch\ncomplex32\n")
             if n.endswith("data.pkl") else d)
    with pytest.raises(SerializationError, match="complex32, which has no NumPy equivalent"):
        fl.load(p)


def test_saved_and_loaded_round_trip_through_fl_save(tmp_path):
    sd = fl.load(FIX / "cnn_state_dict.pt")
    fl.save(sd, tmp_path / "cnn.safetensors")
    back = fl.load(tmp_path / "cnn.safetensors")
    for k in sd:
        np.testing.assert_array_equal(back[k].numpy(), sd[k].numpy())
