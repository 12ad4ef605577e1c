"""``lexlens encoders``: the registry's embedded encoders and the loadable models of the local
Hugging Face cache, with what each can do and where it comes from."""

from __future__ import annotations

import argparse

from lexlens.app.cli.common import add_common_args, emit, format_table
from lexlens.models import available_encoders
from lexlens.models.hub import cached_models


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "encoders", help="list the embedded encoders and the cached hub models Lexlens can load"
    )
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    # Cached hub models are judged from their config files: no weights are read.
    cards = [c.to_dict() | {"origin": "embedded"} for c in available_encoders()]
    cards += [c.to_dict() | {"origin": "hub cache"} for c in cached_models()]
    table = format_table(
        [[c["name"], c["origin"], ", ".join(c["capabilities"]), c["weights"]] for c in cards],
        ["name", "origin", "capabilities", "weights"],
    )
    emit(args, {"encoders": cards}, table)
