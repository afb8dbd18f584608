"""How TileLang buffers map onto PPL's 4-D ``[N, C, H, W]`` tensors.

PPL local tensors are 4-D with ``C`` on the 64 hardware lanes.  A 2-D tile
``[rows, cols]`` becomes ``[1, rows, 1, cols]`` (rows on lanes, columns along
``W``), the layout PPL experts use for element-wise work, row reductions and
mm2 matrix multiplies.  Global tensors use the same mapping, so a global region
and the local tile it is copied to have the same 4-D shape and a DMA moves it
as one block.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "DTYPES",
    "ELEMENT_BYTES",
    "FLOAT_DTYPES",
    "LAYOUTS",
    "REDUCE_ALIGN",
    "WORD_PAIR_DTYPES",
    "aligned_strides",
    "broadcast_strides",
    "dim4",
    "offset4",
    "storage_dims",
    "storage_type",
    "to4",
]

#: TIR dtype -> PPL element type.
DTYPES: dict[str, str] = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "uint16": "uint16",
    "uint32": "uint32",
}

#: Floating types the tile arithmetic (tiu::f*) accepts.
FLOAT_DTYPES = ("float32", "float16", "bfloat16")

#: Elements a reduce source row is padded to in local memory.  The row reduction
#: views a row as ``slice x EU`` and fills the tail up to a whole execution unit
#: (16 fp32 / 32 fp16 on a 64-byte EU); 64 elements covers every dtype and chip.
REDUCE_ALIGN = 64


#: Layouts: where each TileLang dim goes in ``[N, C, H, W]``, by rank.
#:
#: ``lanes`` (the default) puts rows on the lanes (C).  ``rows_n`` puts the rows of
#: a 2-D tile on N and keeps a whole row in one lane: the "mm v1" operand layout of
#: ``tiu::fmm``, the fp32 matrix multiply (``A [M,1,1,K] x B [K,1,1,N]``).
LAYOUTS: dict[str, dict[int, tuple[int, ...]]] = {
    "lanes": {1: (1,), 2: (1, 3), 3: (0, 1, 3), 4: (0, 1, 2, 3)},
    "rows_n": {2: (0, 3)},
    "row": {1: (3,)},
}


def _place(dims: Sequence[str], layout: str, fill: str) -> list[str]:
    positions = LAYOUTS[layout].get(len(dims))
    if positions is None:
        ranks = ", ".join(str(r) for r in sorted(LAYOUTS[layout]))
        raise ValueError(f"rank {len(dims)} tiles have no PPL {layout} layout (ranks {ranks} are supported)")
    out = [fill] * 4
    for pos, value in zip(positions, dims, strict=True):
        out[pos] = value
    return out


def to4(dims: Sequence[str], layout: str = "lanes") -> list[str]:
    """Map TileLang dims (outermost first) to PPL ``[N, C, H, W]``.

    ``lanes``: rank 1 ``[a]`` -> ``[1, a, 1, 1]`` (one element per lane row);
    rank 2 ``[a, b]`` -> ``[1, a, 1, b]``; rank 3 ``[a, b, c]`` -> ``[a, b, 1, c]``;
    rank 4 as is.  ``rows_n``: ``[a, b]`` -> ``[a, 1, 1, b]``.  Works on C
    expressions (strings).
    """
    return _place(dims, layout, "1")


def offset4(dims: Sequence[str], layout: str = "lanes") -> list[str]:
    """Like :func:`to4` for offsets: the inserted unit dims get offset 0."""
    return _place(dims, layout, "0")


def dim4(values: Sequence[str]) -> str:
    """C initialiser of a ``dim4``."""
    return "{" + ", ".join(values) + "}"


def aligned_strides(block: Sequence[str], ppl_type: str) -> list[str]:
    """C expressions of the element strides ``[N, C, H, W]`` of a local tensor
    allocated with ``block`` (``make_tensor``'s default TPU_ALIGN layout).

    The ``C`` stride is the per-lane distance from channel ``c`` to ``c + LANE_NUM``
    (the next *group* of rows on the same lane): ``H * W`` rounded up to a whole
    execution unit.  ``N`` steps over all ``ceil(C / LANE_NUM)`` groups.  These are
    PPL's own rules (``ppl::get_stride`` with ``TPU_ALIGN``), written as C so that
    the chip's ``EU_BYTES``/``LANE_NUM`` apply.
    """
    _, c, h, w = block
    c_stride = f"align({h} * {w}, get_eu_num<{ppl_type}>())"
    return [f"div_up({c}, LANE_NUM) * {c_stride}", c_stride, w, "1"]


def broadcast_strides(block: Sequence[str], ppl_type: str, axes: Sequence[int]) -> list[str]:
    """Strides of a view of a local tensor (allocated with ``block``) that repeats
    it along ``axes`` (stride 0 there), e.g. a ``[rows, 1]`` tile seen as
    ``[rows, cols]`` (axes ``(3,)``).  Every other axis keeps the tensor's real
    stride -- in particular ``C``, whose stride is what row ``r + 64`` is found by.
    """
    strides = aligned_strides(block, ppl_type)
    return ["0" if i in axes else s for i, s in enumerate(strides)]


#: Dtypes PPL has no tensors of, held as pairs of 32-bit words (little-endian: the low word
#: first), so the last axis (``W``) of their tensors and tiles is twice as long.  Only
#: embedding ids are 64-bit: such tensors and tiles are copied and used as gather indices,
#: and refused by name everywhere else.
WORD_PAIR_DTYPES = {"int64": "uint32"}

ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "int16": 2, "uint16": 2, "int8": 1, "uint8": 1}


def storage_type(dtype: str) -> str:
    """The PPL element type a tensor or tile of TIR dtype ``dtype`` is held in."""
    return WORD_PAIR_DTYPES.get(dtype) or DTYPES[dtype]


def storage_dims(dims4: list[str], dtype: str) -> list[str]:
    """4-D extents (or offsets) in elements of :func:`storage_type`: ``W`` doubled for word pairs."""
    if dtype not in WORD_PAIR_DTYPES:
        return list(dims4)
    w = dims4[3]
    return [*dims4[:3], str(2 * int(w)) if w.lstrip("-").isdigit() else f"2 * ({w})"]
