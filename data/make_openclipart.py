"""Render Debian's ``openclipart-svg`` (public-domain drawings) into an image–caption
collection source: PNG files plus ``items.csv`` (id, image, caption, caption_2, labels).

    python data/make_openclipart.py --out DIR [--folders animals,food,…] [--limit N]

Needs ``apt-get install openclipart-svg librsvg2-bin`` (``make sample-collections`` does it
when root). For each drawing, read from the SVG's own metadata (Dublin Core in RDF):

- caption: the title, with "Clipart by NAME - " removed and ``_`` as spaces; a generic title
  (a set name shared by many drawings, e.g. "gramastar", "Lemon SVG theme") is replaced by
  the file name. caption_2: the description when there is one.
- labels: the keywords and the folder names (``animals/mammals/…`` → animal, mammal),
  lower-cased, singular for the few plural aliases below, creator names and set markers
  dropped. Labels are separated by ``|``.

Copies of one drawing in several folders (the same SVG apart from its metadata) are kept
once, with the union of their labels. Rendering: ``rsvg-convert`` at 512 px, cropped to the
drawn area, padded to a white square, 224 px; drawings that render empty are left out.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import html
import io
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path("/usr/share/openclipart/svg")
NS = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "dc": "http://purl.org/dc/elements/1.1/",
}
#: Titles that name a set of drawings rather than the drawing.
GENERIC = re.compile(
    r"^(gramastar|card|various cliparts|etiquette icons|lemon svg theme|aiga_symbol_signs"
    r"|part of the flat icon collection.*|svg gradient collection.*)$",
    re.IGNORECASE,
)
#: Keywords that mark a set, not a content.
NOISE = {
    "hash",
    "unsorted",
    "theme",
    "lemon_theme_icon",
    "magick",
    "special",
    "icon",
    "icons",
    "clip art",
    "clipart",
    "image",
    "media",
    "public domain",
    "svg",
    "png",
}
#: Plural and synonym spellings folded into one label.
ALIASES = {
    "animals": "animal",
    "mammals": "mammal",
    "birds": "bird",
    "bugs": "insect",
    "insects": "insect",
    "flags": "flag",
    "desserts": "dessert",
    "beverages": "beverage",
    "transportation": "transport",
    "boating": "boat",
    "boats": "boat",
    "plants": "plant",
    "flowers": "flower",
    "sports": "sport",
    "fruits": "fruit",
    "vegetables": "vegetable",
    "signs_and_symbols": "sign",
    "signs": "sign",
    "shapes": "shape",
    "arrows": "arrow",
    "trees": "tree",
    "cars": "car",
    "buildings": "building",
    "tools": "tool",
    "instruments": "instrument",
    "vehicles": "vehicle",
    "dogs": "dog",
    "cats": "cat",
}


def _text(element) -> str:
    return " ".join("".join(element.itertext()).split()) if element is not None else ""


def metadata(path: Path) -> dict | None:
    """title, description, keywords and creator of one SVG (None when unparsable)."""
    work = None
    try:
        for _, element in ET.iterparse(path, events=("end",)):
            if element.tag.endswith("}Work") or element.tag.endswith("}metadata"):
                work = element
                break
    except ET.ParseError:
        return None
    if work is not None and not work.tag.endswith("}Work"):
        inner = work.find(".//{*}Work")
        work = inner if inner is not None else work
    if work is None:
        return {"title": "", "description": "", "keywords": [], "creator": ""}
    subject = work.find("dc:subject", NS)
    items = subject.findall(".//rdf:li", NS) if subject is not None else []
    keywords = (
        [_text(li) for li in items]
        if items
        else [k.strip() for k in _text(subject).split(",") if k.strip()]
    )
    return {
        "title": html.unescape(_text(work.find("dc:title", NS))),
        "description": html.unescape(_text(work.find("dc:description", NS))),
        "keywords": [html.unescape(k) for k in keywords],
        "creator": html.unescape(_text(work.find("dc:creator", NS))),
    }


def drawing_hash(path: Path) -> str:
    """The SVG's bytes without its <metadata> block: copies in other folders hash alike."""
    data = path.read_bytes()
    data = re.sub(rb"<metadata.*?</metadata>", b"", data, flags=re.DOTALL)
    return hashlib.sha1(data).hexdigest()


