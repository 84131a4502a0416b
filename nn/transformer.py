"""Attention and the Transformer: ``MultiheadAttention``, ``TransformerEncoderLayer``, ``TransformerEncoder``,
``TransformerDecoderLayer``, ``TransformerDecoder`` and ``Transformer``, with PyTorch's parameter names
(``in_proj_weight``, ``out_proj.weight``, ``linear1``, ``norm1``, ...), defaults and mask conventions, so PyTorch
checkpoints load.

>>> import funclib as fl, funclib.nn as nn
>>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
>>> nn.TransformerEncoder(layer, num_layers=2)(fl.ones((2, 5, 16))).shape
(2, 5, 16)
"""

from __future__ import annotations

import copy
import math

import numpy as np

import funclib as fl
from funclib.errors import ShapeError

from . import functional as F
from . import init
from .container import ModuleList
from .layers import Dropout, LayerNorm, Linear, _check_divides, _dtype
from .module import Module, Parameter, _split_key

__all__ = [
    "MultiheadAttention",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "TransformerDecoderLayer",
    "TransformerDecoder",
    "Transformer",
]


def _additive(mask, dtype, op: str):
    """A boolean mask (True = masked out) or a float mask as an additive float mask."""
    m = fl.asarray(mask)
    if m.dtype == fl.bool:
        return fl.where(m, -math.inf, fl.zeros((), dtype=dtype))
    if m.dtype not in (fl.float16, fl.bfloat16, fl.float32, fl.float64):
        raise TypeError(f"{op}: masks must be bool or float, got {m.dtype.name}")
    return m.astype(dtype)


