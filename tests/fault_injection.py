"""Fault injection: install a misbehaving third-party backend next to a good one and check the promise.

For each fault kind a real distribution (package + ``*.dist-info`` on ``PYTHONPATH``,
see ``tcsupport.FakeSite``) is built in a temporary directory and exercised in fresh
interpreters: the in-process faults through ``tilecore``'s registry, the import
hang and the interpreter crash through ``tilecore list --load`` (each backend in its
own subprocess).  Three questions per fault:

isolated?           the good backend still resolves and runs its setup hook
named distribution? the error the user sees names the faulty distribution
named fix?          the error carries a fix (``TilecoreError.fix`` / the ``fix`` field)

Run ``python tests/fault_injection.py`` for the table; ``tests/test_fault_injection.py``
runs it as a test and requires every cell to be "yes".
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from tcsupport import FakeSite

GOOD = """
import tilecore
from tilecore import TargetSpec, TargetOption, hookimpl
@hookimpl
def tilecore_declare_targets():
    return [TargetSpec("fiok", "the good backend", options=(TargetOption("opt", "level", choices=("O0", "O2"), default="O2"),))]
@hookimpl
def tilecore_setup(target):
    return tilecore.Toolchain("cc", "1", "/usr/bin/cc", "test")
"""

DECLARE = """
from tilecore import TargetSpec, TargetOption, ToolchainError, hookimpl
@hookimpl
def tilecore_declare_targets():
    return [TargetSpec("fault", "faulty", options=(TargetOption("opt", "level", choices=("O0", "O2"), default="O2"),))]
"""

#: fault kind -> (module source, tilecore.targets metadata, how to trigger it in the probe script)
IN_PROCESS = {
    "import raises": ("raise ImportError('libvendor.so: cannot open shared object file')\n", ("fault",), "resolve"),
    "hook raises": (DECLARE + "@hookimpl\ndef tilecore_setup(target):\n    raise OSError('device node vanished')\n", ("fault",), "setup"),
    "wrong return type": (DECLARE + "@hookimpl\ndef tilecore_setup(target):\n    return 'cc 1.0'\n", ("fault",), "setup"),
    "malformed target": (DECLARE, ("fault",), "malformed"),
    "name clash": (DECLARE.replace('"fault", "faulty"', '"fiok", "clash"'), ("fiok",), "clash"),
    "API major mismatch": (DECLARE, ("fault",), "resolve"),
    "missing toolchain": (
        DECLARE
        + "@hookimpl\ndef tilecore_setup(target):\n    raise ToolchainError('no vendor compiler found', fix='install the vendor SDK')\n",
        ("fault",),
        "setup",
    ),
}
ISOLATED_PROCESS = {
    "hang at import": "import time\ntime.sleep(600)\n",
    "crash at import": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
}
DIST = "tilelang-faulty"

PROBE = """
import json, sys
import tilecore
from tilecore import TilecoreError
from tilecore._registry import Registry
trigger = sys.argv[1]
registry = Registry()
err = None
try:
    if trigger == "resolve":
        registry.setup(registry.resolve("fault"))
    elif trigger == "setup":
        registry.setup(registry.resolve("fault"))
    elif trigger == "malformed":
        registry.resolve("fault:O0,O2")
    elif trigger == "clash":
        registry.resolve("fiok")
except TilecoreError as caught:
    err = caught
except Exception as caught:  # not a TilecoreError: the promise is broken
    err = caught
isolated = False
try:
    fresh = Registry()
    if trigger == "clash":
        fresh = Registry(tilecore._registry.discovery.PluginPolicy.from_env({"TILECORE_PLUGINS": "no:tilelang-faulty"}))
    isolated = fresh.setup(fresh.resolve("fiok:O0")).name == "cc"
except Exception as caught:
    isolated = f"{type(caught).__name__}: {caught}"
