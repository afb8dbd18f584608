"""Discovery, lazy loading, failure isolation, API versions and conflicts.

These run a real :class:`tilecore.Registry` (real pluggy, real
``importlib.metadata``) over distributions installed into a temporary
directory on ``sys.path``.
"""

from __future__ import annotations

import importlib
import sys
import uuid

import pytest

from tilecore import (
    AmbiguousTargetError,
    BackendLoadError,
    IncompatibleBackendError,
    Owner,
    PluginValidationError,
    Registry,
    TargetOptionError,
    ToolchainError,
    UnknownTargetError,
)
from tilecore._registry import State
from tilecore._registry.discovery import PluginPolicy

DECLARE = """
from tilecore import TargetSpec, TargetOption, hookimpl
@hookimpl
def tilecore_declare_targets():
    return [TargetSpec({name!r}, "test", aliases={aliases!r},
                       options=(TargetOption("chip", "chip", choices=("a", "b"), default="a"),))]
@hookimpl
def tilecore_setup(target):
    {setup}
"""


def backend_source(name: str, aliases: tuple[str, ...] = (), setup: str = "return None") -> str:
    return DECLARE.format(name=name, aliases=aliases, setup=setup)


@pytest.fixture
def site(fake_site, monkeypatch):
    monkeypatch.syspath_prepend(str(fake_site.root))
    importlib.invalidate_caches()
    yield fake_site
    for name in [m for m in sys.modules if m.startswith("tcfake_")]:
        del sys.modules[name]


def unique(prefix: str) -> str:
    return f"tcfake_{prefix}_{uuid.uuid4().hex[:6]}"


def make_registry(**env: str) -> Registry:
    return Registry(PluginPolicy.from_env(env), builtin_kinds=lambda: ("c", "cuda"))


def ours(registry: Registry) -> dict[str, object]:
    return {b.name: b for b in registry.backends() if b.value.startswith("tcfake_")}


def test_listing_reads_metadata_only(site) -> None:
    module = unique("good")
    site.add("tilelang-good", "1.2.3", module, backend_source("goodt"), entry="goodt")
    registry = make_registry()
    backend = ours(registry)["goodt"]
    assert (backend.distribution, backend.version, backend.state) == ("tilelang-good", "1.2.3", State.DISCOVERED)
    assert module not in sys.modules, "listing must not import the backend"
    resolved = registry.resolve("goodt:b")
    assert module in sys.modules
    assert resolved is not None and resolved.options == {"chip": "b"} and resolved.owner == "tilelang-good 1.2.3"


def test_resolution_forms_and_bad_option(site) -> None:
    site.add("tilelang-good", "1.0", unique("good"), backend_source("goodt", aliases=("gt",)), entry="goodt")
    registry = make_registry()
    assert registry.resolve({"kind": "gt", "chip": "b"}).name == "goodt"
    assert registry.resolve("goodt").options == {"chip": "a"}
    with pytest.raises(TargetOptionError, match="Valid chip values: a, b"):
        registry.resolve({"kind": "goodt", "chip": "zz"})
    assert registry.resolve("c") is None  # tilelang's own kind: left to tilelang
    # Only our fake backend may load, so the result does not depend on what else is installed.
    only_ours = make_registry(TILECORE_PLUGINS="goodt")
    with pytest.raises(UnknownTargetError) as info:
        only_ours.resolve("bm1684x")
    assert "goodt (tilelang-good 1.0)" in str(info.value) and "pip install tilelang-tpu" in str(info.value)


def test_import_failure_is_isolated_and_loud_when_named(site) -> None:
    site.add(
        "tilelang-broken", "0.9", unique("broken"), "raise ImportError('libvendor.so: cannot open shared object file')\n", entry="brokent"
    )
    site.add("tilelang-good", "1.0", unique("good"), backend_source("goodt"), entry="goodt")
    registry = make_registry()
    assert registry.resolve("goodt").name == "goodt"  # the other target is unaffected
    registry.load_all()
    broken = ours(registry)["brokent"]
    assert broken.state is State.FAILED and "libvendor.so" in broken.error_text()
    with pytest.raises(BackendLoadError) as info:
        registry.resolve("brokent")
    text = str(info.value)
    assert "tilelang-broken 0.9" in text and "libvendor.so" in text and "TILECORE_PLUGINS=no:brokent" in text
    assert isinstance(info.value.__cause__, ImportError)


