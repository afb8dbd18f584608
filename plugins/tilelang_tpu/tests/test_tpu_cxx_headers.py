"""The libstdc++ header set ppl-compile gets (tilelang_tpu.cxx_headers).

ppl-compile 1.30.2 hard-codes ``/usr/include/c++/11``, ``/usr/include/x86_64-linux-gnu/c++/11`` and
``/usr/include/c++/12``; its clang adds the newest GCC's headers.  On Ubuntu 24.04 (GCC 12 and 13
headers, no ``c++/11``) ``/usr/include/c++/12/type_traits`` got GCC 13's ``bits/c++config.h`` and
every kernel failed to compile.  The selection is tested on folder layouts of each kind, and the
Ubuntu 24.04 layout is rebuilt here in a private mount namespace (GCC 13 = a copy of this host's
GCC 12, whose ``c++config.h`` is an ``#error``): the real ppl-compile fails there without the
selected folders and compiles with them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang_tpu import setup
from tilelang_tpu.cxx_headers import TRIPLE, cxx_include_dirs

from tilecore import ToolchainError


def _layout(root: Path, headers: tuple[str, ...], targets: tuple[str, ...]) -> Path:
    for version in headers:
        (root / "c++" / version / "backward").mkdir(parents=True)
        (root / "c++" / version / "type_traits").write_text("")
    for version in targets:
        (root / TRIPLE / "c++" / version / "bits").mkdir(parents=True)
        (root / TRIPLE / "c++" / version / "bits" / "c++config.h").write_text("")
    return root


def _set(root: Path, version: str) -> tuple[Path, ...]:
    return root / "c++" / version, root / TRIPLE / "c++" / version, root / "c++" / version / "backward"


@pytest.mark.parametrize(
    ("headers", "targets", "chosen"),
    [
        (("12",), ("12",), "12"),  # Debian 12: GCC 12 only
        (("12", "13"), ("12", "13"), "12"),  # Ubuntu 24.04: ppl-compile searches c++/12 first, so its set
        (("11", "12"), ("11", "12"), "11"),  # Ubuntu 22.04 with GCC 12 too: c++/11 comes first
        (("13",), ("13",), "13"),  # GCC 13 only: the host's own set
        (("9", "13", "14"), ("9", "13", "14"), "14"),  # the newest complete one (numeric order)
        (("13", "14"), ("13",), "13"),  # a set without its target folder is not complete
    ],
)
def test_one_complete_set_is_chosen(tmp_path: Path, headers: tuple[str, ...], targets: tuple[str, ...], chosen: str) -> None:
    root = _layout(tmp_path, headers, targets)
    assert cxx_include_dirs(root) == _set(root, chosen)


def test_a_hard_coded_folder_without_its_target_folder_is_a_named_error(tmp_path: Path) -> None:
    root = _layout(tmp_path, ("12", "13"), ("13",))  # c++/12 without x86_64-linux-gnu/c++/12
    with pytest.raises(ToolchainError) as info:
        cxx_include_dirs(root)
    text = str(info.value)
    assert str(root / "c++" / "12") in text and "libstdc++-12-dev" in text and "tilelang-tpu" in text


def test_no_complete_set_is_a_named_error(tmp_path: Path) -> None:
    root = _layout(tmp_path, ("13",), ())
    with pytest.raises(ToolchainError) as info:
        cxx_include_dirs(root)
    assert "no complete libstdc++ header set" in str(info.value) and "apt-get install g++" in str(info.value)


def test_a_stray_gcc_11_target_folder(tmp_path: Path) -> None:
    """ppl-compile adds x86_64-linux-gnu/c++/11 by itself: fine as the last session's symlink to the
    chosen set's target folder, a named error when it is another set's."""
    root = _layout(tmp_path, ("12",), ("12",))
    (root / TRIPLE / "c++" / "11").symlink_to("12")
    assert cxx_include_dirs(root) == _set(root, "12")
    (root / TRIPLE / "c++" / "11").unlink()
    _layout(root, (), ("11",))
    with pytest.raises(ToolchainError) as info:
        cxx_include_dirs(root)
    assert str(root / TRIPLE / "c++" / "11") in str(info.value) and "remove" in str(info.value)


def _can_unshare() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True).returncode == 0


def _host_gcc12() -> bool:
    return all(Path(p).is_dir() for p in ("/usr/lib/gcc/x86_64-linux-gnu/12", "/usr/include/c++/12", f"/usr/include/{TRIPLE}/c++/12"))


#: Ubuntu 24.04's layout over this host's GCC 12: GCC 13's driver folder (a bind of 12's), headers (a
#: copy of 12's) and target folder (a c++config.h that is an #error); no c++/11.
UBUNTU_2404 = textwrap.dedent(
    """\
    set -e
    keep=$1; shift
    mkdir -p "$keep/gcc" "$keep/inc" "$keep/tgt"
    mount --bind /usr/lib/gcc/x86_64-linux-gnu/12 "$keep/gcc"
    mount --bind /usr/include/c++/12 "$keep/inc"
    mount --bind /usr/include/x86_64-linux-gnu/c++/12 "$keep/tgt"
    mount -t tmpfs tmpfs /usr/lib/gcc/x86_64-linux-gnu
    mkdir /usr/lib/gcc/x86_64-linux-gnu/12 /usr/lib/gcc/x86_64-linux-gnu/13
    mount --bind "$keep/gcc" /usr/lib/gcc/x86_64-linux-gnu/12
    mount --bind "$keep/gcc" /usr/lib/gcc/x86_64-linux-gnu/13
    mount -t tmpfs tmpfs /usr/include/c++
    mkdir /usr/include/c++/12 /usr/include/c++/13
    mount --bind "$keep/inc" /usr/include/c++/12
    cp -r "$keep/inc/." /usr/include/c++/13/
    mount -t tmpfs tmpfs /usr/include/x86_64-linux-gnu/c++
    mkdir -p /usr/include/x86_64-linux-gnu/c++/12 /usr/include/x86_64-linux-gnu/c++/13/bits
    mount --bind "$keep/tgt" /usr/include/x86_64-linux-gnu/c++/12
    echo '#error "GCC 13 c++config.h mixed with GCC 12 headers"' > /usr/include/x86_64-linux-gnu/c++/13/bits/c++config.h
    exec "$@"
    """
)

BUILD = textwrap.dedent(
    """\
    import sys
    from tilelang_tpu import build, setup
    if sys.argv[2] == "without":  # ppl-compile's own folders only: what every earlier release did
        build.cxx_include_dirs = lambda: ()
    try:
        build.build(open(sys.argv[1]).read(), "add", "bm1690", "cmodel", setup.find_toolchain())
    except Exception as err:
        print(type(err).__name__, err)
        sys.exit(3)
    print("built")
    """
)


@pytest.mark.skipif(not _can_unshare(), reason="needs `unshare --mount` (root with CAP_SYS_ADMIN) to rebuild Ubuntu 24.04's layout")
@pytest.mark.skipif(not _host_gcc12(), reason="rebuilds Ubuntu 24.04's layout from this host's GCC 12 headers")
def test_ubuntu_2404_layout_compiles_with_the_chosen_set(toolchain: setup.TpuToolchain, tmp_path: Path) -> None:
    source = Path(__file__).parent / "ppl" / "add_f32_1024.pl"
    outputs = {}
    for mode in ("without", "with"):
        env = {**os.environ, "TILECORE_CACHE_DIR": str(tmp_path / f"cache-{mode}")}
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", UBUNTU_2404, "sh", str(tmp_path / f"keep-{mode}")]
        command += [sys.executable, "-c", BUILD, str(source), mode]
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
        outputs[mode] = (proc.returncode, proc.stdout + proc.stderr)
    rc, out = outputs["without"]
    assert rc == 3 and "PplCompileError" in out and "GCC 13 c++config.h mixed" in out, out[-3000:]
    rc, out = outputs["with"]
    assert rc == 0 and "built" in out, out[-3000:]
