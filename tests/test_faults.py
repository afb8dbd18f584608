"""Misbehaving third-party backends (issue 11 items 4, 5, 6, 8, 9, 12): unit tests on a real
Registry over real installed fake distributions, plus end-to-end runs in fresh interpreters."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import subprocess
import sys
import time
import uuid

import pytest
from tcsupport import ADD_KERNEL, FakeSite, good_backend

from tilecore import (
    AmbiguousTargetError,
    BackendLoadError,
    PluginValidationError,
    Registry,
    TilecoreError,
    UnknownTargetError,
)
from tilecore._registry import State
from tilecore._registry.discovery import PluginPolicy
from tilecore.errors import HookReturnError

DECLARE = """
import tilecore
from tilecore import TargetSpec, TargetOption, hookimpl
@hookimpl
def tilecore_declare_targets():
    return {declared}
"""


def spec(name: str, *aliases: str, extra: str = "") -> str:
    opts = 'options=(TargetOption("chip", "chip", choices=("a", "b"), default="a"),)'
    return f'TargetSpec({name!r}, "test", aliases={aliases!r}, {opts}{extra})'


def source(declared: str, body: str = "") -> str:
    return DECLARE.format(declared=declared) + body


SETUP_OK = """
@hookimpl
def tilecore_setup(target):
    return tilecore.Toolchain("own", "1", "/bin/true", "test")
"""


@pytest.fixture
def site(fake_site, monkeypatch):
    monkeypatch.syspath_prepend(str(fake_site.root))
    importlib.invalidate_caches()
    yield fake_site
    for name in [m for m in sys.modules if m.startswith("tcfault_")]:
        del sys.modules[name]


def unique(prefix: str) -> str:
    return f"tcfault_{prefix}_{uuid.uuid4().hex[:6]}"


def make_registry(**env: str) -> Registry:
    return Registry(PluginPolicy.from_env(env), builtin_kinds=lambda: ("c", "llvm"))


def ours(registry: Registry) -> dict[str, object]:
    return {b.name: b for b in registry.backends() if b.value.startswith("tcfault_")}


# -- item 4: roles are declared, an empty declaration hijacks nothing ---------------------


def test_backend_without_targets_does_not_answer_for_others(site) -> None:
    site.add("tilelang-own", "1.0", unique("own"), source(f"[{spec('ownt')}]", SETUP_OK), entry="ownt", targets=("ownt",))
    hijack = source("[]", '@hookimpl\ndef tilecore_setup(target):\n    return tilecore.Toolchain("HIJACK", "0", "/x", "nodevice")\n')
    site.add("tilelang-nodevice", "1.0", unique("nodev"), hijack, entry="nodev", targets=("nodev",))
    registry = make_registry()
    registry.load_all()
    nodev = ours(registry)["nodev"]
    assert nodev.state is State.LOADED and nodev.targets == () and nodev.role == "backend"
    assert registry.setup(registry.resolve("ownt")).name == "own"
    with pytest.raises(UnknownTargetError, match="did not declare it"):
        registry.resolve("nodev")


def test_none_from_declare_targets_is_a_validation_error(site) -> None:
    site.add("tilelang-none", "4.2", unique("none"), source("None"), entry="nonet", targets=("nonet",))
    registry = make_registry()
    with pytest.raises(BackendLoadError) as info:
        registry.resolve("nonet")
    cause = info.value.__cause__
    assert isinstance(cause, HookReturnError)
    text = str(cause)
    assert "tilelang-none 4.2" in text and "tilecore_declare_targets" in text and "TargetSpec" in text and cause.fix


def test_wrapper_role_is_explicit(site) -> None:
    from types import ModuleType

    from tilecore import hookimpl

    @hookimpl(wrapper=True)
    def tilecore_setup(target):
        return (yield)

    undeclared = ModuleType("tracer")
    undeclared.tilecore_api_version = "1.1"
    undeclared.tilecore_setup = tilecore_setup
    registry = make_registry()
    with pytest.raises(PluginValidationError) as info:
        registry.register(undeclared)
    assert "tilecore_role" in info.value.fix
    undeclared.tilecore_role = "wrapper"
    assert registry.register(undeclared).role == "wrapper"
    bad = ModuleType("bad")
    bad.tilecore_api_version = "1.1"
    bad.tilecore_role = "decorator"
    with pytest.raises(PluginValidationError, match="valid roles"):
        registry.register(bad)


def test_end_to_end_empty_backend_does_not_hijack_compile(fake_site: FakeSite) -> None:
    fake_site.add("tilelang-good", "1.0", "tcfault_e2egood", good_backend(), entry="goodt", targets=("goodt", "goodt-alias"))
    hijack = source(
        "[]",
        "@hookimpl\ndef tilecore_setup(target):\n    raise RuntimeError('HIJACKED setup')\n"
        "@hookimpl\ndef tilecore_create_adapter(target, kernel):\n    raise RuntimeError('HIJACKED adapter')\n",
    )
    fake_site.add("tilelang-nodevice", "1.0", "tcfault_e2enodev", hijack, entry="nodev", targets=("nodev",))
    result = fake_site.run(
        ADD_KERNEL
        + """
