"""``cachecraft arena ...``: the arena's boards, baselines, submissions, leaderboard and reveal.

Every verb takes ``--profile`` and ``--root`` (default ``data/results/arena/<profile>``: ledger and results). Bad
input (an unknown board, a bad folder, a missing secret, a corrupt ledger) or a missing sandbox (checked first where
a verb runs code) is one ``error:`` line, exit status 2, and nothing already recorded is touched."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..arena.boards.boards import board_help
from .doctor import SANDBOXED, boundary_first

BOARD_HELP = board_help()


def _arena(args: argparse.Namespace):
    from ..arena.arena import Arena

    root = Path(args.root) if args.root else None
    if getattr(args, "ray", None) is not None:  # dev and baselines with --ray
        from ..arena.ray_eval import RayArena

        arena = RayArena(args.profile, root, address=None if args.ray == "local" else args.ray,
                         cpus_per_task=args.cpus_per_task, max_retries=args.max_retries)
    else:
        arena = Arena(args.profile, root)
    arena.weak_secret_ok = bool(getattr(args, "weak_secret_ok", False))
    return arena


def _known_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean bad input, not a bug: reported in one line (imported here, not at the top, so that
    ``cachecraft --help`` does not load pandas; a renamed class fails this import, loudly)."""
    from ..arena.boards.boards import BoardError
    from ..arena.boards.splits import SecretMismatch, SecretMissing
    from ..arena.calibration import CalibrationFailed
    from ..arena.ray_eval import ChunksFailed, ContendersFailed
    from ..arena.scoring.ledger import RateLimited
    from ..arena.scoring.signing import KeyMissing
    from ..arena.scoring.verify import LedgerTampered, LedgerUntrusted
    from ..arena.submissions.errors import SubmissionError
    from ..sandbox.boundary import BoundaryUnavailable
    from ..util.ray import RayMissing

    return (BoardError, FileNotFoundError, FileExistsError, RayMissing, SubmissionError, SecretMissing,
            SecretMismatch, KeyMissing, CalibrationFailed, LedgerTampered, LedgerUntrusted, RateLimited,
            ContendersFailed, ChunksFailed, PinInvalid, BoundaryUnavailable)  # the machine's: it names the doctor


class PinInvalid(ValueError):
    """``--public-key`` is neither a key, a fingerprint nor a file holding a key."""


def _pin(args: argparse.Namespace) -> str | None:
    from ..arena.scoring.verify import read_pin

    try:
        return read_pin(getattr(args, "public_key", None))
    except ValueError as err:
        raise PinInvalid(str(err)) from None


def _guard(func):
    def run(args: argparse.Namespace) -> int:
        from ..arena.boards.math500 import NotMeasurable

        try:
            return int(func(args) or 0)
        except NotMeasurable as err:  # a status, not a failure: the board needs what this machine lacks
            print(f"board {getattr(args, 'board', None) or '?'} ({args.profile}): {err}")
            return 0
        except _known_errors() as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    return run


def _cmd_boards(args: argparse.Namespace) -> int:
    from ..arena.boards.boards import boards_table

    print(boards_table(_arena(args).boards).to_string(index=False))
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from ..arena.submissions.folder import load_submission
    from ..util.terminal_text import safe_text

    sub = load_submission(args.folder)
    params = f", params sha256 {sub.params_sha256[:12]}" if sub.params_sha256 else ""
    print(safe_text(f"ok: {sub.name} by {sub.author}, boards {', '.join(sub.boards)}, hooks {', '.join(sub.hooks)}, "
                    f"code sha256 {sub.code_sha256[:12]}{params}", None))  # the author is the submitter's text
    return 0


def _cmd_dev(args: argparse.Namespace) -> int:
    from ..arena.board_runner import baseline_contender, submission_contender

    arena = _arena(args)
    arena.board(args.board)
    if args.folder.startswith("baseline:"):
        contender = baseline_contender(args.folder[len("baseline:"):])
    else:
        from ..arena.submissions.folder import load_submission

        contender = submission_contender(load_submission(args.folder), **_sandbox_limits(args))
    if args.ray is not None:
        from ..arena.ray_eval import ray_dev

        with arena:
            report = ray_dev(arena, args.board, contender)
        for name, reason in report["failed_baselines"].items():
            print(f"failed: baseline {name}: {reason} (left out of the comparison)", file=sys.stderr)
    else:
        report = arena.dev(args.board, contender)
    if args.json:  # one JSON object: the scores as records (pandas.json_normalize(obj["scores"]))
        print(json.dumps(_as_json(report)))
        return 0
    print(f"board {args.board} (dev items; {arena.boards[args.board].label})")
    print(report["scores"].round(3).to_string())
    print(f"gain over the best baseline ({report['best_baseline']}): {report['gain']}; "
          f"eligible: {report['eligible']} ({report['eligibility']}); excluded tasks: {report['excluded_tasks'] or 'none'}")
    return 0


