"""The PyTorch parity cases of tests/test_layer_parity.py, shared with the script that records PyTorch's results
(tests/data/make_layer_reference.py).

A case builds its module from a namespace ``lib`` that is either PyTorch's (``lib.nn = torch.nn``) or funclib's,
and runs ``forward(lib, module, *inputs)`` to one tensor, so the same line describes both. Inputs, weights (every
floating entry of the state_dict, drawn from NumPy) and the output cotangent are drawn from NumPy generators seeded
by the case's name, so only PyTorch's outputs and gradients need storing.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Any], Any] | None  # lib -> module (None: a functional case)
    shapes: tuple[tuple[int, ...], ...]
    forward: Callable[..., Any] = lambda lib, m, *xs: m(*xs)  # noqa: E731
    train: bool = True


def rng(*parts: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(parts).encode()))


def inputs(case: Case) -> list[np.ndarray]:
    return [rng(case.name, "x", str(i)).standard_normal(s) for i, s in enumerate(case.shapes)]


def weights(case: Case, state: dict[str, tuple[tuple[int, ...], bool]]) -> dict[str, np.ndarray]:
    """New values for the floating entries of a state_dict, given ``{key: (shape, is_float)}``."""
    out = {}
    for k, (shape, is_float) in state.items():
        if not is_float:
            continue
        g = rng(case.name, "w", k)
        out[k] = g.uniform(0.5, 1.5, shape) if "running_var" in k else 0.5 * g.standard_normal(shape)
    return out


def cotangent(case: Case, shape) -> np.ndarray:
    return rng(case.name, "ct").standard_normal(shape)


def _packed(lengths, batch_first=False):
    def forward(lib, m, x):
        packed = lib.rnn.pack_padded_sequence(x, lengths, batch_first=batch_first, enforce_sorted=False)
        out, state = m(packed)
        h = state[0] if isinstance(state, tuple) else state
        padded = lib.rnn.pad_packed_sequence(out, batch_first=batch_first)[0]
        return lib.concat([padded.reshape(-1), h.reshape(-1)])

    return forward


def _causal(lib, m, tgt, memory):
    mask = lib.nn.Transformer.generate_square_subsequent_mask(tgt.shape[0]).double()
    return m(tgt, memory, tgt_mask=mask, tgt_is_causal=True)


def _padded_memory(lib, m, tgt, memory):
    pad = np.zeros((memory.shape[1], memory.shape[0]), bool)  # (N, S): memory is (S, N, E)
    pad[1, -2:] = True
    return m(tgt, memory, memory_key_padding_mask=lib.asarray(pad))


def _transformer(lib, m, src, tgt):
    mask = lib.nn.Transformer.generate_square_subsequent_mask(tgt.shape[1]).double()
    return m(src, tgt, tgt_mask=mask)


def _methods(lib, m, x):
    # (2, 3, 4) -> unsqueeze/permute/flatten/view/squeeze/to, with the integer and size methods mixed in
    y = x.view(6, 4).unsqueeze(0).permute(2, 0, 1).flatten(1, 2).squeeze(0).unsqueeze(1).squeeze(1)
    y = y.to(lib.float64) * x.numel() + x.detach().long().double().sum() + x.dim()
    return y.float().double().unsqueeze(-1).flatten()


CASES = [
    Case("conv3d_reflect", lambda lib: lib.nn.Conv3d(2, 3, 3, padding=1, padding_mode="reflect"), ((1, 2, 3, 4, 3),)),
    Case(
        "conv3d_groups_circular",
        lambda lib: lib.nn.Conv3d(4, 4, (2, 3, 1), stride=(1, 2, 1), padding=(1, 1, 0), groups=2,
                                  padding_mode="circular"),
        ((1, 4, 3, 5, 4),),
    ),
    Case(
        "conv2d_same_replicate",
        lambda lib: lib.nn.Conv2d(2, 3, 3, padding="same", dilation=2, padding_mode="replicate"),
        ((2, 2, 6, 5),),
    ),
    Case("conv1d_circular", lambda lib: lib.nn.Conv1d(2, 2, 3, padding=2, padding_mode="circular"), ((2, 2, 5),)),
    Case(
        "conv_transpose3d",
        lambda lib: lib.nn.ConvTranspose3d(2, 3, 3, stride=2, padding=1, output_padding=1),
        ((1, 2, 3, 2, 3),),
    ),
    Case("max_pool3d", lambda lib: lib.nn.MaxPool3d(2, stride=1, padding=1), ((1, 2, 3, 4, 3),)),
    Case(
        "avg_pool3d",
        lambda lib: lib.nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
        ((1, 2, 5, 4, 5),),
    ),
    Case("adaptive_avg_pool3d", lambda lib: lib.nn.AdaptiveAvgPool3d((2, 3, 1)), ((1, 2, 5, 4, 3),)),
    Case("batch_norm3d", lambda lib: lib.nn.BatchNorm3d(2), ((3, 2, 2, 3, 2),)),
    Case(
        "instance_norm1d_tracked",
        lambda lib: lib.nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
        ((2, 3, 6),),
    ),
    Case(
        "instance_norm1d_tracked_eval",
        lambda lib: lib.nn.InstanceNorm1d(3, affine=True, track_running_stats=True),
        ((2, 3, 6),),
        train=False,
    ),
    Case("instance_norm2d", lambda lib: lib.nn.InstanceNorm2d(3), ((2, 3, 4, 5),)),
    Case(
        "instance_norm3d_unbatched",
        lambda lib: lib.nn.InstanceNorm3d(2, affine=True, momentum=None, track_running_stats=True),
        ((2, 3, 3, 3),),
    ),
    Case("rms_norm", lambda lib: lib.nn.RMSNorm((3, 4)), ((2, 3, 4),)),
    Case("rms_norm_eps", lambda lib: lib.nn.RMSNorm(4, eps=1e-3, elementwise_affine=False), ((2, 3, 4),)),
    Case("local_response_norm", lambda lib: lib.nn.LocalResponseNorm(3, 0.1, 0.6, 1.5), ((2, 5, 3, 2),)),
    Case("local_response_norm_3d", lambda lib: lib.nn.LocalResponseNorm(2), ((2, 4, 5),)),
    Case(
        "decoder_layer_causal",
        lambda lib: lib.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0),
        ((3, 2, 4), (4, 2, 4)),
        _causal,
    ),
    Case(
        "decoder_layer_norm_first_eval",
        lambda lib: lib.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0, activation="gelu", norm_first=True),
        ((3, 2, 4), (4, 2, 4)),
        _padded_memory,
        train=False,
    ),
    Case(
        "decoder",
        lambda lib: lib.nn.TransformerDecoder(
            lib.nn.TransformerDecoderLayer(4, 2, 6, dropout=0.0), 2, lib.nn.LayerNorm(4)
        ),
        ((3, 2, 4), (4, 2, 4)),
        _causal,
    ),
    Case(
        "transformer",
        lambda lib: lib.nn.Transformer(4, 2, 1, 2, 6, dropout=0.0, batch_first=True),
        ((2, 4, 4), (2, 3, 4)),
        _transformer,
    ),
    Case(
        "transformer_eval",
        lambda lib: lib.nn.Transformer(4, 2, 2, 1, 6, dropout=0.0, batch_first=True, norm_first=True),
        ((2, 4, 4), (2, 3, 4)),
        _transformer,
        train=False,
    ),
    Case("upsample_nearest", lambda lib: lib.nn.Upsample(scale_factor=(2, 1.5)), ((1, 2, 3, 4),)),
    Case("upsample_nearest_exact", lambda lib: lib.nn.Upsample(size=7, mode="nearest-exact"), ((1, 2, 3),)),
    Case("upsample_linear", lambda lib: lib.nn.Upsample(scale_factor=1.7, mode="linear"), ((2, 2, 5),)),
    Case("upsample_bilinear", lambda lib: lib.nn.Upsample(scale_factor=2, mode="bilinear"), ((1, 2, 3, 4),)),
    Case("upsampling_bilinear2d", lambda lib: lib.nn.UpsamplingBilinear2d(size=(5, 3)), ((1, 2, 3, 4),)),
    Case(
        "upsample_trilinear_align",
        lambda lib: lib.nn.Upsample(size=(3, 4, 2), mode="trilinear", align_corners=True),
        ((1, 1, 2, 3, 4),),
    ),
    Case("pixel_shuffle", lambda lib: lib.nn.PixelShuffle(2), ((2, 8, 2, 3),)),
    Case("pixel_unshuffle", lambda lib: lib.nn.PixelUnshuffle(2), ((2, 2, 4, 6),)),
    Case("lstm_packed", lambda lib: lib.nn.LSTM(2, 3, num_layers=2, bidirectional=True), ((5, 3, 2),),
         _packed([2, 5, 3])),
    Case("gru_packed_batch_first", lambda lib: lib.nn.GRU(3, 4, batch_first=True), ((3, 4, 3),),
         _packed([4, 1, 2], batch_first=True)),
    Case("rnn_packed_eval", lambda lib: lib.nn.RNN(3, 4, bidirectional=True), ((4, 2, 3),), _packed([4, 3]),
         train=False),
    Case("pad_reflect", None, ((2, 3, 5, 4),), lambda lib, m, x: lib.F.pad(x, (2, 1, 3, 0), mode="reflect")),
    Case("pad_replicate", None, ((2, 3, 4),), lambda lib, m, x: lib.F.pad(x, (3, 2), mode="replicate")),
    Case("pad_circular", None, ((1, 2, 3, 4, 2),), lambda lib, m, x: lib.F.pad(x, (1, 2, 0, 4, 2, 1),
                                                                                mode="circular")),
    Case("conv3d_functional", None, ((2, 2, 4, 3, 3), (4, 1, 2, 2, 3), (4,)),
         lambda lib, m, x, w, b: lib.F.conv3d(x, w, b, stride=(2, 1, 1), padding=(1, 0, 1), groups=2)),
    Case("conv_transpose3d_functional", None, ((1, 2, 2, 3, 2), (2, 2, 2, 3, 2)),
         lambda lib, m, x, w: lib.F.conv_transpose3d(x, w, stride=(1, 2, 2), padding=(0, 1, 0), dilation=(2, 1, 1))),
    Case("max_pool3d_functional", None, ((1, 2, 4, 5, 4),),
         lambda lib, m, x: lib.F.max_pool3d(x, (2, 3, 2), stride=2, ceil_mode=True)),
    Case("avg_pool3d_functional", None, ((1, 2, 4, 5, 4),),
         lambda lib, m, x: lib.F.avg_pool3d(x, 2, stride=(1, 2, 2), padding=1, divisor_override=3)),
    Case("interpolate_area", None, ((1, 2, 5, 7),), lambda lib, m, x: lib.F.interpolate(x, size=(2, 3), mode="area")),
    Case("interpolate_recompute", None, ((1, 2, 5, 7),),
         lambda lib, m, x: lib.F.interpolate(x, scale_factor=1.3, mode="bilinear", recompute_scale_factor=True)),
    Case("tensor_methods", None, ((2, 3, 4),), _methods),
]