def label_set(meta: dict, relative: Path) -> set[str]:
    creator = meta["creator"].lower()
    labels = set()
    for raw in [*meta["keywords"], *relative.parts[:-1]]:
        word = raw.strip().lower().replace("|", " ")
        if not word or word in NOISE or word == creator or len(word) > 40:
            continue
        labels.add(ALIASES.get(word, word))
    return labels


def caption_of(meta: dict, relative: Path) -> str:
    title = re.sub(r"^clipart by .*? - ", "", meta["title"], flags=re.IGNORECASE).strip()
    if not title or GENERIC.match(title):
        title = relative.stem
    return " ".join(title.replace("_", " ").split())


def render(svg: Path, size: int = 224, work: int = 512, timeout: float = 30):
    """PNG bytes of the drawing, cropped to its drawn area on a white square (or None)."""
    from PIL import Image

    try:
        proc = subprocess.run(
            [
                "rsvg-convert",
                "-w",
                str(work),
                "-h",
                str(work),
                "--keep-aspect-ratio",
                "-f",
                "png",
                str(svg),
            ],
            capture_output=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode or not proc.stdout:
        return None
    image = Image.open(io.BytesIO(proc.stdout)).convert("RGBA")
    box = image.getchannel("A").point(lambda a: 255 if a > 8 else 0).getbbox()
    if box is None:
        return None
    image = image.crop(box)
    side = int(max(image.size) * 1.1) + 1
    canvas = Image.new("RGBA", (side, side), (255, 255, 255, 255))
    canvas.alpha_composite(image, ((side - image.width) // 2, (side - image.height) // 2))
    out = canvas.convert("RGB").resize((size, size), Image.Resampling.LANCZOS)
    if out.getextrema() == ((255, 255), (255, 255), (255, 255)):
        return None
    buffer = io.BytesIO()
    out.save(buffer, format="PNG")
    return buffer.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the PNGs and items.csv")
    parser.add_argument("--folders", default="", help="top-level folders to keep (default: all)")
    parser.add_argument("--limit", type=int, default=0, help="at most this many drawings")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    if not ROOT.is_dir():
        print("openclipart-svg is not installed: apt-get install openclipart-svg", file=sys.stderr)
        return 2
    keep = {f.strip() for f in args.folders.split(",") if f.strip()}
    drawings: dict[str, dict] = {}
    for svg in sorted(ROOT.rglob("*.svg")):
        relative = svg.relative_to(ROOT)
        if svg.is_symlink() or relative.parts[0] == "special":
            continue
        if keep and relative.parts[0] not in keep:
            continue
        meta = metadata(svg)
        if meta is None:
            continue
        key = drawing_hash(svg)
        entry = drawings.setdefault(
            key, {"svg": svg, "relative": relative, "meta": meta, "labels": set()}
        )
        entry["labels"] |= label_set(meta, relative)
    chosen = list(drawings.values())
    if args.limit:
        chosen = sorted(chosen, key=lambda d: hashlib.sha1(str(d["relative"]).encode()).hexdigest())
        chosen = sorted(chosen[: args.limit], key=lambda d: str(d["relative"]))
    out = Path(args.out)
    (out / "img").mkdir(parents=True, exist_ok=True)

    def one(entry: dict):
        name = str(entry["relative"].with_suffix(".png")).replace("/", "__")
        target = out / "img" / name
        if not target.exists():
            png = render(entry["svg"])
            if png is None:
                return None
            target.write_bytes(png)
        return entry, f"img/{name}"

    rows = []
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for n, done in enumerate(pool.map(one, chosen), start=1):
            if done is not None:
                entry, image = done
                rows.append(
                    {
                        "id": str(entry["relative"].with_suffix("")),
                        "image": image,
                        "caption": caption_of(entry["meta"], entry["relative"]),
                        "caption_2": entry["meta"]["description"][:300],
                        "labels": "|".join(sorted(entry["labels"])),
                    }
                )
            if n % 200 == 0:
                print(f"rendered {n}/{len(chosen)}", file=sys.stderr, flush=True)
    with open(out / "items.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, ["id", "image", "caption", "caption_2", "labels"])
        writer.writeheader()
        writer.writerows(rows)
    print(
        f"{len(rows)} drawings ({len(chosen) - len(rows)} empty or unreadable) → {out / 'items.csv'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