def _as_json(result) -> dict:
    """A ``DevReport``/``Entry``/``Rejection`` (or the Ray path's dict) as plain JSON values."""
    if hasattr(result, "as_dict"):
        return result.as_dict()
    from ..arena.results import DevReport

    return DevReport(**{k: v for k, v in result.items()}).as_dict()


def _secret(args: argparse.Namespace):
    from ..arena.boards.splits import load_secret

    return load_secret(weak_ok=bool(getattr(args, "weak_secret_ok", False)))


def _cmd_baselines(args: argparse.Namespace) -> int:
    arena = _arena(args)
    boards = [args.board] if args.board else list(arena.boards)
    rnd = arena.open_round(_secret(args), args.round)  # the secret checked once for every board
    if args.ray is not None:
        from ..arena.ray_eval import ray_baselines

        with arena:
            results = ray_baselines(arena, boards, rnd)
        for name, (scores, failed) in results.items():
            print(f"board {name}: " + ("already recorded" if scores.empty else f"\n{scores.round(3).to_string()}"))
            for baseline, reason in failed.items():
                print(f"failed: board {name}, baseline {baseline}: {reason} (not recorded; the others are; fix it "
                      "and run the same command)", file=sys.stderr)
        return 1 if any(failed for _, failed in results.values()) else 0
    for name in boards:
        scores = arena.record_baselines(name, rnd)
        print(f"board {name}: " + ("already recorded" if scores.empty else f"\n{scores.round(3).to_string()}"))
    return 0


def _sandbox_limits(args: argparse.Namespace) -> dict:
    """``--allow-weak-sandbox`` as the sandbox's ``Limits(allow_weak=True)``; the entry records the boundary."""
    return {"allow_weak": True} if getattr(args, "allow_weak_sandbox", False) else {}


def _cmd_submit(args: argparse.Namespace) -> int:
    from ..util.terminal_text import safe_text

    arena = _arena(args)
    arena.board(args.board)
    entry = arena.submit(args.folder, args.board, _secret(args), args.round, rule=args.rule, **_sandbox_limits(args))
    if args.json:  # one JSON object, the entry (or the rejection) as the ledger recorded it
        print(json.dumps(_as_json(entry)))
        return 1 if entry.get("rejected") else 0
    if entry.get("rejected"):
        print(safe_text(f"rejected ({entry['kind']}): {entry['message']} (recorded in the ledger)", None),
              file=sys.stderr)
        return 1
    print(f"{entry['name']} on {args.board}: overall {entry['overall']:.3f} [{entry['lo']:.3f}, {entry['hi']:.3f}], "
          f"gain over {entry['best_before']} {entry['gain']:+.3f} [{entry['gain_lo']:+.3f}, {entry['gain_hi']:+.3f}]; "
          f"{'moves the board' if entry['moved'] else 'does not move the board'}; points {entry['points']:g}")
    return 0


def _cmd_leaderboard(args: argparse.Namespace) -> int:
    from ..arena.scoring import leaderboard
    from ..arena.scoring.verify import trusted_events
    from ..util.terminal_text import safe_table

    arena = _arena(args)
    events, check = trusted_events(arena.ledger, args.head, _pin(args))  # an unsigned ledger is refused
    print(f"ledger: {check.shown} ({check.events} events, key {check.fingerprint})", file=sys.stderr)
    table = leaderboard.leaderboard(events, args.board, units=leaderboard.units_loader(arena.root))
    if args.json:  # one JSON object per entry and line: pandas.read_json(..., lines=True)
        if not table.empty:
            print(table.to_json(orient="records", lines=True, date_format="iso"))
        return 0
    if table.empty:
        print(f"no entries yet in {arena.root / 'ledger.jsonl'}; run `cachecraft arena baselines` first")
        return 0
    print(safe_table(table.drop(columns=["time"]).round(3)).to_string(index=False))  # names, authors: submitters'
    if args.out:
        for path in leaderboard.write(events, args.out, label=next(iter(arena.boards.values())).label,
                                      units=leaderboard.units_loader(arena.root)):
            print(f"wrote {path}")
        print(f"wrote {arena.ledger.publish_head(args.out)} (publish it with the leaderboard: `cachecraft arena "
              "verify --head` checks the ledger against it)")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    arena = _arena(args)
    result = arena.ledger.verify(head=args.head, public_key=_pin(args))
    print(f"{arena.ledger.path}: {result.shown}: {result.message}"
          + (f" (key {result.fingerprint})" if result.fingerprint else ""))
    return 0 if result.ok else 1


def _cmd_reveal(args: argparse.Namespace) -> int:
    result = _arena(args).reveal(_secret(args), args.round)
    verdict = "matches" if result["matches"] else "does NOT match"
    print(f"round {result['round']}: the secret {verdict} the commitment {result['commitment'][:16]}... "
          f"(salt {result.get('salt')})")
    for board, seed in result["test_seeds"].items():
        print(f"  board {board}: test seed {seed}")
    return 0 if result["matches"] else 1


