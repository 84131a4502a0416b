"""funclib.nn: Module mechanics, layers against independent NumPy references (forward and gradients),
finite-difference derivative checks, BatchNorm under transforms, functional entry points, bad inputs, and
PyTorch interop (skipped when torch is not installed)."""

from __future__ import annotations

import copy
import math

import funclib.nn as nn
import funclib.nn.functional as F
import numpy as np
import pytest

import funclib as fl
from funclib import random as R
from funclib.errors import DTypeError, ShapeError
from funclib.testing import check_grads

try:
    import torch
except ImportError:  # the parity checks need torch; everything else does not
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

RNG = np.random.default_rng(0)


def a64(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, size=shape)


def t64(*shape, lo=-1.0, hi=1.0):
    return fl.asarray(a64(*shape, lo=lo, hi=hi))


def close(a, b, tol=1e-10):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


def num_grad(f, x, eps=1e-6):
    """Central differences of a scalar NumPy function ``f`` at ``x`` (an independent reference)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


# ---------------------------------------------------------------------------------------------------------------
# Independent NumPy references


def np_conv2d(x, w, b, stride, pad, dil, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for oc in range(o):
        g = oc // og
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for bb in range(kw):
                        patch = xp[
                            :, g * cg : (g + 1) * cg, i * stride[0] + a * dil[0], j * stride[1] + bb * dil[1]
                        ]
                        out[:, oc, i, j] += patch @ w[oc, :, a, bb]
    if b is not None:
        out += b[None, :, None, None]
    return out


def np_conv_transpose2d(x, w, b, stride, pad, out_pad, groups, dil):
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = cin // groups
    fh = (h - 1) * stride[0] + dil[0] * (kh - 1) + 1 + out_pad[0]
    fw = (wd - 1) * stride[1] + dil[1] * (kw - 1) + 1 + out_pad[1]
    full = np.zeros((n, og * groups, fh, fw))
    for ci in range(cin):
        g = ci // cg
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for bb in range(kw):
                        full[
                            :, g * og : (g + 1) * og, i * stride[0] + a * dil[0], j * stride[1] + bb * dil[1]
                        ] += x[:, ci, i, j][:, None] * w[ci, :, a, bb][None, :]
    oh = (h - 1) * stride[0] - 2 * pad[0] + dil[0] * (kh - 1) + out_pad[0] + 1
    ow = (wd - 1) * stride[1] - 2 * pad[1] + dil[1] * (kw - 1) + out_pad[1] + 1
    out = full[:, :, pad[0] : pad[0] + oh, pad[1] : pad[1] + ow]
    if b is not None:
        out = out + b[None, :, None, None]
    return out


def np_pool2d(x, k, s, p, kind, ceil_mode=False, count_include_pad=True):
    n, c, h, w = x.shape

    def osz(size, kk, ss, pp):
        span = size + 2 * pp - kk
        o = (-(-span // ss) if ceil_mode else span // ss) + 1
        if ceil_mode and (o - 1) * ss >= size + pp:
            o -= 1
        return o

    oh, ow = osz(h, k[0], s[0], p[0]), osz(w, k[1], s[1], p[1])
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s[0] - p[0], j * s[1] - p[1]
            h1, w1 = min(h0 + k[0], h + p[0]), min(w0 + k[1], w + p[1])
            size = (h1 - h0) * (w1 - w0)
            hs, ws, he, we = max(h0, 0), max(w0, 0), min(h1, h), min(w1, w)
            region = x[:, :, hs:he, ws:we]
            if kind == "max":
                out[:, :, i, j] = region.max(axis=(2, 3))
            else:
                div = size if count_include_pad else (he - hs) * (we - ws)
                out[:, :, i, j] = region.sum(axis=(2, 3)) / div
    return out


def np_adaptive_avg(x, oh, ow):
    n, c, h, w = x.shape
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[:, :, i, j] = x[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return out


def np_log_softmax(z, axis=-1):
    m = z.max(axis=axis, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=axis, keepdims=True))


def np_sigmoid(z):
    return 1 / (1 + np.exp(-z))


# ---------------------------------------------------------------------------------------------------------------
# The seed example and Module mechanics


def test_seed_example_runs_unchanged():
    import funclib as torch_  # noqa: F401  (the example's `import funclib as torch`)

    src = """
import funclib as torch
import funclib.nn as nn

class SimpleNet(nn.Module):
    def __init__(self):
        super(SimpleNet, self).__init__()
        self.fc = nn.Linear(10, 5)

    def forward(self, x):
        return torch.relu(self.fc(x))

