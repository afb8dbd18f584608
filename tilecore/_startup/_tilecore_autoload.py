"""Startup hook that activates tilecore right after ``import tilelang``.

Installed at the top level of site-packages and imported by
``tilecore-autoload.pth`` in every interpreter of the environment, so it is
stdlib-only and does almost nothing until tilelang is imported: it puts one
finder on ``sys.meta_path`` that waits for the ``tilelang`` module, lets the
normal loader execute it, then calls ``tilecore._autoload_activate()`` and
removes itself.  ``TILECORE_DISABLE_PLUGIN_AUTOLOAD=1`` turns it off.

PYTEST_DONT_REWRITE: the tilecore distribution provides a pytest plugin, so
pytest would try to assertion-rewrite this already-imported module and warn.
"""

from __future__ import annotations

import os
import sys

# Type-only imports: this module runs in every interpreter of the environment, and importing
# `typing` alone costs ~15 ms there (mypy treats a module-level TYPE_CHECKING as True).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any

_TRUTHY = ("1", "true", "yes", "on")


class _TilelangWatcher:
    """Meta-path finder that wraps tilelang's loader once."""

    _busy = False

    @classmethod
    def find_spec(cls, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "tilelang" or cls._busy:
            return None
        cls._busy = True
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            cls._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            try:
                original_exec(module)
            except OSError as err:  # tilelang creates its cache directories while it is imported
                explained = _cache_dir_error(err)
                if explained is None:
                    raise
                raise explained from err
            finally:
                _uninstall()
            _activate()

        loader.exec_module = exec_module  # type: ignore[method-assign]  # this one loader, once
        return spec


def _activate() -> None:
    try:
        import tilecore
    except Exception as err:  # never break `import tilelang`
        sys.stderr.write(f"tilecore: autoload failed to import tilecore ({type(err).__name__}: {err})\n")
        return
    tilecore._autoload_activate()


def _cache_dir_error(err: OSError) -> Exception | None:
    """tilecore's ``CacheDirectoryError`` (naming the directory, ``TILELANG_CACHE_DIR`` and the
    fix) for an ``err`` met creating tilelang's cache directory during ``import tilelang``."""
    from pathlib import Path

    try:
        from tilecore.kit.paths import cache_write_error
    except Exception:  # never hide tilelang's own error behind one of ours
        return None
    directory = Path(os.environ.get("TILELANG_CACHE_DIR") or "~/.tilelang/cache").expanduser()
    return cache_write_error(err, directory, "TILELANG_CACHE_DIR")


def _uninstall() -> None:
    if _TilelangWatcher in sys.meta_path:
        sys.meta_path.remove(_TilelangWatcher)


def watch() -> None:
    """Activate tilecore right after the next ``import tilelang`` (``import tilecore`` calls this)."""
    if _TilelangWatcher not in sys.meta_path:
        sys.meta_path.insert(0, _TilelangWatcher)


def install() -> None:
    if os.environ.get("TILECORE_DISABLE_PLUGIN_AUTOLOAD", "").strip().lower() in _TRUTHY:
        return
    if "tilelang" in sys.modules:
        _activate()
    else:
        watch()


install()
