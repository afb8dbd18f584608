"""Tuning records in the remote store (real Redis): signed, bound to their key, refused otherwise;
and the executor's refusal to ship a sweep without the remote cache (one warning, local tuning).
These need no Ray."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from tilecore import executor, remote
from tilecore.remote import records
from tilecore.remote.localserver import LocalRedisServer

KEY_A = "tuning-record-key-a-0123456789abcdef"
KEY_B = "tuning-record-key-b-0123456789abcdef"
RECORD = {"best": {"index": 1, "config": {"BM": 32}, "latency": 0.5, "ref_latency": None}, "configs": []}


@pytest.fixture
def store(redis_server: LocalRedisServer) -> Iterator[str]:
    try:
        yield redis_server.url
    finally:
        remote.reset()


def test_a_record_round_trips_signed(store: str) -> None:
    remote.configure(store, key=KEY_A)
    assert remote.put_record("k1", RECORD) is True
    assert remote.put_record("k1", {"best": None}) is False  # the first record of a key stays
    assert remote.get_record("k1") == RECORD
    assert remote.get_record("k-absent") is None
    counted = remote.counters()
    assert counted["records_published"] == 1 and counted["record_exists"] == 1 and counted["record_hits"] == 1


def test_a_record_signed_with_another_key_or_unsigned_is_refused(store: str, caplog: pytest.LogCaptureFixture) -> None:
    remote.configure(store, key=KEY_A)
    assert remote.put_record("k2", RECORD)
    remote.configure(store, key=KEY_B)
    with caplog.at_level(logging.WARNING, logger="tilecore.remote"):
        assert remote.get_record("k2") is None
    assert "not signed with this reader's key" in caplog.text
    assert remote.counters()["record_rejected"] == 1
    remote.configure(store)  # no key: a signed record cannot be checked, so it is refused too
    assert remote.get_record("k2") is None
    assert remote.put_record("k3", RECORD)  # unsigned
    remote.configure(store, key=KEY_A)
    assert remote.get_record("k3") is None


def test_a_record_is_bound_to_its_key() -> None:
    blob = records.encode("k4", RECORD, KEY_A.encode())
    assert records.decode(blob, "k4", KEY_A.encode()) == RECORD
    with pytest.raises(records.RecordRejected, match="key"):
        records.decode(blob, "k5", KEY_A.encode())
    tampered = blob.replace(b'"BM":32', b'"BM":64')
    with pytest.raises(records.RecordRejected, match="signature"):
        records.decode(tampered, "k4", KEY_A.encode())


def test_without_the_remote_cache_the_ray_executor_warns_once_and_tilelang_tunes(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch
    from tune_kernels import make_matmul

    monkeypatch.chdir(tmp_path)  # tilelang's tuner writes autotuner.log into the working directory
    remote.configure(None)
    try:
        executor.configure("ray")
        with caplog.at_level(logging.WARNING, logger="tilecore.executor"):
            kernel = make_matmul("democpu", configs=[{"BM": 16, "BN": 16, "BK": 16}, {"BM": 32, "BN": 32, "BK": 32}])(64, 64, 64)
        assert caplog.text.count("needs the remote compile cache") == 1
        assert executor.counters() == {}  # no record looked up, no task submitted
        a, b = torch.randn(64, 64), torch.randn(64, 64)
        torch.testing.assert_close(kernel(a, b), a @ b, atol=1e-3, rtol=1e-3)
    finally:
        executor.reset()
        remote.reset()


def test_an_unreachable_store_is_a_warning_and_local_tuning(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import torch
    from tune_kernels import make_matmul

    from tilecore.remote.localserver import free_port

    monkeypatch.chdir(tmp_path)  # tilelang's tuner writes autotuner.log into the working directory
    remote.configure(f"redis://127.0.0.1:{free_port()}/0?connect_timeout=1", key=KEY_A)  # nothing listens there
    try:
        executor.configure("ray", address="127.0.0.1:1")  # never reached: the store fails first
        with caplog.at_level(logging.WARNING):
            kernel = make_matmul("democpu", configs=[{"BM": 16, "BN": 16, "BK": 16}, {"BM": 32, "BN": 32, "BK": 32}])(64, 64, 64)
        assert caplog.text.count("remote cache store is unreachable; tuning locally") == 1
        assert "cannot be reached" not in caplog.text and executor.counters() == {}
        a, b = torch.randn(64, 64), torch.randn(64, 64)
        torch.testing.assert_close(kernel(a, b), a @ b, atol=1e-3, rtol=1e-3)
    finally:
        executor.reset()
        remote.reset()


def test_node_resources_advertise_only_working_toolchains() -> None:
    import json
    import os
    import subprocess
    import sys

    from tilecore.executor.ray_executor import bench_resource, toolchain_resource

    assert executor.node_resources(["democpu"]) == {toolchain_resource("democpu"): 1.0, bench_resource("democpu"): 1.0}
    # A node whose C++ compiler is missing: democpu's set-up fails there, so it advertises nothing.
    env = dict(os.environ, CXX="/nonexistent/c++")
    command = [sys.executable, "-m", "tilecore.cli", "executor", "node-resources", "--target", "democpu"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {}


def test_the_ray_executor_never_starts_a_cluster() -> None:
    with pytest.raises(ValueError, match="never starts one"):
        executor.configure("ray", address="local")
    with pytest.raises(ValueError, match="never starts one"):
        executor.configure("ray:local")
    assert executor.current() is None  # nothing configured, TILECORE_EXECUTOR unset: tilelang's own tuner
