"""``lexlens report``: a self-contained HTML report (+ JSON and CSV) for texts or a corpus.

A dense+PQ encoder (``minilm-pq`` or a saved directory) gets the attribution report:
Integrated Gradients per sub-vector, GlobalT, completeness deltas and, with ``--mot``, the
masking evaluation. A lexical encoder (``splade-tiny``, a VDR or SPLADE directory) gets a
terms report: a word cloud and the top terms of each text.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lexlens.analysis.cli.common import add_common_args, emit, read_corpus
from lexlens.analysis.report import dense_with_m, is_dense_pq
from lexlens.models import load_encoder
from lexlens.models.base import InputError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("report", help="write an HTML + JSON + CSV report into a directory")
    parser.add_argument("--encoder", required=True, help="registry name or checkpoint directory")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one text")
    source.add_argument("--corpus", help="a .txt (one text per line) or .csv (a 'text' column)")
    parser.add_argument("--out", required=True, help="output directory (created if missing)")
    parser.add_argument("--subvectors", type=int, default=None, help="M sub-vectors (dense+PQ)")
    parser.add_argument("--steps", type=int, default=50, help="IG steps (default 50)")
    parser.add_argument("--baseline", choices=["unk", "pad"], default="unk", help="IG baseline")
    parser.add_argument("--mot", action="store_true", help="add the MoT masking evaluation")
    parser.add_argument("--keep", type=float, default=0.05, help="MoT: fraction of words kept")
    parser.add_argument("--top", type=int, default=30, help="lexical: top terms per text")
    add_common_args(parser)
    parser.set_defaults(func=run)


def _progress(args: argparse.Namespace):
    """Progress lines on stderr when it is a terminal (never mixed into --json stdout)."""
    if not sys.stderr.isatty():
        return None

    def show(fraction: float, message: str) -> None:
        sys.stderr.write(f"\r{100 * fraction:5.1f}%  {message[:70]:<70}")
        if fraction >= 1.0:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _check_out(out: str) -> Path:
    path = Path(out).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {path} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create --out {path}: {exc.strerror or exc}") from None
    return path


def run(args: argparse.Namespace) -> None:
    if not 1 <= args.steps <= 1000:
        raise InputError("--steps must be between 1 and 1000")
    if not 0 < args.keep <= 1:
        raise InputError("--keep must be a fraction in (0, 1]")
    if args.top <= 0:
        raise InputError("--top must be a positive number")
    if args.text is not None and not args.text.strip():
        raise InputError("--text is empty")
    texts = [args.text] if args.text is not None else read_corpus(args.corpus)
    out = _check_out(args.out)
    encoder = load_encoder(args.encoder, device=args.device)
    progress = _progress(args)
    meta = {"source": args.corpus if args.corpus else "--text", "texts": len(texts)}
    if is_dense_pq(encoder):
        paths, notes = _dense_report(args, encoder, texts, out, meta, progress)
    else:
        if args.subvectors is not None or args.mot:
            raise InputError(
                f"--subvectors and --mot need a dense+PQ encoder (e.g. minilm-pq); "
                f"{encoder.name} is lexical"
            )
        paths, notes = _terms_report(args, encoder, texts, out, meta)
    files = {name: str(path.resolve()) for name, path in paths.items()}
    payload = {"encoder": encoder.name, "out": str(out.resolve()), "files": files, "notes": notes}
    table = "\n".join(
        [*(f"note: {n}" for n in notes), *(f"{name:<18} {path}" for name, path in files.items())]
    )
    emit(args, payload, table)


def _dense_report(args, encoder, texts, out, meta, progress):
    from lexlens.analysis.attribution import attribute_corpus
    from lexlens.analysis.report import write_attribution_report

    encoder = dense_with_m(encoder, args.subvectors, progress)
    notes = list(encoder.notes)
    attrs = attribute_corpus(
        encoder, texts, steps=args.steps, baseline=args.baseline, progress=progress
    )
    n_trunc = sum(a.truncated for a in attrs)
    if n_trunc:
        notes.append(
            f"{n_trunc} text(s) truncated to the model's limit of {encoder.max_length} tokens"
        )
    mot_table = mot_tests = None
    if args.mot:
        mot = _mot(encoder, texts, attrs, args, progress)
        mot_table, mot_tests = mot.table, mot.significance
        notes.extend(n for n in mot.settings.get("notes", []) if n not in notes)
        meta["MoT"] = {k: mot.settings[k] for k in ("keep", "mask", "n_docs", "codebook")}
    meta.update(
        {
            "M": encoder.m,
            "K": encoder.k,
            "IG steps": args.steps,
            "baseline": args.baseline,
            "notes": notes,
        }
    )
    paths = write_attribution_report(
        out, attrs, encoder_name=encoder.name, mot_table=mot_table, mot_tests=mot_tests, meta=meta
    )
    return paths, notes


def _mot(encoder, texts, attrs, args, progress):
    """The masking evaluation on the report's own codebook, reusing its attributions."""
    from lexlens.analysis.mot import mot_evaluate

    result = mot_evaluate(
        encoder, texts, keep=args.keep, attributions=attrs, mask="unk", progress=progress
    )
    return result


def _terms_report(args, encoder, texts, out, meta):
    from lexlens.analysis.report import TermsItem, write_terms_report
    from lexlens.analysis.terms import own_tokens, top_terms

    encodings = encoder.encode_texts(texts, keep_units=False)
    items, notes = [], []
    for text, enc in zip(texts, encodings, strict=True):
        item_notes = list(enc.notes)
        if enc.truncated:
            item_notes.append(f"truncated to the encoder's limit of {encoder.max_length} tokens")
        terms = top_terms(enc.weights, encoder.vocab, args.top)
        own = own_tokens(enc)
        in_input = {t.token for t in terms if t.token in own}
        items.append(TermsItem(text, terms, item_notes, in_input))
    n_trunc = sum(e.truncated for e in encodings)
    if n_trunc:
        notes.append(
            f"{n_trunc} text(s) truncated to the encoder's limit of {encoder.max_length} tokens"
        )
    meta["top terms"] = args.top
    return write_terms_report(out, items, encoder_name=encoder.name, meta=meta), notes
