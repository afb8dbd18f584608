"""The machine-wide lock SophGo's BM1690 runtime takes to start its emulator, and its stale state.

``tpuRtSetDevice`` (``sg_device_create`` in ``libtpuv7_rt.so``) serialises the
emulator's start-up across every process of the machine with a spin lock in a
System V shared-memory segment: ``lock_port`` does
``shmget(ftok("/home/", 'r'), 4096, IPC_CREAT | 0666)``, ``shmat``, and a
compare-and-swap of the segment's first 8 bytes from :data:`UNLOCKED` (or 0,
a fresh segment) to :data:`LOCKED`; then ``find_available_port`` (the first
TCP port from 10000 that binds), ``ap_entry`` (the emulated device's daemon
threads) and ``socket_client_init`` run, and ``unlock_port`` swaps the word
back, detaches and removes the segment.  A process that finds the word
:data:`LOCKED` sleeps one second and retries; after 30 failed tries it prints
``some device get port_lock too long time``, forces the word back to
:data:`UNLOCKED` and takes the lock: **31 s**.

So when a process dies between ``lock_port`` and ``unlock_port`` (killed, or
ended by the emulator during its start-up), the segment outlives it with the
word :data:`LOCKED` and no owner, and the next emulator start on the machine,
by any user, stalls for 31 s.  The holder stays attached to the segment for as
long as it holds the lock, so a segment that is :data:`LOCKED` while no process
is attached to it has a dead holder: :func:`clear_stale` unlocks exactly that
case (the worker calls it before ``tpuRtSetDevice``).  A locked segment with
processes attached is left alone: those may be the holder.

Stdlib only (ctypes on libc): the emulator worker imports it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import struct
from collections.abc import Iterator
from dataclasses import dataclass

#: The lock word's two values (from ``lock_port`` / ``unlock_port`` in libtpuv7_rt.so).
LOCKED = 0xAAAAAAAA19961207
UNLOCKED = 0x19961207BBBBBBBB
#: ``ftok`` arguments of ``lock_port``.
FTOK_PATH = "/home/"
FTOK_PROJECT = ord("r")
SEGMENT_BYTES = 0x1000

_IPC_STAT = 2
_SHM_RDONLY = 0o10000
#: ``struct shmid_ds`` on x86-64/aarch64 glibc: ``shm_cpid``, ``shm_lpid`` (int32) at 80, ``shm_nattch`` at 88.
_SHMID_DS_BYTES = 112
_CPID_LPID_NATTCH = struct.Struct("=iiQ")
_CPID_OFFSET = 80


@dataclass(frozen=True)
class LockState:
    """What the lock segment holds now."""

    shmid: int
    word: int
    attached: int  # processes attached (the holder and waiters)
    creator_pid: int
    last_pid: int  # last shmat/shmdt

    @property
    def locked(self) -> bool:
        return self.word == LOCKED

    @property
    def stale(self) -> bool:
        """Locked, and nobody attached: its holder died inside the locked section."""
        return self.locked and self.attached == 0

    def describe(self) -> str:
        word = {LOCKED: "locked", UNLOCKED: "unlocked", 0: "fresh"}.get(self.word, f"{self.word:#x}")
        return f"{word}, {self.attached} attached, created by pid {self.creator_pid}, last used by pid {self.last_pid}"


@functools.cache
def _libc() -> ctypes.CDLL:
    # The process's own symbols, libc's among them (ctypes.util.find_library would run ldconfig
    # in every worker start).
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ftok.argtypes = [ctypes.c_char_p, ctypes.c_int]
    libc.ftok.restype = ctypes.c_int
    libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
    libc.shmget.restype = ctypes.c_int
    libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]
    libc.shmat.restype = ctypes.c_void_p
    libc.shmdt.argtypes = [ctypes.c_void_p]
    libc.shmdt.restype = ctypes.c_int
    libc.shmctl.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    libc.shmctl.restype = ctypes.c_int
    return libc


def key() -> int | None:
    """The segment's System V key, as ``lock_port`` computes it (None when ``/home/`` does not exist:
    the runtime then cannot lock either)."""
    value = _libc().ftok(FTOK_PATH.encode(), FTOK_PROJECT)
    return None if value == -1 else value


def _attached(libc: ctypes.CDLL, shmid: int) -> tuple[int, int, int] | None:
    buffer = ctypes.create_string_buffer(_SHMID_DS_BYTES)
    if libc.shmctl(shmid, _IPC_STAT, buffer) != 0:
        return None
    return _CPID_LPID_NATTCH.unpack_from(buffer.raw, _CPID_OFFSET)


def _word(address: int) -> int:
    return ctypes.c_uint64.from_address(address).value


@contextlib.contextmanager
def _mapped_segment(flags: int) -> Iterator[tuple[ctypes.CDLL, int, int] | None]:
    """The existing lock segment attached with ``shmat`` ``flags`` (libc, shmid, address), detached
    on exit; None when there is no segment or it cannot be attached (another user's, read-only)."""
    libc = _libc()
    segment_key = key()
    shmid = -1 if segment_key is None else libc.shmget(segment_key, 0, 0)
    address = None if shmid < 0 else libc.shmat(shmid, None, flags)
    if address in (None, ctypes.c_void_p(-1).value):
        yield None
        return
    try:
        yield libc, shmid, address
    finally:
        libc.shmdt(address)


def inspect() -> LockState | None:
    """The lock segment's state, or None when there is none (nobody holds or waits for the lock)."""
    with _mapped_segment(_SHM_RDONLY) as segment:
        if segment is None:
            return None
        libc, shmid, address = segment
        word = _word(address)
        stat = _attached(libc, shmid)
    if stat is None:
        return None
    creator, last, attached = stat
    return LockState(shmid, word, attached - 1, creator, last)  # minus this process's own attachment


def clear_stale() -> LockState | None:
    """Unlock the segment if its holder is dead (locked, nobody else attached); the state found if so.

    Safe against live processes: only the holder ever moves the word from
    LOCKED, and a locked segment with no process attached has no holder.
    A process that attaches meanwhile finds it locked and retries within a
    second, finding it unlocked.  A segment this process may not write
    (another user's) is left alone.
    """
    with _mapped_segment(0) as segment:
        if segment is None:
            return None
        libc, shmid, address = segment
        stat = _attached(libc, shmid)
        if stat is None or _word(address) != LOCKED or stat[2] != 1:  # 1: only this process
            return None
        ctypes.c_uint64.from_address(address).value = UNLOCKED
        return LockState(shmid, LOCKED, 0, stat[0], stat[1])


def make_stale() -> bool:
    """Leave the lock as a holder that died inside the locked section leaves it (for tests and the
    start-up benchmark).  Only when no segment exists, so a live holder is never disturbed; False
    otherwise."""
    libc = _libc()
    segment_key = key()
    if segment_key is None:
        return False
    shmid = libc.shmget(segment_key, SEGMENT_BYTES, 0o1000 | 0o2000 | 0o666)  # IPC_CREAT | IPC_EXCL | 0666
    if shmid < 0:
        return False
    address = libc.shmat(shmid, None, 0)
    if address in (None, ctypes.c_void_p(-1).value):
        return False
    ctypes.c_uint64.from_address(address).value = LOCKED
    libc.shmdt(address)
    return True
