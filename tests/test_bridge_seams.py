"""The bridge's seam table, in-process: the gate checks every tilelang name the bridge
uses, ``install`` patches exactly the table's rows and ``uninstall`` restores the
original objects themselves."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

tilelang = pytest.importorskip("tilelang")

import tilecore  # noqa: E402
from tilecore import _bridge  # noqa: E402
from tilecore._bridge import gate, patches  # noqa: E402
from tilecore._bridge.seams import SEAMS, Seam  # noqa: E402
from tilecore._registry import Registry  # noqa: E402

BRIDGE = Path(_bridge.__file__).parent
ROOT = Path(__file__).resolve().parents[1]


def _tilelang_names_used_by_bridge() -> set[tuple[str, str]]:
    """(module, name) of every ``from tilelang... import name`` and TVM global looked up by name."""
    used: set[tuple[str, str]] = set()
    for path in BRIDGE.glob("*.py"):
        if path.name == "gate.py":  # the checker itself looks every row up
            continue
        tree = ast.parse(path.read_text())
        constants = {
            node.targets[0].id: node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "tilelang":
                used.update((node.module, alias.name) for alias in node.names)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "get_global_func" and node.args:
                arg = node.args[0]
                name = arg.value if isinstance(arg, ast.Constant) else constants.get(getattr(arg, "id", ""))
                used.add(("tvm_ffi", str(name)))
    return used


def _added_by_an_upstream_patch(module: str, name: str) -> bool:
    """``name`` is defined in ``module`` by one of docs/upstream/*.patch (the public API a retired row
    uses: the bridge imports it only once the gate has found that API)."""
    path = "+++ b/" + module.replace(".", "/")
    for patch in (ROOT / "docs" / "upstream").glob("*.patch"):
        for section in patch.read_text().split("\ndiff "):
            header = next((line for line in section.splitlines() if line.startswith("+++ ")), "")
            if header not in (f"{path}.py", f"{path}/__init__.py"):
                continue
            if re.search(rf"^\+(class|def) {re.escape(name)}\b", section, flags=re.MULTILINE):
                return True
    return False


def _covered(module: str, name: str) -> bool:
    if _added_by_an_upstream_patch(module, name):
        return True
    for seam in SEAMS:
        if f"{module}:{name}" in seam.tables:  # a private table a registration row restores
            return True
        if f"{module}:{name}" in (seam.retired_by, seam.retired_by.replace(":register_", ":unregister_")):
            return True  # the public API of a retired row (register/unregister pair)
        owner_module, _, owner_attrs = seam.owner.partition(":")
        if owner_module == module and not owner_attrs and seam.attribute == name:
            return True
        if owner_module == module and owner_attrs.split(".")[-1] == name:  # a class whose members are rows
            return True
    return False


def test_gate_covers_every_tilelang_name_the_bridge_uses() -> None:
    missing = sorted(f"{module}:{name}" for module, name in _tilelang_names_used_by_bridge() if not _covered(module, name))
    assert not missing, f"tilelang names used by tilecore._bridge without a SEAMS row: {missing}"
    # The rows the old gate did not check are rows now.
    names = {seam.name for seam in SEAMS}
    for expected in (
        "tilelang.profiler:Profiler._get_inputs",
        "tilelang.profiler:Profiler._legalize_result_idx",
        "tilelang.cache.kernel_cache:KernelCache._load_binary",
        "tilelang.cache.kernel_cache:KernelCache._safe_write_file",
        "TVM global 'runtime.SourceModuleCreate'",
        "TVM global 'target.build.tilelang_c'",
    ):
        assert expected in names


def test_every_patched_seam_has_a_wrapper_and_an_upstream_proposal() -> None:
    root = Path(__file__).resolve().parents[1] / "docs" / "upstream"
    for seam in SEAMS:
        if seam.patched:
            assert callable(patches.wrapper_of(seam)), seam
            assert seam.proposal and (root / seam.proposal).is_file(), f"{seam.name}: no docs/upstream/{seam.proposal}"


def test_installed_tilelang_passes_the_gate() -> None:
    assert gate.problems() == []


def test_gate_names_a_missing_private_method(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang.profiler import Profiler

    monkeypatch.delattr(Profiler, "_get_inputs")
    assert any("Profiler._get_inputs is missing" in p for p in gate.problems())


def test_gate_names_a_changed_signature(monkeypatch: pytest.MonkeyPatch) -> None:
    from tilelang.cache.kernel_cache import KernelCache

    monkeypatch.setattr(KernelCache, "_safe_write_file", staticmethod(lambda path, how: None))
    assert any("_safe_write_file lost parameter(s) mode, operation" in p for p in gate.problems())


@pytest.mark.parametrize("version", ["0.1.13", "0.1.16", "0.2.0"])
def test_version_gate_refuses_outside_the_range(version: str) -> None:
    with pytest.raises(
        _bridge.BridgeError, match=r"tested with tilelang >=0\.1\.14,<0\.1\.16; found tilelang " + version.replace(".", r"\.")
    ):
        gate.check_version(version)


def test_version_gate_accepts_the_window() -> None:
    for version in ("0.1.14", "0.1.15", "0.1.15.post1", "0.1.15+cu128"):
        assert gate.check_version(version) is False


def _snapshot() -> dict[str, Any]:
    """The objects tilelang holds at every patched seam (raw class-dict entries, table contents)."""
    state: dict[str, Any] = {}
    for seam in SEAMS:
        if not seam.patched:
            continue
        owner = gate.resolve(seam.owner)
        if seam.kind == "attribute":
            state[seam.name] = vars(owner).get(seam.attribute, "<absent>") if isinstance(owner, type) else getattr(owner, seam.attribute)
        elif seam.kind == "item":
            state[seam.name] = owner.get(seam.attribute, "<absent>")
        else:
            for table in seam.tables:
                contents = gate.resolve(table)
                state[table] = {key: (value, list(value) if isinstance(value, list) else None) for key, value in contents.items()}
    return state


def _same(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    differ = []
    for name, value in before.items():
        other = after[name]
        if isinstance(value, dict):  # a registry table: same keys, same objects, same list contents
            if value.keys() != other.keys() or any(value[k][0] is not other[k][0] or value[k][1] != other[k][1] for k in value):
                differ.append(name)
        elif value is not other:
            differ.append(name)
    return differ


def test_install_then_uninstall_restores_tilelang_exactly() -> None:
    active = _bridge.installed()
    _bridge.uninstall()
    try:
        pristine = _snapshot()
        from tilelang.jit.kernel import JITKernel

        assert JITKernel.get_profiler.__module__ == "tilelang.jit.kernel"
        assert not hasattr(JITKernel, "__getitem__")
        registry = Registry()
        _bridge.install(registry)
        assert _bridge.installed() is registry
        patched = _snapshot()
        assert sorted(_same(pristine, patched)) == sorted(pristine), "every patched seam must change while installed"
        with pytest.raises(tilecore.TilecoreError, match="another registry"):
            _bridge.install(Registry())
        _bridge.uninstall()
        assert _bridge.installed() is None
        assert _same(pristine, _snapshot()) == []
        assert JITKernel.get_profiler.__module__ == "tilelang.jit.kernel" and not hasattr(JITKernel, "__getitem__")
        assert inspect.isfunction(tilelang.jit) and tilelang.jit.__module__ == "tilelang.jit"
        _bridge.uninstall()  # idempotent
        assert _same(pristine, _snapshot()) == []
    finally:
        if active is not None:
            _bridge.install(active)


def test_failed_install_reverts_what_it_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    active = _bridge.installed()
    _bridge.uninstall()
    try:
        pristine = _snapshot()
        broken = Seam("tilelang.jit.kernel:JITKernel", "get_host_source", "test", wrapper="nosuchmodule:wrap")
        monkeypatch.setattr(patches, "SEAMS", (*SEAMS, broken))
        with pytest.raises(ModuleNotFoundError):
            _bridge.install(Registry())
        assert _bridge.installed() is None
        assert _same(pristine, _snapshot()) == []
    finally:
        monkeypatch.undo()
        if active is not None:
            _bridge.install(active)
