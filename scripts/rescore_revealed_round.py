"""Re-score a revealed notebook 08 round from the committed files alone, and compare with its per-unit values.

A round whose secret has been revealed (``figures/samples/<stem>_revealed_secret.txt``) can be checked by anyone:
the secret must match the commitment in the round's signed public ledger (``<stem>_ledger.jsonl`` with its
``.pub``), and from it the hidden test items are regenerated; FRC's example and each committed program
(``<stem>_programs/seed<N>.py``, converted as ``submit-search`` converted them) are scored on them beside the full
cache, with the baselines the ledger records, and each unit's ``overall`` is compared with ``<stem>.csv.gz``. Exit 0
when every re-scored unit agrees. The controls (the seed program ``seed-v1``, each seed's random-search pick
``random-v1-<seed>``) are not re-scored: their programs are not committed; the output names them.

    python scripts/rescore_revealed_round.py --stem 08_search_arena_B_offline --board B_offline --profile cpu

Runs the embedded model on every test context (about 5-10 minutes at the cpu profile on two cores).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import pandas as pd

from cachecraft_lib.arena.arena import Arena
from cachecraft_lib.arena.board_runner import baseline_contender, submission_contender
from cachecraft_lib.arena.boards import splits
from cachecraft_lib.arena.scoring.ledger import Ledger
from cachecraft_lib.arena.scoring.score import NO_PRESS, unit_values
from cachecraft_lib.arena.submissions.folder import load_submission
from cachecraft_lib.arena.submissions.from_program import program_to_submission
from cachecraft_lib.search.submit import child_program_name

SAMPLES = Path(__file__).resolve().parents[1] / "figures" / "samples"
FRC = Path(splits.__file__).parents[1] / "examples" / "frc"


def revealed_secret(stem: str, ledger_events: list[dict], round_: int = 1) -> bytes:
    """The committed secret, checked against the round's commitment in the ledger (ValueError otherwise)."""
    secret = (SAMPLES / f"{stem}_revealed_secret.txt").read_text().strip().encode()
    event = next(e["payload"] for e in ledger_events if e["kind"] == "round" and e["payload"]["round"] == round_)
    if not splits.verify_reveal(secret, round_, event["commitment"], event["salt"]):
        raise ValueError(f"{stem}: the revealed secret does not match round {round_}'s commitment in the ledger")
    return secret


def ledger_events(stem: str, folder: Path) -> list[dict]:
    """The round's public ledger, verified against its published key (``LedgerTampered`` otherwise)."""
    (folder / "ledger.jsonl").write_bytes((SAMPLES / f"{stem}_ledger.jsonl").read_bytes())
    (folder / "ledger.pub").write_bytes((SAMPLES / f"{stem}_ledger.pub").read_bytes())
    return Ledger(folder / "ledger.jsonl").events()


def entries(events: list[dict], board: str) -> dict[str, str]:
    """Each pre-registered search entry's name and chosen child id, by the committed program's file name."""
    return {f"seed{e['payload']['origin']['random_seed']}.py": e["payload"]["name"] for e in events
            if e["kind"] == "submission" and e["payload"].get("board") == board
            and (e["payload"].get("origin") or {}).get("child_id")}


def contenders(stem: str, events: list[dict], board: str, folder: Path) -> list:
    """The full cache, FRC's example, the ledger's baselines and each committed program, named as the per-unit file
    names them."""
    found = [baseline_contender(NO_PRESS), submission_contender(load_submission(FRC))]
    found += [baseline_contender(name) for name in ledger_baselines(events) if name != NO_PRESS]
    children = {e["payload"]["name"]: e["payload"]["origin"]["child_id"] for e in events
                if e["kind"] == "submission" and (e["payload"].get("origin") or {}).get("child_id")}
    for file, name in sorted(entries(events, board).items()):
        program = folder / child_program_name(children[name])
        program.write_text((SAMPLES / f"{stem}_programs" / file).read_text())
        program_to_submission(program, folder / name, name, boards=(board,))
        found.append(submission_contender(load_submission(folder / name)))
    return found


def ledger_baselines(events: list[dict]) -> list[str]:
    """The baselines whose test means the round's ledger records, in its order."""
    return [e["payload"]["name"] for e in events if e["kind"] == "baseline"]


def compare(units: pd.DataFrame, committed: pd.DataFrame) -> pd.DataFrame:
    """Per (method, context) of every re-scored method: the committed ``overall`` beside the re-scored one (a
    committed unit the re-score lacks, or the reverse, shows as a missing value)."""
    committed = committed[committed.method.isin(set(units.method))]
    merged = committed.merge(units[["method", "context_id", "overall"]], on=["method", "context_id"], how="outer",
                             suffixes=("_committed", "_rescored"))
    merged["diff"] = (merged.overall_rescored - merged.overall_committed).abs()
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stem", default="08_search_arena_B_offline")
    parser.add_argument("--board", default="B_offline")
    parser.add_argument("--profile", default="cpu")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="cachecraft-rescore-"))
    events = ledger_events(args.stem, folder)
    secret = revealed_secret(args.stem, events)
    arena = Arena(args.profile, folder / "arena", progress=True)
    board = arena.board(args.board)
    rows = arena.run(board, arena.items(board, "test", secret), contenders(args.stem, events, args.board, folder))
    units = unit_values(rows, board)
    committed = pd.read_csv(SAMPLES / f"{args.stem}.csv.gz")
    merged = compare(units, committed)
    worst = float(merged["diff"].max()) if merged["diff"].notna().all() else float("nan")
    print(json.dumps({"units": len(merged), "methods": sorted(merged.method.unique()), "max_abs_diff": worst,
                      "not_rescored": sorted(set(committed.method) - set(merged.method)),
                      "means": merged.groupby("method").overall_rescored.mean().round(6).to_dict()}))
    return 0 if worst <= 1e-9 else 1


if __name__ == "__main__":
    sys.exit(main())