print(json.dumps({
    "raised": err is not None,
    "type": type(err).__name__ if err is not None else None,
    "tilecore_error": isinstance(err, TilecoreError),
    "message": str(err) if err is not None else "",
    "fix": getattr(err, "fix", "") or "",
    "isolated": isolated,
}))
"""


def _site(root: Path, source: str, targets: tuple[str, ...], api: str = "1.0") -> FakeSite:
    site = FakeSite(root)
    root.mkdir(parents=True)
    site.add("tilelang-fiok", "1.0", "fi_good", GOOD, entry="fiok", targets=("fiok",))
    site.add(DIST, "6.6.6", "fi_faulty", source, entry="fault", api=api, targets=targets)
    return site


def _env(site: FakeSite) -> dict[str, str]:
    return site.env(TILECORE_PLUGINS="fiok,fault,no:democpu")


def in_process_fault(work: Path, kind: str) -> dict[str, object]:
    source, targets, trigger = IN_PROCESS[kind]
    site = _site(work / kind.replace(" ", "_") / "site", source, targets, api="2.0" if kind == "API major mismatch" else "1.0")
    script = site.root.parent / "probe.py"
    script.write_text(textwrap.dedent(PROBE))
    done = subprocess.run(
        [sys.executable, str(script), trigger], env=_env(site), capture_output=True, text=True, timeout=300, cwd=site.root
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return {"isolated": False, "named": False, "fix": False, "detail": done.stderr[-500:]}
    data = json.loads(lines[-1])
    ok_error = data["raised"] and data["tilecore_error"]
    return {
        "isolated": data["isolated"] is True,
        "named": ok_error and DIST in data["message"],
        "fix": ok_error and bool(data["fix"]),
        "detail": f"{data['type']}: {data['message'][:160]}",
    }


def isolated_process_fault(work: Path, kind: str) -> dict[str, object]:
    site = _site(work / kind.replace(" ", "_") / "site", ISOLATED_PROCESS[kind], ("fault",))
    cli = site.root.parent / "cli.py"
    cli.write_text("import sys\nfrom tilecore.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run(
        [sys.executable, str(cli), "list", "--load", "--json", "--timeout", "30"],
        env=_env(site),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=site.root,
    )
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"isolated": False, "named": False, "fix": False, "detail": (done.stdout + done.stderr)[-500:]}
    entries = {b["name"]: b for b in data["backends"]}
    faulty, good = entries.get("fault", {}), entries.get("fiok", {})
    return {
        "isolated": done.returncode == 0 and good.get("state") == "loaded",
        "named": faulty.get("state") == "failed" and DIST in (faulty.get("distribution") or "") and DIST in (faulty.get("error") or ""),
        "fix": bool(faulty.get("fix")),
        "detail": (faulty.get("error") or "")[:160],
    }


def run_all(work: Path) -> dict[str, dict[str, object]]:
    results = {kind: in_process_fault(work, kind) for kind in IN_PROCESS}
    results.update({kind: isolated_process_fault(work, kind) for kind in ISOLATED_PROCESS})
    return results


def table(results: dict[str, dict[str, object]]) -> str:
    def yes(value: object) -> str:
        return "yes" if value is True else "NO"

    rows = [f"{'fault kind':<20} {'isolated?':<10} {'named distribution?':<20} {'named fix?':<10} what the user sees"]
    for kind, r in results.items():
        rows.append(f"{kind:<20} {yes(r['isolated']):<10} {yes(r['named']):<20} {yes(r['fix']):<10} {r['detail']}")
    totals = [sum(1 for r in results.values() if r[key] is True) for key in ("isolated", "named", "fix")]
    n = len(results)
    rows.append(f"{'total':<20} {f'{totals[0]}/{n}':<10} {f'{totals[1]}/{n}':<20} {f'{totals[2]}/{n}':<10}")
    return "\n".join(rows)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tilecore-faults-") as tmp:
        results = run_all(Path(tmp))
    print(table(results))
    return 0 if all(r[k] is True for r in results.values() for k in ("isolated", "named", "fix")) else 1


if __name__ == "__main__":
    sys.exit(main())
