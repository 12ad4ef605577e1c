"""An index as Lexlens wrote it before the hit records: every item field in
``items.parquet`` (written here with pyarrow alone), no ``records.bin``, the manifest's
sizes and checksums those of the files left (BLAKE2b computed here with hashlib)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

#: The metadata schema of an index without records, as that writer declared it.
OLDER_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("kind", pa.string()),
        ("image", pa.string()),
        ("text", pa.string()),
        ("captions", pa.list_(pa.string())),
        ("labels", pa.list_(pa.string())),
        ("content_key", pa.string()),
        ("size", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("nnz", pa.int32()),
    ]
)


def make_older(folder: Path, items: list[dict], row_group: int = 2048) -> None:
    """Rewrite the index at ``folder`` as one built before the records: ``items`` (every
    field of each item, in row order) as its Parquet metadata, the records removed."""
    pq.write_table(
        pa.Table.from_pylist(items, schema=OLDER_SCHEMA),
        folder / "items.parquet",
        row_group_size=row_group,
        compression="zstd",
    )
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    for name in ("records.bin", "records_index.npy"):
        (folder / name).unlink()
        del manifest["files"][name]
        del manifest["checksums"][name]
    data = (folder / "items.parquet").read_bytes()
    manifest["files"]["items.parquet"] = len(data)
    manifest["checksums"]["items.parquet"] = hashlib.blake2b(data, digest_size=16).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
