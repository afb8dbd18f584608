"""Surviving tilelang releases: check modes, per-backend tested ranges, declared seams, forks.

Every case that loads a backend or compiles runs in a fresh interpreter over a real installed
test distribution (``FakeSite``), against the real tilelang: the bridge, the registry and
tilelang's own passes are the things under test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from tcsupport import ADD_KERNEL, FakeSite, good_backend

from tilecore._bridge import gate
from tilecore._registry import compat
from tilecore._version import TILELANG_REQUIREMENT
from tilecore.errors import TilecoreError

#: Compile the ADD kernel for ``target`` and compare it with torch; print "OK <target>" or the error.
RUN_ADD = (
    ADD_KERNEL
    + """
import sys
for target in sys.argv[1:] or TARGETS:
    a, b = torch.randn(M, N), torch.randn(M, N)
    a0, b0 = a.clone(), b.clone()
    try:
        kernel = tilelang.compile(add, target=target, out_idx=[-1])
        ok = torch.allclose(kernel(a, b), a * 2.0 + b) and torch.equal(a, a0) and torch.equal(b, b0)
        print("OK" if ok else "WRONG", target)
    except Exception as err:
        print("ERROR", target, type(err).__name__, str(err).replace(chr(10), " "))
"""
)


def _run(site: FakeSite, targets: list[str], **env: str) -> str:
    result = site.run(f"TARGETS = {targets!r}\n" + textwrap.dedent(RUN_ADD), **env)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


def test_check_mode_is_strict_by_default_and_refuses_a_typo() -> None:
    assert compat.check_mode({}) == "strict"
    assert compat.check_mode({"TILECORE_TILELANG_CHECK": " Seams "}) == "seams"
    with pytest.raises(TilecoreError, match=r"TILECORE_TILELANG_CHECK='sloppy' .* valid modes: strict, seams, off"):
        compat.check_mode({"TILECORE_TILELANG_CHECK": "sloppy"})


def test_the_core_gate_refuses_an_untested_tilelang_only_in_strict_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    for version in ("0.1.14", "0.1.15", "0.1.15.post1"):
        assert gate.check_version(version) is False
    for version in ("0.1.13", "0.1.16", "0.2.0"):
        with pytest.raises(gate.BridgeError, match=rf"tested with tilelang {TILELANG_REQUIREMENT}; found tilelang {version}") as info:
            gate.check_version(version)
        assert "TILECORE_TILELANG_CHECK=seams" in info.value.fix
    monkeypatch.setenv("TILECORE_TILELANG_CHECK", "seams")
    assert gate.check_version("0.1.16") is True  # accepted, untested: the caller warns once the seams check out


def test_a_backend_reads_its_tested_range_from_its_own_metadata(fake_site: FakeSite, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_site.add_metadata("acme-ranged", "2.0", {"acme": "acme"}, requires=("tilelang >=9.0, <9.1", 'pytest ; extra == "test"'))
    fake_site.add_metadata("acme-open", "1.0", {"open": "open"}, requires=("torch",))
    monkeypatch.syspath_prepend(str(fake_site.root))
    assert compat.declared_range("acme-ranged") == ">=9.0,<9.1"
    assert compat.declared_range("acme-open") is None
    problem = compat.backend_range_problem("acme-ranged", "2.0")
    assert problem is not None and "acme-ranged 2.0 was tested with tilelang >=9.0,<9.1; the installed tilelang is 0.1.1" in problem
    assert compat.backend_range_problem("acme-open", "1.0") is None


@pytest.mark.slow
def test_a_backend_outside_its_range_is_refused_by_name_while_the_others_work(fake_site: FakeSite) -> None:
    fake_site.add(
        "tilecore-goodt",
        "1.0",
        "goodt_backend",
        good_backend(),
        entry="goodt",
        targets=("goodt", "goodt-alias"),
        requires=("tilelang>=9.0",),
    )
    out = _run(fake_site, ["goodt", "democpu"])
    assert "OK democpu" in out, out
    refused = next(line for line in out.splitlines() if line.startswith("ERROR goodt"))
    assert "tilecore-goodt 1.0 was tested with tilelang >=9.0; the installed tilelang is 0.1.1" in refused
    assert "pip install 'tilelang>=9.0'" in refused and "TILECORE_TILELANG_CHECK=seams" in refused
    # The backend's load error (not "unknown target"), naming the target, its cause and fix once each.
    assert refused.split()[2] == "BackendLoadError" and "target 'goodt' is provided by backend 'goodt' (tilecore-goodt 1.0)" in refused
    assert refused.count("was tested with tilelang") == 1 and refused.count("Fix:") == 1, refused
    assert refused.count("pip install 'tilelang>=9.0'") == 1 and refused.endswith("or block it with TILECORE_PLUGINS=no:goodt")

    seams = _run(fake_site, ["goodt"], TILECORE_TILELANG_CHECK="seams")
    assert "OK goodt" in seams and "loaded because TILECORE_TILELANG_CHECK=seams" in seams, seams


@pytest.mark.slow
def test_a_changed_signature_of_a_pass_the_tpu_backend_calls_is_a_named_error_at_load(fake_site: FakeSite) -> None:
    """tilelang-tpu declares MaterializeKernelLaunch(lower_thread_binding=...); plant a tilelang without it."""
    pytest.importorskip("tilelang_tpu")
    planted = """
    import tilelang, tilelang.transform

    def MaterializeKernelLaunch(default_threads=128):  # a 'newer tilelang' that renamed the parameter
        raise AssertionError("the backend must be refused before lowering calls this")

    tilelang.transform.MaterializeKernelLaunch = MaterializeKernelLaunch
    """
    # (Only tpu: tilelang's own CPU pipeline, which democpu and the `c` target run, calls the same pass.)
    result = fake_site.run(textwrap.dedent(planted) + textwrap.dedent(f"TARGETS = {['tpu']!r}\n" + RUN_ADD))
    out = result.stdout
    refused = next(line for line in out.splitlines() if line.startswith("ERROR tpu"))
    assert "tilelang.transform.MaterializeKernelLaunch lost parameter(s) lower_thread_binding" in refused, refused
    assert "backend 'tpu' (tilelang-tpu" in refused and "It was tested with tilelang" in refused
    assert "AssertionError" not in refused


def test_a_declared_seam_must_map_names_to_parameters() -> None:
    class Bad:
        tilecore_tilelang_seams = ("tilelang.transform:Simplify",)

    with pytest.raises(TilecoreError, match=r"tilecore_tilelang_seams=.* must map 'module:attribute' to a tuple of parameter names"):
        gate.declared_seams(Bad(), who="backend 'bad' (bad 1.0)")


def test_capability_checks_read_the_real_signature() -> None:
    assert gate.accepts("tilelang.transform:MaterializeKernelLaunch", "lower_thread_binding")
    assert not gate.accepts("tilelang.transform:MaterializeKernelLaunch", "no_such_parameter")
    assert not gate.accepts("tilelang.transform:NoSuchPass", "x")


def _fork(site: FakeSite, name: str = "tilelang-rocm") -> None:
    """A fork: its own ``tilelang`` package and a dist-info whose RECORD claims tilelang's files."""
    package = site.root / "tilelang"
    package.mkdir()
    (package / "__init__.py").write_text('__version__ = "0.1.15"  # a fork\n')
    info = site.root / f"{name.replace('-', '_')}-0.9.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.9\n")
    (info / "RECORD").write_text("tilelang/__init__.py,sha256=AAAA,40\n")


