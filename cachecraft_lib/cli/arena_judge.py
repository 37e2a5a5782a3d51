"""``cachecraft arena judge DIR``: review a submission with the rule judge or an LLM judge, optionally recorded.

    cachecraft arena judge my_method/ --board A                       # offline rule judge
    cachecraft arena judge my_method/ --board A --run-dev             # measure the dev report first
    OPENAI_API_KEY=... cachecraft arena judge my_method/ --board A --judge openai \\
        --api-base https://api.openai.com/v1 --llm-model gpt-4o-mini --llm-model claude=claude-3-5-haiku
    cachecraft arena judge my_method/ --board A --record              # a review event in the ledger

The dev report is the arena's own measurement: ``--run-dev`` writes it into ``<root>/dev/<board>/<name>-dev_report.json``
and later reviews read it from there (or from ``--dev-report``, a file outside the submission folder); a
``dev_report.json`` shipped inside the submission folder is never read. The rule judge runs the method on
real layers of the board's model it draws itself, beside its synthetic probes (``--probes-only`` skips
them). Nothing under the arena's ``private/`` folder is read. Bad input (no folder, no key, an
unreachable endpoint, a malformed answer) is one line on stderr and exit status 2; nothing is recorded then.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

JUDGE_HELP = "review a submission: novelty, effectiveness, soundness and flags (rule judge offline, or an LLM judge)"


def add_judge_verb(verb: Callable[[str, Callable, str], argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add ``judge`` through ``cli.arena``'s ``verb(name, func, help)`` (it adds --profile and --root)."""
    p = verb("judge", _cmd_judge, JUDGE_HELP)
    p.add_argument("folder", help="submission folder (method.py, DESCRIPTION.md, metadata.yaml)")
    p.add_argument("--board", help="board the review is for (default: the first board in its metadata)")
    p.add_argument("--judge", choices=("rules", "openai"), default="rules",
                   help="rules: offline, no network; openai: an OpenAI-compatible endpoint, two model families")
    p.add_argument("--api-base", default="https://api.openai.com/v1",
                   help="OpenAI-compatible base URL (e.g. http://localhost:8000/v1 for a local vLLM server)")
    p.add_argument("--llm-model", action="append", default=[], metavar="[FAMILY=]MODEL",
                   help="a judge model; give two of different families (FAMILY= when the name does not show it); "
                        "the key comes from OPENAI_API_KEY")
    p.add_argument("--dev-report", help="dev report JSON outside the submission folder (default: the one --run-dev "
                                        "wrote into the arena's dev folder)")
    p.add_argument("--probes-only", action="store_true", help="rule judge: run the method on the synthetic probes "
                                                              "only, not on real layers of the board's model")
    p.add_argument("--run-dev", action="store_true", help="run the submission on the dev items first and write the "
                                                          "dev report into the arena's dev folder")
    p.add_argument("--earlier", nargs="*", default=[], help="folders of earlier entries to compare with (the "
                                                            "shipped ones and the ledger's are always included)")
    p.add_argument("--round", type=int, default=1, help="the arena round whose entries and ledger to use (default 1)")
    p.add_argument("--record", action="store_true", help="append the review to the ledger (a flag zeroes points)")
    p.add_argument("--json", action="store_true", help="print the review as JSON")
    return p


def _errors() -> tuple[type[BaseException], ...]:
    from ..arena.boards.boards import BoardError
    from ..arena.judges.bundle import BundleError
    from ..arena.judges.llm import JudgeConfigError, JudgeConnectionError
    from ..arena.judges.review import ReviewError
    from ..arena.scoring.ledger import LedgerTampered
    from ..arena.submissions.folder import SubmissionError

    return BundleError, ReviewError, JudgeConfigError, JudgeConnectionError, LedgerTampered, SubmissionError, \
        BoardError


def _cmd_judge(args: argparse.Namespace) -> int:
    try:
        return _judge(args)
    except _errors() as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def _dev_report_path(arena, board: str, name: str) -> Path:
    return arena.root / "dev" / board / f"{name}-dev_report.json"


def _judge(args: argparse.Namespace) -> int:
    from ..arena.arena import Arena
    from ..arena.judges import load_bundle, review
    from ..arena.judges.bundle import BundleError, save_dev_report
    from ..arena.submissions.metadata import read_metadata
    from ..util.terminal_text import safe_text

    folder = Path(args.folder)
    if not (folder / "metadata.yaml").is_file():
        raise BundleError(f"{folder} is not a submission folder (no metadata.yaml); see "
                          "cachecraft_lib/arena/examples/frc/ for one")
    meta = read_metadata(folder)  # the arena's loader: no anchors, aliases or tags, bounded, no link followed
    boards = meta.get("boards") or []
    board = args.board or (boards[0] if isinstance(boards, list) and boards else boards or None)
    if not board:
        raise BundleError("no board: pass --board (the metadata names none)")
    arena = Arena(args.profile, Path(args.root) if args.root else None, progress=not args.json)
    arena.board(board)
    name = str(meta.get("name") or folder.name)
    stored = _dev_report_path(arena, board, name)
    if args.run_dev:
        from ..arena.board_runner import submission_contender
        from ..arena.submissions.folder import load_submission

        sub = load_submission(folder)
        save_dev_report(arena.dev(board, submission_contender(sub)), sub.name, stored, arena.boards[board].label)
    report = args.dev_report
    if report is None and stored.is_file():
        report = stored  # the one --run-dev wrote earlier (never the submission's own dev_report.json)
    events = arena.ledger.events()
    bundle = load_bundle(folder, report, tuple(args.earlier), events, arena_root=arena.root)
    if bundle.dev_report and bundle.dev_report.get("board") not in (None, board):
        raise BundleError(f"the dev report is for board {bundle.dev_report['board']}, not {board}; pass --run-dev "
                          "or the right --dev-report")
    options = {"models": args.llm_model, "api_base": args.api_base} if args.judge == "openai" else {}
    if args.judge == "rules" and not args.probes_only:
        from ..arena.judges.layers import arena_layers

        options["layers"] = arena_layers(arena, board)
    result = review(bundle, args.judge, **options)
    if args.json:
        print(json.dumps(result.as_dict(), indent=1, default=str))
    else:
        print(f"{safe_text(bundle.name)} by {safe_text(bundle.author)} on board {board}, judge {result.judge}: "
              f"novelty {result.novelty}/5, "
              f"effectiveness {result.effectiveness}/5, soundness {result.soundness}/3, flags: "
              f"{', '.join(result.flags) or 'none'}")
        for note in result.notes:
            print(f"  - {note}")
        if bundle.dev_report and bundle.dev_report.get("label"):
            print(f"  (dev report: {bundle.dev_report['label']})")
    if args.record:
        from ..arena.judges.record import record_review

        event = record_review(arena.ledger, result, bundle, board, args.round)
        data = event["payload"]
        print(f"recorded review #{event['seq']} in {arena.ledger.path}: points {data['points_before']:g} -> "
              f"{data['points_after']:g}" + (" (flagged: zeroed)" if result.flags else ""), file=sys.stderr)
    return 0