class MultiheadAttention(Module):
    """Multi-head attention ``softmax(Q K^T / sqrt(d)) V`` over ``num_heads`` heads, PyTorch's layout.

    Inputs are ``(L, N, E)`` (``(N, L, E)`` with ``batch_first=True``, or unbatched ``(L, E)``). Masks follow
    PyTorch: in ``attn_mask`` (``(L, S)`` or ``(N * num_heads, L, S)``) and ``key_padding_mask`` (``(N, S)``) a
    True entry is *not* allowed to attend; float masks are added to the scores. ``is_causal=True`` without an
    ``attn_mask`` builds the causal mask.

    Args:
        embed_dim: the model's features ``E``, split over the heads.
        num_heads: the heads; ``embed_dim`` must be a multiple.
        dropout: dropout on the attention weights in training mode (default 0).
        bias: learn the projections' biases (default True).
        add_bias_kv: learn a bias key and value appended to the sequence (default False).
        add_zero_attn: append a zero key and value (default False).
        kdim: the keys' features (default ``embed_dim``).
        vdim: the values' features (default ``embed_dim``).
        batch_first: inputs and outputs are ``(N, L, E)`` (default False).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator).

    Returns:
        A module whose ``forward(query, key, value, ...)`` returns ``(attn_output, attn_weights)``; the weights are
        averaged over heads unless ``average_attn_weights=False``, and None when ``need_weights=False``.

    >>> mha = nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = fl.ones((3, 5, 8))
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    ((3, 5, 8), (3, 5, 5))
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        _check_divides("MultiheadAttention", "num_heads", num_heads, "embed_dim", embed_dim)
        d = _dtype(dtype, device)
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.batch_first, self.add_zero_attn = batch_first, add_zero_attn
        k_out, k_in, k_q, k_k, k_v, k_bk, k_bv = _split_key(key, 7)
        # PyTorch builds out_proj (Linear init) first, then resets the projections
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=d, key=k_out)
        e = embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(init.xavier_uniform_(fl.empty((3 * e, e), dtype=d), key=k_in))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(init.xavier_uniform_(fl.empty((e, e), dtype=d), key=k_q))
            self.k_proj_weight = Parameter(init.xavier_uniform_(fl.empty((e, self.kdim), dtype=d), key=k_k))
            self.v_proj_weight = Parameter(init.xavier_uniform_(fl.empty((e, self.vdim), dtype=d), key=k_v))
        if bias:
            self.in_proj_bias = Parameter(fl.zeros((3 * e,), dtype=d))
            self.out_proj.bias = fl.zeros((e,), dtype=d)
        else:
            self.register_parameter("in_proj_bias", None)
        if add_bias_kv:
            self.bias_k = Parameter(init.xavier_normal_(fl.empty((1, 1, e), dtype=d), key=k_bk))
            self.bias_v = Parameter(init.xavier_normal_(fl.empty((1, 1, e), dtype=d), key=k_bv))
        else:
            self.register_parameter("bias_k", None)
            self.register_parameter("bias_v", None)

    def _proj(self, x, i, w):
        e = self.embed_dim
        b = None if self.in_proj_bias is None else self.in_proj_bias[i * e : (i + 1) * e]
        return F.linear(x, w, b)

    def forward(
        self,
        query,
        key,
        value,
        key_padding_mask=None,
        need_weights: bool = True,
        attn_mask=None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ):
        e, h, hd = self.embed_dim, self.num_heads, self.head_dim
        unbatched = query.ndim == 2
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ShapeError(
                f"MultiheadAttention: query, key and value must all be 3-d (or all 2-d unbatched), got shapes "
                f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}; pass (L, N, E) tensors ((N, L, E) "
                "with batch_first=True)"
            )
        if unbatched:
            query, key, value = (fl.expand_dims(t, axis=1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = fl.expand_dims(fl.asarray(key_padding_mask), axis=0)
        elif self.batch_first:
            query, key, value = (fl.permute_dims(t, (1, 0, 2)) for t in (query, key, value))
        lq, n = query.shape[0], query.shape[1]
        if query.shape[-1] != e or key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise ShapeError(
                f"MultiheadAttention(embed_dim={e}, kdim={self.kdim}, vdim={self.vdim}): got query/key/value "
                f"feature sizes {query.shape[-1]}, {key.shape[-1]}, {value.shape[-1]}; check embed_dim/kdim/vdim or "
                f"batch_first={self.batch_first}"
            )
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            q, k, v = (
                self._proj(query, 0, w[:e]),
                self._proj(key, 1, w[e : 2 * e]),
                self._proj(value, 2, w[2 * e :]),
            )
        else:
            q = self._proj(query, 0, self.q_proj_weight)
            k = self._proj(key, 1, self.k_proj_weight)
            v = self._proj(value, 2, self.v_proj_weight)
        mask = None
        if attn_mask is None and is_causal:
            attn_mask = fl.asarray(np.triu(np.ones((lq, key.shape[0]), bool), 1))
        if attn_mask is not None:
            mask = _additive(attn_mask, q.dtype, "MultiheadAttention")
            if mask.ndim == 2:
                mask = fl.reshape(mask, (1, 1) + tuple(mask.shape))
            elif mask.ndim == 3:
                mask = fl.reshape(mask, (n, h) + tuple(mask.shape[1:]))
            else:
                raise ShapeError(
                    f"MultiheadAttention: attn_mask must be 2-d or 3-d, got shape {tuple(mask.shape)}"
                )
        kpm = None if key_padding_mask is None else _additive(key_padding_mask, q.dtype, "MultiheadAttention")
        if self.bias_k is not None:
            k = fl.concat([k, fl.broadcast_to(self.bias_k, (1, n, e))], axis=0)
            v = fl.concat([v, fl.broadcast_to(self.bias_v, (1, n, e))], axis=0)
            mask = None if mask is None else F.pad(mask, (0, 1))
            kpm = None if kpm is None else F.pad(kpm, (0, 1))
        if self.add_zero_attn:
            k = fl.concat([k, fl.zeros((1, n, e), dtype=k.dtype)], axis=0)
            v = fl.concat([v, fl.zeros((1, n, e), dtype=v.dtype)], axis=0)
            mask = None if mask is None else F.pad(mask, (0, 1))
            kpm = None if kpm is None else F.pad(kpm, (0, 1))
        s = k.shape[0]
        # (L, N, E) -> (N, H, L, hd)
        qh = fl.permute_dims(fl.reshape(q, (lq, n, h, hd)), (1, 2, 0, 3))
        kh = fl.permute_dims(fl.reshape(k, (s, n, h, hd)), (1, 2, 0, 3))
        vh = fl.permute_dims(fl.reshape(v, (s, n, h, hd)), (1, 2, 0, 3))
        scores = fl.matmul(qh, fl.matrix_transpose(kh)) * (1.0 / math.sqrt(hd))
        if mask is not None:
            scores = scores + mask
        if kpm is not None:
            if tuple(kpm.shape) != (n, s):
                raise ShapeError(
                    f"MultiheadAttention: key_padding_mask must have shape (batch, source_len) = {(n, s)}, got "
                    f"{tuple(kpm.shape)}"
                )
            scores = scores + fl.reshape(kpm, (n, 1, 1, s))
        weights = fl.softmax(scores, axis=-1)
        attn = F.dropout(weights, self.dropout, self.training) if self.dropout > 0.0 else weights
        out = fl.matmul(attn, vh)  # (N, H, L, hd)
        out = fl.reshape(fl.permute_dims(out, (2, 0, 1, 3)), (lq, n, e))
        out = self.out_proj(out)
        if unbatched:
            out = out[:, 0]
        elif self.batch_first:
            out = fl.permute_dims(out, (1, 0, 2))
        if not need_weights:
            return out, None
        w = fl.mean(weights, axis=1) if average_attn_weights else weights
        return out, (w[0] if unbatched else w)

    def extra_repr(self):
        return ""


def _activation(act, op: str):
    if callable(act):
        return act
    table = {"relu": F.relu, "gelu": F.gelu}
    if act not in table:
        raise ValueError(f"{op}: activation should be 'relu', 'gelu' or a callable, got {act!r}")
    return table[act]


_LAYER_ARGS = """
        d_model: the features of each position.
        nhead: the attention heads.
        dim_feedforward: the hidden size of the feed-forward block (default 2048)."""

_LAYER_OPTIONS = """
        activation: ``"relu"``, ``"gelu"`` or a callable (default ``"relu"``).
        layer_norm_eps: the layer norms' eps (default 1e-5).
        batch_first: inputs are ``(N, L, d_model)`` (default False: ``(L, N, d_model)``).
        norm_first: normalize before each block instead of after (default False).
        bias: learn the biases of the linear layers and layer norms (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator)."""


class _TransformerLayer(Module):
    # the encoder layer has two blocks (self-attention, feed-forward), the decoder three (cross-attention between);
    # block i owns norm{i} and dropout{i}, registered in PyTorch's order so state_dicts and key streams match
    _blocks = 2

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        *k_attn, k1, k2 = _split_key(key, self._blocks + 1)
        attn = {"dropout": dropout, "bias": bias, "batch_first": batch_first, "device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, **attn, key=k_attn[0])
        if self._blocks == 3:
            self.multihead_attn = MultiheadAttention(d_model, nhead, **attn, key=k_attn[1])
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, device=device, dtype=dtype, key=k1)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, device=device, dtype=dtype, key=k2)
        self.norm_first = norm_first
        for i in range(1, self._blocks + 1):
            setattr(self, f"norm{i}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, device=device, dtype=dtype))
        for i in range(1, self._blocks + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _activation(activation, type(self).__name__)
        self.batch_first = batch_first

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(
            x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False, is_causal=is_causal
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        last = self.dropout3 if self._blocks == 3 else self.dropout2
        return last(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_TransformerLayer):
    __doc__ = f"""Self-attention and a feed-forward block with residual connections and layer norms (post-norm, or
    pre-norm with ``norm_first=True``), as ``torch.nn.TransformerEncoderLayer``.

    Submodules: ``self_attn``, ``linear1``, ``dropout``, ``linear2``, ``norm1``, ``norm2``, ``dropout1``,
    ``dropout2``.

    Args:{_LAYER_ARGS}
        dropout: dropout after attention, in and after the feed-forward block (default 0.1).{_LAYER_OPTIONS}

    Returns:
        A module whose ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)`` returns a tensor
        of ``src``'s shape.

    >>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
    >>> layer(fl.ones((2, 5, 16))).shape
    (2, 5, 16)
    """

    _blocks = 2

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (deep copies, so they start identical, as in PyTorch) and an
    optional final ``norm``.

    Args:
        encoder_layer: the layer to copy.
        num_layers: the copies.
        norm: a module applied to the output (default None).
        enable_nested_tensor: accepted for PyTorch compatibility (no nested tensors here).
        mask_check: accepted for PyTorch compatibility.

    Returns:
        A module whose ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)`` returns a tensor of
        ``src``'s shape.

    >>> layer = nn.TransformerEncoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
    >>> nn.TransformerEncoder(layer, num_layers=2)(fl.ones((2, 5, 16))).shape
    (2, 5, 16)
    """

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal: bool | None = None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            x = self.norm(x)
        return x


