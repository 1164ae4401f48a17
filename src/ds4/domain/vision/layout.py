"""The token block one image becomes in the prompt (docs/vision.md §3):

    [PAD] * lead  [START]  rows...  [PAD] * pad_last  [END]

The aligner's grid has grid_h rows of grid_w merged tokens; each row is followed by a
NEWLINE, an odd row count gets a whole extra row of PADs, and each pair of rows is
interleaved column by column (row 2g col 0, row 2g+1 col 0, row 2g col 1, ...). `lead`
puts START at a multiple of BLOCK_ALIGN minus one: it depends on where the block starts
in the prompt, the rest of the block does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.vision.hparams import BLOCK_ALIGN


class Slot(IntEnum):
    """What sits at one block position (grid rows are >= 0: their row-major index)."""

    START = -1
    END = -2
    NEWLINE = -3
    PAD = -4


@dataclass(frozen=True)
class BlockLayout:
    grid_w: int
    grid_h: int
    lead: int

    def __post_init__(self) -> None:
        if self.grid_w < 1 or self.grid_h < 1:
            raise Ds4Error(f"image grid {self.grid_w}x{self.grid_h} is empty")
        if not 0 <= self.lead < BLOCK_ALIGN:
            raise Ds4Error(f"lead padding {self.lead} is outside 0..{BLOCK_ALIGN - 1}")

    @property
    def rows(self) -> int:
        """Grid rows, padded to an even count."""
        return self.grid_h + self.grid_h % 2

    @property
    def row_len(self) -> int:
        return self.grid_w + 1

    @property
    def pad_last(self) -> int:
        """Trailing pads: 2 when a pair of rows has an odd length, else 0."""
        return (self.rows // 2 * self.row_len) % 2 * 2

    @property
    def n_tokens(self) -> int:
        return self.lead + 1 + self.rows * self.row_len + self.pad_last + 1


def lead_for(n_past: int) -> int:
    """Lead pads for a block starting after n_past prompt positions."""
    if n_past < 0:
        raise Ds4Error(f"prompt position {n_past} is negative")
    return BLOCK_ALIGN - 1 - n_past % BLOCK_ALIGN


def grid_tokens(grid_w: int, grid_h: int) -> int:
    """Block size without lead pads (what the resize solver budgets)."""
    return BlockLayout(grid_w, grid_h, 0).n_tokens


def block_slots(layout: BlockLayout) -> npt.NDArray[np.int64]:
    """Per block position: a grid index (row-major, >= 0) or a Slot value."""
    rl = layout.row_len
    t = np.arange(layout.rows * rl, dtype=np.int64)
    pair, rem = t // (2 * rl), t % (2 * rl)
    col, row = rem // 2, 2 * pair + rem % 2
    body = np.where(col == layout.grid_w, Slot.NEWLINE, row * layout.grid_w + col)
    body = np.where(row >= layout.grid_h, Slot.PAD, body)
    return np.concatenate([
        np.full(layout.lead, Slot.PAD, dtype=np.int64),
        np.array([Slot.START], dtype=np.int64),
        body.astype(np.int64),
        np.full(layout.pad_last, Slot.PAD, dtype=np.int64),
        np.array([Slot.END], dtype=np.int64),
    ])  # fmt: skip


@dataclass(frozen=True)
class Sentinels:
    """The four learned embeddings of the block (each [n_embd_out])."""

    start: npt.NDArray[np.float32]
    end: npt.NDArray[np.float32]
    newline: npt.NDArray[np.float32]
    pad: npt.NDArray[np.float32]


def assemble_block(
    grid: npt.NDArray[np.float32], sentinels: Sentinels, layout: BlockLayout
) -> npt.NDArray[np.float32]:
    """The block's embeddings [n_tokens, n_embd_out] from the aligner grid
    [grid_h * grid_w, n_embd_out]."""
    if grid.shape[0] != layout.grid_w * layout.grid_h:
        raise Ds4Error(f"aligner grid has {grid.shape[0]} rows, layout needs "
                       f"{layout.grid_w * layout.grid_h}")  # fmt: skip
    extra = np.stack([sentinels.start, sentinels.end, sentinels.newline, sentinels.pad])
    table = np.concatenate([grid, extra.astype(np.float32)])
    slots = block_slots(layout)
    n = grid.shape[0]
    # Slot.START (-1) -> n, END -> n + 1, NEWLINE -> n + 2, PAD -> n + 3
    index = np.where(slots >= 0, slots, n - 1 - slots)
    out: npt.NDArray[np.float32] = table[index]
    return out
