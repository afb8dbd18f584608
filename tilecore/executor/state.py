"""Process-wide state of the executor feature: counters and warn-once."""

from __future__ import annotations

import logging
import threading
from collections import Counter

logger = logging.getLogger("tilecore.executor")
counters: Counter[str] = Counter()
_warned: set[str] = set()
_lock = threading.Lock()


def warn_once(topic: str, message: str) -> None:
    """Log ``message`` as a warning the first time ``topic`` comes up in this process."""
    with _lock:
        first = topic not in _warned
        _warned.add(topic)
    if first:
        logger.warning("%s", message)
    else:
        logger.debug("%s", message)


def reset() -> None:
    with _lock:
        counters.clear()
        _warned.clear()
