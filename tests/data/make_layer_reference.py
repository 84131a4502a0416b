"""Record PyTorch's outputs and gradients for the cases of tests/layer_cases.py, so that tests/test_layer_parity.py
checks funclib against PyTorch where PyTorch is not installed (CI). With torch installed the test also compares
with PyTorch live.

    python tests/data/make_layer_reference.py   # writes tests/data/layer_reference.npz (torch==2.13.0)

Stored in float32 to keep the file small (inputs, weights and cotangents are regenerated from seeds); the test
compares with it at float32 precision.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from layer_cases import CASES, cotangent, inputs, weights  # noqa: E402

TORCH = SimpleNamespace(
    nn=torch.nn, F=torch.nn.functional, rnn=torch.nn.utils.rnn, asarray=torch.as_tensor, concat=torch.cat,
    float64=torch.float64,
)


def reference(case) -> dict[str, np.ndarray]:
    """PyTorch's output, input gradients, parameter gradients and state after the forward pass, in float64."""
    torch.manual_seed(0)
    xs = [torch.tensor(x, requires_grad=True) for x in inputs(case)]
    module = None
    if case.build is not None:
        module = case.build(TORCH).double()
        state = module.state_dict()
        new = weights(case, {k: (tuple(v.shape), v.is_floating_point()) for k, v in state.items()})
        module.load_state_dict({k: torch.tensor(new[k]) if k in new else v for k, v in state.items()})
        module.train(case.train)
    out = case.forward(TORCH, module, *xs)
    out.backward(torch.tensor(cotangent(case, tuple(out.shape))))
    res = {"out": out.detach().numpy()}
    for i, x in enumerate(xs):
        res[f"grad_x{i}"] = x.grad.numpy()
    if module is not None:
        for k, p in module.named_parameters():
            res[f"grad/{k}"] = p.grad.numpy()
        for k, b in module.named_buffers():
            res[f"state/{k}"] = b.numpy()
    return res


def main():
    # one flat float32 array and a table of (name, offset, shape): a zip member per array would double the file
    names, chunks, offsets, shapes, at = [], [], [], [], 0
    for case in CASES:
        for k, v in reference(case).items():
            names.append(f"{case.name}/{k}")
            chunks.append(v.astype(np.float32).reshape(-1))
            offsets.append(at)
            shapes.append(",".join(map(str, v.shape)))
            at += v.size
    np.savez_compressed(
        Path(__file__).with_name("layer_reference.npz"), values=np.concatenate(chunks), names=np.array(names),
        offsets=np.array(offsets), shapes=np.array(shapes),
    )


if __name__ == "__main__":
    main()
