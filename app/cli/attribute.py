"""``lexlens attribute``: Integrated Gradients of a text's words onto each PQ sub-vector code.

Parses the arguments, calls :func:`lexlens.analysis.attribution.attribution.attribute` and renders the
result (``--json``: exactly ``result.to_dict()``); ``--out`` also writes the HTML + JSON + CSV
report (the folder is checked before any work starts).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from lexlens.analysis.attribution.attribution import (
    ATTRIBUTION_NEEDS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TOLERANCE,
    MAX_STEPS,
    AttributionResult,
    attribute,
)
from lexlens.analysis.core.inputs import read_texts
from lexlens.analysis.core.outputs import check_out_dir, write_files
from lexlens.app.cli.common import add_common_args, emit, format_table
from lexlens.models import load_encoder
from lexlens.models.base import InputError


def steps_arg(value: str) -> int | None:
    """``auto`` (adaptive, None) or a whole number of quadrature nodes."""
    if value.strip().lower() == "auto":
        return None
    try:
        steps = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or a whole number, got {value!r}"
        ) from None
    if not 2 <= steps <= MAX_STEPS:
        raise argparse.ArgumentTypeError(f"must be 'auto' or between 2 and {MAX_STEPS}")
    return steps


def add_ig_args(parser: argparse.ArgumentParser) -> None:
    """The Integrated-Gradients options shared by ``attribute``, ``mot-eval`` and ``report``."""
    parser.add_argument(
        "--steps",
        type=steps_arg,
        default=None,
        help="IG nodes: 'auto' (default: add nodes until every sub-vector's completeness gap "
        "is within --tolerance) or a fixed number (Gauss–Legendre)",
    )
    parser.add_argument(
        "--tolerance",
        type=float,
        default=DEFAULT_TOLERANCE,
        help=f"auto steps: |delta_i| ≤ tolerance · |F_i(x) − F_i(x')| (default {DEFAULT_TOLERANCE})",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=DEFAULT_MAX_STEPS,
        help=f"auto steps: at most this many nodes (default {DEFAULT_MAX_STEPS})",
    )


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "attribute", help="Integrated Gradients: words → product-quantiser sub-vector codes"
    )
    parser.add_argument("--encoder", required=True, help="registry name or a saved dense+PQ dir")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one text")
    source.add_argument("--corpus", help="texts: .txt (one per line), .csv or .jsonl ('text')")
    parser.add_argument(
        "--subvectors", type=int, default=None, help="M sub-vectors (refits the codebooks)"
    )
    add_ig_args(parser)
    parser.add_argument("--baseline", choices=["unk", "pad"], default="unk", help="IG baseline")
    parser.add_argument("--out", help="also write an HTML + JSON + CSV report into this folder")
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def progress_printer(args: argparse.Namespace):
    """Progress on stderr: a live line on a terminal, plain lines with ``--progress``."""
    if getattr(args, "progress", False):

        def lines(fraction: float, message: str) -> None:
            print(f"{100 * fraction:5.1f}%  {message}", file=sys.stderr, flush=True)

        return lines
    if not sys.stderr.isatty():
        return None

    def live(fraction: float, message: str) -> None:
        sys.stderr.write(f"\r{100 * fraction:5.1f}%  {message[:70]:<70}")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return live


def texts_of(args: argparse.Namespace) -> tuple[list[str], str]:
    """The texts of ``--text`` or ``--corpus`` and the name of their source."""
    if args.text is not None:
        if not args.text.strip():
            raise InputError("--text is empty: type some words to attribute")
        return [args.text], "--text"
    return read_texts(args.corpus).texts, Path(args.corpus).name


def run(args: argparse.Namespace) -> None:
    texts, source = texts_of(args)
    out = check_out_dir(args.out) if args.out else None
    encoder = load_encoder(args.encoder, device=args.device)
    ATTRIBUTION_NEEDS.check(encoder)
    result = attribute(
        encoder,
        texts,
        m=args.subvectors,
        steps=args.steps,
        tolerance=args.tolerance,
        max_steps=args.max_steps,
        baseline=args.baseline,
        progress=progress_printer(args),
    )
    written = {}
    if out is not None:
        from lexlens.analysis.render.report import AttributionReport

        report = AttributionReport(result, None, {"source": source, "texts": len(texts)})
        written = write_files(out, report.files())
    emit(args, result, table(result, written))


def table(result: AttributionResult, files: dict[str, Path]) -> str:
    lines = [f"note: {n}" for n in result.notes]
    lines.append(
        f"{result.encoder}: M = {result.m}, K = {result.k}, steps {result.settings['steps']}"
    )
    for a in result.texts[:20]:
        lines.append(f"text: {a.text[:100]}  ({a.steps} nodes)")
        rows = []
        for r, i in enumerate(a.subvectors):
            order = np.argsort(-a.attributions[r])[:4]
            top = ", ".join(f"{a.words[j]} {a.attributions[r, j]:+.4f}" for j in order)
            rows.append([i, int(a.codes[i]), float(a.delta[r]), top])
        order = np.argsort(-a.global_attributions)[:4]
        top = ", ".join(f"{a.words[j]} {a.global_attributions[j]:+.4f}" for j in order)
        rows.append(["global", "", float(a.global_delta), top])
        lines.append(format_table(rows, ["sub-vector", "code", "delta", "top words"]))
    if len(result.texts) > 20:
        lines.append(f"… {len(result.texts) - 20} more texts (use --json or --out)")
    lines.extend(f"{name:<18} {path}" for name, path in files.items())
    return "\n".join(lines)
