"""Differential testing of TileLang targets: random tile programs, each compiled for
tilelang's own ``c`` target and for ``tpu`` (BM1690 emulator), run on random inputs and
compared with torch evaluating the same expression tree.

* :mod:`.program` -- the program model: expression trees, index maps, kernel shapes; renders
  TileLang source (what runs is the printed source) and evaluates the torch reference;
* :mod:`.strategies` -- hypothesis strategies that draw programs (and shrink failing ones);
* :mod:`.runner` -- compiles and runs one program on one target and classifies the outcome
  (match / refused by name / WRONG / crash).

Used by ``tests/test_tpu_differential.py`` (a seeded corpus) and
``benchmarks/tpu_differential.py`` (long runs printing the classification table).
"""

import os as _os
from pathlib import Path as _Path

from hypothesis.configuration import set_hypothesis_home_dir as _set_home

# Hypothesis keeps a cache (``constants``) under ``./.hypothesis`` by default: nothing goes in the
# cwd, so it lives in the user's cache directory unless HYPOTHESIS_STORAGE_DIRECTORY says otherwise.
if not _os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
    _cache = _Path(_os.environ.get("XDG_CACHE_HOME") or _Path.home() / ".cache")
    _set_home(_cache / "tilecore" / "hypothesis")
