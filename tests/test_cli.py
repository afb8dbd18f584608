"""``tilecore list`` / ``tilecore doctor``: human and JSON output over real installed backends."""

from __future__ import annotations

import importlib.metadata
import json

import pytest
from tcsupport import FakeSite, good_backend

#: The installed tilelang (the suite runs against every release of the tested window).
TILELANG = importlib.metadata.version("tilelang")

CLI = "import sys; from tilecore.cli import main; sys.exit(main(sys.argv[1:]))"


def cli(site: FakeSite, *args: str, **env: str):
    script = site.root.parent / "cli_main.py"
    script.write_text(CLI)
    import subprocess
    import sys

    return subprocess.run([sys.executable, str(script), *args], env=site.env(**env), capture_output=True, text=True, timeout=300)


#: Load only the test's own backends (and democpu), not every plugin installed in the venv.
OURS = "goodt,brokent,democpu"


def flat(text: str) -> str:
    """Output with wrapping undone (human output wraps to the terminal width)."""
    return " ".join(text.split())


def install(site: FakeSite) -> None:
    site.add("tilelang-good", "1.0", "tcfake_cligood", good_backend(), entry="goodt", targets=("goodt", "goodt-alias"))
    site.add("tilelang-broken", "0.9", "tcfake_clibroken", "raise ImportError('libvendor.so missing')\n", entry="brokent")


def test_list_json(fake_site: FakeSite) -> None:
    install(fake_site)
    result = cli(fake_site, "list", "--load", "--json", TILECORE_PLUGINS=OURS)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    backends = {b["name"]: b for b in data["backends"]}
    assert data["plugin_api"] == "1.1" and data["autoload"] is True and data["schema_version"] == 2
    good = backends["goodt"]
    assert (good["distribution"], good["version"], good["state"], good["api_version"]) == ("tilelang-good", "1.0", "loaded", "1.0")
    target = good["targets"][0]
    assert target["name"] == "goodt" and target["aliases"] == ["goodt-alias"] and target["default_options"] == {"opt": "O2"}
    assert target["device"] == "cpu" and isinstance(target["available"], bool) and target["reason"]
    broken = backends["brokent"]
    assert broken["state"] == "failed" and "libvendor.so missing" in broken["error"]
    assert backends["democpu"]["targets"][0]["name"] == "democpu"


def test_list_human_and_blocking(fake_site: FakeSite) -> None:
    install(fake_site)
    result = cli(fake_site, "list", "--load", TILECORE_PLUGINS="goodt,no:brokent")
    assert result.returncode == 0, result.stderr
    out = flat(result.stdout)
    assert "goodt tilelang-good 1.0 API 1.0 targets: goodt" in out
    assert "goodt (aliases: goodt-alias): test backend" in out
    assert "brokent tilelang-broken 0.9 targets: brokent" in out and "blocked by TILECORE_PLUGINS=no:brokent" in out


def test_doctor_reports_toolchains_and_failures(fake_site: FakeSite) -> None:
    install(fake_site)
    human = cli(fake_site, "doctor", TILECORE_PLUGINS=OURS)
    assert human.returncode == 1, "doctor exits non-zero when a backend failed to load"
    out = flat(human.stdout)
    assert "toolchain: c++ test at" in out and "error: ImportError: libvendor.so missing" in out
    assert f"tilelang={TILELANG}" in out
    data = json.loads(cli(fake_site, "doctor", "--json", TILECORE_PLUGINS=OURS).stdout)
    good = next(b for b in data["backends"] if b["name"] == "goodt")
    assert good["targets"][0]["toolchain"]["found_by"] == "PATH"
    assert data["environment"]["packages"]["tilelang"] == TILELANG and data["environment"]["cache_dir"]


def test_doctor_with_explicit_target_options(fake_site: FakeSite) -> None:
    install(fake_site)
    data = json.loads(cli(fake_site, "doctor", "--json", "--target", "goodt:O0", TILECORE_PLUGINS=OURS).stdout)
    good = next(b for b in data["backends"] if b["name"] == "goodt")
    assert good["targets"][0]["toolchain"]["name"] == "c++"


def test_list_shows_fix_and_duplicates(fake_site: FakeSite) -> None:
    """Issue 11 item 12: the fix of every failed backend, and a second distribution registering the
    identical entry point, are shown (never collapsed)."""
    install(fake_site)
    fake_site.add_metadata("tilelang-good-copy", "1.0", {"goodt": "tcfake_cligood"})
    listed = flat(cli(fake_site, "list", TILECORE_PLUGINS=OURS).stdout)
    assert "tilelang-good-copy 1.0" in listed and "also registered by tilelang-good-copy" in listed
    loaded = cli(fake_site, "list", "--load", TILECORE_PLUGINS="brokent")
    out = flat(loaded.stdout)
    assert "FAILED brokent tilelang-broken 0.9" in out
    assert "fix: reinstall or upgrade it (pip install --force-reinstall tilelang-broken)" in out
    assert "block it with TILECORE_PLUGINS=no:brokent" in out
    assert "backend(s): 0 loaded, 1 failed" in out


def test_doctor_checks_a_gpu_toolchain_without_a_gpu(fake_site: FakeSite) -> None:
    """Plain `tilecore doctor` on a GPU-less machine with nvcc: setup still runs, with the explicit
    target the backend chooses, and the exact command is printed (logic in tilelang-cuda)."""
    from tilelang_cuda import setup
    from tilelang_cuda import target as cuda_target

    if setup.locate_nvcc() is None or cuda_target.gpu_problem() is None:
        pytest.skip("needs nvcc and no usable GPU")
    result = cli(fake_site, "doctor", "--json", TILECORE_PLUGINS="cuda")
    data = json.loads(result.stdout)
    toolchain = next(b for b in data["backends"] if b["name"] == "cuda")["targets"][0]["toolchain"]
    assert toolchain["ok"] is True and toolchain["name"] == "nvcc", toolchain
    assert (
        toolchain["checked_with"].startswith("cuda:sm_") and toolchain["command"] == f"tilecore doctor --target {toolchain['checked_with']}"
    )
    human = flat(cli(fake_site, "doctor", TILECORE_PLUGINS="cuda").stdout)
    assert f"to check a specific target: tilecore doctor --target {toolchain['checked_with']}" in human
