"""The fault-injection table (tests/fault_injection.py) must be all "yes": 9 fault kinds x 3 questions."""

from __future__ import annotations

from pathlib import Path

import fault_injection
import pytest


@pytest.mark.slow
def test_every_fault_is_isolated_named_and_fixable(tmp_path: Path) -> None:
    results = fault_injection.run_all(tmp_path)
    table = fault_injection.table(results)
    print(table)
    assert len(results) >= 8
    failing = {kind: r for kind, r in results.items() if not all(r[key] is True for key in ("isolated", "named", "fix"))}
    assert not failing, table
