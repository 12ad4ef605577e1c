"""Karpathy's split JSON of MSCOCO and Flickr30k (``dataset_coco.json``,
``dataset_flickr30k.json``): ``{"images": [{"filename", "filepath"?, "split", "sentences":
[{"raw"}], "imgid", "cocoid"?}]}``, with the images under a root folder of the user's.

A split's images are the items; each image's captions (five, usually) are both the item's
captions (Exact@k, FLOPs) and text queries whose one relevant item is that image — the
text→image evaluation VDR and Dense2Sparse report. An item's id is its ``cocoid``, else its
``imgid``, else its file name (whitespace written ``%20``); a query's id is
``<item id>_<caption number>``. An image whose id an earlier image of the split has is named
and skipped with its captions (they never become queries of the first). The JSON is read
once with ``json.loads`` (COCO's is about 150 MB); one nested too deeply for Python's parser
is refused naming its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lexlens.analysis.core.inputs import folder_file, inside_folder, load_json, read_bytes
from lexlens.analysis.datasets.dataset import Benchmark, file_stamp, pick_split
from lexlens.analysis.datasets.items import Skipped, SourceItem, derived_id
from lexlens.analysis.datasets.trec import Problems
from lexlens.models.base import InputError

#: Karpathy's JSON is read whole; a larger file is refused.
MAX_JSON_BYTES = 1024 * 1024 * 1024


def _item_id(entry: dict, position: int) -> str:
    for key in ("cocoid", "imgid"):
        value = entry.get(key)
        if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    name = entry.get("filename")
    return derived_id(name.strip()) if isinstance(name, str) and name.strip() else str(position)


def _captions(entry: dict) -> list[str]:
    sentences = entry.get("sentences")
    raws = (
        [s.get("raw") for s in sentences if isinstance(s, dict)]
        if isinstance(sentences, list)
        else []
    )
    return [c.strip() for c in raws if isinstance(c, str) and c.strip()]


def _entries(path: Path) -> tuple[Path, list]:
    """The JSON file (the one ``dataset_*.json`` of a folder, inside it once links are
    followed) and its ``images`` list."""
    if path.is_dir():
        found = sorted(path.glob("dataset_*.json"))
        if len(found) != 1:
            raise InputError(f"{path}: expected one dataset_*.json, found {len(found)}")
        path = folder_file(path, found[0].name)
    label = str(path)
    data, _ = read_bytes(path, label, limit=MAX_JSON_BYTES)
    try:
        document = load_json(data.decode("utf-8-sig"), label, precheck=False)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{label}: not a JSON document ({exc})") from None
    entries = document.get("images") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise InputError(f"{label}: no 'images' list (Karpathy's split format)")
    return path, entries


@dataclass
class _Split:
    """One split's images, and the queries and judgements their captions make."""

    label: str
    problems: Problems = field(default_factory=Problems)
    queries: dict[str, str] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] = field(default_factory=dict)
    query_where: dict[str, str] = field(default_factory=dict)
    #: (position, entry, why it is skipped: "" when it is not), in the file's order
    entries: list[tuple[int, dict, str]] = field(default_factory=list)

    def add(self, position: int, entry: dict, first_at: dict[str, int]) -> None:
        """One image of the split: its captions become queries, unless its id was seen."""
        label, item = self.label, _item_id(entry, position)
        if item in first_at:
            why = f"id {item!r} appears again (first at images[{first_at[item]}])"
            self.problems.add(f"{label}:images[{position}]", 0, f"{why}: skipped with its captions")
            self.entries.append((position, entry, why))
            return
        first_at[item] = position
        captions = _captions(entry)
        if not captions:
            self.problems.add(label, 0, f"images[{position}] ({item}) has no caption")
        for j, caption in enumerate(captions):
            self.queries[f"{item}_{j}"] = caption
            self.qrels[f"{item}_{j}"] = {item: 1}
            self.query_where[f"{item}_{j}"] = f"{label}:images[{position}].sentences[{j}]"
        self.entries.append((position, entry, ""))

    def items(self, root: Path) -> Iterator[SourceItem | Skipped]:
        """The split's images as items (an image path leaving ``root`` is refused)."""
        for position, entry, why in self.entries:
            where = f"{self.label}:images[{position}]"
            if why:
                yield Skipped(where, f"{why}: skipped")
                continue
            name = entry.get("filename")
            name = name.strip() if isinstance(name, str) else ""
            if not name:
                yield Skipped(where, "no filename")
                continue
            folder = entry.get("filepath")
            folder = folder if isinstance(folder, str) else ""
            relative = f"{folder}/{name}".strip("/")
            inside = inside_folder(root, relative)
            if inside is None:
                yield Skipped(where, f"image path {relative!r} leaves {root}: refused")
                continue
            yield SourceItem(
                _item_id(entry, position),
                image=inside,
                captions=tuple(_captions(entry)),
                where=where,
            )


def open_karpathy(
    path: Path, *, split: str | None = None, images: str | Path | None = None
) -> Benchmark:
    """One split (default ``test``) of a Karpathy JSON; ``images`` is the image root (default:
    the JSON's folder)."""
    path, entries = _entries(path)
    label = str(path)
    splits = sorted(
        {e["split"] for e in entries if isinstance(e, dict) and isinstance(e.get("split"), str)}
    )
    chosen = pick_split(splits, split, label)
    root = Path(images).expanduser() if images is not None else path.parent
    if not root.is_dir():
        raise InputError(f"--images {root}: not a folder")
    found = _Split(label)
    first_at: dict[str, int] = {}  # item id → the position of the image that has it
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            found.problems.add(label, 0, f"images[{position}] is not an object")
        elif entry.get("split") == chosen:
            found.add(position, entry, first_at)
    if not found.entries:
        raise InputError(f"{label}: the split {chosen!r} has no images")
    return Benchmark(
        kind="karpathy",
        label=label,
        root=root,
        split=chosen,
        splits=splits,
        queries=found.queries,
        qrels=found.qrels,
        read_items=lambda _: found.items(root),
        fingerprint_parts=lambda: [file_stamp(path), str(root)],
        has_images=True,
        problems=found.problems,
        size_hint=len(found.entries),
        query_where=lambda qid: found.query_where.get(qid, label),
    )
