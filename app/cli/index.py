"""``lexlens index``: encode a folder of images or a file of texts/items into a stored index."""

from __future__ import annotations

import argparse

from lexlens.analysis.collections.indexing import (
    SAMPLE_IMAGES,
    default_encoder,
    index_collection,
)
from lexlens.analysis.collections.options import BENCHMARK_OPTIONS, IndexOptions
from lexlens.analysis.collections.vector_import import VectorImportOptions, import_vectors
from lexlens.analysis.core.counts import counted
from lexlens.analysis.core.options import names
from lexlens.analysis.core.samples import SAMPLE_BENCHMARKS
from lexlens.app.cli import common
from lexlens.models.base import InputError

SAMPLES = ", ".join(f"sample:{name}" for name in SAMPLE_BENCHMARKS)
PHOTOS = " and ".join(f"sample:{name}" for name in SAMPLE_IMAGES)
#: Options whose flag takes another form than add_options gives: --ray alone (a local Ray),
#: --text-columns repeated.
SPECIAL = ("ray", "text_columns")


COMMAND = common.Command(
    "build a stored, sparse collection (re-running encodes only what changed)",
    description="Encode a source into a stored index: gated vectors as memory-mapped CSR "
    "arrays, item metadata in Parquet, a manifest. A source is a folder of images "
    "(recursive), a .txt/.csv/.jsonl of texts, or a .csv/.jsonl of items with 'image' "
    "(relative to the file) and/or 'text', optional 'id', 'caption' (several), 'labels' "
    "('|'-separated). Unreadable items are listed and skipped, as is an id holding "
    "whitespace (TREC files split on it) or repeated. Dense features (.npy [N, d], a "
    ".safetensors tensor, or .parquet with 'id' and 'emb') go through a D2S head "
    "(--encoder HEAD_DIR), with --ids and --captions (.csv/.jsonl: id → caption). "
    f"The benchmarks shipped with Lexlens are sources by name: {SAMPLES} ({PHOTOS} reads "
    "scikit-image's photos unless --images names another folder).",
)


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The encoder, the source, the index folder; the options, benchmark ones in a group."""
    common.add_encoder(
        parser,
        "registry name or checkpoint folder (default: the default encoder of what the source "
        f"holds, {default_encoder('text')} for texts, {default_encoder('image')} for images; "
        "dense features need their D2S head)",
        required=False,
    )
    parser.add_argument(
        "--source",
        help="folder of images, .txt/.csv/.jsonl, dense features .npy/.safetensors/.parquet, "
        f"a benchmark (below), or a benchmark shipped with Lexlens: {SAMPLES}",
    )
    parser.add_argument("--out", required=True, help="index folder (created or updated)")
    common.add_options(parser, IndexOptions, skip=(*SPECIAL, *BENCHMARK_OPTIONS))
    _add_ray(parser)
    bench = parser.add_argument_group(
        "benchmarks",
        "a BEIR folder, MS MARCO files, a Karpathy JSON, a Hugging Face dataset "
        "saved on disk or Parquet/Arrow files (read in place), irds:ID, or "
        f"{SAMPLES}: the split's queries and judgements are kept with the index",
    )
    others = [n for n in names(IndexOptions) if n not in BENCHMARK_OPTIONS]
    common.add_options(bench, IndexOptions, skip=(*SPECIAL, *others))  # type: ignore[arg-type]
    _add_columns(bench)
    encoded = parser.add_argument_group(
        "encoded corpora",
        "--vectors PATH instead of --source: vectors encoded elsewhere (Anserini's "
        "JsonVectorCollection, a scipy CSR .npz, a Hugging Face dataset or Parquet with "
        "indices/values), their terms mapped to --encoder's vocabulary and checked against "
        "it on a sample re-encoded from the items' text",
    )
    encoded.add_argument("--vectors", metavar="PATH", help="the encoded corpus (file or folder)")
    common.add_options(encoded, VectorImportOptions)  # type: ignore[arg-type]


def _add_ray(parser: argparse.ArgumentParser) -> None:
    """``--ray [ADDRESS]``: alone, a local Ray."""
    declared = IndexOptions.option("ray")
    parser.add_argument(
        declared.flag,
        dest=declared.name,
        nargs="?",
        const="local",
        default=None,
        metavar=declared.spec.metavar,
        help=declared.help_line() + "; alone: local",
    )


def _add_columns(group) -> None:
    """``--text-columns A,B`` (repeatable: the columns add up)."""
    declared = IndexOptions.option("text_columns")
    group.add_argument(
        declared.flag,
        dest=declared.name,
        action="append",
        default=None,
        metavar=declared.spec.metavar,
        help=declared.help_line() + "; repeatable",
    )


def run(args: argparse.Namespace) -> None:
    """Build the index, then print what was encoded, reused and skipped (or ``--json``)."""
    if (args.vectors is None) == (args.source is None):
        raise InputError("give --source (items to encode) or --vectors (an encoded corpus)")
    if args.vectors is not None:
        _import(args)
        return
    if args.text_columns is not None:
        args.text_columns = ",".join(args.text_columns)
    options = common.options_from_args(IndexOptions, args)
    result = index_collection(
        args.encoder,
        args.source,
        args.out,
        options=options,
        device=args.device,
        progress=common.progress_printer(args),
    )
    lines = [
        f"index {result.out}: {counted(result.items, 'item')} ({result.nnz:,} non-zeros), "
        f"encoder {result.encoder}",
        f"encoded {result.encoded}, reused {result.reused}, skipped {result.skipped_count}"
        + (f" in {result.seconds:.1f} s" if result.encoded else ""),
        *(f"note: {n}" for n in result.notes),
    ]
    if result.skipped:
        shown = result.skipped[:20]
        lines.append(
            common.format_table([[s.file, s.reason] for s in shown], ["skipped", "reason"])
        )
        if result.skipped_count > len(shown):
            more = result.skipped_count - len(shown)
            listed = len(result.skipped) - len(shown)
            lines.append(f"… and {more} more" + (f" ({listed} in --json)" if listed else ""))
    common.emit(args, result, "\n".join(lines))


def _import(args: argparse.Namespace) -> None:
    """Store an encoded corpus, then print its counts, format and parity (or ``--json``)."""
    result = import_vectors(
        args.encoder,
        args.vectors,
        args.out,
        options=common.options_from_args(VectorImportOptions, args),
        device=args.device,
        progress=common.progress_printer(args),
    )
    lines = [
        f"index {result.out}: imported {counted(result.items, 'item')} ({result.nnz:,} "
        f"non-zeros) in {result.seconds:.1f} s, encoder {result.encoder}",
        *result.notes,
    ]
    common.emit(args, result, "\n".join(lines))