def _ray_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="run on Ray: alone, a local cluster on this machine; with an address ('auto', "
                        "'ray://head:10001'), an existing cluster. Needs pip install -e '.[ray]' and an arena "
                        "folder (--root) every worker sees (docs/scaling_out.md)")
    p.add_argument("--cpus-per-task", type=float, default=1,
                   help="with --ray on CPUs: CPUs per worker, each holding the model (on CUDA: one GPU each)")
    p.add_argument("--max-retries", type=int, default=3,
                   help="with --ray: restarts of a worker that died (its finished contexts are kept)")


def _round_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--round", type=int, default=1, help="the round (its secret and test items; default 1)")
    p.add_argument("--weak-secret-ok", action="store_true",
                   help="accept a typed secret below the strength estimate (the round's ledger event records it; "
                        "`arena init` generates a strong one)")


def _pin_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--head", help="a published head (ledger_head.json, written by `leaderboard --out`) to verify "
                                  "against: detects a cut, rewritten or re-signed ledger")
    p.add_argument("--public-key", metavar="KEY",
                   help="the organiser's public key pinned outside the arena folder: its fingerprint (printed by "
                        "`arena init`), the key (64 hex) or a file holding it; without it or --head the status is "
                        "'signed, key not pinned', never verified")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``arena`` and its verbs."""
    from ..profiles import PROFILES

    ar = sub.add_parser("arena", help="the arena: boards, baselines, submissions, leaderboard",
                        description="Submit KV-eviction methods to fixed boards; scored on hidden test items against "
                                    "the full cache and published baselines (cachecraft_lib/arena/README.md).")
    verbs = ar.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name: str, func, help_: str) -> argparse.ArgumentParser:
        p = verbs.add_parser(name, help=help_, description=help_)
        p.add_argument("--profile", default="cpu", choices=sorted(PROFILES),
                       help="the profile whose boards and model to use (default cpu)")
        p.add_argument("--root", help="arena folder: ledger and results (default data/results/arena/<profile>)")
        p.set_defaults(func=_guard(boundary_first(func) if name in SANDBOXED else func))
        return p

    from .arena_init import add_init_verb  # `arena init`: key, generated secret, round commitment

    add_init_verb(verb)
    verb("boards", _cmd_boards, "show the profile's boards: budgets, items, baselines, weights, limits")
    verb("check", _cmd_check, "check a submission folder (method.py, DESCRIPTION.md, metadata, params.npz) "
                              "and list the hooks it uses").add_argument(
        "folder", help="the submission folder")
    p = verb("dev", _cmd_dev, "evaluate a submission (or baseline:NAME) on the public dev items, unlimited")
    p.add_argument("folder", help="submission folder, or baseline:NAME for a trusted baseline")
    p.add_argument("--board", required=True, help=BOARD_HELP)
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run even where the sandbox cannot set up its OS boundary (weaker)")
    p.add_argument("--json", action="store_true", help="print one JSON object (scores as records, the gain as "
                                                      "point/lo/hi) instead of text")
    _ray_options(p)
    p = verb("submit", _cmd_submit, "official submission: hidden test items, gate, points, ledger")
    p.add_argument("folder", help="the submission folder (method.py, DESCRIPTION.md, metadata.yaml)")
    p.add_argument("--json", action="store_true", help="print the entry (or the rejection) as one JSON object")
    p.add_argument("--board", required=True, help=BOARD_HELP)
    _round_options(p)
    p.add_argument("--rule", default="frozen_bar", choices=("frozen_bar", "post"), help="points rule")
    p.add_argument("--allow-weak-sandbox", action="store_true",
                   help="run even where the sandbox cannot set up its OS boundary (weaker; the entry records it)")
    p = verb("baselines", _cmd_baselines, "score the baselines on the hidden test items and record them")
    p.add_argument("--board", help=BOARD_HELP + " (default: every board)")
    _round_options(p)
    _ray_options(p)
    p = verb("leaderboard", _cmd_leaderboard, "the leaderboard derived from the ledger (refused for an unsigned "
                                              "or tampered ledger)")
    p.add_argument("--board", help=BOARD_HELP + " (default: every board)")
    p.add_argument("--out", help="also write CSV/Markdown/LaTeX and the figure into this folder")
    p.add_argument("--json", action="store_true", help="print one JSON object per entry and line (for "
                                                      "pandas.read_json(lines=True)) instead of the table")
    _pin_options(p)
    from .arena_calibrate import add_calibrate_verb

    add_calibrate_verb(verb)
    p = verb("verify", _cmd_verify, "verify the ledger's chain and signatures, against a published head "
                                    "(truncation, a re-signed or rewritten ledger); exit 1 when it does not verify")
    _pin_options(p)
    p = verb("reveal", _cmd_reveal, "check a round's commitment against the secret and show its test seeds")
    _round_options(p)
    from .arena_judge import add_judge_verb

    add_judge_verb(verb)
    from .arena_site import add_site_verb  # `arena site`: the leaderboard as a static web site

    add_site_verb(verb)
    from .arena_search import add_search_verb  # the board search
    from .arena_submit_search import add_submit_search_verb  # and its submission

    _ray_options(add_search_verb(verb))
    add_submit_search_verb(verb)
