"""``lexlens encoders``: the registry's embedded encoders and what each can do."""

from __future__ import annotations

import argparse

from lexlens.analysis.cli.common import add_common_args, emit, format_table
from lexlens.models import available_encoders


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("encoders", help="list the embedded encoders")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    cards = [c.to_dict() for c in available_encoders()]
    table = format_table(
        [[c["name"], ", ".join(c["capabilities"]), c["weights"]] for c in cards],
        ["name", "capabilities", "weights"],
    )
    emit(args, {"encoders": cards}, table)