def test_declare_hook_raising_is_isolated(site) -> None:
    source = "from tilecore import hookimpl\n@hookimpl\ndef tilecore_declare_targets():\n    raise RuntimeError('probe exploded')\n"
    site.add("tilelang-raises", "2.0", unique("raises"), source, entry="raiset")
    site.add("tilelang-good", "1.0", unique("good"), backend_source("goodt"), entry="goodt")
    registry = make_registry()
    registry.load_all()
    assert ours(registry)["raiset"].state is State.FAILED
    assert registry.resolve("goodt") is not None
    with pytest.raises(BackendLoadError, match="probe exploded"):
        registry.resolve("raiset")


def test_malformed_declaration_is_isolated(site) -> None:
    source = "from tilecore import hookimpl\n@hookimpl\ndef tilecore_declare_targets():\n    return ['not a spec']\n"
    site.add("tilelang-malformed", "1.0", unique("malformed"), source, entry="malt")
    registry = make_registry()
    registry.load_all()
    backend = ours(registry)["malt"]
    assert backend.state is State.FAILED and isinstance(backend.error, PluginValidationError)


def test_hook_raising_at_use_names_backend_and_chains(site) -> None:
    source = backend_source("setupt", setup="raise OSError('compiler vanished')")
    site.add("tilelang-setup", "3.1", unique("setup"), source, entry="setupt")
    registry = make_registry()
    target = registry.resolve("setupt")
    with pytest.raises(BackendLoadError) as info:
        registry.setup(target)
    assert "tilelang-setup 3.1" in str(info.value) and "tilecore_setup" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)


def test_a_hooks_error_gets_its_owner_as_a_field_not_by_reading_its_text(site) -> None:
    """An unowned TilecoreError leaving a hook gets the target as ``owner`` (and the text starts with it),
    even when its text already mentions the distribution; an owned one passes through unchanged."""
    raising = "raise ToolchainError('tilelang-owned 2.0 found no compiler', fix='install one')"
    site.add(
        "tilelang-owned",
        "2.0",
        unique("owned"),
        "from tilecore import ToolchainError\n" + backend_source("ownedt", setup=raising),
        entry="ownedt",
    )
    owned = "raise ToolchainError('no sdk', owner=Owner('vendor-sdk', '7', target='x'))"
    site.add(
        "tilelang-keeps",
        "1.0",
        unique("keeps"),
        "from tilecore import Owner, ToolchainError\n" + backend_source("keepst", setup=owned),
        entry="keepst",
    )
    registry = make_registry()
    target = registry.resolve("ownedt:b")
    with pytest.raises(ToolchainError) as info:
        registry.setup(target)
    assert info.value.owner == Owner("tilelang-owned", "2.0", target="ownedt:chip=b", backend="ownedt")
    assert str(info.value) == "target ownedt:chip=b (tilelang-owned 2.0): tilelang-owned 2.0 found no compiler Fix: install one"
    with pytest.raises(ToolchainError) as kept:
        registry.setup(registry.resolve("keepst"))
    assert kept.value.owner == Owner("vendor-sdk", "7", target="x") and str(kept.value) == "target x (vendor-sdk 7): no sdk"


def test_about_owns_an_error_whose_class_takes_no_owner_keyword() -> None:
    class Narrow(ToolchainError):
        def __init__(self, message: str) -> None:
            super().__init__(message)

    error = Narrow.about(Owner("tilelang-x", "1.0", target="x:o=1", kernel="k"), "broke")
    assert error.owner == Owner("tilelang-x", "1.0", target="x:o=1", kernel="k")
    assert str(error) == "kernel 'k' for target x:o=1 (tilelang-x 1.0): broke"
    assert str(Narrow.about("helper", "broke")) == "helper: broke" and Narrow.about("helper", "broke").owner is None


def test_incompatible_api_major_is_refused(site) -> None:
    site.add("tilelang-future", "9.0", unique("future"), backend_source("futuret"), entry="futuret", api="2.0")
    registry = make_registry()
    with pytest.raises(BackendLoadError) as info:
        registry.resolve("futuret")
    assert isinstance(info.value.__cause__, IncompatibleBackendError)
    text = str(info.value)
    assert "tilelang-future 9.0" in text and "API 2.0" in text and "API 1.1" in text and "for API 1.x" in info.value.fix
    # The cause is quoted once and its fix said once (it was quoted with its fix, then the fix repeated).
    assert text.count("for API 1.x") == 1 and text.count("Fix:") == 1, text
    assert "target 'futuret'" in text and text.endswith("or block it with TILECORE_PLUGINS=no:futuret"), text


