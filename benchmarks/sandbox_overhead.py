"""What the sandbox's OS boundary costs: start, one layer call, one whole board A dev evaluation.

    python benchmarks/sandbox_overhead.py [--profile cpu|smoke] [--board A] [--repeats 10]

Runs the arena's FRC submission (``cachecraft_lib/arena/examples/frc``) once behind the boundary this machine
gives (``cachecraft doctor``; bubblewrap namespaces + the seccomp allowlist + a cgroup) and once in a plain child process with only the audit hook
(``weak: process only``, today's design before the boundary; forced here, never by default) and prints the
median times and their ratios, and the boundary's extra cost as a share of one dev evaluation (target:
under 5%). The answers must be identical: the layer outputs and every row the evaluation scores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.board_runner import submission_contender
from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.arena.submissions.press import close_sandboxes
from cachecraft_lib.arena.submissions.sandbox import MethodSandbox
from cachecraft_lib.sandbox import Limits, boundary
from cachecraft_lib.sandbox.cgroup_mode import CgroupMode

FRC = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples" / "frc"
MODES = ("boundary", "hook only")


@contextlib.contextmanager
def mode(name: str) -> Iterator[None]:
    """The full boundary, or a plain process with the audit hook only (weak mode, forced: no bubblewrap, no filter,
    no cgroup)."""
    if name == "boundary":
        yield
        return
    saved, saved_detect, saved_env = boundary.missing_parts, boundary.detect, os.environ.get(boundary.WEAK_ENV)
    boundary.missing_parts = lambda: {"bwrap": "benchmark", "seccomp": "benchmark"}
    boundary.detect = lambda: CgroupMode(None, why="benchmark")
    os.environ[boundary.WEAK_ENV] = "1"
    try:
        yield
    finally:
        boundary.missing_parts, boundary.detect = saved, saved_detect
        if saved_env is None:
            os.environ.pop(boundary.WEAK_ENV, None)
        else:
            os.environ[boundary.WEAK_ENV] = saved_env


def layer_inputs(model, length: int, seed: int = 0) -> tuple[dict[str, np.ndarray], dict]:
    cfg = model.config
    heads, kv = cfg.num_attention_heads, cfg.num_key_value_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    rng = np.random.default_rng(seed)
    arrays = {"keys": rng.standard_normal((kv, length, dim), np.float32),
              "values": rng.standard_normal((kv, length, dim), np.float32),
              "queries": rng.standard_normal((heads, 64, dim), np.float32),
              "positions": np.arange(length, dtype=np.int64)}
    return arrays, {"budget": length // 4, "layer": 0, "n_layers": cfg.num_hidden_layers, "compression_ratio": 0.75}


def start_and_call(sub, arrays, scalars, repeats: int) -> dict:
    """Starts and calls, the two modes interleaved (a loaded machine drifts; interleaving cancels it)."""
    out = {m: {"start": [], "call": []} for m in MODES}
    for _ in range(repeats):
        for m in MODES:
            with mode(m):
                t = time.perf_counter()
                box = MethodSandbox(sub, Limits()).start()
                out[m]["start"].append(time.perf_counter() - t)
            try:
                answer = box.answer(arrays, **scalars)  # warm
                for _ in range(repeats):
                    t = time.perf_counter()
                    answer = box.answer(arrays, **scalars)
                    out[m]["call"].append(time.perf_counter() - t)
                out[m]["answer"], out[m]["name"] = answer, box.boundary
            finally:
                box.close()
    return out


def evaluation(arena: Arena, board, items, sub) -> tuple[float, object]:
    close_sandboxes()
    t = time.perf_counter()
    rows = arena.run(board, items, [submission_contender(sub)])
    elapsed = time.perf_counter() - t
    close_sandboxes()
    return elapsed, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--board", default="A")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--evaluations", type=int, default=1, help="whole dev evaluations per mode")
    args = parser.parse_args()

    arena = Arena(args.profile, progress=False)
    board = arena.board(args.board)
    items = arena.items(board, "dev")
    model, _ = arena.model(board)
    sub = load_submission(FRC)
    arrays, scalars = layer_inputs(model, max(board.lengths))
    arena.run(board, items.head(1), [submission_contender(sub)])  # load the model and warm every cache once
    timed = start_and_call(sub, arrays, scalars, args.repeats)
    evals, rows = {m: [] for m in MODES}, {}
    for _ in range(args.evaluations):
        for m in MODES:
            with mode(m):
                seconds, rows[m] = evaluation(arena, board, items, sub)
            evals[m].append(seconds)
    med = {m: {"start": statistics.median(timed[m]["start"]), "call": statistics.median(timed[m]["call"]),
               "evaluation": statistics.median(evals[m])} for m in MODES}
    outs, names = {m: timed[m]["answer"] for m in MODES}, {m: timed[m]["name"] for m in MODES}
    same_layer = np.array_equal(outs["boundary"], outs["hook only"])
    numeric = rows["boundary"].select_dtypes("number").columns
    same_rows = rows["boundary"][numeric].equals(rows["hook only"][numeric])
    b, h = med["boundary"], med["hook only"]
    print(f"profile {args.profile}, board {args.board}: {len(items)} dev items, layer input "
          f"{arrays['keys'].shape} keys, median of {args.repeats} starts / {args.repeats ** 2} calls / "
          f"{args.evaluations} evaluation(s) per mode, the modes interleaved")
    print(f"boundaries: {names['boundary']!r} vs {names['hook only']!r}")
    print(f"{'':>12} {'boundary':>12} {'hook only':>12} {'ratio':>8}")
    for key, unit, scale in (("start", "ms", 1e3), ("call", "ms", 1e3), ("evaluation", "s", 1.0)):
        print(f"{key + ' ' + unit:>12} {b[key] * scale:>12.2f} {h[key] * scale:>12.2f} {b[key] / h[key]:>7.2f}x")
    extra = b["evaluation"] - h["evaluation"]
    print(f"boundary's extra cost: {extra:+.2f} s = {100 * extra / h['evaluation']:+.1f}% of a dev evaluation "
          f"(start alone: {100 * (b['start'] - h['start']) / h['evaluation']:+.2f}%; target < 5%)")
    print(f"identical answers: layer call {same_layer}, evaluation rows {same_rows}")
    if not (same_layer and same_rows):
        raise SystemExit("the answers differ between the two modes")


if __name__ == "__main__":
    main()
