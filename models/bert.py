"""BERT's masked language model in plain torch (Devlin et al., 2019, "BERT: Pre-training of
Deep Bidirectional Transformers for Language Understanding").

The modules carry the parameter names of transformers' ``BertForMaskedLM`` (``bert.embeddings.*``,
``bert.encoder.layer.N.*``, ``cls.predictions.*``), so its checkpoints load as they are, but
nothing of transformers' modeling code is imported (importing it pulls torch.distributed,
torch._dynamo, sympy and scipy.optimize: twice the cost of importing torch). Per layer::

    a = LayerNorm(x + W_o · softmax(Q Kᵀ / √d + mask) V)     # scaled_dot_product_attention
    y = LayerNorm(a + W_2 · act(W_1 · a))

and the head ``transform(h) = LayerNorm(act(W h))``, ``logits = transform(h) · Eᵀ + b`` with
``E`` the word embeddings and ``b`` ``cls.predictions.bias`` when the config ties them (the
default; else the decoder's own weight and bias). Positions are absolute and
every token type is 0, as in a one-segment input. :func:`plain_bert_config` says when a
config is one this module runs exactly; any other masked LM goes through transformers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn


def _gelu_tanh_written_out(x: torch.Tensor) -> torch.Tensor:
    """GELU's tanh approximation as transformers' ``NewGELUActivation`` writes it (its float
    rounding differs from ``F.gelu(approximate="tanh")``)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3.0))))


#: ``hidden_act`` values and the function each names in transformers' ``ACT2FN``.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": F.gelu,
    "gelu_new": _gelu_tanh_written_out,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "silu": F.silu,
    "swish": F.silu,
}


class _Linear(nn.Linear):
    def reset_parameters(self) -> None:
        """Left uninitialised: a checkpoint fills it (and meta-device builds stay cheap)."""


class _Embedding(nn.Embedding):
    def reset_parameters(self) -> None:
        """Left uninitialised: a checkpoint fills it."""


class _LayerNorm(nn.LayerNorm):
    def reset_parameters(self) -> None:
        """Left uninitialised: a checkpoint fills it."""