model = SimpleNet()
input_tensor = torch.randn(3, 10)
output = model(input_tensor)
"""
    env: dict = {}
    exec(compile(src, "<seed example>", "exec"), env)
    out, model, x = env["output"], env["model"], env["input_tensor"]
    assert out.shape == (3, 5)
    ref = np.maximum(x.numpy() @ model.fc.weight.numpy().T + model.fc.bias.numpy(), 0)
    close(out, ref, 1e-6)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3, key=R.key(1))
        self.bn = nn.BatchNorm1d(3)
        self.fc2 = nn.Linear(3, 2, bias=False, key=R.key(2))
        self.register_buffer("scale", fl.ones(()))
        self.register_buffer("tmp", fl.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(fl.relu(self.bn(self.fc1(x)))) * self.scale


def test_registration_traversal_and_repr():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "fc1.weight",
        "fc1.bias",
        "bn.weight",
        "bn.bias",
        "fc2.weight",
    ]
    assert [n for n, _ in net.named_buffers()] == [
        "scale",
        "tmp",
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
    ]
    assert [n for n, _ in net.named_children()] == ["fc1", "bn", "fc2"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "bn", "fc2"]
    assert len(list(net.parameters())) == 5 and len(list(net.modules())) == 4
    assert net.fc2.bias is None and net.get_submodule("bn") is net.bn
    assert list(net.state_dict()) == [
        "scale",
        "fc1.weight",
        "fc1.bias",
        "bn.weight",
        "bn.bias",
        "bn.running_mean",
        "bn.running_var",
        "bn.num_batches_tracked",
        "fc2.weight",
    ]
    assert net.state_dict()["bn.num_batches_tracked"].dtype == fl.int64
    assert repr(net) == (
        "Net(\n"
        "  (fc1): Linear(in_features=4, out_features=3, bias=True)\n"
        "  (bn): BatchNorm1d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)\n"
        "  (fc2): Linear(in_features=3, out_features=2, bias=False)\n"
        ")"
    )
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "BatchNorm1d", "Linear", "Net"]
    del net.fc2
    assert "fc2" not in dict(net.named_children())


def test_modes_freeze_and_dtype():
    net = Net()
    assert net.training and net.bn.training
    net.eval()
    assert not net.training and not net.bn.training
    net.train()
    assert net.bn.training
    net.freeze()
    assert list(net.trainable_parameters()) == []
    net.unfreeze(keys="bias")
    assert [n for n, _ in net.trainable_parameters()] == ["fc1.bias", "bn.bias"]
    net.requires_grad_(True)
    assert len(list(net.trainable_parameters())) == 5
    net.double()
    assert net.fc1.weight.dtype == fl.float64 and net.bn.running_var.dtype == fl.float64
    assert net.bn.num_batches_tracked.dtype == fl.float64  # a counter, never cast
    net.half()
    assert net.fc1.weight.dtype == fl.float16
    assert net.to(fl.float32) is net and net.fc2.weight.dtype == fl.float32
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        net.to("tpu")


def test_module_is_a_pytree_and_grad_is_model_shaped():
    net = Net()
    leaves = fl.tree.leaves(net)
    assert len(leaves) == 5 + 5
    doubled = fl.tree.map(lambda t: t * 2, net)
    assert type(doubled) is Net and doubled is not net
    close(doubled.fc1.weight, net.fc1.weight.numpy() * 2)
    x = t64(5, 4).astype(fl.float32)
    g = fl.grad(lambda m, x: m(x).sum())(net, x)
    assert type(g) is Net and g.fc1.weight.shape == (3, 4)
    # gradients of the first layer by finite differences on a float64 copy (eval mode: a fixed function)
    net64 = copy.deepcopy(net).double().eval()
    x64 = x.astype(fl.float64)
    g = fl.grad(lambda m, x: (m(x) ** 2).sum())(net64, x64)
    w0 = net64.fc1.weight.numpy().copy()

    def f(w):
        net64.fc1.weight = fl.asarray(w)
        return float((net64(x64) ** 2).sum())

    close(g.fc1.weight, num_grad(f, w0), 1e-6)
    net64.fc1.weight = fl.asarray(w0)
    # buffers carry no gradient
    assert float(fl.sum(fl.abs(g.bn.running_mean))) == 0.0


def test_frozen_parameters_get_no_gradient():
    net = Net()
    net.fc1.freeze()
    x = t64(6, 4).astype(fl.float32)
    g = fl.grad(lambda m, x: m(x).sum())(net, x)
    assert float(fl.sum(fl.abs(g.fc1.weight))) == 0.0
    assert float(fl.sum(fl.abs(g.fc2.weight))) > 0.0
    loss, g2 = nn.value_and_grad(net, lambda x: net(x).sum())(x)
    assert g2.fc1.weight is None and g2.fc2.weight is not None and g2.bn.running_mean is None


def test_setattr_rules_and_errors():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(fl.ones(2))

    with pytest.raises(AttributeError, match="super"):
        Bad()
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="parameter 'weight'"):
        m.weight = "nope"
    m.weight = fl.zeros((2, 2))  # rebinding a parameter with a tensor is how updates work
    assert [n for n, _ in m.named_parameters()] == ["weight", "bias"]
    m.extra = nn.Buffer(fl.ones(3))
    assert "extra" in m.state_dict()
    p = fl.ones(2)
    m.a, m.b = nn.Parameter(p), nn.Parameter(p)
    assert m.a is not m.b  # two Parameters from one tensor are two parameters


def test_state_dict_load_strict_and_errors():
    src, dst = Net(), Net()
    src.fc1.weight = src.fc1.weight + 1.0
    res = dst.load_state_dict(src.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    close(dst.fc1.weight, src.fc1.weight)
    sd = src.state_dict()
    del sd["fc1.bias"]
    sd["extra.weight"] = fl.ones(1)
    with pytest.raises(nn.StateDictError) as e:
        dst.load_state_dict(sd)
    msg = str(e.value)
    assert (
        'Missing key(s) in state_dict: "fc1.bias"' in msg
        and 'Unexpected key(s) in state_dict: "extra.weight"' in msg
    )
    res = dst.load_state_dict(sd, strict=False)
    assert res.missing_keys == ["fc1.bias"] and res.unexpected_keys == ["extra.weight"]
    bad = src.state_dict()
    bad["fc1.weight"] = bad["fc1.weight"] * 2.0
    bad["fc2.weight"] = fl.ones((5, 5))
    before = dst.fc1.weight
    with pytest.raises(nn.StateDictError, match=r"size mismatch for fc2.weight.*\(5, 5\).*\(2, 3\)"):
        dst.load_state_dict(bad, strict=False)
    assert dst.fc1.weight is before  # a failed load changes nothing


def test_weight_tying_and_deepcopy():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3, bias=False)
            self.b = nn.Linear(3, 3, bias=False)
            self.b.weight = self.a.weight

    m = Tied()
    assert [n for n, _ in m.named_parameters()] == ["a.weight"]
    assert list(m.state_dict()) == ["a.weight", "b.weight"]
    c = copy.deepcopy(m)
    assert c.a.weight is c.b.weight and c.a.weight is not m.a.weight
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8), 2)
    names = [n for n, _ in enc.named_parameters()]
    assert len(names) == 2 * len(list(enc.layers[0].parameters()))  # deep copies are independent parameters


def test_key_and_global_generator_init():
    a, b = nn.Linear(5, 3, key=R.key(7)), nn.Linear(5, 3, key=R.key(7))
    close(a.weight, b.weight, 0)
    bound = 1 / math.sqrt(5)
    w = nn.Linear(5, 400, key=R.key(1)).weight.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
    R.manual_seed(3)
    c = nn.Linear(5, 3)
    R.manual_seed(3)
    d = nn.Linear(5, 3)
    close(c.weight, d.weight, 0)
    conv = nn.Conv2d(4, 6, 3, groups=2, key=R.key(2))
    fan_in = 2 * 9
    assert np.abs(conv.weight.numpy()).max() <= 1 / math.sqrt(fan_in)
    e = nn.Embedding(10, 3, padding_idx=2, key=R.key(0))
    assert np.all(e.weight.numpy()[2] == 0)


# ---------------------------------------------------------------------------------------------------------------
# Layers: forward and gradients against NumPy


def test_linear_and_bilinear():
    lin = nn.Linear(4, 3, dtype=fl.float64, key=R.key(0))
    x = a64(5, 4)
    close(lin(fl.asarray(x)), x @ lin.weight.numpy().T + lin.bias.numpy())
    g = fl.grad(lambda m, x: (m(x) ** 2).sum())(lin, fl.asarray(x))
    y = x @ lin.weight.numpy().T + lin.bias.numpy()
    close(g.weight, 2 * y.T @ x)
    close(g.bias, 2 * y.sum(0))
    bl = nn.Bilinear(3, 2, 4, dtype=fl.float64, key=R.key(1))
    x1, x2 = a64(5, 3), a64(5, 2)
    ref = np.einsum("ni,kij,nj->nk", x1, bl.weight.numpy(), x2) + bl.bias.numpy()
    close(bl(fl.asarray(x1), fl.asarray(x2)), ref)
    check_grads(
        lambda w, a, b: F.bilinear(a, b, w), (bl.weight, fl.asarray(x1[:2]), fl.asarray(x2[:2])), order=1
    )


@pytest.mark.parametrize(
    "stride,pad,dil,groups",
    [((1, 1), (0, 0), (1, 1), 1), ((2, 1), (1, 2), (1, 2), 2), ((1, 2), (1, 0), (2, 1), 4)],
)
def test_conv2d_forward_and_grads(stride, pad, dil, groups):
    x, w, b = a64(2, 4, 7, 6), a64(4, 4 // groups, 3, 2), a64(4)
    out = F.conv2d(fl.asarray(x), fl.asarray(w), fl.asarray(b), stride, pad, dil, groups)
    ref = np_conv2d(x, w, b, stride, pad, dil, groups)
    close(out, ref)
    ct = a64(*ref.shape)
    gx, gw = fl.grad(
        lambda x, w: fl.sum(F.conv2d(x, w, None, stride, pad, dil, groups) * fl.asarray(ct)), argnums=(0, 1)
    )(fl.asarray(x), fl.asarray(w))
    f_w = lambda ww: float((np_conv2d(x, ww, None, stride, pad, dil, groups) * ct).sum())  # noqa: E731
    close(gw, num_grad(f_w, w), 1e-7)
    # the input gradient is the transposed convolution (same weight) of the cotangent: the scatter reference
    out_pad = tuple(
        x.shape[2 + i] - ((ref.shape[2 + i] - 1) * stride[i] - 2 * pad[i] + dil[i] * (w.shape[2 + i] - 1) + 1)
        for i in range(2)
    )
    close(gx, np_conv_transpose2d(ct, w, None, stride, pad, out_pad, groups, dil))


def test_conv_derivatives_by_finite_differences():
    x, w, b = t64(1, 2, 5, 4), t64(2, 1, 2, 3), t64(2)
    check_grads(
        lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1, groups=2),
        (x, w, b),
        order=2,
        modes=("rev",),
    )
    check_grads(lambda x, w: F.conv1d(x, w, stride=2, padding=1), (t64(2, 2, 7), t64(3, 2, 3)), order=1)
    check_grads(
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
        (t64(1, 2, 3, 3), t64(2, 1, 3, 2)),
        order=1,
    )
    # vmap of a convolution is the convolution of each element
    xs = t64(3, 1, 2, 5, 4)
    ys = fl.vmap(lambda x: F.conv2d(x, w, b, padding=1, groups=2))(xs)
    for i in range(3):
        close(ys[i], F.conv2d(xs[i], w, b, padding=1, groups=2))


def test_conv1d_and_modules():
    x, w = a64(2, 4, 9), a64(6, 2, 3)
    ref = np_conv2d(x[:, :, None], w[:, :, None], None, (1, 2), (0, 1), (1, 1), 2)[:, :, 0]
    close(F.conv1d(fl.asarray(x), fl.asarray(w), stride=2, padding=1, groups=2), ref)
    conv = nn.Conv2d(3, 5, 3, padding="same", dtype=fl.float64, key=R.key(0))
    xx = a64(2, 3, 6, 6)
    close(
        conv(fl.asarray(xx)), np_conv2d(xx, conv.weight.numpy(), conv.bias.numpy(), (1, 1), (1, 1), (1, 1), 1)
    )
    assert conv(fl.asarray(xx[0])).shape == (5, 6, 6)  # unbatched input
    assert repr(conv) == "Conv2d(3, 5, kernel_size=(3, 3), stride=(1, 1), padding='same')"


@pytest.mark.parametrize("stride,pad,out_pad,groups,dil", [(2, 1, 1, 1, 1), (3, 0, 2, 2, 1), (1, 2, 0, 2, 2)])
def test_conv_transpose2d(stride, pad, out_pad, groups, dil):
    x, w, b = a64(2, 4, 3, 4), a64(4, 3, 3, 2), a64(3 * groups)
    s, p, op, d = (stride,) * 2, (pad,) * 2, (out_pad,) * 2, (dil,) * 2
    out = F.conv_transpose2d(fl.asarray(x), fl.asarray(w), fl.asarray(b), stride, pad, out_pad, groups, dil)
    close(out, np_conv_transpose2d(x, w, b, s, p, op, groups, d))
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, dtype=fl.float64)
    assert m(fl.asarray(a64(1, 4, 5, 5)), output_size=(10, 10)).shape == (1, 6, 10, 10)


@pytest.mark.parametrize(
    "k,s,p,ceil",
    [((2, 2), (2, 2), (0, 0), False), ((3, 2), (2, 1), (1, 1), True), ((3, 3), (2, 2), (1, 0), False)],
)
def test_pooling(k, s, p, ceil):
    x = RNG.permutation(2 * 3 * 7 * 6).reshape(2, 3, 7, 6).astype(np.float64) / 10  # no ties
    close(F.max_pool2d(fl.asarray(x), k, s, p, ceil_mode=ceil), np_pool2d(x, k, s, p, "max", ceil))
    for cip in (True, False):
        close(
            F.avg_pool2d(fl.asarray(x), k, s, p, ceil_mode=ceil, count_include_pad=cip),
            np_pool2d(x, k, s, p, "avg", ceil, cip),
        )
    ct = a64(*np_pool2d(x, k, s, p, "max", ceil).shape)
    g = fl.grad(lambda x: fl.sum(F.max_pool2d(x, k, s, p, ceil_mode=ceil) * fl.asarray(ct)))(fl.asarray(x))
    close(g, num_grad(lambda xx: float((np_pool2d(xx, k, s, p, "max", ceil) * ct).sum()), x, 1e-4), 1e-6)
    check_grads(lambda x: F.avg_pool2d(x, k, s, p, ceil_mode=ceil), (fl.asarray(x[:1, :1]),), order=1)
    y, idx = F.max_pool2d(fl.asarray(x), k, s, p, ceil_mode=ceil, return_indices=True)
    close(np.take_along_axis(x.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), 2).reshape(y.shape), y)


def test_adaptive_avg_pool_and_pool_modules():
    x = a64(2, 3, 7, 5)
    for size in [(3, 2), (1, 1), (7, 5), (4, None)]:
        want = np_adaptive_avg(x, size[0], size[1] or 5)
        close(F.adaptive_avg_pool2d(fl.asarray(x), size), want)
    check_grads(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (fl.asarray(x[:1, :1]),), order=1)
    assert nn.MaxPool2d(2)(fl.asarray(x)).shape == (2, 3, 3, 2)
    assert nn.AvgPool2d(3, 2, 1)(fl.asarray(x)).shape == (2, 3, 4, 3)
    assert nn.AdaptiveAvgPool2d(1)(fl.asarray(x)).shape == (2, 3, 1, 1)
    close(nn.AvgPool1d(2)(fl.asarray(x[:, :, 0])), x[:, :, 0, :4].reshape(2, 3, 2, 2).mean(-1))


def test_batchnorm_numerics_match_definition():
    bn = nn.BatchNorm2d(3, dtype=fl.float64)
    bn.weight = fl.asarray(np.array([1.0, 2.0, 0.5]))
    bn.bias = fl.asarray(np.array([0.0, 1.0, -1.0]))
    rm, rv = np.zeros(3), np.ones(3)
    for _ in range(3):
        x = a64(4, 3, 2, 5)
        out = bn(fl.asarray(x))
        mu, var = x.mean(axis=(0, 2, 3)), x.var(axis=(0, 2, 3))
        ref = (x - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
        ref = ref * bn.weight.numpy()[None, :, None, None] + bn.bias.numpy()[None, :, None, None]
        close(out, ref)
        n = 4 * 2 * 5
        rm, rv = 0.9 * rm + 0.1 * mu, 0.9 * rv + 0.1 * var * n / (n - 1)
        close(bn.running_mean, rm)
        close(bn.running_var, rv)
    assert int(bn.num_batches_tracked) == 3
    bn.eval()
    x = a64(2, 3, 2, 2)
    ref = (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None] + 1e-5)
    close(
        bn(fl.asarray(x)), ref * bn.weight.numpy()[None, :, None, None] + bn.bias.numpy()[None, :, None, None]
    )
    cum = nn.BatchNorm1d(2, momentum=None, dtype=fl.float64)
    xs = [a64(5, 2) for _ in range(3)]
    for x in xs:
        cum(fl.asarray(x))
    close(cum.running_mean, np.mean([x.mean(0) for x in xs], axis=0))
    check_grads(
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
        (t64(4, 3, 2), t64(3), t64(3)),
        order=2,
        modes=("rev",),
    )


def test_batchnorm_under_grad_vmap_and_errors():
    bn = nn.BatchNorm1d(3)
    x = t64(6, 3).astype(fl.float32)
    # closed over under grad: the statistics update with concrete values, as PyTorch does under no_grad
    fl.grad(lambda x: bn(x).sum())(x)
    assert int(bn.num_batches_tracked) == 1 and not isinstance(bn.running_mean, fl.Tracer)
    close(bn.running_mean, 0.1 * x.numpy().mean(0), 1e-6)
    # model as the differentiated argument: the statistics come out through has_aux
    m = nn.BatchNorm1d(3)
    g, new = fl.grad(lambda m, x: (m(x).sum(), m), has_aux=True)(m, x)
    assert int(new.num_batches_tracked) == 1 and int(m.num_batches_tracked) == 0
    close(new.running_mean, bn.running_mean)
    # vmap over stacked models: each lane updates its own statistics
    stacked = fl.tree.map(lambda *t: fl.stack(t), nn.BatchNorm1d(3), nn.BatchNorm1d(3))
    xs = t64(2, 6, 3).astype(fl.float32)
    out, after = fl.vmap(lambda m, x: (m(x), m))(stacked, xs)
    for i in range(2):
        close(after.running_mean[i], 0.1 * xs.numpy()[i].mean(0), 1e-6)
    # closed over under vmap: no tracer is stored; the error names the fixes and nothing changes
    before = bn.running_mean
    with pytest.raises(nn.ModuleStateError, match="return it"):
        fl.vmap(lambda x: bn(x))(xs)
    assert bn.running_mean is before and int(bn.num_batches_tracked) == 1


def test_batchnorm_under_jit_grad():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    ref = copy.deepcopy(model)
    x = t64(8, 3).astype(fl.float32)

    @fl.jit
    def step(m, x):
        loss, g = nn.value_and_grad(m, lambda m, x: (m(x) ** 2).mean())(m, x)
        return m, loss, g

    m2, loss, g = step(model, x)
    loss_ref, g_ref = nn.value_and_grad(ref, lambda m, x: (m(x) ** 2).mean())(ref, x)
    close(loss, loss_ref, 1e-5)
    close(g[0].weight, g_ref[0].weight, 1e-5)
    close(m2[1].running_mean, ref[1].running_mean, 1e-6)
    assert int(m2[1].num_batches_tracked) == 1 and int(model[1].num_batches_tracked) == 0
    closed = nn.BatchNorm1d(3)
    with pytest.raises(nn.ModuleStateError):
        fl.jit(lambda x: closed(x))(x)


def test_layer_and_group_norm():
    x, w, b = a64(3, 4, 5), a64(5), a64(5)
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(
        F.layer_norm(fl.asarray(x), 5, fl.asarray(w), fl.asarray(b)), (x - mu) / np.sqrt(var + 1e-5) * w + b
    )
    check_grads(
        lambda x, w, b: F.layer_norm(x, (5,), w, b),
        (fl.asarray(x[:2]), fl.asarray(w), fl.asarray(b)),
        order=2,
        modes=("rev",),
    )
    x = a64(2, 6, 3)
    g = x.reshape(2, 3, 2, 3)
    ref = ((g - g.mean((2, 3), keepdims=True)) / np.sqrt(g.var((2, 3), keepdims=True) + 1e-5)).reshape(
        2, 6, 3
    )
    gn = nn.GroupNorm(3, 6, dtype=fl.float64)
    close(gn(fl.asarray(x)), ref)
    check_grads(lambda x, w: F.group_norm(x, 3, w), (fl.asarray(x[:1]), fl.asarray(a64(6))), order=1)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(4, 6)


def test_dropout_statistics_and_keys():
    x = fl.ones((200, 100))
    with nn.rng(R.key(0)):
        y = F.dropout(x, 0.3)
        y2 = F.dropout(x, 0.3)
    v = y.numpy()
    assert set(np.unique(v)) <= {0.0, np.float32(1 / 0.7)}
    assert abs((v == 0).mean() - 0.3) < 0.02
    assert not np.array_equal(v, y2.numpy())  # the installed key is split per use
    with nn.rng(R.key(0)):
        close(F.dropout(x, 0.3), v, 0)  # same key, same mask
    d = nn.Dropout(0.5).eval()
    assert d(x) is x
    R.manual_seed(0)
    a = nn.Dropout(0.5)(x)
    R.manual_seed(0)
    close(nn.Dropout(0.5)(x), a, 0)
    with pytest.raises(nn.ModuleStateError, match="nn.rng"):
        fl.grad(lambda x: F.dropout(x, 0.5).sum())(x)
    d2 = nn.Dropout2d(0.5)
    z = d2(fl.ones((4, 8, 3, 3))).numpy()
    assert np.all(z.reshape(4, 8, 9).std(-1) == 0)  # whole channels


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("layout", ["strided", "contiguous"])
def test_dropout_draws_a_ranks_rows_of_the_global_batch(ranks, layout):
    # simulated ranks in one process: each draws inside DistributedDataParallel's context for its rows
    from funclib.nn.module import _global_batch_rows

    b = 4
    x = fl.ones((ranks * b, 5, 4))  # masks of 20, 5 (Dropout1d) and 1 numbers per row
    with nn.rng(R.key(5)):
        whole = [F.dropout(x, 0.4).numpy(), nn.Dropout1d(0.5)(x).numpy(), F.dropout(x[:, 0, 0], 0.5).numpy()]
    for r in range(ranks):
        rows = np.arange(b) * ranks + r if layout == "strided" else r * b + np.arange(b)
        with nn.rng(R.key(5)), _global_batch_rows(lambda n, rows=rows: fl.asarray(rows[:n])):
            mine = [F.dropout(x[:b], 0.4), nn.Dropout1d(0.5)(x[:b]), F.dropout(x[:b, 0, 0], 0.5)]
        for m, w in zip(mine, whole):
            np.testing.assert_array_equal(m.numpy(), w[rows])
    with nn.rng(R.key(5)), _global_batch_rows(lambda n: fl.arange(n)):
        assert F.dropout(fl.ones(()), 0.5).shape == ()  # a 0-d draw has no rows: the same on every rank


def test_embedding_and_one_hot():
    emb = nn.Embedding(6, 3, padding_idx=1, dtype=fl.float64, key=R.key(0))
    idx = np.array([[0, 1, 5], [1, 2, 2]])
    close(emb(fl.asarray(idx)), emb.weight.numpy()[idx])
    g = fl.grad(lambda m: (m(fl.asarray(idx)) ** 2).sum())(emb)
    want = np.zeros((6, 3))
    for i in idx.ravel():
        if i != 1:
            want[i] += 2 * emb.weight.numpy()[i]
    close(g.weight, want)
    with pytest.raises(IndexError, match="out of range"):
        emb(fl.asarray(np.array([6])))
    oh = F.one_hot(fl.asarray(np.array([0, 2, 1])))
    assert oh.dtype == fl.int64 and oh.shape == (3, 3)
    frozen = nn.Embedding.from_pretrained(fl.ones((3, 2)))
    assert list(frozen.trainable_parameters()) == []


def test_activations_against_formulas():
    x = a64(50, lo=-6, hi=6)
    cases = {
        nn.ReLU(): np.maximum(x, 0),
        nn.ReLU6(): np.clip(x, 0, 6),
        nn.LeakyReLU(0.2): np.where(x >= 0, x, 0.2 * x),
        nn.ELU(0.7): np.where(x > 0, x, 0.7 * np.expm1(x)),
        nn.SiLU(): x * np_sigmoid(x),
        nn.Sigmoid(): np_sigmoid(x),
        nn.Tanh(): np.tanh(x),
        nn.Softplus(2.0, 5.0): np.where(2 * x > 5, x, np.log1p(np.exp(2 * x)) / 2),
        nn.GELU(): 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
        nn.GELU("tanh"): 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
        nn.Mish(): x * np.tanh(np.log1p(np.exp(x))),
        nn.Hardswish(): x * np.clip(x + 3, 0, 6) / 6,
        nn.Softsign(): x / (1 + np.abs(x)),
        nn.LogSigmoid(): -np.log1p(np.exp(-x)),
    }
    for mod, want in cases.items():
        close(mod(fl.asarray(x)), want, 1e-9)
    z = a64(3, 4)
    close(nn.Softmax(dim=1)(fl.asarray(z)), np.exp(np_log_softmax(z, 1)))
    close(nn.LogSoftmax(dim=0)(fl.asarray(z)), np_log_softmax(z, 0))
    smooth = a64(6, lo=0.5, hi=2)
    for f in (F.gelu, F.silu, F.mish, F.elu, F.softplus, F.logsigmoid):
        check_grads(f, (fl.asarray(smooth),), order=2)
    assert repr(nn.LeakyReLU()) == "LeakyReLU(negative_slope=0.01)"


def np_mha(q, k, v, wi, bi, wo, bo, heads, mask=None):
    e = q.shape[-1]
    qq, kk, vv = q @ wi[:e].T + bi[:e], k @ wi[e : 2 * e].T + bi[e : 2 * e], v @ wi[2 * e :].T + bi[2 * e :]
    hd = e // heads
    outs = []
    for h in range(heads):
        sl = slice(h * hd, (h + 1) * hd)
        s = qq[:, sl] @ kk[:, sl].T / math.sqrt(hd)
        if mask is not None:
            s = np.where(mask, -np.inf, s)
        outs.append(np.exp(np_log_softmax(s, -1)) @ vv[:, sl])
    return np.concatenate(outs, -1) @ wo.T + bo


def test_multihead_attention_and_encoder_layer():
    mha = nn.MultiheadAttention(8, 2, batch_first=True, dtype=fl.float64, key=R.key(0))
    q, k = a64(2, 3, 8), a64(2, 5, 8)
    mask = np.zeros((3, 5), bool)
    mask[:, 4] = True
    out, w = mha(fl.asarray(q), fl.asarray(k), fl.asarray(k), attn_mask=fl.asarray(mask))
    for n in range(2):
        ref = np_mha(
            q[n],
            k[n],
            k[n],
            mha.in_proj_weight.numpy(),
            mha.in_proj_bias.numpy(),
            mha.out_proj.weight.numpy(),
            mha.out_proj.bias.numpy(),
            2,
            mask,
        )
        close(out[n], ref)
    assert w.shape == (2, 3, 5) and np.allclose(w.numpy()[..., 4], 0)
    check_grads(
        lambda m, q: m(q, q, q, need_weights=False)[0], (mha, fl.asarray(q[:1, :2])), order=1, modes=("rev",)
    )
    layer = nn.TransformerEncoderLayer(
        8, 2, 16, dropout=0.0, batch_first=True, dtype=fl.float64, key=R.key(1)
    )
    x = a64(2, 4, 8)
    sa = np.stack(
        [
            np_mha(
                x[n],
                x[n],
                x[n],
                layer.self_attn.in_proj_weight.numpy(),
                layer.self_attn.in_proj_bias.numpy(),
                layer.self_attn.out_proj.weight.numpy(),
                layer.self_attn.out_proj.bias.numpy(),
                2,
            )
            for n in range(2)
        ]
    )

    def ln(z, m):
        return (z - z.mean(-1, keepdims=True)) / np.sqrt(
            z.var(-1, keepdims=True) + 1e-5
        ) * m.weight.numpy() + m.bias.numpy()

    h = ln(x + sa, layer.norm1)
    ff = np.maximum(h @ layer.linear1.weight.numpy().T + layer.linear1.bias.numpy(), 0)
    ff = ff @ layer.linear2.weight.numpy().T + layer.linear2.bias.numpy()
    close(layer(fl.asarray(x)), ln(h + ff, layer.norm2))
    enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8, dtype=fl.float64))
    assert enc(fl.asarray(x), is_causal=True).shape == (2, 4, 8)


def np_lstm(x, h, c, wih, whh, bih, bhh):
    outs = []
    for t in range(x.shape[0]):
        g = x[t] @ wih.T + bih + h @ whh.T + bhh
        i, f, gg, o = np.split(g, 4, axis=-1)
        c = np_sigmoid(f) * c + np_sigmoid(i) * np.tanh(gg)
        h = np_sigmoid(o) * np.tanh(c)
        outs.append(h)
    return np.stack(outs), h, c


def np_gru(x, h, wih, whh, bih, bhh):
    outs = []
    for t in range(x.shape[0]):
        rx, zx, nx = np.split(x[t] @ wih.T + bih, 3, -1)
        rh, zh, nh = np.split(h @ whh.T + bhh, 3, -1)
        r, z = np_sigmoid(rx + rh), np_sigmoid(zx + zh)
        n = np.tanh(nx + r * nh)
        h = (1 - z) * n + z * h
        outs.append(h)
    return np.stack(outs), h


def test_recurrent_layers():
    x = a64(5, 2, 3)
    lstm = nn.LSTM(3, 4, dtype=fl.float64, key=R.key(0))
    p = {k: v.numpy() for k, v in lstm.named_parameters()}
    out, (h, c) = lstm(fl.asarray(x))
    ro, rh, rc = np_lstm(
        x,
        np.zeros((2, 4)),
        np.zeros((2, 4)),
        p["weight_ih_l0"],
        p["weight_hh_l0"],
        p["bias_ih_l0"],
        p["bias_hh_l0"],
    )
    close(out, ro)
    close(h[0], rh)
    close(c[0], rc)
    gru = nn.GRU(3, 4, bidirectional=True, batch_first=True, dtype=fl.float64, key=R.key(1))
    p = {k: v.numpy() for k, v in gru.named_parameters()}
    xb = x.transpose(1, 0, 2)
    out, h = gru(fl.asarray(xb))
    fwd, hf = np_gru(
        x, np.zeros((2, 4)), p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"]
    )
    bwd, hb = np_gru(
        x[::-1],
        np.zeros((2, 4)),
        p["weight_ih_l0_reverse"],
        p["weight_hh_l0_reverse"],
        p["bias_ih_l0_reverse"],
        p["bias_hh_l0_reverse"],
    )
    close(out, np.concatenate([fwd, bwd[::-1]], -1).transpose(1, 0, 2))
    close(h, np.stack([hf, hb]))
    rnn = nn.RNN(3, 4, num_layers=2, nonlinearity="relu", dtype=fl.float64, key=R.key(2))
    p = {k: v.numpy() for k, v in rnn.named_parameters()}
    hs = [np.zeros((2, 4)), np.zeros((2, 4))]
    ref = []
    for t in range(5):
        inp = x[t]
        for layer in range(2):
            hs[layer] = np.maximum(
                inp @ p[f"weight_ih_l{layer}"].T
                + p[f"bias_ih_l{layer}"]
                + hs[layer] @ p[f"weight_hh_l{layer}"].T
                + p[f"bias_hh_l{layer}"],
                0,
            )
            inp = hs[layer]
        ref.append(inp)
    close(rnn(fl.asarray(x))[0], np.stack(ref))
    check_grads(
        lambda m, x: m(x)[0],
        (nn.LSTM(2, 2, dtype=fl.float64, key=R.key(3)), t64(3, 1, 2)),
        order=1,
        modes=("rev",),
    )
    cell = nn.GRUCell(3, 4, dtype=fl.float64, key=R.key(4))
    cp = {k: v.numpy() for k, v in cell.named_parameters()}
    close(
        cell(fl.asarray(x[0])),
        np_gru(x[:1], np.zeros((2, 4)), cp["weight_ih"], cp["weight_hh"], cp["bias_ih"], cp["bias_hh"])[1],
    )


def test_losses_against_numpy():
    z, t = a64(6, 4), np.array([0, 3, 1, 1, -100, 2])
    w = np.array([1.0, 2.0, 0.5, 1.5])
    lp = np_log_softmax(z)
    valid = t != -100
    ts = np.where(valid, t, 0)
    nll = -lp[np.arange(6), ts] * w[ts] * valid
    close(F.cross_entropy(fl.asarray(z), fl.asarray(t), fl.asarray(w)), nll.sum() / (w[ts] * valid).sum())
    close(F.cross_entropy(fl.asarray(z), fl.asarray(t), reduction="none"), -lp[np.arange(6), ts] * valid)
    eps = 0.1
    smooth = -(lp * w).sum(1) * valid
    want = (1 - eps) * nll.sum() / (w[ts] * valid).sum() + eps / 4 * smooth.sum() / (w[ts] * valid).sum()
    close(F.cross_entropy(fl.asarray(z), fl.asarray(t), fl.asarray(w), label_smoothing=eps), want)
    probs = np.exp(np_log_softmax(a64(6, 4)))
    close(
        F.cross_entropy(fl.asarray(z), fl.asarray(probs), label_smoothing=eps),
        -((probs * (1 - eps) + eps / 4) * lp).sum(1).mean(),
    )
    z3, t3 = a64(2, 4, 3), np.array([[0, 1, 2], [3, 3, 0]])
    lp3 = np_log_softmax(z3, 1)
    close(
        F.cross_entropy(fl.asarray(z3), fl.asarray(t3)),
        -np.mean([lp3[n, t3[n, j], j] for n in range(2) for j in range(3)]),
    )
    close(F.nll_loss(fl.asarray(lp), fl.asarray(ts), reduction="sum"), -lp[np.arange(6), ts].sum())
    a, b = a64(3, 4), a64(3, 4)
    d = a - b
    close(F.mse_loss(fl.asarray(a), fl.asarray(b)), (d**2).mean())
    close(F.l1_loss(fl.asarray(a), fl.asarray(b), reduction="sum"), np.abs(d).sum())
    close(
        F.smooth_l1_loss(fl.asarray(a), fl.asarray(b), beta=0.5),
        np.where(np.abs(d) < 0.5, 0.5 * d**2 / 0.5, np.abs(d) - 0.25).mean(),
    )
    close(
        F.huber_loss(fl.asarray(a), fl.asarray(b), delta=0.5),
        np.where(np.abs(d) <= 0.5, 0.5 * d**2, 0.5 * (np.abs(d) - 0.25)).mean(),
    )
    p, y = np_sigmoid(a), (b > 0).astype(float)
    close(
        F.binary_cross_entropy(fl.asarray(p), fl.asarray(y)),
        -(y * np.log(p) + (1 - y) * np.log(1 - p)).mean(),
    )
    pw = np.array([1.0, 2.0, 3.0, 0.5])
    close(
        F.binary_cross_entropy_with_logits(fl.asarray(a), fl.asarray(y), pos_weight=fl.asarray(pw)),
        -(pw * y * np.log(p) + (1 - y) * np.log(1 - p)).mean(),
    )
    q = np.exp(np_log_softmax(a64(3, 4)))
    q[0, 0] = 0.0
    kl = np.where(q > 0, q * np.log(np.where(q > 0, q, 1)), 0) - q * lp[:3]
    close(F.kl_div(fl.asarray(lp[:3]), fl.asarray(q), reduction="batchmean"), kl.sum() / 3)
    close(
        nn.CrossEntropyLoss(label_smoothing=eps)(fl.asarray(z[:5]), fl.asarray(t[:4].tolist() + [2])),
        F.cross_entropy(fl.asarray(z[:5]), fl.asarray(t[:4].tolist() + [2]), label_smoothing=eps),
    )
    check_grads(
        lambda z: F.cross_entropy(z, fl.asarray(ts), fl.asarray(w), label_smoothing=0.2),
        (fl.asarray(z),),
        order=2,
        modes=("rev",),
    )
    check_grads(lambda a: F.binary_cross_entropy_with_logits(a, fl.asarray(y)), (fl.asarray(a),), order=2)


def test_containers():
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[1], nn.ReLU) and isinstance(seq[-1], nn.Linear)
    assert len(seq[:2]) == 2 and [n for n, _ in seq.named_parameters()] == [
        "0.weight",
        "0.bias",
        "2.weight",
        "2.bias",
    ]
    seq.append(nn.Sigmoid())
    assert seq(fl.ones((4, 2))).shape == (4, 1)
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    ml.insert(0, nn.Identity())
    assert len(ml) == 4 and isinstance(ml[0], nn.Identity)
    md = nn.ModuleDict({"enc": nn.Linear(2, 4), "dec": nn.Linear(4, 2)})
    assert list(md.keys()) == ["enc", "dec"] and "enc" in md
    assert [n for n, _ in md.named_parameters()][0] == "enc.weight"
    paths = [fl.tree.keystr(p, simple=True) for p, _ in fl.tree.flatten_with_path(seq)[0]]
    assert paths[0] == "0.weight"


# ---------------------------------------------------------------------------------------------------------------
# Functional entry points


def test_functional_call_and_buffer_writeback():
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    x = t64(5, 3).astype(fl.float32)
    params = {k: v * 0.0 for k, v in model.named_parameters()}
    out = nn.functional_call(model, params, (x,))
    assert float(fl.sum(fl.abs(out))) == 0.0
    assert float(fl.sum(fl.abs(model[0].weight))) > 0  # the model's own tensors are untouched
    assert int(model[1].num_batches_tracked) == 1  # buffers not passed are updated on the model
    bufs = dict(model.named_buffers())
    nn.functional_call(model, (dict(model.named_parameters()), bufs), x)
    assert int(bufs["1.num_batches_tracked"]) == 2 and int(model[1].num_batches_tracked) == 1
    g = fl.grad(lambda p: nn.functional_call(model, p, x).sum())(dict(model.named_parameters()))
    assert set(g) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    with pytest.raises(ValueError, match="not a parameter"):
        nn.functional_call(model, {"nope": fl.ones(1)}, x)
    with pytest.raises(nn.StateDictError, match="missing"):
        nn.functional_call(model, params, x, strict=True)


def test_stack_module_state_ensembles():
    models = [nn.Linear(3, 2, key=R.key(i)) for i in range(4)]
    params, buffers = nn.stack_module_state(models)
    assert params["weight"].shape == (4, 2, 3) and buffers == {}
    x = t64(5, 3).astype(fl.float32)
    out = fl.vmap(lambda p: nn.functional_call(models[0], p, (x,)))(params)
    for i, m in enumerate(models):
        close(out[i], m(x), 1e-6)
    with pytest.raises(ValueError, match="architecture"):
        nn.stack_module_state([nn.Linear(3, 2), nn.Sequential(nn.Linear(3, 2))])


def test_value_and_grad_mlx_style():
    model = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.BatchNorm1d(4), nn.Linear(4, 1))
    x = t64(8, 3).astype(fl.float32)
    (loss, aux), grads = nn.value_and_grad(model, lambda m, x: ((m(x) ** 2).mean(), 7))(model, x)
    assert aux == 7 and grads[0].weight.shape == (3 * 0 + 4, 3) and grads[2].running_mean is None
    assert int(model[2].num_batches_tracked) == 1
    model.eval()
    loss, grads = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())(model, x)
    gm = fl.grad(lambda m, x: (m(x) ** 2).mean())(model, x)
    close(grads[3].weight, gm[3].weight, 1e-6)
    assert not any(isinstance(p, fl.Tracer) for p in model.parameters())


def test_value_and_grad_of_a_model_passed_through_a_transform():
    # jit and vmap hand fn a copy of the model rebuilt from its leaves; the gradients are taken through that copy
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    x = t64(8, 3).astype(fl.float32)
    loss_and_grad = nn.value_and_grad(model, lambda m, x: (m(x) ** 2).mean())
    loss, grads = loss_and_grad(model, x)
    jloss, jgrads = fl.jit(loss_and_grad)(model, x)
    close(jloss, loss, 1e-6)
    for a, b in zip(fl.tree.leaves(jgrads), fl.tree.leaves(grads)):
        close(a, b, 1e-5)
        assert float(fl.max(fl.abs(b))) > 0
    per = fl.vmap(lambda xi: loss_and_grad(model, xi[None])[1][0].weight)(x)
    for i in range(3):
        close(per[i], loss_and_grad(model, x[i : i + 1])[1][0].weight, 1e-5)
    # a teacher of the same architecture passed beside the model is not differentiated
    teacher = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    distill = nn.value_and_grad(model, lambda t, m, x: ((m(x) - t(x)) ** 2).mean())
    eager, jitted = distill(teacher, model, x)[1], fl.jit(distill)(teacher, model, x)[1]
    for a, b in zip(fl.tree.leaves(jitted), fl.tree.leaves(eager)):
        close(a, b, 1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Bad inputs


def test_bad_inputs_have_clear_errors():
    with pytest.raises(ShapeError, match=r"Linear\(in_features=10, out_features=5\).*\(3, 7\)"):
        nn.Linear(10, 5)(fl.ones((3, 7)))
    with pytest.raises(ShapeError, match=r"expected input of shape \(N, C, H, W\) with C=3.*check in_channels"):
        nn.Conv2d(3, 4, 3)(fl.ones((2, 5, 8, 8)))
    with pytest.raises(ShapeError, match="smaller than the dilated kernel"):
        F.conv2d(fl.ones((1, 1, 2, 2)), fl.ones((1, 1, 3, 3)))
    with pytest.raises(ShapeError, match="expected 4D input"):
        nn.BatchNorm2d(3)(fl.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(fl.ones((1, 3)))
    with pytest.raises(ShapeError, match="class-index targets of shape"):
        F.cross_entropy(fl.ones((4, 3)), fl.asarray(np.array([0, 1])))
    with pytest.raises(IndexError, match="out of bounds for 3 classes"):
        F.cross_entropy(fl.ones((2, 3)), fl.asarray(np.array([0, 3])))
    with pytest.raises(ShapeError, match="input shape"):
        F.mse_loss(fl.ones((2, 3)), fl.ones((3, 2)))
    with pytest.raises(DTypeError, match="floating-point"):
        F.dropout(fl.ones(3, dtype=fl.int32), 0.5)
    with pytest.raises(ValueError, match="reduction"):
        F.l1_loss(fl.ones(2), fl.ones(2), reduction="avg")
    with pytest.raises(ShapeError, match="layer_norm"):
        nn.LayerNorm(4)(fl.ones((2, 3)))
    with pytest.raises(ShapeError, match="LSTM"):
        nn.LSTM(3, 4)(fl.ones((5, 2, 2)))


# ---------------------------------------------------------------------------------------------------------------
# PyTorch interop (skipped without torch)


@needs_torch
def test_torch_state_dicts_load_and_match():
    torch.manual_seed(0)
    pairs = [
        (
            torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, groups=1),
            nn.Conv2d(3, 4, 3, stride=2, padding=1),
            (2, 3, 7, 7),
        ),
        (
            torch.nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1),
            nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1),
            (2, 4, 3, 3),
        ),
        (
            torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True),
            nn.LSTM(3, 5, num_layers=2, bidirectional=True),
            (4, 2, 3),
        ),
        (
            torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
            nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
            (5, 2, 8),
        ),
        (
            torch.nn.Sequential(
                torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.GELU(), torch.nn.LayerNorm(3)
            ),
            nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.GELU(), nn.LayerNorm(3)),
            (6, 4),
        ),
    ]
    for tm, fm, shape in pairs:
        tm.double().eval()
        fm.double().eval()
        fm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
        x = RNG.standard_normal(shape)
        to, fo = tm(torch.tensor(x)), fm(fl.asarray(x))
        to, fo = (to[0], fo[0]) if isinstance(to, tuple) else (to, fo)
        close(fo, to.detach().numpy(), 1e-9)
        assert list(fm.state_dict()) == list(tm.state_dict())


def _ce_through_log_softmax(z, t, reduction):
    """Cross entropy the long way: log_softmax, then the log-probabilities of the targets (take_along_axis)."""
    rows = fl.expand_dims(z, axis=0) if z.ndim == 1 else z
    tt = fl.reshape(t, (-1,))
    picked = fl.take_along_axis(fl.log_softmax(rows, axis=1), fl.expand_dims(tt, axis=1), axis=1)[:, 0]
    if reduction == "none":
        return fl.reshape(-picked, tuple(t.shape))
    return -(fl.sum(picked) if reduction == "sum" else fl.mean(picked))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_cross_entropy_of_class_indices_matches_the_log_softmax_path(reduction, dtype):
    # known targets, no weights, nothing ignored: logsumexp(z) - z[t]; the same numbers (and gradients) as
    # picking from log_softmax, including rows with huge logits
    rng = np.random.default_rng(7)
    for shape in [(9, 6), (6,)]:
        z = fl.asarray(rng.standard_normal(shape) * 5).astype(dtype)
        if len(shape) == 2:
            z = z.at[0, 0].set(1e4)
        t = fl.asarray(rng.integers(0, shape[-1], shape[:-1]))

        def fast(z, t):
            return fl.sum(F.cross_entropy(z, t, reduction=reduction))

        def slow(z, t):
            return fl.sum(_ce_through_log_softmax(z, t, reduction))

        want = _ce_through_log_softmax(z, t, reduction)
        np.testing.assert_array_equal(F.cross_entropy(z, t, reduction=reduction), want)
        (v1, g1), (v2, g2) = fl.value_and_grad(fast)(z, t), fl.value_and_grad(slow)(z, t)
        np.testing.assert_array_equal(v1, v2)
        np.testing.assert_array_equal(g1, g2)
        # traced targets take the general path: the same value
        traced = fl.jit(lambda z, t: F.cross_entropy(z, t, reduction=reduction))(z, t)
        np.testing.assert_allclose(traced, want, rtol=1e-6)
    check_grads(lambda z: F.cross_entropy(z, fl.asarray(np.array([2, 0, 1]))), (t64(3, 4),), order=2)


def test_cross_entropy_checks_targets_under_grad():
    z = fl.ones((2, 3))
    for bad in ([0, 3], [0, -1]):
        with pytest.raises(IndexError, match="out of bounds for 3 classes"):
            fl.grad(lambda z, t: F.cross_entropy(z, t))(z, fl.asarray(np.array(bad)))


# ---------------------------------------------------------------------------------------------------------------
# Extreme logits: results as accurate as the dtype allows (float64 references), gradients unchanged


def _lsm64(z, axis=-1):
    z = np.asarray(z, np.float64)
    s = z - z.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


_EXTREME_ROWS = [
    [1000.0, 1000.0, -5.0],
    [-1000.0, -1000.0, -999.0],
    [1e4, 1e4 - 1.0, 0.0],
    [88.5, 80.0, 0.0],
    [-3e4, 2e4, 2e4 + 0.5],
    [1e5, -1e5, 1e5],
]


def _assert_near64(got, want, dtype, ulps=4.0):
    """Within a few rounding errors of the float64 value, relative to max(1, |want|): shifted logits bound the
    absolute error of a log-probability by the rounding of log(sum(exp)) (a value near 1), not by |x|."""
    eps = np.finfo(dtype).eps
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= ulps * eps, (got, want, err.max() / eps)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_softmax_softmax_logsumexp_at_extreme_logits(dtype):
    z = np.array(_EXTREME_ROWS, dtype)
    want = _lsm64(z)
    for f in (fl.log_softmax, fl.jit(fl.log_softmax), lambda a: F.log_softmax(a, dim=-1), nn.LogSoftmax(dim=-1)):
        _assert_near64(f(fl.asarray(z)), want, dtype)
    _assert_near64(fl.log_softmax(fl.asarray(z.T), axis=0), want.T, dtype)
    for f in (fl.softmax, fl.jit(fl.softmax)):
        _assert_near64(f(fl.asarray(z)), np.exp(want), dtype)
    lse = np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1)) + z.max(-1).astype(np.float64)
    for f in (lambda a: fl.logsumexp(a, axis=-1), fl.jit(lambda a: fl.logsumexp(a, axis=-1))):
        np.testing.assert_allclose(f(fl.asarray(z)).numpy(), lse, rtol=2 * np.finfo(dtype).eps)
    # d/dz sum(w * log_softmax(z)) = w - softmax(z) * sum(w)
    w = np.linspace(-1.0, 2.0, z.shape[1]).astype(dtype)
    g_want = w - np.exp(want) * w.sum()
    g = fl.grad(lambda a: (fl.log_softmax(a) * fl.asarray(w)).sum())
    for gf in (g, fl.jit(g)):
        _assert_near64(gf(fl.asarray(z)), g_want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cross_entropy_at_extreme_logits(dtype):
    z = np.array(_EXTREME_ROWS, dtype)
    t = np.array([0, 2, 1, 0, 1, 2])
    lp = _lsm64(z)
    want = -lp[np.arange(len(t)), t]
    zt, tt = fl.asarray(z), fl.asarray(t)
    _assert_near64(F.cross_entropy(zt, tt, reduction="none"), want, dtype)  # known targets: the row fast path
    _assert_near64(fl.jit(lambda a, b: F.cross_entropy(a, b, reduction="none"))(zt, tt), want, dtype)  # traced
    _assert_near64(F.cross_entropy(zt, tt, weight=fl.ones(3, dtype=zt.dtype), reduction="none"), want, dtype)
    _assert_near64(nn.CrossEntropyLoss(reduction="none")(zt, tt), want, dtype)
    probs = np.eye(3, dtype=dtype)[t] * 0.75 + 0.25 / 3
    _assert_near64(F.cross_entropy(zt, fl.asarray(probs), reduction="none"), -(lp * probs).sum(1), dtype)
    _assert_near64(F.nll_loss(F.log_softmax(zt, dim=1), tt, reduction="none"), want, dtype)
    # gradient of the mean: (softmax - onehot) / N
    g_want = (np.exp(lp) - np.eye(3)[t]) / len(t)
    g = fl.grad(lambda a, b: F.cross_entropy(a, b))
    for gf in (g, fl.jit(g)):
        _assert_near64(gf(zt, tt), g_want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softplus_log_sigmoid_and_logit_losses_at_extreme_inputs(dtype):
    x = np.array([-1e4, -100.0, -30.0, -20.0, -5.0, -1e-3, 0.0, 1e-3, 5.0, 20.0, 30.0, 100.0, 1e4], dtype)
    x64 = x.astype(np.float64)
    sp, sp_neg = np.logaddexp(0.0, x64), np.logaddexp(0.0, -x64)  # softplus(x), softplus(-x) = -log_sigmoid(x)
    eps = np.finfo(dtype).eps
    tiny = np.finfo(dtype).tiny  # results below it are subnormal and carry less relative precision

    def rel(got, want):
        got = np.asarray(got, np.float64)
        err = np.abs(got - want) / np.maximum(np.abs(want), tiny / eps)
        assert err.max() <= 4 * eps, (got, want)

    xt = fl.asarray(x)
    rel(fl.softplus(xt), sp)
    rel(F.softplus(xt), np.where(x64 > 20, x64, sp))
    rel(fl.log_sigmoid(xt), -sp_neg)
    rel(F.logsigmoid(xt), -sp_neg)
    for t in (0.0, 1.0, 0.3):
        want = (1 - t) * sp + t * sp_neg
        tt = fl.full(x.shape, t, dtype=xt.dtype)
        rel(F.binary_cross_entropy_with_logits(xt, tt, reduction="none"), want)
        rel(nn.BCEWithLogitsLoss(reduction="none")(xt, tt), want)
        rel(F.binary_cross_entropy_with_logits(xt, tt, reduction="none", pos_weight=3.0), (1 - t) * sp + 3 * t * sp_neg)
        # d/dx = (1 - t) sigmoid(x) - t sigmoid(-x)
        g = fl.grad(lambda a: F.binary_cross_entropy_with_logits(a, tt, reduction="sum"))(xt)  # noqa: B023
        sig = np.exp(-sp_neg)
        np.testing.assert_allclose(g.numpy(), (1 - t) * sig - t * (1 - sig), rtol=4 * eps, atol=4 * eps)
    np.testing.assert_allclose(fl.grad(lambda a: fl.softplus(a).sum())(xt).numpy(), np.exp(-sp_neg), rtol=8 * eps,
                               atol=tiny)