import tilecore
tilecore.get_registry().load_all()   # what `target="auto"` and a typo did before
kernel = tilelang.compile(add, target="goodt", out_idx=[-1])
a, b = torch.randn(M, N), torch.randn(M, N)
a0, b0 = a.clone(), b.clone()
c = kernel(a, b)
assert torch.allclose(c, a * 2 + b), "wrong result"
assert torch.equal(a, a0) and torch.equal(b, b0), "inputs changed"
print("OK", tilecore.get_registry().backend_of(tilecore.resolve_target("goodt")).distribution)
""",
        TILECORE_PLUGINS="goodt,nodev",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK tilelang-good" in result.stdout and "HIJACKED" not in result.stderr


# -- item 6: every hook's return value is checked ------------------------------------------


def test_wrong_setup_return_type_names_everything(site) -> None:
    site.add(
        "tilelang-bad",
        "0.3",
        unique("bad"),
        source(f"[{spec('badt')}]", "@hookimpl\ndef tilecore_setup(target):\n    return {'nvcc': 1}\n"),
        entry="badt",
        targets=("badt",),
    )
    registry = make_registry()
    with pytest.raises(HookReturnError) as info:
        registry.setup(registry.resolve("badt"))
    text = str(info.value)
    assert all(part in text for part in ("tilelang-bad 0.3", "tilecore_setup", "dict", "tilecore.Toolchain"))


def test_return_contracts() -> None:
    from tilecore import Toolchain, hookspecs
    from tilecore._registry.dispatch import RETURNS

    assert RETURNS["tilecore_bench"].check([1.0, 2.0]) and not RETURNS["tilecore_bench"].check("fast")
    assert not RETURNS["tilecore_bench"].check([]) and not RETURNS["tilecore_bench"].check(True)
    assert RETURNS["tilecore_setup"].check(Toolchain("a", "1", "/", "x"))
    assert not RETURNS["tilecore_codegen"].check(b"bytes")
    assert not RETURNS["tilecore_create_adapter"].check(object())
    assert set(RETURNS) == {h for h in dir(hookspecs) if h.startswith("tilecore_")}


def test_end_to_end_doctor_json_survives_a_wrong_type(fake_site: FakeSite) -> None:
    bad = source(f"[{spec('badt')}]", "@hookimpl\ndef tilecore_setup(target):\n    return 'nvcc 12'\n")
    fake_site.add("tilelang-bad", "0.3", "tcfault_clibad", bad, entry="badt", targets=("badt",))
    result = cli(fake_site, "doctor", "--json", TILECORE_PLUGINS="badt")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    toolchain = next(b for b in data["backends"] if b["name"] == "badt")["targets"][0]["toolchain"]
    assert toolchain["ok"] is False and toolchain["error_type"] == "HookReturnError"
    assert "tilelang-bad 0.3" in toolchain["error"] and "tilecore_setup" in toolchain["error"] and toolchain["fix"]


# -- item 12: messages -----------------------------------------------------------------------


def test_same_target_twice_is_a_load_time_error(site) -> None:
    site.add(
        "tilelang-twice",
        "1.0",
        unique("twice"),
        source(f"[{spec('twicet')}, {spec('othert', 'twicet')}]"),
        entry="twicet",
        targets=("twicet", "othert"),
    )
    registry = make_registry()
    with pytest.raises(BackendLoadError) as info:
        registry.resolve("twicet")
    assert "twice" in str(info.value) and "declare 'twicet' once" in info.value.fix
    assert "TILECORE_PLUGINS=no:twicet or" not in str(info.value)


def test_identical_entry_point_from_two_distributions_is_shown(site) -> None:
    module = unique("same")
    site.add("tilelang-first", "1.0", module, source(f"[{spec('samet')}]"), entry="samet")
    site.add_metadata("tilelang-second", "2.0", {"samet": module})
    registry = make_registry()
    found = [b for b in registry.backends() if b.name == "samet"]
    assert {b.distribution for b in found} == {"tilelang-first", "tilelang-second"}
    assert all(b.duplicates for b in found)
    with pytest.raises(AmbiguousTargetError) as info:
        registry.resolve("samet")
    assert "TILECORE_PLUGINS=no:tilelang-first" in info.value.fix


# -- item 9: ownership from metadata, built-in kinds need an opt-in ---------------------------


def test_builtin_kind_cannot_be_taken_without_opt_in(site) -> None:
    site.add("tilelang-grab", "1.0", unique("grab"), source(f"[{spec('grabt', 'c')}]"), entry="grabt")
    optin = source(f"[{spec('llvm', extra=', replaces_builtin=True')}]")
    site.add("tilelang-optin", "1.0", unique("optin"), optin, entry="optin", targets=("llvm",))
    fresh = make_registry()
    assert fresh.resolve("c") is None, "tilelang keeps 'c' in a fresh process"
    assert fresh.resolve("llvm").distribution == "tilelang-optin"
    loaded = make_registry()
    loaded.load_all()
    assert loaded.resolve("c") is None, "... and after every backend is loaded"
    assert loaded.resolve("llvm").distribution == "tilelang-optin"
    grab = ours(loaded)["grabt"]
    assert grab.state is State.FAILED and "replaces_builtin" in grab.error.fix


def test_end_to_end_owner_is_the_same_fresh_and_after_load_all(fake_site: FakeSite) -> None:
    rogue = source(f"[{spec('roguet', 'democpu', 'c')}]")
    fake_site.add("tilelang-rogue", "1.0", "tcfault_rogue", rogue, entry="roguet")
    result = fake_site.run(
        """
