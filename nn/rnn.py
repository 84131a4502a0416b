"""Recurrent layers ``RNN``, ``LSTM``, ``GRU`` (multi-layer, bidirectional, ``batch_first``, inter-layer dropout,
LSTM ``proj_size``), with PyTorch's parameter names (``weight_ih_l0``, ``bias_hh_l1_reverse``, ...), gate order
and init. Each layer and direction is one ``fl.scan`` over time (the loop is traced once, not unrolled); the input
projection of all time steps is one matrix multiply before the loop.

>>> import funclib as fl, funclib.nn as nn
>>> lstm = nn.LSTM(8, 16, num_layers=2, batch_first=True)
>>> out, (h, c) = lstm(fl.ones((4, 10, 8)))
>>> out.shape, h.shape
((4, 10, 16), (2, 4, 16))
"""

from __future__ import annotations

import math

import funclib as fl
from funclib.checks import check_int, check_probability
from funclib.errors import ShapeError

from . import functional as F
from . import init
from .layers import _dtype
from .module import Module, Parameter, _split_key

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]


def _linear(x, w, b):
    y = fl.matmul(x, fl.matrix_transpose(w))
    return y if b is None else y + b


def _rnn_step(nonlinearity):
    act = fl.tanh if nonlinearity == "tanh" else fl.relu

    def step(state, gi, w_hh, b_hh, w_hr):
        (h,) = state
        return (act(gi + _linear(h, w_hh, b_hh)),)

    return step


def _lstm_step(state, gi, w_hh, b_hh, w_hr):
    h, c = state
    gates = gi + _linear(h, w_hh, b_hh)
    i, f, g, o = fl.split(gates, 4, axis=-1)
    c = fl.sigmoid(f) * c + fl.sigmoid(i) * fl.tanh(g)
    h = fl.sigmoid(o) * fl.tanh(c)
    if w_hr is not None:
        h = _linear(h, w_hr, None)
    return h, c


def _gru_step(state, gi, w_hh, b_hh, w_hr):
    (h,) = state
    gh = _linear(h, w_hh, b_hh)
    r_x, z_x, n_x = fl.split(gi, 3, axis=-1)
    r_h, z_h, n_h = fl.split(gh, 3, axis=-1)
    r = fl.sigmoid(r_x + r_h)
    z = fl.sigmoid(z_x + z_h)
    n = fl.tanh(n_x + r * n_h)
    return ((1.0 - z) * n + z * h,)


# mode -> (one time step, gates per hidden unit)
_MODES = {
    "RNN_TANH": (_rnn_step("tanh"), 1),
    "RNN_RELU": (_rnn_step("relu"), 1),
    "LSTM": (_lstm_step, 4),
    "GRU": (_gru_step, 3),
}


def _uniform_parameters(module: Module, shapes: dict[str, tuple[int, ...]], hidden_size: int, dtype, keys) -> None:
    """PyTorch's recurrent init: every parameter ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``, one key each."""
    bound = 1.0 / math.sqrt(hidden_size)
    for (name, shape), k in zip(shapes.items(), keys):
        setattr(module, name, Parameter(init.uniform_(fl.empty(shape, dtype=dtype), -bound, bound, key=k)))


_RNN_ARGS = """
        input_size: the features of each time step of the input.
        hidden_size: the features of the hidden state.
        num_layers: stacked layers, each reading the previous one's outputs (default 1)."""
_RNN_OPTIONS = """
        bias: learn ``bias_ih`` and ``bias_hh`` (default True).
        batch_first: inputs and outputs are ``(N, L, features)`` instead of ``(L, N, features)`` (default False).
        dropout: dropout on the outputs of every layer but the last, in training mode (default 0).
        bidirectional: run a second direction over the reversed sequence and concatenate (default False)."""
_CELL_ARGS = """
        input_size: the features of the input.
        hidden_size: the features of the hidden state.
        bias: learn ``bias_ih`` and ``bias_hh`` (default True)."""
_DEVICE_DTYPE_KEY = """
        device: ``None`` or ``"cpu"``.
        dtype: the parameters' floating dtype (default ``fl.float32``).
        key: a ``fl.random`` key for the initialization (default: the global generator)."""


