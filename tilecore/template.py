"""``tilecore new-backend NAME [--dir PATH]``: write a new backend distribution.

The files come from the package data under ``tilecore/templates/backend``
(``*.tmpl``, with ``{{name}}``, ``{{package}}``, ``{{dist}}``,
``{{api_version}}`` and ``{{tilecore_requirement}}`` placeholders, filled by
``string.Template`` with that delimiter).  The result
is a complete backend ``tilelang-NAME`` that compiles kernels to C on the host
CPU: it installs and passes the conformance suite as generated, and each
module is the place to put the real device's version of that stage.
"""

from __future__ import annotations

import argparse
import keyword
import re
import string
import sys
from collections.abc import Iterator
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from tilecore._version import API_VERSION, __version__, docs_url

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
TEMPLATE_ROOT = ("templates", "backend")
SUFFIX = ".tmpl"


#: ``{{name}}``; a ``{{`` that does not start one is "invalid" (string.Template's group names).
_PLACEHOLDER = r"""
\{\{(?:
  (?P<escaped>(?!))            |  # no escape sequence: templates never need a literal {{
  (?P<named>[a-z_]+)\}\}      |
  (?P<braced>(?!))             |
  (?P<invalid>)
)
"""


class Placeholders(string.Template):
    """``string.Template`` with ``{{name}}`` placeholders (``$`` stays literal, as shell and
    Python text in the templates need); a ``{{`` that does not start a placeholder is an error."""

    delimiter = "{{"
    pattern = _PLACEHOLDER  # type: ignore[assignment]  # a str: string.Template compiles it


class TemplateError(ValueError):
    """A bad NAME or destination; the message says what to do instead."""


def tilecore_requirement() -> str:
    """``tilecore>=X.Y,<X.(Y+1)`` for this tilecore (the plugin API is per minor series)."""
    major, minor = (int(p) for p in __version__.split(".")[:2])
    return f"tilecore>={major}.{minor},<{major}.{minor + 1}"


def validate_name(name: str) -> None:
    """Refuse names that cannot be a target and a Python package, or that are taken."""
    if not NAME_RE.match(name) or keyword.iskeyword(name):
        raise TemplateError(
            f"backend name {name!r} is not valid: use a lower-case Python identifier (letters, digits, '_', "
            "starting with a letter, not a Python keyword), e.g. 'mychip'. It becomes the target name, the "
            "entry point name and the package name tilelang_<name>."
        )
    import tilecore
    from tilecore._registry.table import loaded_host_kinds

    registry = tilecore.get_registry()
    registry.load_all()
    for backend, spec in registry.declared_targets():
        if name in spec.names:
            raise TemplateError(
                f"backend name {name!r} is already an installed target, declared by {backend.label}. "
                f"Choose another name, or uninstall it first (pip uninstall {backend.distribution})."
            )
    for backend in registry.backends():
        if backend.name == name:
            raise TemplateError(
                f"backend name {name!r} is already the entry point of {backend.label} (state: {backend.state.value}). "
                f"Choose another name, or uninstall it first (pip uninstall {backend.distribution})."
            )
    if name in loaded_host_kinds():
        raise TemplateError(
            f"backend name {name!r} is one of tilelang's built-in target kinds; choose another name "
            f"(a backend that reuses tilelang's {name!r} support declares TargetSpec(upstream=tilecore.Upstream({name!r})))."
        )


def _walk(node: Traversable, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Traversable]]:
    for child in sorted(node.iterdir(), key=lambda c: c.name):
        if child.is_dir():
            if child.name != "__pycache__":
                yield from _walk(child, (*prefix, child.name))
        elif child.name.endswith(SUFFIX):
            yield (*prefix, child.name), child


def render(name: str) -> dict[Path, str]:
    """Relative path -> text of every file of backend ``name`` (nothing is written)."""
    package = f"tilelang_{name}"
    values = {
        "name": name,
        "package": package,
        "dist": f"tilelang-{name}",
        "api_version": f"{API_VERSION[0]}.{API_VERSION[1]}",
        "tilecore_requirement": tilecore_requirement(),
        "docs_url": docs_url("writing-a-backend.md"),
    }
    root = resources.files("tilecore")
    for part in TEMPLATE_ROOT:  # one part per call: some Traversables (3.11's MultiplexedPath) take a single name
        root = root.joinpath(part)
    files: dict[Path, str] = {}
    for parts, item in _walk(root):
        try:
            text = Placeholders(item.read_text(encoding="utf-8")).substitute(values)
        except (KeyError, ValueError) as err:
            raise RuntimeError(f"template {'/'.join(parts)} has an unknown or malformed placeholder: {err}") from None
        mapped = [package if part == "package" else part for part in parts]
        mapped[-1] = mapped[-1].removesuffix(SUFFIX).replace("NAME", name)
        files[Path(*mapped)] = text
    return files


def write(name: str, destination: Path) -> list[Path]:
    """Validate, then write backend ``name`` into the new directory ``destination``."""
    validate_name(name)
    if destination.exists():
        raise TemplateError(f"{destination} already exists; refusing to overwrite it. Pass --dir with a new directory.")
    files = render(name)
    destination.mkdir(parents=True)
    written = []
    for relative, text in files.items():
        path = destination / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="tilecore new-backend",
        description="Write a complete minimal TileLang backend distribution tilelang-NAME (host-CPU C backend, "
        "entry point, hooks with the contract in comments, a conformance test).",
    )
    parser.add_argument("name", help="target and backend name: a lower-case identifier, e.g. mychip")
    parser.add_argument("--dir", type=Path, default=None, help="directory to create (default: ./tilelang-NAME)")
    args = parser.parse_args(argv)
    destination = (args.dir or Path(f"tilelang-{args.name}")).expanduser()
    try:
        written = write(args.name, destination)
    except TemplateError as err:
        print(f"tilecore new-backend: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files to {destination}:")
    for path in written:
        print(f"  {path.relative_to(destination)}")
    print(
        "next:\n"
        f"  pip install -e {destination}\n"
        f"  tilecore list                      # target {args.name!r} appears\n"
        f"  pytest {destination}                # the conformance suite against {args.name!r}\n"
        f"then replace each stage with your device's; {docs_url('writing-a-backend.md')} walks through it."
    )
    return 0
