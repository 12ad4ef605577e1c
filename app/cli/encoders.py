"""``lexlens encoders``: the registry's embedded encoders and the loadable models of the local
Hugging Face cache, with what each can do and where it comes from."""

from __future__ import annotations

import argparse

from lexlens.app.cli import common
from lexlens.models import available_encoders
from lexlens.models.hub import cached_models

COMMAND = common.Command("list the embedded encoders and the cached hub models Lexlens can load")


def add_flags(parser: argparse.ArgumentParser) -> None:
    """None of its own: the list takes no input."""


def run(args: argparse.Namespace) -> None:
    # Cached hub models are judged from their config files: no weights are read.
    cards = [c.to_dict() | {"origin": "embedded"} for c in available_encoders()]
    cards += [c.to_dict() | {"origin": "hub cache"} for c in cached_models()]
    table = common.format_table(
        [[c["name"], c["origin"], ", ".join(c["capabilities"]), c["weights"]] for c in cards],
        ["name", "origin", "capabilities", "weights"],
    )
    common.emit(args, {"encoders": cards}, table)