class _RNNBase(Module):
    _mode = "RNN_TANH"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__()
        name = type(self).__name__
        check_int(input_size, name, "input_size", min=1)
        check_int(hidden_size, name, "hidden_size", min=1)
        check_int(num_layers, name, "num_layers", min=1)
        check_probability(dropout, name, "dropout")
        if proj_size < 0 or (proj_size and self._mode != "LSTM"):
            raise ValueError(f"{name}: proj_size must be 0 (only LSTM supports projections), got {proj_size}")
        if proj_size >= hidden_size and proj_size:
            raise ValueError(f"{name}: proj_size={proj_size} must be smaller than hidden_size={hidden_size}")
        d = _dtype(dtype, device)
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        dirs = 2 if bidirectional else 1
        real_hidden = proj_size or hidden_size
        gate = _MODES[self._mode][1] * hidden_size
        shapes = {}
        for layer in range(num_layers):
            in_size = input_size if layer == 0 else real_hidden * dirs
            for direction in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                shapes[f"weight_ih{sfx}"], shapes[f"weight_hh{sfx}"] = (gate, in_size), (gate, real_hidden)
                if bias:
                    shapes[f"bias_ih{sfx}"], shapes[f"bias_hh{sfx}"] = (gate,), (gate,)
                if proj_size:
                    shapes[f"weight_hr{sfx}"] = (proj_size, hidden_size)
        _uniform_parameters(self, shapes, hidden_size, d, _split_key(key, len(shapes)))
        self._flat_names = tuple(shapes)

    def _weights(self, layer, direction):
        sfx = f"_l{layer}" + ("_reverse" if direction else "")
        g = lambda n: getattr(self, n + sfx) if (n + sfx) in self._parameters else None  # noqa: E731
        return g("weight_ih"), g("weight_hh"), g("bias_ih"), g("bias_hh"), g("weight_hr")

    def _check_input(self, input):
        name = type(self).__name__
        if input.ndim not in (2, 3) or input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{name}(input_size={self.input_size}): expected input of shape "
                f"{'(N, L, ' if self.batch_first else '(L, N, '}{self.input_size}) or unbatched "
                f"(L, {self.input_size}), got {tuple(input.shape)}; check input_size, or batch_first="
                f"{not self.batch_first} if the batch axis comes {'second' if self.batch_first else 'first'}"
            )

    def forward(self, input, hx=None):
        self._check_input(input)
        name = type(self).__name__
        unbatched = input.ndim == 2
        x = (
            fl.expand_dims(input, axis=1)
            if unbatched
            else (fl.permute_dims(input, (1, 0, 2)) if self.batch_first else input)
        )
        n = x.shape[1]
        dirs = 2 if self.bidirectional else 1
        real_hidden = self.proj_size or self.hidden_size
        lstm = self._mode == "LSTM"
        h_shape = (self.num_layers * dirs, n, real_hidden)
        c_shape = (self.num_layers * dirs, n, self.hidden_size)
        if hx is None:
            h0 = fl.zeros(h_shape, dtype=x.dtype)
            c0 = fl.zeros(c_shape, dtype=x.dtype) if lstm else None
        else:
            h0, c0 = hx if lstm else (hx, None)
            if unbatched:
                h0 = fl.expand_dims(h0, axis=1)
                c0 = fl.expand_dims(c0, axis=1) if c0 is not None else None
            if tuple(h0.shape) != h_shape or (lstm and tuple(c0.shape) != c_shape):
                raise ShapeError(
                    f"{name}: initial state shapes {tuple(h0.shape)}"
                    f"{'' if not lstm else ', ' + str(tuple(c0.shape))} do not match the expected {h_shape}"
                    f"{'' if not lstm else ', ' + str(c_shape)}; pass states of shape (num_layers * directions, N, "
                    "hidden size)"
                )
        step = _MODES[self._mode][0]
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                gi = _linear(x, w_ih, b_ih)  # (L, N, gates) for every step at once
                i = layer * dirs + direction
                state0 = (h0[i], c0[i]) if lstm else (h0[i],)

                def body(state, g, w_hh=w_hh, b_hh=b_hh, w_hr=w_hr):
                    new = step(state, g, w_hh, b_hh, w_hr)
                    return new, new[0]

                state, ys = fl.scan(body, state0, gi, reverse=bool(direction))
                outs.append(ys)
                h_n.append(state[0])
                if lstm:
                    c_n.append(state[1])
            x = outs[0] if dirs == 1 else fl.concat(outs, axis=-1)
            if self.dropout > 0.0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = x
        hn = fl.stack(h_n)
        cn = fl.stack(c_n) if lstm else None
        if unbatched:
            out, hn = out[:, 0], hn[:, 0]
            cn = cn[:, 0] if lstm else None
        elif self.batch_first:
            out = fl.permute_dims(out, (1, 0, 2))
        return (out, (hn, cn)) if lstm else (out, hn)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self._mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(_RNNBase):
    __doc__ = f"""Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{{t-1}} W_hh^T + b_hh)`` (or relu), one ``fl.scan``
    per layer and direction.

    Args:{_RNN_ARGS}
        nonlinearity: ``"tanh"`` or ``"relu"``.{_RNN_OPTIONS}{_DEVICE_DTYPE_KEY}

    Returns:
        A module whose ``forward(input, h_0=None)`` returns ``(output, h_n)``: the last layer's hidden states
        ``(L, N, D * hidden_size)`` and every layer's final one ``(D * num_layers, N, hidden_size)``.

    >>> out, h = nn.RNN(3, 5, num_layers=2)(fl.ones((7, 4, 3)))
    >>> out.shape, h.shape
    ((7, 4, 5), (2, 4, 5))
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.__dict__["_mode"] = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            0,
            device,
            dtype,
            key=key,
        )
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    __doc__ = f"""Long short-term memory, gates ``i, f, g, o`` in PyTorch's order, one ``fl.scan`` per layer and
    direction; ``proj_size > 0`` projects the hidden state with ``weight_hr``.

    Args:{_RNN_ARGS}{_RNN_OPTIONS}
        proj_size: the size of the projected hidden state (default 0: none).{_DEVICE_DTYPE_KEY}

    Returns:
        A module whose ``forward(input, (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``.

    >>> out, (h, c) = nn.LSTM(3, 5, batch_first=True)(fl.ones((4, 7, 3)))
    >>> out.shape, h.shape, c.shape
    ((4, 7, 5), (1, 4, 5), (1, 4, 5))
    """

    _mode = "LSTM"


class GRU(_RNNBase):
    __doc__ = f"""Gated recurrent unit, gates ``r, z, n`` in PyTorch's order
    (``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``), one ``fl.scan`` per layer and direction.

    Args:{_RNN_ARGS}{_RNN_OPTIONS}
        proj_size: must be 0 (projections are LSTM's).{_DEVICE_DTYPE_KEY}

    Returns:
        A module whose ``forward(input, h_0=None)`` returns ``(output, h_n)``.

    >>> out, h = nn.GRU(3, 5, bidirectional=True)(fl.ones((7, 4, 3)))
    >>> out.shape, h.shape
    ((7, 4, 10), (2, 4, 5))
    """

    _mode = "GRU"


class _CellBase(Module):
    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None, dtype=None, *, key=None):
        super().__init__()
        d = _dtype(dtype, device)
        check_int(input_size, type(self).__name__, "input_size", min=1)
        check_int(hidden_size, type(self).__name__, "hidden_size", min=1)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gate = _MODES[self._mode][1] * hidden_size
        shapes = {"weight_ih": (gate, input_size), "weight_hh": (gate, hidden_size)}
        shapes.update(bias_ih=(gate,), bias_hh=(gate,))
        # four draws with or without biases: a key (or the global generator) gives the same weights either way
        keys = _split_key(key, 4)
        if not bias:
            del shapes["bias_ih"], shapes["bias_hh"]
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        _uniform_parameters(self, shapes, hidden_size, d, keys)

    def forward(self, input, hx=None):
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise ShapeError(
                f"{type(self).__name__}({self.input_size}, {self.hidden_size}): expected input (N, {self.input_size}) "
                f"or ({self.input_size},), got {tuple(input.shape)}; check input_size (features on the last axis)"
            )
        lstm = self._mode == "LSTM"
        unbatched = input.ndim == 1
        x = fl.expand_dims(input, axis=0) if unbatched else input
        if hx is None:
            state = (fl.zeros((x.shape[0], self.hidden_size), dtype=x.dtype),) * (2 if lstm else 1)
        else:
            state = tuple(hx) if lstm else (hx,)
            if unbatched:
                state = tuple(fl.expand_dims(h, axis=0) for h in state)
        step = _MODES[self._mode][0]
        state = step(state, _linear(x, self.weight_ih, self.bias_ih), self.weight_hh, self.bias_hh, None)
        if unbatched:
            state = tuple(h[0] for h in state)
        return state if lstm else state[0]

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    __doc__ = f"""One step of ``RNN``: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or relu).

    Args:{_CELL_ARGS}
        nonlinearity: ``"tanh"`` or ``"relu"``.{_DEVICE_DTYPE_KEY}

    Returns:
        A module whose ``forward(input, h=None)`` maps ``(N, input_size)`` (or unbatched) to ``h'``.

    >>> nn.RNNCell(3, 5)(fl.ones((4, 3))).shape
    (4, 5)
    """

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device=None,
        dtype=None,
        *,
        key=None,
    ):
        super().__init__(input_size, hidden_size, bias, device, dtype, key=key)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class LSTMCell(_CellBase):
    __doc__ = f"""One step of ``LSTM``.

    Args:{_CELL_ARGS}{_DEVICE_DTYPE_KEY}

    Returns:
        A module whose ``forward(input, (h, c)=None)`` returns ``(h', c')``.

    >>> h, c = nn.LSTMCell(3, 5)(fl.ones((4, 3)))
    >>> h.shape, c.shape
    ((4, 5), (4, 5))
    """

    _mode = "LSTM"


class GRUCell(_CellBase):
    __doc__ = f"""One step of ``GRU``.

    Args:{_CELL_ARGS}{_DEVICE_DTYPE_KEY}

    Returns:
        A module whose ``forward(input, h=None)`` returns ``h'``.

    >>> nn.GRUCell(3, 5)(fl.ones(3)).shape
    (5,)
    """

    _mode = "GRU"