@dataclass(frozen=True)
class BertConfig:
    """The sizes of a BERT masked LM (``BertConfig``'s defaults: bert-base-uncased)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    tie_word_embeddings: bool = True


_SIZES = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "type_vocab_size",
)


def _is_size(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def plain_bert_config(config: dict[str, Any]) -> BertConfig | None:
    """The config as :class:`BertConfig` when this module computes exactly what transformers'
    ``AutoModelForMaskedLM`` builds for it, else ``None``.

    That is ``model_type`` "bert" (what ``AutoModelForMaskedLM`` dispatches on), absolute
    positions, an encoder (no decoder, no cross-attention), an activation of
    :data:`ACTIVATIONS`, heads dividing the hidden size, and every size a plain number.
    """
    if config.get("model_type") != "bert":
        return None
    if config.get("position_embedding_type", "absolute") not in (None, "absolute"):
        return None
    if config.get("is_decoder") or config.get("add_cross_attention"):
        return None
    defaults = BertConfig()
    values = {f.name: config.get(f.name, getattr(defaults, f.name)) for f in fields(BertConfig)}
    if not all(_is_size(values[name]) for name in _SIZES):
        return None
    pad = values["pad_token_id"]
    if pad is not None and not (_is_size(pad) or (pad == 0 and type(pad) is int)):
        return None
    if pad is not None and pad >= values["vocab_size"]:
        return None
    eps = values["layer_norm_eps"]
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not eps > 0:
        return None
    if not isinstance(values["tie_word_embeddings"], bool):
        return None
    if not isinstance(values["hidden_act"], str) or values["hidden_act"] not in ACTIVATIONS:
        return None
    if values["hidden_size"] % values["num_attention_heads"]:
        return None
    return BertConfig(**values)


class BertEmbeddings(nn.Module):
    """Word + absolute position + token type (always 0) embeddings, then LayerNorm."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = _Embedding(
            config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id
        )
        self.position_embeddings = _Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = _Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = _LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` token ids → ``[B, T, H]``."""
        length = input_ids.shape[1]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings.weight[0]
        x = x + self.position_embeddings.weight[:length]
        return self.LayerNorm(x)


class BertLayer(nn.Module):
    """One transformer block (post-LayerNorm), with transformers' submodule names."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        hidden, eps = config.hidden_size, config.layer_norm_eps
        self.heads = config.num_attention_heads
        self.act = ACTIVATIONS[config.hidden_act]
        self.attention = nn.ModuleDict(
            {
                "self": nn.ModuleDict(
                    {n: _Linear(hidden, hidden) for n in ("query", "key", "value")}
                ),
                "output": _dense_norm(hidden, hidden, eps),
            }
        )
        self.intermediate = nn.ModuleDict({"dense": _Linear(hidden, config.intermediate_size)})
        self.output = _dense_norm(config.intermediate_size, hidden, eps)

    def forward(self, x: torch.Tensor, attend: torch.Tensor | None) -> torch.Tensor:
        """``x [B, T, H]``; ``attend [B, 1, 1, T]`` bool (True: a real key) or ``None``."""
        batch, length, hidden = x.shape
        own = self.attention["self"]

        def split(linear: nn.Module) -> torch.Tensor:
            return linear(x).view(batch, length, self.heads, -1).transpose(1, 2)

        context = F.scaled_dot_product_attention(
            split(own["query"]), split(own["key"]), split(own["value"]), attn_mask=attend
        )
        context = context.transpose(1, 2).reshape(batch, length, hidden)
        out = self.attention["output"]
        a = out["LayerNorm"](out["dense"](context) + x)
        h = self.act(self.intermediate["dense"](a))
        return self.output["LayerNorm"](self.output["dense"](h) + a)


def _dense_norm(inputs: int, hidden: int, eps: float) -> nn.ModuleDict:
    return nn.ModuleDict(
        {"dense": _Linear(inputs, hidden), "LayerNorm": _LayerNorm(hidden, eps=eps)}
    )


class BertBody(nn.Module):
    """Embeddings and the stack of layers (``bert.*``; BertForMaskedLM has no pooler)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        self.encoder = nn.ModuleDict(
            {"layer": nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))}
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Last hidden states ``[B, T, H]`` of ``[B, T]`` ids and their 0/1 mask."""
        attend = None
        if not bool(attention_mask.all()):
            attend = attention_mask.bool()[:, None, None, :]
        x = self.embeddings(input_ids)
        for layer in self.encoder["layer"]:
            x = layer(x, attend)
        return x


class BertPredictionHead(nn.Module):
    """``cls.predictions``: transform (dense → act → LayerNorm), decoder onto the vocabulary."""

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding) -> None:
        super().__init__()
        hidden = config.hidden_size
        act = ACTIVATIONS[config.hidden_act]
        self.transform = _Transform(hidden, act, config.layer_norm_eps)
        self.bias = nn.Parameter(torch.empty(config.vocab_size))
        self.decoder = _Linear(hidden, config.vocab_size)
        if config.tie_word_embeddings:
            self.decoder.weight = word_embeddings.weight
            self.decoder.bias = self.bias


class _Transform(nn.Module):
    def __init__(self, hidden: int, act: Callable[[torch.Tensor], torch.Tensor], eps: float):
        super().__init__()
        self.act = act
        self.dense = _Linear(hidden, hidden)
        self.LayerNorm = _LayerNorm(hidden, eps=eps)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(h)))


class BertMaskedLM(nn.Module):
    """``BertForMaskedLM``'s parameters and forward pass (no dropout: inference only)."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.config = config
        self.bert = BertBody(config)
        self.cls = nn.ModuleDict(
            {"predictions": BertPredictionHead(config, self.bert.embeddings.word_embeddings)}
        )

    def hidden_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The body's last hidden states ``[B, T, H]``."""
        return self.bert(input_ids, attention_mask)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """MLM logits ``[B, T, |V|]``."""
        return self.cls["predictions"].decoder(
            self.cls["predictions"].transform(self.hidden_states(input_ids, attention_mask))
        )

    def tie_weights(self) -> None:
        """When the config ties them, the decoder is the word embeddings and the head's bias
        (transformers ties both or neither)."""
        predictions = self.cls["predictions"]
        if self.config.tie_word_embeddings:
            predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
            predictions.decoder.bias = predictions.bias

    def get_input_embeddings(self) -> nn.Embedding:
        """The word-embedding table (as transformers' models name it)."""
        return self.bert.embeddings.word_embeddings
