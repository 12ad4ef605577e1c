"""Regenerate the sample images of the Images page (drawn here; no third-party photos).

``python data/images/make_samples.py`` writes ``maze_and_crossword.png``: a maze (left)
beside a crossword grid (right), two ImageNet classes EfficientNet-Lite0 recognises, so
the two halves of one image give different word clouds.
"""

from __future__ import annotations

import random
from pathlib import Path

from PIL import Image, ImageDraw

HERE = Path(__file__).resolve().parent


def maze(n: int = 12, cell: int = 20, seed: int = 3) -> Image.Image:
    """A perfect maze (depth-first carving), black walls on white."""
    rng = random.Random(seed)
    side = n * cell + 2
    image = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(image)
    walls = {(x, y, s): True for x in range(n) for y in range(n) for s in "RD"}
    seen, stack = {(0, 0)}, [(0, 0)]
    while stack:
        x, y = stack[-1]
        options = [
            (x + dx, y + dy)
            for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))
            if 0 <= x + dx < n and 0 <= y + dy < n and (x + dx, y + dy) not in seen
        ]
        if not options:
            stack.pop()
            continue
        nx, ny = rng.choice(options)
        seen.add((nx, ny))
        stack.append((nx, ny))
        if nx != x:
            walls[(min(x, nx), y, "R")] = False
        else:
            walls[(x, min(y, ny), "D")] = False
    draw.rectangle([0, 0, side - 1, side - 1], outline="black", width=3)
    for (x, y, s), wall in walls.items():
        if wall and s == "R":
            draw.line([(x + 1) * cell, y * cell, (x + 1) * cell, (y + 1) * cell], "black", 3)
        elif wall:
            draw.line([x * cell, (y + 1) * cell, (x + 1) * cell, (y + 1) * cell], "black", 3)
    return image


def crossword(n: int = 13, cell: int = 18, seed: int = 5) -> Image.Image:
    """A crossword-style grid with random black squares."""
    rng = random.Random(seed)
    side = n * cell + 2
    image = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(image)
    for x in range(n):
        for y in range(n):
            fill = "black" if rng.random() < 0.18 else "white"
            box = [x * cell, y * cell, (x + 1) * cell, (y + 1) * cell]
            draw.rectangle(box, fill=fill, outline="black", width=2)
    return image


def main() -> None:
    left, right = maze(), crossword()
    both = Image.new("RGB", (left.width + right.width, max(left.height, right.height)), "white")
    both.paste(left, (0, 0))
    both.paste(right, (left.width, 0))
    both.save(HERE / "maze_and_crossword.png", optimize=True)


if __name__ == "__main__":
    main()
