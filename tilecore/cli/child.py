"""The child side of :mod:`tilecore.cli.isolate`: load one backend (or activate) and print its report.

Run as ``python -m tilecore.cli.child --dump-at EPOCH --name N --distribution D --value V
[--doctor] [--target T ...]``; it prints, as its last stdout line, :data:`~tilecore.cli.isolate.MARKER`
followed by the backend's JSON entry (see docs/user-guide.md, "JSON output").
``--activation`` instead reports whether tilecore can be connected to the installed tilelang.
faulthandler is armed just before the parent's deadline, so a hang is reported with the
file and line it hangs at.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from tilecore.cli.isolate import MARKER


def _child(argv: Sequence[str]) -> int:
    import faulthandler

    parser = argparse.ArgumentParser(prog="tilecore.cli.child")
    parser.add_argument("--dump-at", type=float, required=True, help="epoch seconds at which to dump every thread's stack")
    parser.add_argument("--activation", action="store_true")
    parser.add_argument("--name")
    parser.add_argument("--distribution")
    parser.add_argument("--value")
    parser.add_argument("--doctor", action="store_true")
    parser.add_argument("--target", action="append", default=[])
    args = parser.parse_args(argv)
    faulthandler.enable()
    faulthandler.dump_traceback_later(max(args.dump_at - time.time(), 0.1), exit=False)
    if args.activation:
        report = _activation_report()
    else:
        from tilecore.cli.report import backend_entry_in_child

        report = backend_entry_in_child(args.name, args.distribution, args.value, doctor=args.doctor, targets=args.target)
    faulthandler.cancel_dump_traceback_later()
    sys.stdout.write("\n" + MARKER + json.dumps(report, default=str) + "\n")
    sys.stdout.flush()
    return 0


def _activation_report() -> dict[str, Any]:
    import tilecore

    try:
        tilecore.activate()
    except Exception as err:
        return {"ok": False, "error": f"{type(err).__name__}: {err}"}
    return {"ok": True, "error": None}


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1:]))