def test_a_fork_owning_tilelang_is_named_at_import_and_fails_doctor(fake_site: FakeSite) -> None:
    _fork(fake_site)
    imported = fake_site.run("import tilelang\nprint('imported', tilelang.__file__)\n")
    assert imported.returncode == 0, imported.stderr  # a fork never breaks `import tilelang` itself
    warnings = [line for line in imported.stderr.splitlines() if "overwritten by another distribution" in line]
    assert len(warnings) == 1, imported.stderr[-3000:]
    assert "tilelang-rocm also install" in warnings[0] or "tilelang-rocm" in warnings[0]
    assert "pip uninstall" in warnings[0]

    doctor = subprocess.run(
        [sys.executable, "-m", "tilecore.cli", "doctor", "--json"], env=fake_site.env(), capture_output=True, text=True, timeout=600
    )
    assert doctor.returncode == 1, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    section = next(s for s in json.loads(doctor.stdout)["sections"] if s["title"] == "tilelang")
    assert not section["ok"] and "tilelang-rocm" in (section["data"]["fork"] or "")


def test_no_hint_points_at_a_fork() -> None:
    """known_targets.json's pip hints never name a distribution that ships the tilelang package itself."""
    from importlib import resources

    known = json.loads(resources.files("tilecore").joinpath("known_targets.json").read_text())
    forks = {"tilelang-rocm", "tilelang-ascend", "tilelang-paddle"}
    text = json.dumps(known)
    assert not [fork for fork in forks if f'"{fork}"' in text or f"install {fork}" in text]
