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
