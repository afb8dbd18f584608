"""``tilecore --version``: versions for bug reports, from metadata only (like ``pytest --version``)."""

from __future__ import annotations

from tilecore._version import API_VERSION, __version__


def print_versions(verbose: bool = False) -> int:
    from tilecore._registry import Registry
    from tilecore.cli.report import version_of

    print(f"tilecore {__version__} (plugin API {API_VERSION[0]}.{API_VERSION[1]})")
    print(f"tilelang {version_of('tilelang') or 'not installed'}")
    for backend in Registry().backends():
        line = f"  {backend.name}: {backend.distribution} {backend.version}"
        if verbose:
            line += f" ({backend.name} = {backend.value}; targets: {', '.join(backend.claims)})"
        if backend.reason:
            line += f" [{backend.reason}]"
        print(line)
    return 0
