"""``lexlens mot-eval``: the RepMoT masking table (RepMoT Table 3) on a corpus.

For each M, codebooks are fitted by k-means on the corpus; each document keeps its top
``--keep`` words by every ranking, the rest become ``[UNK]``, and the table reports the
mean ``||d̂_i − f_i(mask(d))||²`` with Wilcoxon tests of MoT against each baseline.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lexlens.analysis.cli.attribute import progress_printer
from lexlens.analysis.cli.common import add_common_args, emit, format_table, read_corpus
from lexlens.models import load_encoder
from lexlens.models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("mot-eval", help="MoT masking evaluation (RepMoT Table 3)")
    parser.add_argument("--encoder", required=True, help="a dense+PQ encoder (e.g. minilm-pq)")
    parser.add_argument("--corpus", required=True, help=".txt (one text per line) or .csv ('text')")
    parser.add_argument(
        "--subvectors",
        type=int,
        nargs="+",
        default=[12, 24, 48],
        help="M values (default 12 24 48)",
    )
    parser.add_argument("--keep", type=float, default=0.05, help="fraction of words kept (0.05)")
    parser.add_argument("--steps", type=int, default=16, help="IG steps (default 16)")
    parser.add_argument("--k", type=int, default=256, help="centroids per sub-space (256)")
    parser.add_argument(
        "--limit", type=int, default=None, help="evaluate a random sample of N docs"
    )
    parser.add_argument("--mask", choices=["unk", "mask", "delete"], default="unk")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--own-codebook", action="store_true", help="evaluate the encoder's codebook (one M)"
    )
    parser.add_argument("--out", help="write mot.csv, mot_tests.csv, per-document CSVs, mot.json")
    parser.add_argument("--progress", action="store_true", help="progress lines on stderr")
    add_common_args(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> dict:
    from lexlens.analysis.mot import mot_evaluate

    if not 1 <= args.steps <= 1000:
        raise InputError("--steps must be between 1 and 1000")
    if not 0 < args.keep <= 1:
        raise InputError("--keep must be a fraction in (0, 1]")
    if args.limit is not None and args.limit < 2:
        raise InputError("--limit must be at least 2")
    if args.k < 1:
        raise InputError("--k must be a positive number")
    texts = read_corpus(args.corpus)
    out = None
    if args.out:
        out = Path(args.out).expanduser()
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out} exists and is not a directory")
    encoder = load_encoder(args.encoder, device=args.device)
    result = mot_evaluate(
        encoder,
        texts,
        m_values=tuple(args.subvectors),
        keep=args.keep,
        steps=args.steps,
        k=args.k,
        seed=args.seed,
        limit=args.limit,
        mask=args.mask,
        own_codebook=args.own_codebook,
        progress=progress_printer(args),
    )
    payload = {"encoder": encoder.name, "corpus": str(args.corpus), **result.to_dict()}
    if out is not None:
        payload["files"] = write_mot_files(out, result, payload)
    emit(args, payload, _table(result, payload.get("files")))
    return payload


def write_mot_files(out: Path, result, payload: dict) -> dict[str, str]:
    """mot.csv (table), mot_tests.csv, mot_docs_M{m}.csv, mot.json (+ report.html if available)."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create --out {out}: {exc.strerror or exc}") from None
    files = {
        "mot.csv": out / "mot.csv",
        "mot_tests.csv": out / "mot_tests.csv",
        "mot.json": out / "mot.json",
    }
    result.table.to_csv(files["mot.csv"])
    result.significance.to_csv(files["mot_tests.csv"], index=False)
    for m, frame in result.per_doc.items():
        path = out / f"mot_docs_M{m}.csv"
        frame.to_csv(path, index_label="doc")
        files[path.name] = path
    files["mot.json"].write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    try:
        from lexlens.analysis.report import write_attribution_report
    except ImportError:
        write_attribution_report = None
    if write_attribution_report is not None:
        meta = {"corpus": payload.get("corpus", ""), **result.settings}
        written = write_attribution_report(
            out,
            [],
            encoder_name=payload.get("encoder", ""),
            mot_table=result.table,
            mot_tests=result.significance,
            meta=meta,
        )
        if "report.html" in written:
            files["report.html"] = Path(written["report.html"])
    return {name: str(Path(p).resolve()) for name, p in files.items()}


def _table(result, files) -> str:
    table = result.table
    rows = [[name, *(float(v) for v in table.loc[name])] for name in table.index]
    lines = [f"note: {n}" for n in result.settings.get("notes", [])]
    s = result.settings
    lines.append(
        f"{s['n_docs']} documents of {s['n_corpus']}, keep {s['keep']:.0%}, IG steps {s['steps']}, "
        f"mask [{s['mask'].upper()}] — mean ||d̂_i − f_i(mask(d))||² (lower is better)"
    )
    lines.append(format_table(rows, ["ranking", *(f"M={m}" for m in table.columns)]))
    sig = result.significance
    lines.append("MoT vs baseline: Wilcoxon signed-rank p (two-sided)")
    lines.append(
        format_table(
            [
                [
                    r.baseline,
                    *(
                        float(sig[(sig.m == m) & (sig.baseline == r.baseline)].wilcoxon_p.iloc[0])
                        for m in table.columns
                    ),
                ]
                for r in sig[sig.m == table.columns[0]].itertuples()
            ],
            ["baseline", *(f"M={m}" for m in table.columns)],
        )
    )
    for name, path in (files or {}).items():
        lines.append(f"{name:<18} {path}")
    return "\n".join(lines)
