"""The conformance suite (tilecore.conformance) run for real, in fresh pytest processes.

* against the installed example backend ``democpu``: every case passes except
  the two constructs democpu declares unsupported;
* against a deliberately wrong backend: its wrong results are *failed*, its
  declared-unsupported construct is *unsupported*, and pytest exits non-zero;
* the report renderers on a known result set.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tcsupport import FakeSite

from tilecore.conformance.report import CaseResult, Report, render_markdown, render_table


def _pytest(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_democpu_passes_the_suite(tmp_path: Path) -> None:
    results = tmp_path / "democpu.json"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch)}
    proc = _pytest(["--pyargs", "tilecore.conformance", "--tilecore-target=democpu", f"--tilecore-json={results}"], tmp_path, env)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    data = json.loads(results.read_text())
    statuses = {case["case"]: case["status"] for case in data["cases"]}
    unsupported = {name for name, status in statuses.items() if status == "unsupported"}
    assert unsupported == {"elementwise[bfloat16]"}, statuses
    assert all(status == "passed" for name, status in statuses.items() if name not in unsupported), statuses
    # The battery covers what a backend author is promised it covers.
    for case in (
        "declaration",
        "setup_toolchain",
        "copy",
        "elementwise[float16]",
        "row_reduce",
        "odd_shape",
        "out_idx",
        "in_place",
        "jit_factory",
        "jit_prim_func",
        "grid_syntax",
        "do_bench",
        "assert_allclose",
        "wrong_dtype",
        "wrong_shape",
        "disk_cache_second_process",
        "cache_hit_runs_no_compiler[kept]",
        "cache_hit_runs_no_compiler[empty]",
    ):
        assert case in statuses, f"case {case} missing from {sorted(statuses)}"
    assert {f"tensor_supply[{k}]" for k in ("Integer", "Uniform", "Normal", "Randn", "Zero", "One", "Auto")} <= set(statuses)
    assert data["target"]["distribution"] == "tilelang-democpu"
    # The table is printed at the end of the session.
    assert "tilecore conformance" in proc.stdout and re.search(r"disk_cache_second_process +passed", proc.stdout)
    # Nothing is written to the current directory, and the session's private kernel
    # cache and build directories are gone from the temporary directory.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["democpu.json", "tmp"]
    assert list(scratch.iterdir()) == []


#: A backend with democpu's stages whose adapter corrupts every output, and which
#: declares row reductions unsupported.
WRONG_BACKEND = """
import dataclasses
import torch
import tilecore
from tilecore import hookimpl
from tilelang_democpu import codegen, lowering, runtime, setup, target as demo_target

__version__ = "0.3"

@hookimpl
def tilecore_declare_targets():
    return [dataclasses.replace(demo_target.TARGET, name="wrongcpu", aliases=(), unsupported=frozenset({"reduce"}))]

@hookimpl
def tilecore_setup(target):
    return setup.find_compiler()

@hookimpl
def tilecore_lower(target, mod, tvm_target):
    return lowering.lower(mod, tvm_target)

@hookimpl
def tilecore_codegen(target, device_mod, tvm_target):
    return codegen.generate(device_mod, tvm_target)

class OffByOne:
    def __init__(self, inner):
        self.inner = inner
        self.library_path = inner.library_path
    def __call__(self, *tensors):
        self.inner(*tensors)
        tensors[-1].add_(1)

@hookimpl
def tilecore_create_adapter(target, kernel):
    return OffByOne(runtime.CAdapter(kernel, runtime.build(kernel, tilecore.setup_target(target).location)))
"""


@pytest.mark.slow
def test_wrong_results_fail_and_unsupported_is_reported(fake_site: FakeSite, tmp_path: Path) -> None:
    fake_site.add("tilelang-wrongcpu", "0.3", "tcfake_wrongcpu", WRONG_BACKEND, entry="wrongcpu")
    results = tmp_path / "wrong.json"
    # Autoload off: the `-p tilecore.conformance` form alone loads the plugin, and with
    # no test paths it collects the bundled cases.
    env = fake_site.env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = _pytest(
        [
            "-p",
            "tilecore.conformance",
            "--tilecore-target=wrongcpu",
            f"--tilecore-json={results}",
            "-k",
            "declaration or copy or row_reduce",
        ],
        tmp_path,
        env,
    )
    assert proc.returncode == 1, proc.stdout[-6000:] + proc.stderr[-3000:]
    data = json.loads(results.read_text())
    statuses = {case["case"]: case for case in data["cases"]}
    assert statuses["declaration"]["status"] == "passed", statuses
    assert statuses["copy"]["status"] == "failed", statuses
    assert "Mismatched elements" in statuses["copy"]["detail"] or "not close" in statuses["copy"]["detail"], statuses["copy"]
    assert statuses["row_reduce"]["status"] == "unsupported", statuses
    assert statuses["row_reduce"]["detail"].startswith("unsupported: reduce"), statuses["row_reduce"]
    assert data["target"]["distribution"] == "tilelang-wrongcpu"
    assert data["summary"] == {"passed": 1, "failed": 1, "unsupported": 1}


def test_cases_need_a_target(tmp_path: Path) -> None:
    proc = _pytest(["--pyargs", "tilecore.conformance", "--co"], tmp_path)
    assert proc.returncode != 0
    assert "--tilecore-target" in proc.stdout + proc.stderr and "democpu (tilelang-democpu" in proc.stdout + proc.stderr


def test_report_rendering() -> None:
    report = Report(
        target={"requested": "x", "resolved": "x:opt=O2", "distribution": "tilelang-x", "version": "1.2", "device": "cpu"},
        tilecore="0.1.0",
        tilelang="0.1.15",
        python="3.11",
        duration_s=3.5,
        cases=[
            CaseResult("copy", "passed", "", 0.5),
            CaseResult("gemm", "unsupported", "unsupported: gemm (declared ...)", 0.0),
            CaseResult("row_reduce", "failed", "AssertionError: a | b", 0.1),
        ],
    )
    table = render_table(report)
    assert "x:opt=O2 (tilelang-x 1.2, device cpu, portable kernels)" in table
    assert [line.split()[:2] for line in table.splitlines()[3:6]] == [["copy", "passed"], ["gemm", "unsupported"], ["row_reduce", "failed"]]
    assert table.splitlines()[-1] == "3 cases: 1 passed, 1 failed, 1 unsupported in 3.5 s"
    markdown = render_markdown(report)
    assert "| `row_reduce` | failed | AssertionError: a \\| b |" in markdown
    again = Report.from_dict(json.loads(json.dumps(report.as_dict())))
    assert again.cases == report.cases and again.counts() == {"passed": 1, "failed": 1, "unsupported": 1}
