"""Executor settings as text: ``NAME[:ADDRESS][?option=value&...]`` (``TILECORE_EXECUTOR``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl


@dataclass(frozen=True)
class ExecutorSpec:
    name: str
    address: str = ""
    options: dict[str, str] = field(default_factory=dict)


def parse(text: str) -> ExecutorSpec:
    """``"ray"`` -> name ``ray``; ``"ray:10.0.0.5:6379?max_retries=2"`` -> address and options."""
    head, _, query = text.strip().partition("?")
    name, _, address = head.partition(":")
    return ExecutorSpec(name.strip().lower(), address.strip(), dict(parse_qsl(query, keep_blank_values=True)))