import tilecore, tilelang
registry = tilecore.get_registry()
fresh = (tilecore.resolve_target("democpu").distribution, tilecore.resolve_target("c"))
registry.load_all()
after = (tilecore.resolve_target("democpu").distribution, tilecore.resolve_target("c"))
rogue = next(b for b in registry.backends() if b.name == "roguet")
print(fresh, after, rogue.state.value)
""",
        TILECORE_PLUGINS="democpu,roguet",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "('tilelang-democpu', None) ('tilelang-democpu', None) failed" in result.stdout


# -- item 5: hangs are bounded; typos import nothing ------------------------------------------


def test_load_all_bounds_a_hanging_import(site) -> None:
    site.add("tilelang-hang", "1.0", unique("hang"), "import time\ntime.sleep(30)\n", entry="hangt")
    site.add("tilelang-own", "1.0", unique("own"), source(f"[{spec('ownt')}]"), entry="ownt", targets=("ownt",))
    registry = make_registry(TILECORE_PLUGINS="hangt,ownt")
    start = time.monotonic()
    registry.load_all(timeout=1.0)
    assert time.monotonic() - start < 10
    hang = ours(registry)["hangt"]
    assert hang.state is State.FAILED and "did not finish within 1 s" in str(hang.error)
    assert registry.resolve("ownt") is not None


def test_naming_a_backend_whose_import_hangs_is_bounded(site, monkeypatch) -> None:
    """Issue 19, item 10: ``tilelang.compile(f, target="hangt")`` must not hang in silence."""
    module = unique("hang")
    site.add(
        "tilelang-hang",
        "1.0",
        module,
        "import time\n\n\ndef stall():\n    time.sleep(30)\n\n\nstall()\n",
        entry="hangt",
        targets=("hangt",),
    )
    monkeypatch.setenv("TILECORE_IMPORT_TIMEOUT", "1")
    registry = make_registry(TILECORE_PLUGINS="hangt")
    start = time.monotonic()
    with pytest.raises(BackendLoadError) as info:
        registry.resolve("hangt")
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "tilelang-hang 1.0" in message and "did not finish within 1 s" in message
    assert f"It hangs at {site.root / module / '__init__.py'}:" in message, message  # the file and line
    assert "TILECORE_PLUGINS=no:hangt" in message and "TILECORE_IMPORT_TIMEOUT" in message


def test_misspelled_target_imports_nothing_when_metadata_answers(site) -> None:
    modules = [unique("one"), unique("two")]
    site.add("tilelang-one", "1.0", modules[0], "raise SystemExit('must not be imported')\n", entry="onet", targets=("onet",))
    site.add("tilelang-two", "1.0", modules[1], "raise SystemExit('must not be imported')\n", entry="twot", targets=("twot", "twot-x"))
    registry = make_registry(TILECORE_PLUGINS="onet,twot")
    with pytest.raises(UnknownTargetError) as info:
        registry.resolve("twox")
    assert "Did you mean 'twot'" in str(info.value) or "Did you mean 'twot-x'" in str(info.value)
    assert not any(m in sys.modules for m in modules)
    assert all(b.state is State.DISCOVERED for b in ours(registry).values())


def test_end_to_end_list_survives_a_hanging_backend(fake_site: FakeSite) -> None:
    fake_site.add("tilelang-hang", "1.0", "tcfault_clihang", "import time\ntime.sleep(600)\n", entry="hangt", targets=("hangt",))
    fake_site.add("tilelang-good", "1.0", "tcfault_cligood", good_backend(), entry="goodt", targets=("goodt", "goodt-alias"))
    quick = cli(fake_site, "list", TILECORE_PLUGINS="hangt,goodt")
    assert quick.returncode == 0 and "hangt" in quick.stdout
    start = time.monotonic()
    result = cli(fake_site, "list", "--load", "--json", "--timeout", "30", TILECORE_PLUGINS="hangt,goodt")
    assert time.monotonic() - start < 120
    data = json.loads(result.stdout)
    entries = {b["name"]: b for b in data["backends"]}
    assert entries["goodt"]["state"] == "loaded"
    hang = entries["hangt"]
    assert hang["state"] == "failed" and "tilelang-hang" in hang["error"] and "TILECORE_PLUGINS=no:hangt" in hang["fix"]
    assert "tcfault_clihang" in hang["error"], "names the file it hangs in"


# -- CLI: errors are one line, --help works everywhere ---------------------------------------


def cli(site: FakeSite, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = site.root.parent / "cli_main.py"
    script.write_text("import sys\nfrom tilecore.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    return subprocess.run([sys.executable, str(script), *args], env=site.env(**env), capture_output=True, text=True, timeout=300)


def test_cli_errors_are_one_line(fake_site: FakeSite) -> None:
    for args in (
        ["doctor", "--target", "nosuch"],
        ["doctor", "--target", "democpu:O2,O0"],
        ["doctor", "--target", "cuda:sm_٩٠"],
        ["bogus"],
    ):
        result = cli(fake_site, *args, TILECORE_PLUGINS="democpu")
        assert result.returncode in (1, 2), args
        errors = [line for line in result.stderr.splitlines() if line.startswith("tilecore: error:")]
        assert len(errors) == 1 and "Traceback" not in result.stderr, (args, result.stderr)
    for args in (["new-backend", "--help"], ["list", "--help"], ["doctor", "--help"]):
        result = cli(fake_site, *args)
        assert result.returncode == 0 and "usage: tilecore" in result.stdout, args
    version = cli(fake_site, "--version", TILECORE_PLUGINS="democpu")
    assert (
        version.returncode == 0
        and "plugin API 1.1" in version.stdout
        and f"tilelang {importlib.metadata.version('tilelang')}" in version.stdout
    )
    assert "democpu: tilelang-democpu" in version.stdout


def test_malformed_target_unit_errors_are_tilecore_errors() -> None:
    from tilecore._registry import Registry as R

    registry = R(PluginPolicy.from_env({"TILECORE_PLUGINS": "democpu"}))
    for bad in (
        {"kind": "democpu", 1: 2},
        {"kind": 5},
        "democpu:O2,O0",
        "democpu:opt=O2,opt=O0",
        {"kind": "democpu", "opt": 2},
        "démo",
        "bad$name",
    ):
        with pytest.raises(TilecoreError):
            registry.resolve(bad)


def test_target_auto_survives_a_backend_whose_import_crashes(fake_site: FakeSite) -> None:
    """``target="auto"`` tries every backend although the user named none: one that kills the
    interpreter at import (SIGSEGV) is probed in a fresh interpreter, recorded as failed, and the
    process goes on with the others (it died with exit -11 before)."""
    fake_site.add("tilelang-crashy", "0.3", "crashy_backend", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", entry="crashy")
    result = fake_site.run(
        """
        import tilecore
        from tilecore._registry import State
        chosen = tilecore.resolve_target("auto")
        crashy = next(b for b in tilecore.get_registry().backends() if b.name == "crashy")
        print("chosen", chosen.name if chosen is not None else None)
        print("crashy", crashy.state.name, crashy.error)
        """,
        TILECORE_PLUGINS="crashy,democpu",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "chosen democpu" in result.stdout, result.stdout
    assert "crashy FAILED" in result.stdout and "crashed the interpreter (SIGSEGV)" in result.stdout
    assert "TILECORE_PLUGINS=no:crashy" in result.stdout
