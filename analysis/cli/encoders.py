"""``lexlens encoders``: the registry's embedded encoders."""

from __future__ import annotations

import argparse

from analysis.cli.common import add_common_args, emit, format_table
from models import available_encoders


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("encoders", help="list the embedded encoders")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    entries = available_encoders()
    table = format_table(
        [[e["name"], e["modality"], e["source"]] for e in entries], ["name", "modality", "source"]
    )
    emit(args, {"encoders": entries}, table)
