"""Which reader opens a benchmark: the format told from the path (or given), and one entry
point, :func:`open_benchmark`, that ``lexlens index --source``, the API and the Collections
page share; its settings are :class:`~lexlens.analysis.datasets.options.BenchmarkOptions`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lexlens.analysis.core.arguments import path_argument
from lexlens.analysis.datasets.beir import open_beir
from lexlens.analysis.datasets.dataset import Benchmark, check_queries_and_qrels
from lexlens.analysis.datasets.hf import (
    SAVED_MARKERS,
    is_table_file,
    is_table_folder,
    open_hf,
)
from lexlens.analysis.datasets.irds import open_irds
from lexlens.analysis.datasets.karpathy import open_karpathy
from lexlens.analysis.datasets.msmarco import open_msmarco
from lexlens.analysis.datasets.options import KINDS, BenchmarkOptions
from lexlens.models.base import InputError


def detect(path: Path) -> str | None:
    """The benchmark format of a path, or ``None`` when it is not one."""
    if path.is_dir():
        if (path / "corpus.jsonl").exists():
            return "beir"
        if (path / "collection.tsv").exists():
            return "msmarco"
        if any((path / n).is_file() for n in SAVED_MARKERS):
            return "hf"
        if any(path.glob("dataset_*.json")):
            return "karpathy"
        if is_table_folder(path):
            return "hf"
        return None
    name = path.name.lower()
    if name.startswith("dataset_") and name.endswith(".json"):
        return "karpathy"
    if name == "collection.tsv":
        return "msmarco"
    if is_table_file(path):
        return "hf"
    return None


def is_benchmark_source(path: str | Path) -> bool:
    """A path (or ``irds:ID``) that :func:`open_benchmark` reads."""
    text = str(path)
    if text.startswith("irds:"):
        return True
    return detect(Path(text).expanduser()) is not None


def open_benchmark(
    path: str | Path, *, options: BenchmarkOptions | None = None, **given: Any
) -> Benchmark:
    """Open a benchmark (see the module docstring): its queries and judgements are read
    here, its items when :meth:`Benchmark.items` is iterated. The settings are ``options``
    (:class:`BenchmarkOptions`: split, images, image_column, text_columns, kind) or its
    fields as keywords."""
    options = BenchmarkOptions.of(options, **given)
    path = path_argument(path, "path", "a benchmark's path or irds:ID")
    text, kind, split = str(path), options.kind, options.split
    if kind is None and text.startswith("irds:"):
        kind, text = "ir_datasets", text[len("irds:") :]
    if kind == "ir_datasets":
        return check_queries_and_qrels(open_irds(text, split=split))
    where = Path(text).expanduser()
    if not where.exists():
        raise InputError(f"--source {text}: not found")
    kind = kind or detect(where)
    if kind not in KINDS:
        raise InputError(
            f"--source {text}: not a benchmark (a BEIR folder with corpus.jsonl, MS MARCO's "
            "collection.tsv, a Karpathy dataset_*.json, a Hugging Face dataset saved to disk, "
            "Parquet or Arrow files, or irds:ID)"
        )
    if kind == "beir":
        bench = open_beir(where, split=split)
    elif kind == "msmarco":
        bench = open_msmarco(where, split=split)
    elif kind == "karpathy":
        bench = open_karpathy(where, split=split, images=options.images)
    else:
        columns = list(options.text_columns) if options.text_columns else None
        bench = open_hf(where, split=split, image_column=options.image_column, text_columns=columns)
    return check_queries_and_qrels(bench)
