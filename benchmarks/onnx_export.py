"""ONNX export: the time ``fl.onnx.export`` takes, and onnxruntime (one thread, CPU) running the exported model
against ``fl.jit`` running the same forward pass: the digits CNN of ``examples/train_digits.py`` on a batch of 256
and a transformer encoder layer (d=64, 4 heads, feed-forward 128) on ``(32, 16, 64)``.

Run with ``python -m benchmarks onnx_export``.
"""

from __future__ import annotations

import numpy as np

from benchmarks._harness import Case, allclose, optional


def _digits_cnn():
    import funclib.nn as nn

    from funclib import random as frandom

    k1, k2, k3 = frandom.split(frandom.key(0), 3)
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, key=k1),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, key=k2),
        nn.BatchNorm2d(64),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.3),
        nn.Linear(256, 10, key=k3),
    ).eval()


def _encoder():
    import funclib.nn as nn

    from funclib import random as frandom

    return nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True, key=frandom.key(1)).eval()


def _forward_setup(make, shape):
    def setup():
        import funclib as fl

        ort = optional("onnxruntime")
        model = make()
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        xt = fl.asarray(x)
        fwd = fl.jit(lambda m, x: m(x))
        proto = fl.onnx.export(model, (xt,), None, dynamic_axes=[{0: "batch"}])
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        name = proto.graph.input[0].name
        return {"funclib": lambda: fwd(model, xt), "onnxruntime": lambda: sess.run(None, {name: x})[0]}

    return setup


def _export_setup(make, shape):
    def setup():
        import funclib as fl

        model = make()
        xt = fl.asarray(np.zeros(shape, np.float32))
        return {
            "funclib": lambda: fl.onnx.export(model, (xt,), None, dynamic_axes=[{0: "batch"}]).graph.output[0].name,
        }

    return setup


def cases():
    if optional("onnxruntime") is None or optional("onnx") is None:
        return []
    check = allclose(rtol=1e-4, atol=1e-5, reference="funclib")
    return [
        Case("digits CNN forward, batch 256", _forward_setup(_digits_cnn, (256, 1, 8, 8)), calls=20, check=check),
        Case("encoder layer forward (32, 16, 64)", _forward_setup(_encoder, (32, 16, 64)), calls=20, check=check),
        Case("export digits CNN (dynamic batch)", _export_setup(_digits_cnn, (4, 1, 8, 8)), calls=1, rounds=5),
        Case("export encoder layer (dynamic batch)", _export_setup(_encoder, (4, 16, 64)), calls=1, rounds=5),
    ]
