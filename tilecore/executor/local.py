"""The ``local`` executor: tilelang's own sweep in this process (today's behaviour, the default)."""

from __future__ import annotations

from typing import Any


class LocalExecutor:
    name = "local"

    def __init__(self, spec: str = "local", **options: Any) -> None:
        self.spec = spec

    def tune(self, job: Any) -> Any:
        return job.run_local()

    def doctor_report(self) -> dict[str, Any]:
        return {"executor": "local", "detail": "tilelang's autotuner in this process"}