class TransformerDecoderLayer(_TransformerLayer):
    __doc__ = f"""Self-attention over the target, attention to the encoder's output (``memory``) and a feed-forward
    block, each with a residual connection and a layer norm (post-norm, or pre-norm with ``norm_first=True``), as
    ``torch.nn.TransformerDecoderLayer``.

    Submodules: ``self_attn``, ``multihead_attn``, ``linear1``, ``dropout``, ``linear2``, ``norm1``, ``norm2``,
    ``norm3``, ``dropout1``, ``dropout2``, ``dropout3``.

    Args:{_LAYER_ARGS}
        dropout: dropout after each block and in the feed-forward block (default 0.1).{_LAYER_OPTIONS}

    Returns:
        A module whose ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
        memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False)`` returns a tensor of ``tgt``'s
        shape.

    >>> layer = nn.TransformerDecoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
    >>> layer(fl.ones((2, 3, 16)), fl.ones((2, 5, 16))).shape
    (2, 3, 16)
    """

    _blocks = 3

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(
            x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout2(x)

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ):
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x


class TransformerDecoder(Module):
    """``num_layers`` copies of ``decoder_layer`` (deep copies, as in PyTorch) and an optional final ``norm``.

    Args:
        decoder_layer: the layer to copy.
        num_layers: the copies.
        norm: a module applied to the output (default None).

    Returns:
        A module whose ``forward(tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
        memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False)`` returns a tensor of ``tgt``'s
        shape.

    >>> layer = nn.TransformerDecoderLayer(d_model=16, nhead=4, dim_feedforward=32, batch_first=True)
    >>> nn.TransformerDecoder(layer, num_layers=2)(fl.ones((2, 3, 16)), fl.ones((2, 5, 16))).shape
    (2, 3, 16)
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(
        self,
        tgt,
        memory,
        tgt_mask=None,
        memory_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ):
        x = tgt
        for layer in self.layers:
            x = layer(
                x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, bool(tgt_is_causal),
                memory_is_causal,
            )
        if self.norm is not None:
            x = self.norm(x)
        return x


class Transformer(Module):
    """An encoder-decoder Transformer (Vaswani et al.) as ``torch.nn.Transformer``: ``encoder`` (a
    ``TransformerEncoder`` with a final ``LayerNorm``) and ``decoder`` (likewise), every weight matrix initialized
    by ``xavier_uniform_``.

    Args:
        d_model: the features of each position (default 512).
        nhead: the attention heads (default 8).
        num_encoder_layers: encoder layers (default 6).
        num_decoder_layers: decoder layers (default 6).
        dim_feedforward: the feed-forward blocks' hidden size (default 2048).
        dropout: dropout in every layer (default 0.1).
        activation: ``"relu"``, ``"gelu"`` or a callable (default ``"relu"``).
        custom_encoder: a module used as the encoder instead (default None).
        custom_decoder: a module used as the decoder instead (default None).
        layer_norm_eps: the layer norms' eps (default 1e-5).
        batch_first: inputs are ``(N, L, d_model)`` (default False: ``(L, N, d_model)``).
        norm_first: pre-norm layers (default False).
        bias: learn the biases of the linear layers and layer norms (default True).
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator).

    Returns:
        A module whose ``forward(src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
        src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None, src_is_causal=None,
        tgt_is_causal=None, memory_is_causal=False)`` returns a tensor of ``tgt``'s shape.

    >>> model = nn.Transformer(16, 4, 1, 1, 32, batch_first=True)
    >>> model(fl.ones((2, 5, 16)), fl.ones((2, 3, 16))).shape
    (2, 3, 16)
    """

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation="relu",
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        k_enc, k_dec, k_init = _split_key(key, 3)
        common = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias)
        norm = {"eps": layer_norm_eps, "bias": bias, "device": device, "dtype": dtype}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(*common, device=device, dtype=dtype, key=k_enc)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, LayerNorm(d_model, **norm))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(*common, device=device, dtype=dtype, key=k_dec)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, LayerNorm(d_model, **norm))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        # PyTorch re-draws every matrix (the copied layers included) with Glorot's uniform initialization
        owners = [(m, n) for m in self.modules() for n, p in m._parameters.items() if p is not None and p.ndim > 1]
        for (m, n), k in zip(owners, _split_key(k_init, len(owners))):
            m._parameters[n] = init.xavier_uniform_(m._parameters[n], key=k)  # in place: keeps the order

    def forward(
        self,
        src,
        tgt,
        src_mask=None,
        tgt_mask=None,
        memory_mask=None,
        src_key_padding_mask=None,
        tgt_key_padding_mask=None,
        memory_key_padding_mask=None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ):
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and tgt.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise ShapeError(
                f"Transformer: the batch sizes of src {tuple(src.shape)} and tgt {tuple(tgt.shape)} differ (axis "
                f"{batch} with batch_first={self.batch_first}); pass the same batch, or set batch_first"
            )
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise ShapeError(
                f"Transformer(d_model={self.d_model}): the features of src {tuple(src.shape)} and tgt "
                f"{tuple(tgt.shape)} must equal d_model"
            )
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(
            tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal,
            memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
        """The causal mask of ``sz`` positions: ``-inf`` above the diagonal, 0 elsewhere (float).

        Args:
            sz: the sequence length.
            device: ``None`` or ``"cpu"``.
            dtype: the mask's floating dtype (default ``fl.float32``).

        Returns:
            A ``(sz, sz)`` float tensor.

        >>> nn.Transformer.generate_square_subsequent_mask(2)
        Tensor([[  0., -inf],
                [  0.,   0.]], dtype=float32)
        """
        d = _dtype(dtype, device)
        return fl.asarray(np.triu(np.full((sz, sz), -np.inf), k=1).astype(d))
