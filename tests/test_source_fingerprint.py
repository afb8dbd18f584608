"""An editable backend's sources are part of the kernel cache key (tilecore._registry.identity):
editing its code generator must be a cache miss, never a stale kernel."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tilecore._registry.identity import editable_source_fingerprint


def _install(site: Path, name: str, project: Path, editable: bool) -> None:
    """A real (metadata-only) installed distribution, found by importlib.metadata on sys.path."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    record = {"url": project.as_uri(), "dir_info": {"editable": True} if editable else {}}
    (info / "direct_url.json").write_text(json.dumps(record))


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    editable_source_fingerprint.cache_clear()
    yield site
    editable_source_fingerprint.cache_clear()


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    (project / "vendor_backend").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "vendor_backend" / "codegen.py").write_text("EMIT = 'add'\n")
    (project / "tests" / "test_codegen.py").write_text("def test(): pass\n")
    return project


def test_an_edit_to_an_editable_backend_changes_its_fingerprint(site: Path, tmp_path: Path) -> None:
    project = _project(tmp_path)
    _install(site, "tilelang-vendor", project, editable=True)
    before = editable_source_fingerprint("tilelang-vendor")
    assert before.startswith("editable:")

    editable_source_fingerprint.cache_clear()
    assert editable_source_fingerprint("tilelang-vendor") == before  # stable while nothing changes

    # An edit to a test only is not a change of what the backend runs.
    test_file = project / "tests" / "test_codegen.py"
    test_file.write_text("def test(): assert True\n")
    editable_source_fingerprint.cache_clear()
    assert editable_source_fingerprint("tilelang-vendor") == before

    # The same size, a new modification time: still a different fingerprint.
    codegen = project / "vendor_backend" / "codegen.py"
    codegen.write_text("EMIT = 'sub'\n")
    stat = codegen.stat()
    os.utime(codegen, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    editable_source_fingerprint.cache_clear()
    assert editable_source_fingerprint("tilelang-vendor") not in ("", before)


def test_regular_installs_and_unknown_distributions_have_none(site: Path, tmp_path: Path) -> None:
    _install(site, "tilelang-released", _project(tmp_path), editable=False)
    assert editable_source_fingerprint("tilelang-released") == ""
    assert editable_source_fingerprint("tilelang-not-installed") == ""


def test_the_cache_salt_carries_it(site: Path, tmp_path: Path) -> None:
    """The cache-key salt of a target names its backend's source fingerprint when the backend
    is editable: here the democpu example backend's distribution is shadowed, first on
    sys.path, by an editable record of a project this test edits."""
    import tilelang  # noqa: F401  (puts its bundled tvm on the path: the normalizer builds TVM targets)

    import tilecore
    from tilecore._bridge.cache_key import cache_salt
    from tilecore._bridge.tvm_targets import normalizer

    registry = tilecore.get_registry()
    tvm_target = normalizer(registry)("democpu")
    distribution = registry.resolve("democpu").distribution
    project = _project(tmp_path)
    _install(site, distribution, project, editable=True)

    first = cache_salt(registry, tvm_target)
    assert first is not None and editable_source_fingerprint(distribution) in first
    (project / "vendor_backend" / "codegen.py").write_text("EMIT = 'mul'  # a longer line: a new size\n")
    editable_source_fingerprint.cache_clear()
    assert cache_salt(registry, tvm_target) != first
