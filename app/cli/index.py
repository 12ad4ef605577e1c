"""``lexlens index``: encode a folder of images or a file of texts/items into a stored index."""

from __future__ import annotations

import argparse

from lexlens.analysis.collections.build_parts import DEFAULT_BATCH_SIZE
from lexlens.analysis.collections.indexing import index_collection
from lexlens.analysis.core.gating import DEFAULT_GATE_K
from lexlens.app.cli.common import add_common_args, emit, format_table, progress_printer


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``lexlens index`` and its options."""
    parser = sub.add_parser(
        "index",
        help="build a stored, sparse collection (re-running encodes only what changed)",
        description="Encode a source into a stored index: gated vectors as memory-mapped CSR "
        "arrays, item metadata in Parquet, a manifest. A source is a folder of images "
        "(recursive), a .txt/.csv/.jsonl of texts, or a .csv/.jsonl of items with 'image' "
        "(relative to the file) and/or 'text', optional 'id', 'caption' (several), 'labels' "
        "('|'-separated). Unreadable items are listed and skipped, as is an id holding "
        "whitespace (TREC files split on it) or repeated. Dense features (.npy [N, d], a "
        ".safetensors tensor, or .parquet with 'id' and 'emb') go through a D2S head "
        "(--encoder HEAD_DIR), with --ids and --captions (.csv/.jsonl: id → caption).",
    )
    parser.add_argument("--encoder", required=True, help="registry name or checkpoint folder")
    parser.add_argument(
        "--source",
        required=True,
        help="folder of images, .txt/.csv/.jsonl, or dense features .npy/.safetensors/.parquet",
    )
    parser.add_argument("--out", required=True, help="index folder (created or updated)")
    parser.add_argument(
        "--topk",
        dest="gate_k",
        type=int,
        default=DEFAULT_GATE_K,
        help="gate k: top-k dims kept (-1 all, 0 own tokens)",
    )
    parser.add_argument(
        "--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="items encoded per batch"
    )
    parser.add_argument(
        "--captions", help="dense features: .csv/.jsonl pairing ids with captions (optional)"
    )
    parser.add_argument(
        "--ids", help="dense features: one id per line (default FILE.ids.txt, else row numbers)"
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="encode on Ray: alone starts a local Ray; 'auto' or ray://HOST:PORT uses a cluster "
        '(needs pip install "lexlens[ray]")',
    )
    bench = parser.add_argument_group(
        "benchmarks",
        "a BEIR folder, MS MARCO files, a Karpathy JSON, a Hugging Face dataset "
        "saved on disk or Parquet/Arrow files (read in place), or irds:ID: the split's "
        "queries and judgements are kept with the index",
    )
    bench.add_argument("--split", help="the split to read (default: test, or dev for MS MARCO)")
    bench.add_argument("--images", help="Karpathy JSON: the folder its image paths start from")
    bench.add_argument(
        "--image-column", help="Hugging Face dataset or Parquet/Arrow files: the image column"
    )
    bench.add_argument(
        "--text-column", action="append", dest="text_columns",
        help="Hugging Face dataset or Parquet/Arrow files: a caption (or text) column "
        "(repeat for several)",
    )  # fmt: skip
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> None:
    """Build the index, then print what was encoded, reused and skipped (or ``--json``)."""
    result = index_collection(
        args.encoder, args.source, args.out, device=args.device, gate_k=args.gate_k,
        batch_size=args.batch_size, progress=progress_printer(args), ray=args.ray,
        captions=args.captions, ids=args.ids, split=args.split, images=args.images,
        image_column=args.image_column, text_columns=args.text_columns,
    )  # fmt: skip
    counts = result.manifest["counts"]
    lines = [
        f"index {result.out}: {result.items} items ({counts['nnz']:,} non-zeros), "
        f"encoder {result.encoder}",
        f"encoded {result.encoded}, reused {result.reused}, skipped {result.skipped_count}"
        + (f" in {result.seconds:.1f} s" if result.encoded else ""),
        *(f"note: {n}" for n in result.notes),
    ]
    if result.skipped:
        shown = result.skipped[:20]
        lines.append(format_table([[s.file, s.reason] for s in shown], ["skipped", "reason"]))
        if result.skipped_count > len(shown):
            more = result.skipped_count - len(shown)
            listed = len(result.skipped) - len(shown)
            lines.append(f"… and {more} more" + (f" ({listed} in --json)" if listed else ""))
    emit(args, result, "\n".join(lines))
