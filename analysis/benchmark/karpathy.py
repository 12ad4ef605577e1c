"""Karpathy's split JSON of MSCOCO and Flickr30k (``dataset_coco.json``,
``dataset_flickr30k.json``): ``{"images": [{"filename", "filepath"?, "split", "sentences":
[{"raw"}], "imgid", "cocoid"?}]}``, with the images under a root folder of the user's.

A split's images are the items; each image's captions (five, usually) are both the item's
captions (Exact@k, FLOPs) and text queries whose one relevant item is that image — the
text→image evaluation VDR and Dense2Sparse report. An item's id is its ``cocoid``, else its
``imgid``, else its file name; a query's id is ``<item id>_<caption number>``. The JSON is
read once with ``json.load`` (COCO's is about 150 MB).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from lexlens.analysis.benchmark.dataset import Benchmark, file_stamp, pick_split
from lexlens.analysis.benchmark.trec import Problems
from lexlens.analysis.collections.items import Skipped, SourceItem
from lexlens.analysis.core.inputs import inside_folder, read_bytes
from lexlens.models.base import InputError

#: Karpathy's JSON is read whole; a larger file is refused.
MAX_JSON_BYTES = 1024 * 1024 * 1024


def _item_id(entry: dict, position: int) -> str:
    for key in ("cocoid", "imgid"):
        if isinstance(entry.get(key), (int, str)) and str(entry[key]).strip():
            return str(entry[key])
    return str(entry.get("filename") or position)


def open_karpathy(
    path: Path, *, split: str | None = None, images: str | Path | None = None
) -> Benchmark:
    """One split (default ``test``) of a Karpathy JSON; ``images`` is the image root (default:
    the JSON's folder)."""
    if path.is_dir():
        found = sorted(path.glob("dataset_*.json"))
        if len(found) != 1:
            raise InputError(f"{path}: expected one dataset_*.json, found {len(found)}")
        path = found[0]
    label = str(path)
    data, _ = read_bytes(path, label, limit=MAX_JSON_BYTES)
    try:
        document = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{label}: not a JSON document ({exc})") from None
    entries = document.get("images") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{label}: no 'images' list (Karpathy's split format)")
    splits = sorted(
        {str(e.get("split")) for e in entries if isinstance(e, dict) and e.get("split")}
    )
    chosen = pick_split(splits, split, label)
    root = Path(images).expanduser() if images is not None else path.parent
    if not root.is_dir():
        raise InputError(f"--images {root}: not a folder")
    problems = Problems()
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    chosen_entries: list[tuple[int, dict]] = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.add(label, 0, f"images[{position}] is not an object")
            continue
        if str(entry.get("split")) != chosen:
            continue
        item = _item_id(entry, position)
        captions = [s.get("raw") for s in entry.get("sentences") or [] if isinstance(s, dict)]
        captions = [c.strip() for c in captions if isinstance(c, str) and c.strip()]
        if not captions:
            problems.add(label, 0, f"images[{position}] ({item}) has no caption")
        for j, caption in enumerate(captions):
            queries[f"{item}_{j}"] = caption
            qrels[f"{item}_{j}"] = {item: 1}
        chosen_entries.append((position, entry))
    if not chosen_entries:
        raise InputError(f"{label}: the split {chosen!r} has no images")

    def read(found: Problems) -> Iterator[SourceItem | Skipped]:
        for position, entry in chosen_entries:
            where = f"{label}:images[{position}]"
            name = str(entry.get("filename") or "").strip()
            if not name:
                yield Skipped(where, "no filename")
                continue
            relative = f"{entry.get('filepath') or ''}/{name}".strip("/")
            inside = inside_folder(root, relative)
            if inside is None:
                yield Skipped(where, f"image path {relative!r} leaves {root}: refused")
                continue
            captions = [s.get("raw") for s in entry.get("sentences") or [] if isinstance(s, dict)]
            yield SourceItem(
                _item_id(entry, position), image=inside,
                captions=tuple(c.strip() for c in captions if isinstance(c, str) and c.strip()),
                where=where,
            )  # fmt: skip

    return Benchmark(
        kind="karpathy", label=label, root=root, split=chosen, splits=splits, queries=queries,
        qrels=qrels, read_items=read, fingerprint_parts=lambda: [file_stamp(path), str(root)],
        has_images=True, problems=problems, size_hint=len(chosen_entries),
    )  # fmt: skip
