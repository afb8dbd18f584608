"""``tilecore new-backend``: name validation, rendered files, and a generated backend
that pip-installs and passes the conformance suite as generated."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tcsupport import FakeSite

from tilecore import cli, template
from tilecore._version import API_VERSION

EXPECTED_FILES = {
    "README.md",
    "pyproject.toml",
    "tests/conftest.py",
    "tests/test_mychip_conformance.py",
    "tilelang_mychip/py.typed",
    *(f"tilelang_mychip/{m}.py" for m in ("__init__", "target", "setup", "lowering", "codegen", "runtime", "profiling", "plugin")),
}


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("MyChip", "not valid"),
        ("1chip", "not valid"),
        ("my-chip", "not valid"),
        ("class", "not valid"),
        ("democpu", "already an installed target, declared by backend 'democpu' (tilelang-democpu"),
        ("democpu_host", None),  # 'democpu-host' is an alias, but this spelling is free
        ("llvm", "built-in target kinds"),
    ],
)
def test_name_validation(name: str, fragment: str | None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    destination = tmp_path / "out"
    code = cli.main(["new-backend", name, "--dir", str(destination)])
    err = capsys.readouterr().err
    if fragment is None:
        assert code == 0 and destination.is_dir(), err
    else:
        assert code == 2 and fragment in err, err
        assert not destination.exists()


def test_existing_directory_is_not_clobbered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    destination = tmp_path / "tilelang-mychip"
    destination.mkdir()
    (destination / "keep.txt").write_text("mine")
    assert template.main(["mychip", "--dir", str(destination)]) == 2
    assert "already exists; refusing to overwrite" in capsys.readouterr().err
    assert sorted(p.name for p in destination.iterdir()) == ["keep.txt"]


def test_rendered_files() -> None:
    files = template.render("mychip")
    assert {p.as_posix() for p in files} == EXPECTED_FILES
    for path, text in files.items():
        assert "{{" not in text and "}}" not in text.replace("}}}", ""), path
        if path.suffix == ".py":
            compile(text, str(path), "exec")
    pyproject = files[Path("pyproject.toml")]
    assert 'name = "tilelang-mychip"' in pyproject
    assert '[project.entry-points."tilecore.backends"]\nmychip = "tilelang_mychip.plugin"' in pyproject
    assert f'dependencies = ["{template.tilecore_requirement()}"]' in pyproject
    plugin = files[Path("tilelang_mychip/plugin.py")]
    for hook in ("declare_targets", "setup", "lower", "codegen", "create_adapter", "supply_tensor", "bench"):
        assert f"def tilecore_{hook}(" in plugin, hook
    assert f'tilecore_api_version = "{API_VERSION[0]}.{API_VERSION[1]}"' in plugin
    # Every vendor inherits verified reuse of build products, fault handling, the core's
    # host-compiler lookup and the shared cache-isolation fixture.
    runtime = files[Path("tilelang_mychip/runtime.py")]
    assert 'STORE = ArtifactStore("mychip", "kernels")' in runtime and "raise KernelFaultError(" in runtime
    # tilelang's copy of the library (a disk-cache hit) is adopted and repaired by the kit (issue 21: once, for every backend).
    assert "runtime.obtain(kernel, compiler, copy)" in plugin
    assert "adopt(copy, " in runtime and 'STORE.obtain(key, f"lib{key}.so", compile_into, what=where, copy=copy)' in runtime
    assert "check_tool([compiler, " in runtime  # the build runs through the kit's tool runner
    assert 'find_host_compiler("c++"' in files[Path("tilelang_mychip/setup.py")]
    assert "from tilecore.kit.testing import tilecore_isolated_caches" in files[Path("tests/conftest.py")]


@pytest.mark.slow
def test_generated_backend_installs_and_passes_the_suite(tmp_path: Path) -> None:
    source = tmp_path / "tilelang-mychip"
    assert template.main(["mychip", "--dir", str(source)]) == 0
    site = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(source)]
    if importlib.util.find_spec("hatchling") is not None:
        install.insert(4, "--no-build-isolation")  # offline when the build backend is already here
    proc = subprocess.run(install, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "tilelang_mychip" / "plugin.py").is_file()

    # The generated distribution's own test (which runs the conformance suite) in a fresh
    # process that finds the backend only through its installed entry point.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH", "")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-q", "tests"],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0 and "1 passed" in out, out[-6000:] + proc.stderr[-3000:]
    assert "target mychip:opt=O2 (tilelang-mychip 0.1.0, device cpu, portable kernels)" in out, out[-6000:]
    statuses = {
        line.split()[0]: line.split()[1]
        for line in out.splitlines()
        if line.split()[1:2] and line.split()[1] in ("passed", "failed", "error", "unsupported", "skipped")
    }
    for case in (
        "declaration",
        "target_forms",
        "option_errors",
        "setup_toolchain",
        "copy",
        "elementwise[float32]",
        "elementwise[float16]",
        "odd_shape",
        "row_reduce",
        "gemm",
        "out_idx",
        "in_place",
        "jit_factory",
        "jit_prim_func",
        "grid_syntax",
        "do_bench",
        "assert_allclose",
        "wrong_dtype",
        "disk_cache_second_process",
    ):
        assert statuses.get(case) == "passed", (case, statuses)
    assert statuses["elementwise[bfloat16]"] == "unsupported"


@pytest.mark.slow
def test_doc_minimal_backend(fake_site: FakeSite, tmp_path: Path) -> None:
    """The one-module backend printed in docs/writing-a-backend.md is complete: installed as a
    distribution, it passes the suite's declaration, setup, kernel and disk-cache cases."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "writing-a-backend.md").read_text()
    block = doc.split("<!-- minimal-backend:start -->", 1)[1].split("<!-- minimal-backend:end -->", 1)[0]
    # Renamed, so a reader's own minicpu installed in this venv (the guide's example) cannot clash (issue 22, F7).
    source = block.strip().removeprefix("```python").removesuffix("```").replace("minicpu", "tcdocmini")
    fake_site.add("tilelang-tcdocmini", "0.1.0", "tilelang_tcdocmini", source, entry="tcdocmini", api=None)
    results = tmp_path / "tcdocmini.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--pyargs",
            "tilecore.conformance",
            "--tilecore-target=tcdocmini",
            f"--tilecore-json={results}",
            "-k",
            "declaration or setup_toolchain or copy or odd_shape or disk_cache",
        ],
        cwd=tmp_path,
        env=fake_site.env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    statuses = {c["case"]: c["status"] for c in json.loads(results.read_text())["cases"]}
    assert statuses == dict.fromkeys(("declaration", "setup_toolchain", "copy", "odd_shape", "disk_cache_second_process"), "passed")


def test_placeholders_are_string_template() -> None:
    fill = {"name": "mychip"}
    assert template.Placeholders("target {{name}}: $HOME ${x} {}").substitute(fill) == "target mychip: $HOME ${x} {}"
    with pytest.raises(KeyError):
        template.Placeholders("{{nosuch}}").substitute(fill)
    with pytest.raises(ValueError, match="Invalid placeholder"):
        template.Placeholders("{{ name}}").substitute(fill)
