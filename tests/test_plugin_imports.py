"""Backends reach tilelang internals only through ``tilecore.upstream``.

The shipped code of every backend and example (``plugins/``, ``examples/``; their
tests are free to compare with upstream internals) is scanned: imports and
attribute chains into ``tilelang``/``tvm`` must stay within :data:`ALLOWED`, the
public surface the project relies on.  Anything else goes through
``tilecore.upstream.internal("tilelang.<module>:<name>")``, and every name passed
there must exist in the installed tilelang.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = [ROOT / "plugins", ROOT / "examples"]

#: Public modules of tilelang and TVM a backend may import directly, and why.
ALLOWED = {
    "tilelang": "the package itself: compile, lower, jit, __version__",
    "tilelang.language": "the kernel language (T)",
    "tilelang.backend": "the public registries: get_backend, list_backends, register_*",
    "tilelang.transform": "tilelang's passes, for a backend's own pass list",
    "tvm": "TVM's Python API",
    "tvm.arith": "TVM's Python API",
    "tvm.ir": "TVM's Python API",
    "tvm.target": "TVM's Python API",
    "tvm.tirx": "TVM's Python API",
    "tvm.transform": "TVM's Python API",
    "tvm_ffi": "TVM FFI's Python API",
}
ROOTS = ("tilelang", "tvm", "tvm_ffi")
#: Public objects of an allowed module that share a name with one of its sub-modules.
PUBLIC_NAMES_LIKE_MODULES = {"tilelang.jit": "the decorator tilelang/__init__.py re-exports"}


@cache
def _package_dir(root: str) -> Path | None:
    """Where a top-level package lives (tvm is found only once tilelang is imported: it ships it)."""
    importlib.import_module("tilelang")
    spec = importlib.util.find_spec(root)
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _is_module(dotted: str) -> bool:
    root, *rest = dotted.split(".")
    base = _package_dir(root)
    if base is None:
        return False
    path = base.joinpath(*rest)
    return not rest or path.is_dir() or path.with_suffix(".py").is_file()


def _deepest_module(chain: list[str]) -> str:
    """The longest prefix of ``chain`` that is a module (``tilelang.env.CUDA_HOME`` -> ``tilelang.env``)."""
    for end in range(len(chain), 0, -1):
        if _is_module(".".join(chain[:end])):
            return ".".join(chain[:end])
    return chain[0]


def _attribute_chain(node: ast.Attribute) -> list[str] | None:
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    parts.append(current.id)
    return parts[::-1]


def violations(source: str) -> Iterator[tuple[int, str]]:
    """``(line, what)`` for every reach into tilelang/TVM outside :data:`ALLOWED`."""
    nodes = list(ast.walk(ast.parse(source)))
    # Only whole chains: ``a.b.c`` is one use, not also ``a.b``.
    inner = {id(node.value) for node in nodes if isinstance(node, ast.Attribute)}
    for node in nodes:
        used: list[list[str]] = []
        if isinstance(node, ast.Import):
            used = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            used = [[*node.module.split("."), alias.name] for alias in node.names]
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            chain = _attribute_chain(node)
            used = [chain] if chain else []
        for chain in used:
            if chain[0] not in ROOTS:
                continue
            module = _deepest_module(chain)
            if not isinstance(node, ast.Import) and ".".join(chain) in PUBLIC_NAMES_LIKE_MODULES:
                module = _deepest_module(chain[:-1])
            private = [part for part in chain if part.startswith("_") and not (part.startswith("__") and part.endswith("__"))]
            if module not in ALLOWED or private:
                yield node.lineno, ".".join(chain)


def _shipped_sources() -> Iterator[Path]:
    for top in SCANNED:
        for path in sorted(top.rglob("*.py")):
            relative = path.relative_to(ROOT).parts
            if "tests" not in relative and not any(part.startswith(".") for part in relative):
                yield path


def _internal_names() -> Iterator[tuple[Path, int, str]]:
    """Every literal passed to ``internal(...)`` in the shipped sources."""
    for path in _shipped_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "internal":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        yield path, node.lineno, arg.value


@pytest.fixture(scope="module", autouse=True)
def _tilelang() -> None:
    pytest.importorskip("tilelang")


def test_shipped_plugin_code_imports_only_public_tilelang_and_tvm() -> None:
    sources = list(_shipped_sources())
    assert any("tilelang_cuda" in str(p) for p in sources) and any("democpu" in str(p) for p in sources)
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in sources for line, what in violations(path.read_text())]
    assert found == [], "use tilecore.upstream (internal() for a name with no helper):\n" + "\n".join(found)


def test_the_scan_catches_each_way_of_reaching_an_internal() -> None:
    snippet = (
        "import tilelang\n"
        "from tilelang.env import CUDA_HOME\n"  # a module outside the allow-list
        "from tilelang import env\n"  # the same module, imported by name
        "import tilelang.cache.kernel_cache\n"
        "x = tilelang.jit.kernel.JITKernel\n"  # through an attribute chain
        "y = tilelang._ffi_api\n"  # a private name of an allowed module
        "from tvm.relax import op\n"
        "ok = tilelang.compile, tilelang.__version__\n"
        "from tilelang.language import Kernel\n"
        "from tvm.tirx import PrimFunc\n"
    )
    assert sorted(line for line, _ in violations(snippet)) == [2, 3, 4, 5, 6, 7]


def test_every_internal_name_a_plugin_uses_exists_in_the_installed_tilelang() -> None:
    from tilecore._bridge import BridgeError
    from tilecore.upstream import internal

    names = list(_internal_names())
    assert {path.parent.name for path, _, _ in names} >= {"tilelang_cuda", "tilelang_hip"}
    for path, line, name in names:
        try:
            internal(name)
        except BridgeError as err:
            pytest.fail(f"{path.relative_to(ROOT)}:{line}: {err}")


def test_internal_refuses_a_missing_name_with_the_supported_range() -> None:
    from tilecore._bridge import BridgeError
    from tilecore.upstream import internal

    with pytest.raises(BridgeError, match=r"tilelang\.env:NO_SUCH_NAME.*pip install 'tilelang>="):
        internal("tilelang.env:NO_SUCH_NAME")
    with pytest.raises(ValueError, match="takes 'tilelang"):
        internal("os:sep")