def test_missing_api_version_is_refused(site) -> None:
    site.add("tilelang-noapi", "1.0", unique("noapi"), backend_source("noapit"), entry="noapit", api=None)
    registry = make_registry()
    registry.load_all()
    assert "tilecore_api_version" in ours(registry)["noapit"].error_text()


def test_two_backends_claiming_a_target(site) -> None:
    """Both list the name in metadata: ambiguous before any import, in every process."""
    site.add("tilelang-alpha", "1.0", unique("alpha"), backend_source("dupt"), entry="dupt", targets=("dupt",))
    site.add("tilelang-beta", "2.0", unique("beta"), backend_source("betat", aliases=("dupt",)), entry="betat", targets=("betat", "dupt"))
    fresh = make_registry()
    with pytest.raises(AmbiguousTargetError) as info:
        fresh.resolve("dupt")
    assert not any(b.state is State.LOADED for b in ours(fresh).values()), "decided from metadata, nothing imported"
    assert "tilelang-alpha 1.0" in str(info.value) and "tilelang-beta 2.0" in str(info.value)
    assert "TILECORE_PLUGINS=no:" in str(info.value)
    loaded = make_registry()
    loaded.load_all()
    with pytest.raises(AmbiguousTargetError):
        loaded.resolve("dupt")
    picked = make_registry(TILECORE_PLUGINS="no:betat")
    assert picked.resolve("dupt").distribution == "tilelang-alpha"


def test_undeclared_alias_cannot_take_a_name_metadata_gives_to_another(site) -> None:
    """A legacy backend declaring, at load time only, a name another distribution lists in metadata
    is refused at load, so the owner is the same in a fresh process and after load_all."""
    site.add("tilelang-alpha", "1.0", unique("alpha"), backend_source("dupt"), entry="dupt")
    site.add("tilelang-beta", "2.0", unique("beta"), backend_source("betat", aliases=("dupt",)), entry="betat")
    fresh = make_registry()
    assert fresh.resolve("dupt").distribution == "tilelang-alpha"
    loaded = make_registry()
    loaded.load_all()
    assert loaded.resolve("dupt").distribution == "tilelang-alpha"
    beta = ours(loaded)["betat"]
    assert beta.state is State.FAILED and isinstance(beta.error, PluginValidationError)
    assert "'dupt'" in str(beta.error) and "tilelang-alpha" in str(beta.error) and beta.error.fix


def test_same_entry_name_from_two_distributions_picked_by_distribution(site) -> None:
    site.add("tilelang-one", "1.0", unique("one"), backend_source("twint"), entry="twint")
    site.add("tilelang-two", "1.0", unique("two"), backend_source("twint"), entry="twint")
    with pytest.raises(AmbiguousTargetError):
        make_registry().resolve("twint")
    assert make_registry(TILECORE_PLUGINS="no:tilelang-one").resolve("twint").distribution == "tilelang-two"


