"""The benchmark harness: interleaved timing, checks, ratios, the table and the JSON record."""

import json

import numpy as np
import pytest

from benchmarks import _harness as h


def _case(check=None):
    x = np.arange(4.0)
    return h.Case(
        "toy",
        setup=lambda: {
            "funclib": lambda: x + 1,
            "numpy": lambda: x + 1,
            "slow": lambda: [x + 1 for _ in range(50)][0],
        },
        calls=20,
        rounds=4,
        check=check,
    )


def test_run_case_samples_and_ratios():
    res = h.run_case(_case(h.allclose()))
    assert res.rounds == 4 and all(len(s) == 4 for s in res.samples.values())
    assert all(t > 0 for s in res.samples.values() for t in s)
    ratios = res.ratios()
    assert set(ratios) == {"funclib/numpy", "funclib/slow"}
    assert ratios["funclib/slow"] < 1
    record = json.loads(json.dumps(res.to_json()))
    assert record["per_call_s"]["numpy"]["min"] <= record["per_call_s"]["numpy"]["median"]
    table = h.format_table("title", [res])
    assert "funclib/slow" in table and "toy" in table.splitlines()[3]


def test_check_catches_disagreement():
    def setup():
        return {"funclib": lambda: np.ones(3), "numpy": lambda: np.zeros(3)}

    with pytest.raises(AssertionError, match="'funclib' disagrees with 'numpy'"):
        h.run_case(h.Case("bad", setup, calls=1, rounds=1, check=h.allclose()))


def test_optional_missing_library_is_a_note():
    assert h.optional("a_library_that_is_not_installed") is None
    assert any("a_library_that_is_not_installed" in n for n in h._notes)


def test_available_lists_modules():
    names = h.available()
    assert "eager" in names and "_harness" not in names and "__main__" not in names


def test_all_skips_a_benchmark_that_cannot_run_here_and_a_named_one_exits(monkeypatch, capsys):
    ran = []

    def fake_run(name, *args):
        if name == "gpu":
            raise SystemExit("benchmarks/gpu.py measures a CUDA GPU and none can be used here: no device")
        ran.append(name)
        return []

    monkeypatch.setattr(h, "available", lambda: ["eager", "gpu", "loops"])
    monkeypatch.setattr(h, "run_module", fake_run)
    assert h.main(["all", "--no-save"]) == 0
    assert ran == ["eager", "loops"]
    assert "== gpu: skipped: benchmarks/gpu.py measures a CUDA GPU" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="none can be used here"):
        h.main(["gpu", "--no-save"])
