"""The remote compile-cache tier against a real ``redis-server`` (no fake Redis anywhere).

"Machines" are separate interpreters (tests/remote_worker.py) with separate local
tilelang cache dirs sharing one Redis server; the test process itself never imports
tilelang.  Target democpu keeps compiles cheap.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tilecore._version import __version__ as tilecore_version
from tilecore.kit.paths import cache_root
from tilecore.remote import entry, signing
from tilecore.remote.localserver import LocalRedisServer, free_port
from tilecore.remote.url import RemoteURLError, parse, redact

redis = pytest.importorskip("redis", reason="the redis client is tilecore[remote]'s dependency")

WORKER = Path(__file__).with_name("remote_worker.py")
KEY_A = "a" * 32  # signing keys (>= 16 bytes)
KEY_B = "b" * 32
VERSIONS = {"tilelang": "0.1.15", "backend": "tilelang-democpu==0.1.0", "tilecore": "0.1.0"}
# The SophGo toolchain stays where `tilelang-tpu toolchain install` put it (computed before the
# per-test cache isolation); the tpu case of the cross-machine test needs it.
TPU_TOOLCHAIN = Path(os.environ.get("TILELANG_TPU_TOOLCHAIN_DIR") or cache_root() / "tpu" / "toolchain")
HAVE_TPU = importlib.util.find_spec("tilelang_tpu") is not None and TPU_TOOLCHAIN.is_dir() and any(TPU_TOOLCHAIN.iterdir())


# ----------------------------------------------------------------------------------------
# Fixtures: one real server per session, an empty database per test
# ----------------------------------------------------------------------------------------


@pytest.fixture
def store(redis_server: LocalRedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    yield client
    client.config_set("maxmemory", 0)
    client.acl_deluser("reader")
    client.close()


class Machines:
    """Runs worker plans in fresh interpreters with a private cwd, TMPDIR and HOME."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd, self.tmp, self.home = root / "cwd", root / "tmp", root / "home"
        for path in (self.cwd, self.tmp, self.home):
            path.mkdir()

    def cache(self, name: str) -> str:
        return str(self.root / "caches" / name)

    def run(self, plan: list[dict], **env: str) -> tuple[list[dict], dict, str]:
        environ = {k: v for k, v in os.environ.items() if not k.startswith("TILECORE_REMOTE_CACHE")}
        environ.update(
            TMPDIR=str(self.tmp), HOME=str(self.home), PYTHONUNBUFFERED="1", TILELANG_TPU_TOOLCHAIN_DIR=str(TPU_TOOLCHAIN), **env
        )
        proc = subprocess.run(
            [sys.executable, str(WORKER), json.dumps(plan)], env=environ, cwd=self.cwd, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        steps = [json.loads(line[5:]) for line in proc.stdout.splitlines() if line.startswith("STEP ")]
        children = [json.loads(line[6:]) for line in proc.stdout.splitlines() if line.startswith("CHILD ")]
        counters = json.loads(proc.stdout.split("COUNTERS ", 1)[1].splitlines()[0])
        if children:
            steps.append({"children": children})
        return steps, counters, proc.stderr


@pytest.fixture
def machines() -> Iterator[Machines]:
    # A short root: the SophGo toolchain aborts (SIGABRT, no message) when TMPDIR is longer
    # than about 80 characters, which pytest's own temporary paths are.
    root = Path(tempfile.mkdtemp(prefix="tcrc-", dir="/tmp"))
    try:
        yield Machines(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def local_entries(cache: str) -> list[Path]:
    return sorted(p for p in Path(cache).glob("*/*/kernels/*") if p.is_dir())


def remote_names(client: redis.Redis) -> list[str]:
    return sorted(name.decode() for name in client.scan_iter("tilecore:*"))


def remote_warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "tilecore remote cache" in line]


# ----------------------------------------------------------------------------------------
# Entry format and configuration (no server, no compile)
# ----------------------------------------------------------------------------------------


def test_entry_refusals_name_their_reason() -> None:
    files = {"kernel_lib.bin": os.urandom(3000), "params.json": b"[]", "manifest.json": b"{}"}
    blob = entry.encode("k" * 64, VERSIONS, files, KEY_A.encode())
    assert entry.decode(blob, "k" * 64, VERSIONS, KEY_A.encode()).files == files
    assert entry.decode(blob, "k" * 64, VERSIONS, None).files == files  # without a key: hashes only
    flipped = bytearray(blob)
    flipped[-100] ^= 0x01
    cases = {
        "signature": (bytes(flipped), KEY_A),  # any flipped bit breaks the HMAC first
        "hash": (bytes(flipped), None),
        "size": (blob[:-500], None),
        "format": (os.urandom(200), None),
    }
    for reason, (data, key) in cases.items():
        with pytest.raises(entry.EntryRejected) as err:
            entry.decode(data, "k" * 64, VERSIONS, key.encode() if key else None)
        assert err.value.reason == reason, (reason, err.value)
    with pytest.raises(entry.EntryRejected, match="signature"):
        entry.decode(entry.encode("k" * 64, VERSIONS, files, None), "k" * 64, VERSIONS, KEY_A.encode())
    with pytest.raises(entry.EntryRejected, match="signature"):
        entry.decode(blob, "k" * 64, VERSIONS, KEY_B.encode())
    with pytest.raises(entry.EntryRejected, match="version"):
        entry.decode(blob, "k" * 64, {**VERSIONS, "tilelang": "0.1.16"}, KEY_A.encode())
    with pytest.raises(entry.EntryRejected, match="key"):
        entry.decode(blob, "j" * 64, VERSIONS, KEY_A.encode())
    with pytest.raises(ValueError, match="plain file names"):
        entry.encode("k", VERSIONS, {"../evil.so": b"x"}, None)


def test_url_options_redaction_and_key_checks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    parsed = parse("redis://alice:hunter2@cache.lan:6380/2?ttl=60&timeout=0.2&ssl_cert_reqs=none")
    assert parsed.scheme == "redis" and parsed.options == {"ttl": "60", "timeout": "0.2"}
    assert "ssl_cert_reqs=none" in parsed.store_url and "hunter2" in parsed.store_url
    assert redact("redis://alice:hunter2@cache.lan:6380/2?password=x") == "redis://cache.lan:6380/2?password=***"
    with pytest.raises(RemoteURLError, match="no scheme"):
        parse("cache.lan:6379")
    from tilecore import remote

    try:
        with pytest.raises(RemoteURLError, match=r"scheme 'nosuch'.*Known schemes: .*redis"):
            remote.configure("nosuch://x")
        with pytest.raises(RemoteURLError, match="option ttl='soon' from URL"):
            remote.configure("redis://127.0.0.1:1/0?ttl=soon")
        with pytest.raises(signing.SigningKeyError, match="at least 16"):
            remote.configure("redis://127.0.0.1:1/0", key="short")
        monkeypatch.setenv(signing.KEY_FILE_ENV, str(tmp_path / "missing"))
        with pytest.raises(signing.SigningKeyError, match="cannot read"):
            remote.configure("redis://127.0.0.1:1/0")
        keyfile = tmp_path / "key"
        keyfile.write_text(KEY_A + "\n")
        monkeypatch.setenv(signing.KEY_FILE_ENV, str(keyfile))
        assert signing.load_key() == (KEY_A.encode(), f"{signing.KEY_FILE_ENV}={keyfile}")
        assert remote.printable_env(signing.KEY_ENV, KEY_A) == "<hidden>"
        assert remote.printable_env(remote.ENV, "redis://a:hunter2@h:1/0") == "redis://h:1/0"
    finally:
        remote.reset()


def test_third_party_store_from_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution ships a store for its own scheme the way a vendor ships a backend."""
    site = tmp_path / "site"
    (site / "tcfake_dirstore").mkdir(parents=True)
    (site / "tcfake_dirstore" / "__init__.py").write_text(
        "from pathlib import Path\n"
        "from tilecore.remote import Store, StoredEntry\n"
        "class DirStore(Store):\n"
        "    def __init__(self, url, options):\n"
        "        self.root = Path(url.split('://', 1)[1]); self.root.mkdir(parents=True, exist_ok=True)\n"
        "    def get(self, name, ttl_s):\n"
        "        p = self.root / name\n"
        "        return p.read_bytes() if p.exists() else None\n"
        "    def put_if_absent(self, name, blob, ttl_s):\n"
        "        try:\n"
        "            with open(self.root / name, 'xb') as f: f.write(blob)\n"
        "        except FileExistsError: return False\n"
        "        return True\n"
        "    def delete(self, names):\n"
        "        n = 0\n"
        "        for name in names: (self.root / name).unlink(missing_ok=True); n += 1\n"
        "        return n\n"
        "    def scan(self, prefix):\n"
        "        return (StoredEntry(p.name, p.stat().st_size, None) for p in self.root.iterdir() if p.name.startswith(prefix))\n"
        "    def ping(self): return 0.0\n"
    )
    info = site / "tcfake_dirstore-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tcfake-dirstore\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[tilecore.remote_stores]\ndirstore = tcfake_dirstore:DirStore\n")
    monkeypatch.syspath_prepend(str(site))
    from tilecore import remote

    source = tmp_path / "entry_src"
    source.mkdir()
    (source / "kernel_lib.bin").write_bytes(os.urandom(500))
    (source / "params.json").write_text("[]")
    try:
        remote.configure(f"dirstore://{tmp_path / 'blobs'}", key=KEY_A)
        assert remote.publish_async(str(source), "c" * 64, {"tilelang": "x", "backend": "y"})
        assert remote.flush(10)
        assert remote.counters()["published"] == 1
        target = tmp_path / "local" / "kernels" / ("c" * 64)
        assert remote.lookup_into(str(target), "c" * 64, {"tilelang": "x", "backend": "y"})
        assert sorted(p.name for p in target.iterdir()) == ["kernel_lib.bin", "params.json"]
        assert (target / "kernel_lib.bin").read_bytes() == (source / "kernel_lib.bin").read_bytes()
        assert not remote.lookup_into(str(tmp_path / "other"), "c" * 64, {"tilelang": "x", "backend": "z"})  # foreign backend
        assert remote.counters()["rejected_version"] == 1
    finally:
        remote.reset()


# ----------------------------------------------------------------------------------------
# Across machines
# ----------------------------------------------------------------------------------------


def test_hit_across_machines_and_nothing_written_outside_the_caches(
    machines: Machines, store: redis.Redis, redis_server: LocalRedisServer
) -> None:
    """democpu, and tpu (BM1690 emulator) where its toolchain is installed: machine B loads
    machine A's kernels; the remote key is the local one; no stray files anywhere."""
    url = {"configure": {"url": redis_server.url, "key": KEY_A}}
    tpu = [{"compile": 1.5, "cache": machines.cache("a-tpu"), "target": "tpu"}] if HAVE_TPU else []
    first, _, err_a = machines.run([url, {"compile": 1.5, "cache": machines.cache("a")}, *tpu])
    assert all(s["served"] == "compiled" and s["ok"] for s in first[1:]), first
    assert first[1]["counters"]["misses"] == 1
    (entry_a,) = local_entries(machines.cache("a"))
    assert f"tilecore:v1:{tilecore_version}:" + entry_a.name in remote_names(store), "the remote key is tilelang+tilecore's cache key"
    if HAVE_TPU:  # published by the first machine's exit flush
        (entry_tpu,) = local_entries(machines.cache("a-tpu"))
        assert remote_names(store) == sorted(f"tilecore:v1:{tilecore_version}:" + e.name for e in (entry_a, entry_tpu))
        tpu = [{"compile": 1.5, "cache": machines.cache("b-tpu"), "target": "tpu"}]

    # The second machine reads through a Redis user that may not write: hits work, its own
    # cold compile is not published, and that costs one warning (no password in it).
    store.acl_setuser("reader", enabled=True, passwords=["+readerpw"], keys=["*"], commands=["+get", "+strlen", "+expire", "+@connection"])
    reader = {"configure": {"url": redis_server.url.replace("//", "//reader:readerpw@"), "key": KEY_A}}
    second, counters, err_b = machines.run(
        [reader, {"compile": 1.5, "cache": machines.cache("b")}, {"compile": 2.5, "cache": machines.cache("b")}, *tpu, {"flush": True}]
    )
    hit, cold = second[1], second[2]
    if HAVE_TPU:
        assert second[3]["served"] == "disk" and second[3]["ok"], second[3]
        assert local_entries(machines.cache("b-tpu"))[0].name == entry_tpu.name
    assert hit["served"] == "disk" and hit["ok"], "the second machine must load the first machine's kernel"
    assert cold["served"] == "compiled" and cold["ok"]
    assert counters["hits"] == 1 + HAVE_TPU and counters["misses"] == 1 and counters["publish_denied"] == 1
    assert {p.name for p in local_entries(machines.cache("b"))} >= {entry_a.name}, "a remote hit is installed locally"
    assert len(remote_names(store)) == 1 + HAVE_TPU
    assert remote_warnings(err_a) == []
    (denied,) = remote_warnings(err_b)
    assert "publishing refused" in denied and redis_server.url in denied and "readerpw" not in err_b
    # Nothing outside the cache dirs: not the working directory, TMPDIR or HOME.
    for path in (machines.cwd, machines.tmp, machines.home):
        assert list(path.rglob("*")) == [], (path, list(path.rglob("*"))[:5])
    staging = list(Path(machines.cache("b")).glob("*/*/.staging/*"))
    assert staging == []


def test_bad_entries_are_refused_and_recompiled(machines: Machines, store: redis.Redis, redis_server: LocalRedisServer) -> None:
    """Corrupted, truncated, garbage, wrongly signed, unsigned and foreign-version entries:
    refused (never loaded), recompiled, correct; an intact one is a hit (the control)."""
    cases = ["intact", "corrupted", "truncated", "garbage", "wrong_key", "unsigned", "foreign_version"]
    scales = {case: 3.0 + index for index, case in enumerate(cases)}
    producer = [{"configure": {"url": redis_server.url, "key": KEY_A}}]
    producer += [{"compile": scales[c], "cache": machines.cache(f"p-{c}")} for c in cases]
    machines.run(producer)
    names = {c: next(n for n in remote_names(store) if n.endswith(local_entries(machines.cache(f"p-{c}"))[0].name)) for c in cases}
    assert len(set(names.values())) == len(cases)

    def reencode(name: str, versions: dict | None = None, secret: bytes | None = None) -> bytes:
        key = name.rsplit(":", 1)[1]
        found = entry.decode(store.get(name), key, {}, KEY_A.encode())
        return entry.encode(key, versions or found.versions, found.files, secret)

    blob = {c: store.get(names[c]) for c in cases}
    flipped = bytearray(blob["corrupted"])
    flipped[len(flipped) // 2] ^= 0xFF
    tampered = {
        "corrupted": bytes(flipped),
        "truncated": blob["truncated"][: len(blob["truncated"]) // 2],
        "garbage": os.urandom(4096),
        "wrong_key": reencode(names["wrong_key"], secret=KEY_B.encode()),
        "unsigned": reencode(names["unsigned"], secret=None),
        "foreign_version": reencode(names["foreign_version"], versions={**VERSIONS, "tilelang": "0.0.1"}, secret=KEY_A.encode()),
    }
    for case, data in tampered.items():
        store.set(names[case], data)
    # Corruption and truncation are caught by the content hashes alone (a reader without a key);
    # the signed cases need the key.
    unsigned_reader = [{"configure": {"url": redis_server.url, "key": None}}]
    unsigned_reader += [{"compile": scales[c], "cache": machines.cache("r1")} for c in ("corrupted", "truncated", "garbage")]
    signed_reader = [{"configure": {"url": redis_server.url, "key": KEY_A}}]
    signed_reader += [{"compile": scales[c], "cache": machines.cache("r2")} for c in ("intact", "wrong_key", "unsigned", "foreign_version")]
    steps, _, err = machines.run([*unsigned_reader, {"flush": True}, *signed_reader, {"flush": True}])
    counters1, counters2 = steps[len(unsigned_reader)]["counters"], steps[-1]["counters"]
    served = {s["scale"]: s for s in steps if "scale" in s}
    for case in cases:
        assert served[scales[case]]["ok"], case
        assert served[scales[case]]["served"] == ("disk" if case == "intact" else "compiled"), case
    assert counters1["rejected_hash"] == 1 and counters1["rejected_size"] == 1 and counters1["rejected_format"] == 1
    assert counters2["hits"] == 1 and counters2["rejected_signature"] == 2 and counters2["rejected_version"] == 1
    assert len(remote_warnings(err)) == 6, err[-4000:]
    # Every refused entry (wrongly signed and unsigned ones too) is dropped and the recompiled
    # kernel, signed with the fleet's key, takes its place.
    for case in tampered:
        key = names[case].rsplit(":", 1)[1]
        entry.decode(store.get(names[case]), key, {}, KEY_A.encode() if case in ("wrong_key", "unsigned", "foreign_version") else None)
    assert counters2["dropped_bad"] == 3 and counters2["published"] == 3, counters2


# ----------------------------------------------------------------------------------------
# Failures of the store: down, silent, garbage, full
# ----------------------------------------------------------------------------------------


class _BadServer:
    """A TCP server that accepts and then never answers (``reply=None``) or answers junk."""

    def __init__(self, reply: bytes | None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply is not None:
                try:
                    conn.recv(65536)
                    conn.sendall(self.reply)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


def test_store_down_silent_garbage_or_full_costs_one_warning(
    machines: Machines, store: redis.Redis, redis_server: LocalRedisServer
) -> None:
    """Each failing store costs its process one warning naming the URL (credentials stripped),
    then kernels compile locally without further remote calls."""
    silent, junk = _BadServer(None), _BadServer(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    # Full: the real server refuses writes (maxmemory reached, no eviction); reads still work.
    store.config_set("maxmemory-policy", "noeviction")
    store.config_set("maxmemory", 1)
    try:
        urls = {
            "down": f"redis://alice:hunter2@127.0.0.1:{free_port()}/0",
            "silent": f"redis://alice:hunter2@127.0.0.1:{silent.port}/0",
            "garbage": f"redis://alice:hunter2@127.0.0.1:{junk.port}/0",
            "full": redis_server.url,
        }
        plan: list[dict] = []
        for index, url in enumerate(urls.values()):
            plan += [{"configure": {"url": url, "timeout": 0.3, "connect_timeout": 0.3}}]
            plan += [{"compile": 20.0 + 2 * index + n, "cache": machines.cache("bad")} for n in range(2)]
            plan += [{"flush": True}]
        steps, _, err = machines.run(plan)
    finally:
        silent.close()
        junk.close()
    warnings = remote_warnings(err)
    assert len(warnings) == len(urls), err[-4000:]  # one per configured store
    assert "hunter2" not in err
    for index, (case, url) in enumerate(urls.items()):
        _configured, *compiled, flushed = steps[4 * index : 4 * index + 4]
        assert all(s["ok"] and s["served"] == "compiled" for s in compiled), case
        assert f"127.0.0.1:{url.rsplit(':', 1)[1].split('/')[0]}/0" in warnings[index], (case, warnings[index])
        counters = flushed["counters"]
        assert counters["store_errors"] == 1, (case, counters)
        assert counters.get("skipped", 0) + counters.get("publish_skipped", 0) >= 1, (case, counters)
    assert "lookup failed" in warnings[0] and "timeout" in warnings[1] and "lookup failed" in warnings[2]
    assert "publish failed" in warnings[3] and "full" in warnings[3], warnings[3]
    assert remote_names(store) == []


# ----------------------------------------------------------------------------------------
# Concurrency
# ----------------------------------------------------------------------------------------


def test_eight_concurrent_compilers_store_one_entry(machines: Machines, store: redis.Redis, redis_server: LocalRedisServer) -> None:
    steps, _, err = machines.run(
        # deadline=30: eight compiling processes load a small machine far more than a fleet's
        # client; this test is about SET NX, not about the lookup deadline (test_remote_reliability.py).
        [
            {"configure": {"url": redis_server.url, "key": KEY_A, "deadline": 30}},
            {"fork": 8, "scale": 40.0, "cache_root": machines.cache("fork")},
        ]
    )
    assert steps[1]["exit_codes"] == [0] * 8, err[-3000:]
    children = steps[-1]["children"]
    assert len(children) == 8 and all(c["ok"] for c in children)
    assert len(remote_names(store)) == 1, ([c["counters"] for c in children], err[-3000:])
    published = sum(c["counters"].get("published", 0) for c in children)
    hits = sum(c["counters"].get("hits", 0) for c in children)
    assert published <= 1 and published + hits >= 1
    assert sum(c["counters"].get("publish_exists", 0) for c in children) + published + hits == 8
    assert remote_warnings(err) == []


# ----------------------------------------------------------------------------------------
# Command line: tilecore cache stats|prune|clear, doctor
# ----------------------------------------------------------------------------------------


def test_cache_command_and_doctor_on_both_tiers(machines: Machines, store: redis.Redis, redis_server: LocalRedisServer) -> None:
    cache = machines.cache("cli")
    machines.run([{"configure": {"url": redis_server.url}}, {"compile": 50.0, "cache": cache}])
    store.set("tilecore:v1:0.0.1:" + "f" * 64, b"old version entry")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TILECORE_REMOTE_CACHE")}
    env.update(
        TILELANG_CACHE_DIR=cache,
        TILECORE_REMOTE_CACHE=redis_server.url.replace("//", "//default:sekrit@"),
        TMPDIR=str(machines.tmp),
        TILECORE_REMOTE_CACHE_KEY=KEY_A,
    )
    store.config_set("requirepass", "sekrit")
    try:
        script = (
            "import json, sys\n"
            "from tilecore import cli\n"
            "for argv in (['cache', 'stats', '--json'], ['cache', 'prune', '--json'], ['cache', 'clear', '--json'], ['cache', 'stats', '--json']):\n"
            "    cli.main(argv)\n"
            "import tilecore\n"
            "from tilecore.remote import doctor_report\n"
            "print(json.dumps(doctor_report()))\n"
            "from tilecore.cli import envinfo\n"
            "from tilecore.cli.cache_cmd import doctor_section\n"
            "print(json.dumps({'section': doctor_section(None).as_json('remote'), 'env': envinfo.collect()['tilecore_env']}))\n"
        )
        proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=machines.cwd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        decoder, text, docs = json.JSONDecoder(), proc.stdout, []
        index = 0
        while index < len(text):
            if text[index].isspace():
                index += 1
                continue
            doc, index = decoder.raw_decode(text, index)
            docs.append(doc)
        before, pruned, cleared, after, doctor, shown = docs
        assert shown["section"]["ok"] and shown["section"]["title"] == "remote cache"
        assert any("reachable: yes" in line for line in shown["section"]["lines"]), shown
        assert shown["env"]["TILECORE_REMOTE_CACHE"] == redis_server.url and shown["env"]["TILECORE_REMOTE_CACHE_KEY"] == "<hidden>"
        assert KEY_A not in proc.stdout
        assert before["local"]["entries"] == 1 and before["remote"]["entries"] == 1 and before["remote"]["other_versions_entries"] == 1
        assert "sekrit" not in proc.stdout and before["remote"]["url"] == redis_server.url
        assert pruned["remote"]["removed_other_versions"] == 1 and pruned["local"]["removed"] == 0
        assert cleared["local"]["removed"] == 1 and cleared["remote"]["removed"] == 1
        assert after["local"]["entries"] == 0 and after["remote"]["entries"] == 0 and after["remote"]["other_versions_entries"] == 0
        assert doctor["reachable"] and doctor["url"] == redis_server.url and doctor["rtt_ms"] > 0 and doctor["entries"] == 0
    finally:
        store.config_set("requirepass", "")


def test_local_tier_prune_by_age_and_size(tmp_path: Path) -> None:
    """`tilecore cache prune` on the local tier: entries unused for --max-age go, then the least
    recently used ones until the rest fits in --max-bytes; hidden staging leftovers are no entries."""
    import time

    from tilecore.remote import local

    root = tmp_path / "kernels"
    now = time.time()
    for name, size, age_days in (("old", 100, 40), ("mid", 300, 5), ("new", 200, 1), ("newest", 50, 0)):
        entry_dir = root / name
        entry_dir.mkdir(parents=True)
        (entry_dir / "kernel_lib.bin").write_bytes(b"x" * size)
        os.utime(entry_dir / "kernel_lib.bin", (now - age_days * 86400, now - age_days * 86400))
    (root / ".staging-leftover").mkdir()
    assert local.usage(root) == {"dir": str(root), "entries": 4, "bytes": 650}
    assert local.prune(root, max_age_s=30 * 86400) == {"removed": 1, "bytes_left": 550}
    assert local.prune(root, max_bytes=300) == {"removed": 1, "bytes_left": 250}
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == ["new", "newest"]
    assert local.clear(root) == 2 and local.usage(root)["entries"] == 0
