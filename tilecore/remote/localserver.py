"""A throwaway ``redis-server`` on a free loopback port, for tests, benchmarks and trials.

It runs in a directory the caller owns (its log and nothing else: persistence is
off), listens on 127.0.0.1 only, and is stopped (SIGTERM, then SIGKILL) on exit.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import time
from pathlib import Path


def find_binary(explicit: str | None = None) -> str | None:
    """``explicit``, else ``redis-server`` on PATH, else Debian's /usr/bin/redis-server."""
    for candidate in (explicit, shutil.which("redis-server"), "/usr/bin/redis-server"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ping(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class LocalRedisServer:
    def __init__(self, workdir: Path, binary: str | None = None, maxmemory: str | None = None) -> None:
        found = find_binary(binary)
        if found is None:
            raise FileNotFoundError("no redis-server binary (apt-get install -y redis-server, or pass its path)")
        self.binary = found
        self.workdir = Path(workdir)
        self.maxmemory = maxmemory
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> LocalRedisServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for _attempt in range(3):  # the free port may be taken between probing and binding
            self.port = free_port()
            args = [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.workdir),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--logfile",
                str(self.workdir / "redis.log"),
            ]
            if self.maxmemory:
                args += ["--maxmemory", self.maxmemory, "--maxmemory-policy", "allkeys-lru"]
            self.process = subprocess.Popen(
                args, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and self.process.poll() is None:
                if ping(self.port):
                    return self
                time.sleep(0.05)
            self.stop()
        log = (self.workdir / "redis.log").read_text(errors="replace")[-2000:] if (self.workdir / "redis.log").exists() else ""
        raise RuntimeError(f"{self.binary} did not start on a loopback port: {log}")

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None

    def __enter__(self) -> LocalRedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop()
