"""tilelang-tpu: SophGo TPU (BM1690 / BM1684X) backend for TileLang, as a tilecore plugin."""

__version__ = "0.2.0"
