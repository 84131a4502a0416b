"""Op-table rows for the sparse products and the segment reductions (funclib/primitives/sparse.py, segment.py).

``tests/op_table.py`` appends ``ROWS`` to its table. Patterns are drawn with repeated entries and padding
(indices equal to the dimension) in both layouts; segment ids include out-of-range ones, which are dropped.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from op_table import REAL, Row, bind, distinct, values

from funclib import dtypes as D

ROWS: list[Row] = []
F = (D.float32, D.float64)


@st.composite
def _pattern_cfg(draw, dtype):
    m, k, n = (draw(st.integers(1, 3)) for _ in range(3))
    nse = draw(st.integers(0, 6))
    layout = draw(st.sampled_from(["coo", "csr"]))
    return {"m": m, "k": k, "n": n, "nse": nse, "layout": layout, "transpose": draw(st.booleans())}


def _pattern(draw, cfg):
    """``idx0, cols`` and the COO rows of a drawn pattern: repeated entries, and padding past the real ones."""
    m, k, nse = cfg["m"], cfg["k"], cfg["nse"]
    real = draw(st.integers(0, nse))
    rows = np.sort(np.asarray(draw(st.lists(st.integers(0, m - 1), min_size=real, max_size=real)), np.int64))
    cols = np.asarray(draw(st.lists(st.integers(0, k - 1), min_size=real, max_size=real)), np.int64)
    rows = np.concatenate([rows, np.full(nse - real, m)]).astype(np.int64)
    cols = np.concatenate([cols, np.full(nse - real, k)]).astype(np.int64)
    if cfg["layout"] == "csr":
        counts = np.bincount(rows[:real], minlength=m)[:m]
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), cols, rows
    return rows, cols, rows


def _dense_matrix(v, rows, cols, m, k):
    a = np.zeros((m, k), v.dtype)
    ok = (rows < m) & (cols < k)
    np.add.at(a, (rows[ok], cols[ok]), v[ok])
    return a


def _spmm_sample(draw, cfg, dtype, smooth):
    idx0, cols, rows = _pattern(draw, cfg)
    cfg["_rows"] = rows
    r = cfg["m"] if cfg["transpose"] else cfg["k"]
    return [values(draw, dtype, (cfg["nse"],)), idx0, cols, values(draw, dtype, (r, cfg["n"]))]


def _spmm_ref(cfg, v, idx0, cols, dense):
    a = _dense_matrix(v, cfg["_rows"], cols, cfg["m"], cfg["k"])
    return (a.T if cfg["transpose"] else a) @ dense


def _params(cfg, transpose=True):
    p = {"shape": (cfg["m"], cfg["k"]), "layout": cfg["layout"]}
    if transpose:
        p["transpose"] = cfg["transpose"]
    return p


ROWS.append(
    Row(
        "spmm",
        lambda cfg, v, i0, c, d: bind("spmm", v, i0, c, d, **_params(cfg)),
        _pattern_cfg,
        _spmm_sample,
        _spmm_ref,
        F,
        linear=((0,), (3,)),
        tol=10.0,
    )
)


def _sddmm_sample(draw, cfg, dtype, smooth):
    idx0, cols, rows = _pattern(draw, cfg)
    cfg["_rows"] = rows
    return [values(draw, dtype, (cfg["m"], cfg["n"])), values(draw, dtype, (cfg["k"], cfg["n"])), idx0, cols]


def _sddmm_ref(cfg, x, y, idx0, cols):
    rows = cfg["_rows"]
    ok = (rows < cfg["m"]) & (cols < cfg["k"])
    full = x @ y.T
    return np.where(ok, full[np.minimum(rows, cfg["m"] - 1), np.minimum(cols, cfg["k"] - 1)], 0.0)


ROWS.append(
    Row(
        "sddmm",
        lambda cfg, x, y, i0, c: bind("sddmm", x, y, i0, c, **_params(cfg, transpose=False)),
        _pattern_cfg,
        _sddmm_sample,
        _sddmm_ref,
        F,
        linear=((0,), (1,)),
        tol=10.0,
    )
)


@st.composite
def _segment_cfg(draw, dtype):
    return {
        "n": draw(st.integers(0, 5)),
        "rest": tuple(draw(st.lists(st.integers(1, 3), max_size=2))),
        "num": draw(st.integers(0, 3)),
    }


def _segment_sample_for(kind):
    def sample(draw, cfg, dtype, smooth):
        shape = (cfg["n"],) + cfg["rest"]
        # distinct values where derivatives are checked: no ties at a segment's extremum
        data = distinct(draw, dtype, shape) if smooth and dtype in F else values(draw, dtype, shape)
        n = cfg["n"]
        if smooth and kind != "sum":
            # no empty segment either: its -inf/+inf has no finite differences
            cfg["num"] = min(cfg["num"], n)
            ids = np.asarray(draw(st.permutations(np.arange(n) % max(cfg["num"], 1))), np.int64)
        else:
            ids = np.asarray(draw(st.lists(st.integers(-1, cfg["num"]), min_size=n, max_size=n)), np.int64)
        return [data, ids]

    return sample


def _segment_ref_for(kind):
    def ref(cfg, data, ids):
        num = cfg["num"]
        if kind == "sum":
            init = 0
        elif data.dtype.kind == "f":
            init = -np.inf if kind == "max" else np.inf
        else:
            info = np.iinfo(data.dtype)
            init = info.min if kind == "max" else info.max
        out = np.full((num,) + data.shape[1:], init, data.dtype)
        ok = (ids >= 0) & (ids < num)
        {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind].at(out, ids[ok], data[ok])
        return out

    return ref


for _kind in ("sum", "max", "min"):
    ROWS.append(
        Row(
            f"segment_{_kind}",
            lambda cfg, x, i, _k=_kind: bind(f"segment_{_k}", x, i, num_segments=cfg["num"]),
            lambda dtype: _segment_cfg(dtype),
            _segment_sample_for(_kind),
            _segment_ref_for(_kind),
            REAL,
            linear=((0,),) if _kind == "sum" else (),
        )
    )
