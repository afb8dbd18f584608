"""The hook table in docs/writing-a-backend.md is generated from tilecore/hookspecs.py.

    python tests/test_docs_hooks.py     # rewrite the table after changing a hook

The test fails when the doc and the hookspecs disagree (a hook added, renamed,
or a parameter changed), so the guide cannot drift from the contract.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

from tilecore import hookspecs

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-backend.md"
BEGIN = "<!-- hook-table: generated from tilecore/hookspecs.py by tests/test_docs_hooks.py -->"
END = "<!-- hook-table: end -->"

#: What tilecore does when a backend does not implement a hook, for a target it
#: compiles itself and for one declared with ``upstream=`` (delegated to tilelang).
ROLES: dict[str, tuple[str, str]] = {
    "tilecore_declare_targets": ("required", "required"),
    "tilecore_setup": ("optional", "optional"),
    "tilecore_lower": ("required", "not called"),
    "tilecore_codegen": ("required", "not called"),
    "tilecore_create_adapter": ("required", "not called"),
    "tilecore_supply_tensor": ("optional (`make_tensor` on the target's device)", "optional"),
    "tilecore_bench": ("optional (host wall clock)", "optional"),
    "tilecore_doctor_target": ("optional (doctor reports the default-options error)", "optional"),
}


def hook_specs() -> list[tuple[str, inspect.Signature, bool, str]]:
    """(name, signature, firstresult, first docstring sentence) of every hook, in source order."""
    found = []
    for name, func in vars(hookspecs).items():
        opts = getattr(func, "tilecore_spec", None)
        if not name.startswith("tilecore_") or opts is None:
            continue
        doc = " ".join(inspect.getdoc(func).split())
        summary = doc.split(". ")[0].rstrip(".").replace("``", "`") + "."
        found.append((name, inspect.signature(func), bool(opts.get("firstresult")), summary))
    found.sort(key=lambda item: inspect.getsourcelines(getattr(hookspecs, item[0]))[1])
    return found


def hook_table() -> str:
    rows = [
        "| hook | returns | own target | `upstream=` target | what it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, signature, firstresult, summary in hook_specs():
        params = ", ".join(signature.parameters)
        returns = str(signature.return_annotation).replace("|", "\\|")
        own, delegated = ROLES[name]
        kind = "first non-`None` answer" if firstresult else "every backend answers"
        rows.append(f"| `{name}({params})` | `{returns}` ({kind}) | {own} | {delegated} | {summary} |")
    return "\n".join([BEGIN, *rows, END])


def current_table(text: str) -> str:
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def test_every_hook_has_a_role() -> None:
    assert sorted(ROLES) == sorted(name for name, *_ in hook_specs())


def test_doc_hook_table_matches_hookspecs() -> None:
    text = DOC.read_text()
    assert BEGIN in text and END in text, f"{DOC} lost its generated hook table markers"
    assert current_table(text) == hook_table(), f"hook table is stale: run `python {Path(__file__).name}`"


if __name__ == "__main__":
    text = DOC.read_text()
    DOC.write_text(text.replace(current_table(text), hook_table()))
    sys.exit(0)
