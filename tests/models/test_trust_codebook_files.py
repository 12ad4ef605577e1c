"""The files a codebook suffix names (``DIR+faiss:FILE``, ``DIR+pq:M:CORPUS``) are read as
every user file is: one reading of the spec, a regular file only, a bounded read, and a
refusal that never quotes the bytes of a file that is not a faiss index.

Each test is named by the kind of failure it guards against."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lexlens.models import LexlensError, load_encoder
from tests.models.test_models_dense_dirs import write_st_dir


@pytest.fixture(scope="module")
def st_dir(tmp_path_factory):
    return write_st_dir(tmp_path_factory.mktemp("dense") / "tiny", pooling="cls", seed=5)


def test_silent_wrong_a_spec_is_read_once_into_its_base_and_suffix(tmp_path):
    """The loader and the data roots' check read a spec by one function: the last suffix
    splits it, the base may hold another, a path that exists whole is never split."""
    from lexlens.models.registry import EncoderSpec, parse_spec

    assert parse_spec("m+pq:8:/c/corpus.txt") == EncoderSpec("m", "pq", "8:/c/corpus.txt")
    assert parse_spec("m+pq:8:/c/corpus.txt").file == "/c/corpus.txt"
    assert parse_spec("m+pq:8").file is None
    nested = parse_spec("m+pq:8:/a.txt+faiss:/b.index")
    assert nested == EncoderSpec("m+pq:8:/a.txt", "faiss", "/b.index")
    assert parse_spec(nested.base).file == "/a.txt"
    assert nested.with_paths("/r/m", "/r/b.index") == "/r/m+faiss:/r/b.index"
    assert parse_spec("m+pq:8:/c.txt").with_paths("/r/m", "/r/c.txt") == "/r/m+pq:8:/r/c.txt"
    odd = tmp_path / "a+pq:8"
    odd.mkdir()
    assert parse_spec(str(odd)) == EncoderSpec(str(odd))


def _load_in_child(
    spec: str, limit_gb: int = 3, timeout: float = 120
) -> subprocess.CompletedProcess:
    """``load_encoder(spec)`` in a child process whose address space is capped, so a reader
    without a bound fails there (MemoryError) and never takes this machine's memory."""
    code = textwrap.dedent(
        f"""
        import resource
        resource.setrlimit(resource.RLIMIT_AS, ({limit_gb} << 30, {limit_gb} << 30))
        from lexlens.models import LexlensError, load_encoder
        try:
            load_encoder({spec!r}, device="cpu")
        except LexlensError as exc:
            print("refused:", exc)
        else:
            print("loaded")
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_unbounded_a_codebook_corpus_that_is_a_device_is_refused_before_it_is_read(st_dir):
    """``+pq:M:/dev/zero`` read the device until memory ran out (3.5 GB): a device, a FIFO
    or a folder is refused before it is opened, whoever names it (the CLI, the API)."""
    run = _load_in_child(f"{st_dir}+pq:4:/dev/zero")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "refused: corpus /dev/zero: not a regular file" in run.stdout, run.stdout


def test_unbounded_a_codebook_corpus_that_is_a_fifo_never_blocks(st_dir, tmp_path):
    fifo = tmp_path / "corpus.txt"
    os.mkfifo(fifo)
    run = _load_in_child(f"{st_dir}+pq:4:{fifo}", timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"refused: corpus {fifo}: not a regular file" in run.stdout, run.stdout


def test_security_a_faiss_suffix_never_quotes_the_bytes_of_another_file(st_dir, tmp_path):
    """faiss's own message quoted a file's first four bytes (``Index type 0x72636573
    ("secr")``): a file that is not a faiss PQ index is refused in one line of Lexlens's,
    the same whatever it holds."""
    messages = []
    for content in (b"secret: the launch codes\n", b"another private text\n"):
        secret = tmp_path / "notes.txt"
        secret.write_bytes(content)
        with pytest.raises(LexlensError) as caught:
            load_encoder(f"{st_dir}+faiss:{secret}", device="cpu")
        message = str(caught.value)
        assert "\n" not in message and "not a readable faiss index" in message, message
        message = message.replace(str(secret), "FILE")
        for leak in (content[:4].decode(), content[:4].hex(), content[:4][::-1].hex()):
            assert leak not in message, message
        messages.append(message)
    assert messages[0] == messages[1]


def test_security_a_damaged_faiss_index_is_refused_without_its_bytes(st_dir, tmp_path):
    """A file that starts as a faiss OPQ index and then holds something else (a crafted
    file, a damaged download) is refused in Lexlens's words, never faiss's, which quote the
    bytes where it stopped (``Index type 0x72636573 ("secr")``)."""
    import faiss
    import numpy as np

    index = faiss.index_factory(32, "OPQ4,PQ4x8")
    train = np.random.default_rng(0).standard_normal((300, 32)).astype(np.float32)
    faiss.downcast_VectorTransform(index.chain.at(0)).niter = 1
    faiss.downcast_index(index.index).pq.cp.min_points_per_centroid = 1
    index.train(train)
    data = faiss.serialize_index(index).tobytes()
    inner = data.index(b"IxPq")  # the PQ index inside the OPQ pre-transform
    damaged = tmp_path / "damaged.index"
    damaged.write_bytes(data[:inner] + b"secr" + data[inner + 4 :])
    with pytest.raises(LexlensError) as caught:
        load_encoder(f"{st_dir}+faiss:{damaged}", device="cpu")
    message = str(caught.value).replace(str(damaged), "FILE")
    assert "not a readable faiss index" in message, message
    assert "secr" not in message and "0x" not in message, message
