"""Real misbehaving servers on loopback for the remote tier's tests and benchmarks (no fake client).

``Misbehaving("trickle")``, ``("silent")`` or ``("oversize", size=...)``; ``.url``, ``.commands``, ``.close()``.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Iterator


class Misbehaving:
    """A TCP server on 127.0.0.1 that reads RESP commands and answers them badly.

    ``trickle``: answers any command with an endless bulk string, one byte every 0.3 s.
    ``silent``: accepts and never answers.  ``oversize``: a well-formed server whose every
    entry is ``size`` bytes (STRLEN says so, GET streams it); it counts the GETs it serves."""

    def __init__(self, mode: str, size: int = 0) -> None:
        self.mode, self.size = mode, size
        self.commands: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.closed = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _commands(self, conn: socket.socket) -> Iterator[list[bytes]]:
        buffer = b""
        while True:
            while b"\r\n" not in buffer or not _complete(buffer):
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            command, buffer = _parse(buffer)
            self.commands.append(command[0].decode().upper())
            yield command

    def _serve(self, conn: socket.socket) -> None:
        try:
            for command in self._commands(conn):
                verb = command[0].upper()
                if self.mode == "silent":
                    self.closed.wait()
                    return
                if self.mode == "trickle":
                    for value in itertools.chain(b"$999999999\r\n", itertools.repeat(ord("x"))):
                        if self.closed.wait(0.3):
                            return
                        conn.sendall(bytes([value]))
                elif verb == b"STRLEN":
                    conn.sendall(b":%d\r\n" % self.size)
                elif verb == b"GET":
                    conn.sendall(b"$%d\r\n" % self.size)
                    chunk = b"\0" * 65536
                    for start in range(0, self.size, len(chunk)):
                        conn.sendall(chunk[: self.size - start])
                    conn.sendall(b"\r\n")
                elif verb == b"HELLO":  # redis-py 8 speaks RESP3
                    conn.sendall(b"%1\r\n+proto\r\n:3\r\n")
                else:
                    conn.sendall(b"+OK\r\n" if verb != b"PING" else b"+PONG\r\n")
        except OSError:
            return

    def close(self) -> None:
        self.closed.set()
        self.sock.close()
        for conn in self.conns:
            conn.close()


def _complete(buffer: bytes) -> bool:
    try:
        _parse(buffer)
    except (ValueError, IndexError):
        return False
    return True


def _parse(buffer: bytes) -> tuple[list[bytes], bytes]:
    """One RESP array of bulk strings from ``buffer``; raises if it is incomplete."""
    if not buffer.startswith(b"*"):
        raise ValueError("not an array")
    head, rest = buffer.split(b"\r\n", 1)
    items = []
    for _ in range(int(head[1:])):
        size_line, rest = rest.split(b"\r\n", 1)
        size = int(size_line[1:])
        if len(rest) < size + 2:
            raise ValueError("incomplete")
        items.append(rest[:size])
        rest = rest[size + 2 :]
    return items, rest