def test_policy_allow_block_and_autoload_off(site) -> None:
    site.add("tilelang-good", "1.0", unique("good"), backend_source("goodt"), entry="goodt")
    blocked = make_registry(TILECORE_PLUGINS="no:goodt")
    assert ours(blocked)["goodt"].state is State.BLOCKED
    off = make_registry(TILECORE_DISABLE_PLUGIN_AUTOLOAD="1")
    assert ours(off)["goodt"].state is State.BLOCKED
    named = make_registry(TILECORE_DISABLE_PLUGIN_AUTOLOAD="1", TILECORE_PLUGINS="goodt")
    assert named.resolve("goodt") is not None
    allow_other = make_registry(TILECORE_PLUGINS="somethingelse")
    assert ours(allow_other)["goodt"].state is State.BLOCKED
    by_dist = make_registry(TILECORE_PLUGINS="no:tilelang-good")
    # A known target of a blocked backend is that backend's load error (not "unknown target"): it names the
    # target, distribution and version, the cause once and the one setting to change.
    for registry, cause, fix in (
        (blocked, "blocked by TILECORE_PLUGINS=no:goodt", "remove no:goodt from TILECORE_PLUGINS"),
        (by_dist, "blocked by TILECORE_PLUGINS=no:tilelang-good", "remove no:tilelang-good from TILECORE_PLUGINS"),
        (
            off,
            "autoload disabled by TILECORE_DISABLE_PLUGIN_AUTOLOAD",
            "set TILECORE_PLUGINS=goodt, or unset TILECORE_DISABLE_PLUGIN_AUTOLOAD",
        ),
        (allow_other, "not in the TILECORE_PLUGINS allow-list (somethingelse)", "add goodt to TILECORE_PLUGINS=somethingelse"),
    ):
        with pytest.raises(BackendLoadError) as info:
            registry.resolve("goodt")
        text = str(info.value)
        assert not isinstance(info.value, UnknownTargetError), text
        assert text.startswith("target 'goodt' is provided by backend 'goodt' (tilelang-good 1.0), which was not loaded: "), text
        assert text.count(cause) == 1 and info.value.fix.startswith(fix) and text.count(fix) == 1, text


def test_explicit_register_and_validation(site) -> None:
    from types import ModuleType

    from tilecore import TargetSpec, hookimpl

    def plugin_module(name: str, **attrs: object) -> ModuleType:
        module = ModuleType(name)
        module.__dict__.update(attrs)
        return module

    @hookimpl
    def tilecore_declare_targets():
        return [TargetSpec("inproc", "in-process")]

    registry = make_registry()
    registry.register(plugin_module("inproc", tilecore_api_version="1.0", tilecore_declare_targets=tilecore_declare_targets))
    assert registry.resolve("inproc").distribution == "<in-process>"
    with pytest.raises(PluginValidationError):
        registry.register(plugin_module("noversion", tilecore_declare_targets=tilecore_declare_targets))

    @hookimpl
    def tilecore_not_a_hook():
        return None

    with pytest.raises(PluginValidationError):
        registry.register(plugin_module("typo", tilecore_api_version="1.0", tilecore_not_a_hook=tilecore_not_a_hook))


PRIORITY = """
from tilecore import Availability, TargetSpec, hookimpl
@hookimpl
def tilecore_declare_targets():
    return [TargetSpec("fastt", "available, high priority", priority=50, probe=lambda: Availability.yes("here")),
            TargetSpec("bestt", "best but absent", priority=90, probe=lambda: Availability.no("no card")),
            TargetSpec("crasht", "probe raises", priority=99, probe=lambda: 1 / 0),
            TargetSpec("slowt", "available, low priority", priority=1)]
"""


def test_auto_picks_highest_priority_available(site) -> None:
    site.add("tilelang-prio", "1.0", unique("prio"), PRIORITY, entry="prio")
    registry = make_registry(TILECORE_PLUGINS="prio")
    chosen = registry.select_auto()
    assert chosen is not None and chosen.name == "fastt"
    from tilecore._registry import probe

    specs = {s.name: s for _, s in registry.declared_targets()}
    assert "ZeroDivisionError" in probe(specs["crasht"]).reason
    assert probe(specs["bestt"]).reason == "no card"


def test_targetless_wrapper_plugins_see_every_backend_call(site) -> None:
    """Cross-cutting plugins (tracing, logging) declare no target and wrap every backend's hooks."""
    from types import ModuleType

    from tilecore import hookimpl

    site.add("tilelang-good", "1.0", unique("good"), backend_source("goodt", setup="return None"), entry="goodt")
    site.add(
        "tilelang-other",
        "1.0",
        unique("other"),
        backend_source("othert", setup="raise AssertionError('wrong backend called')"),
        entry="othert",
    )
    registry = make_registry()
    seen: list[str] = []

    @hookimpl(wrapper=True)
    def tilecore_setup(target):
        seen.append(str(target))
        return (yield)

    tracer = ModuleType("tracer")
    tracer.tilecore_api_version = "1.0"
    tracer.tilecore_role = "wrapper"
    tracer.tilecore_setup = tilecore_setup
    registry.register(tracer)
    registry.load_all()
    assert registry.setup(registry.resolve("goodt")) is None  # othert's setup (which raises) is not called
    assert seen == ["goodt:chip=a"]
