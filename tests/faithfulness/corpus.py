"""A small collection whose queries fail for known reasons (a rival shares their words)."""

from __future__ import annotations

TEXTS = {
    "d0": "a dog sleeping on the sofa in the living room",
    "d1": "a cat playing with wool in the garden",
    "d2": "hot coffee in a red cup on the table",
    "d3": "a glass of cold orange juice",
    "d4": "a rocket launching into the night sky",
    "d5": "a telescope pointed at the moon and the stars",
    "d6": "a giraffe eating leaves from a tall tree",
    "d7": "a zebra running across the dry savanna",
    "d8": "fresh bread in a bakery window",
    "d9": "a red bicycle leaning on a wall",
    "d10": "children building a sandcastle on the beach",
    "d11": "a sailing boat on a calm blue sea",
}
QUERIES = {
    "q-cat": "cat sleeping on the sofa",
    "q-juice": "orange juice in a red cup",
    "q-stars": "night sky full of stars",
    "q-zebra": "zebra eating leaves from a tree",
    "q-sea": "children on a boat at sea",
    "q-bread": "bread on a wooden table",
}
QRELS = {
    "q-cat": {"d1": 1},
    "q-juice": {"d3": 1},
    "q-stars": {"d5": 1},
    "q-zebra": {"d7": 1},
    "q-sea": {"d11": 1},
    "q-bread": {"d8": 1},
}
