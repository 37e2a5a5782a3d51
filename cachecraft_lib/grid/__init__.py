"""The RULER grid behind ``cachecraft grid``: cells, the result store, batched decoding and the runner."""

from .cells import Cell, grid_cells, parse_shard, select_shard
from .runner import DECODE_MODES, answer_one, run_grid
from .store import CellStore, load_results

__all__ = ["Cell", "CellStore", "DECODE_MODES", "answer_one", "grid_cells", "load_results", "parse_shard",
           "run_grid", "select_shard"]
