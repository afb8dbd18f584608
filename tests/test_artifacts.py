"""tilecore.kit.artifacts: build once (under a lock), verify at every reuse, rebuild what does not match."""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

import pytest

from tilecore import TilecoreError
from tilecore.kit.artifacts import RECORD, ArtifactError, ArtifactStore, file_digest
from tilecore.kit.paths import socket_scratch_parent


def _builder(calls: list[int], payload: bytes = b"\x7fELF-not-really" * 100):
    def build(staging: Path) -> dict:
        calls.append(1)
        (staging / "lib.so").write_bytes(payload)
        return {"note": "built"}

    return build


def test_build_once_then_verified_reuse() -> None:
    store, calls = ArtifactStore("unit", "libs"), []
    first = store.obtain("k1", "lib.so", _builder(calls))
    again = store.obtain("k1", "lib.so", _builder(calls))
    assert first.built and not again.built and calls == [1]
    assert again.path == first.path and again.sha256 == file_digest(first.path) and again.details == {"note": "built"}
    assert str(first.path).startswith(os.environ["TILECORE_CACHE_DIR"])
    assert json.loads((first.path.parent / RECORD).read_text())["sha256"] == first.sha256


@pytest.mark.parametrize("damage", ["truncated", "zero-filled", "flipped byte", "record missing"])
def test_damaged_entry_is_rebuilt(damage: str) -> None:
    store, calls = ArtifactStore("unit", "libs"), []
    path = store.obtain("k2", "lib.so", _builder(calls)).path
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "zero-filled":
        path.write_bytes(bytes(len(data)))
    elif damage == "flipped byte":
        path.write_bytes(data[:10] + bytes([data[10] ^ 1]) + data[11:])
    else:
        (path.parent / RECORD).unlink()
    assert store.lookup("k2", "lib.so") is None
    rebuilt = store.obtain("k2", "lib.so", _builder(calls))
    assert rebuilt.built and calls == [1, 1] and rebuilt.path.read_bytes() == data


def test_failed_or_empty_build_publishes_nothing() -> None:
    store = ArtifactStore("unit", "libs")

    def fails(staging: Path) -> None:
        (staging / "lib.so").write_bytes(b"half")
        raise RuntimeError("compiler crashed")

    with pytest.raises(RuntimeError, match="compiler crashed"):
        store.obtain("k3", "lib.so", fails)
    with pytest.raises(ArtifactError, match=r"without producing lib\.so"):
        store.obtain("k3", "lib.so", lambda staging: None)
    assert not store.entry("k3").exists()
    assert [p.name for p in store.root.iterdir() if p.name.startswith(".staging")] == []


def test_repair_copy_and_discard(tmp_path: Path) -> None:
    store, calls = ArtifactStore("unit", "libs"), []
    artifact = store.obtain("k4", "lib.so", _builder(calls))
    copy = tmp_path / "kernel_lib.bin"
    copy.write_bytes(bytes(artifact.size))
    assert ArtifactStore.repair_copy(copy, artifact) and copy.read_bytes() == artifact.path.read_bytes()
    assert not ArtifactStore.repair_copy(copy, artifact)
    store.discard("k4")
    assert store.lookup("k4", "lib.so") is None


def _slow_build(cache: str, results: multiprocessing.Queue) -> None:
    os.environ["TILECORE_CACHE_DIR"] = cache

    def build(staging: Path) -> None:
        time.sleep(0.5)
        (staging / "lib.so").write_bytes(str(os.getpid()).encode())

    artifact = ArtifactStore("unit", "libs").obtain("shared", "lib.so", build)
    results.put((artifact.built, artifact.path.read_bytes()))


def test_concurrent_processes_build_once() -> None:
    # fork, not spawn: a spawned child re-imports this module by its pytest name (tests.test_artifacts),
    # which is not importable when pytest runs as a script (CI), only under `python -m pytest`.
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    procs = [context.Process(target=_slow_build, args=(os.environ["TILECORE_CACHE_DIR"], results)) for _ in range(3)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
    assert sorted(built for built, _ in outcomes) == [False, False, True], outcomes
    assert len({content for _, content in outcomes}) == 1, "everybody uses the one library that was built"


def test_socket_scratch_parent_skips_a_long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long_dir = tmp_path / ("x" * 90)
    long_dir.mkdir()
    monkeypatch.setenv("TMPDIR", str(long_dir))
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    assert socket_scratch_parent(40, "test") == Path("/tmp")
    with pytest.raises(TilecoreError, match="Set TMPDIR to a short writable directory"):
        socket_scratch_parent(105, "target 'x'")
