"""``cachecraft evolve``: a CacheCraft search (OpenEvolve's steady-state loop; the README's "Which search?").

The LLM's key comes from ``OPENAI_API_KEY`` (the one variable every LLM client of the project reads);
``--api-key`` still works but warns, since a key on a command line is kept in shell history and shown by ``ps``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..profiles import PROFILES
from .search_options import seed_program

KEY_VAR = "OPENAI_API_KEY"
NO_KEY = "ollama"  # sent when no key is set: Ollama and a local server accept any non-empty string


def api_key(args: argparse.Namespace, env: dict[str, str] | None = None) -> str:
    """The LLM's key: ``OPENAI_API_KEY``, else ``--api-key`` (with a warning), else a placeholder."""
    env = os.environ if env is None else env
    if args.api_key is not None:
        print(f"warning: a key on the command line stays in shell history and shows in `ps`; set {KEY_VAR} "
              "instead", file=sys.stderr)
        return args.api_key
    return env.get(KEY_VAR) or NO_KEY


def _cmd_evolve(args: argparse.Namespace) -> int:
    from ..paths import DATA
    from ..profiles import get_profile
    from ..search.evolve import evolve
    from .search_options import check_board
    from .search_options import iterations as budget

    profile = get_profile(args.profile)
    check_board("cachecraft evolve", args.board, args.profile)
    if (missing := _boundary_missing()) is not None:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    seed = seed_program(args)
    board = f"_board{args.board}" if args.board else ""
    out = Path(args.out) if args.out else DATA / "results" / "search" / f"{profile.name}_{seed}_{args.mutator}{board}"
    iterations = budget(args, 1, profile.search_iterations)
    print(f"cachecraft evolve: seed {seed}, {iterations} iterations, mutator {args.mutator} -> {out}")
    llm = {} if args.mutator == "offline" else {"ollama_model": args.llm_model, "api_base": args.api_base,
                                                "api_key": api_key(args), "max_tokens": args.max_tokens}
    if args.structural:
        if args.mutator != "offline":
            raise SystemExit("--structural belongs to the offline mutator; an LLM writes its own structural edits")
        llm["structural"] = True
    failure = None
    try:
        best = evolve(seed, iterations, out, profile, mutator=args.mutator, adversarial=args.adversarial,
                      ratio=args.ratio, random_seed=args.random_seed, resume=not args.fresh,
                      **({"board": args.board, "arena_root": args.root} if args.board else {}), **llm)
    except RuntimeError as err:  # no candidate at all, every child failed, the fresh process failed: say why
        best, failure = None, err
    if best is not None:
        print(f"best program {best.id}: {best.metrics}")
    if args.mutator != "offline":
        _report_llm_run(out)
    if failure is not None:
        print(f"cachecraft evolve: the search stopped: {failure}")
        return 1
    return 0


def _boundary_missing() -> str | None:
    """Why the sandbox the candidates run in cannot be set up here (None: it can), asked before the model loads
    and the search starts in a fresh process, whose failure would be a traceback."""
    from ..sandbox.boundary import BoundaryUnavailable, plan

    try:
        plan()
    except BoundaryUnavailable as err:
        return str(err)
    return None


def _report_llm_run(out: Path) -> None:
    """Each iteration's verdict, and where the prompts and answers are."""
    from ..search.exchanges import verdicts, write_exchanges

    table = verdicts(out)
    if len(table):
        print(table[["iteration", "outcome", "reason", "prompt_chars", "response_chars"]]
              .to_string(index=False, max_colwidth=90))
        print(f"what OpenEvolve sent and the LLM answered, iteration by iteration: {write_exchanges(out)}")


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``evolve``; the options both searches share come from ``search_options`` (``arena search`` takes the same)."""
    from .search_options import DefaultsShown, add_search_options

    ev = sub.add_parser("evolve", formatter_class=DefaultsShown, help="run a CacheCraft search (OpenEvolve + cascade evaluator)",
                        description="Evolve an eviction policy from a seed with OpenEvolve; candidates run isolated "
                                    "and are scored by the cascade evaluator. Resumes from the run's last checkpoint.")
    add_search_options(ev, seed_program="v5", random_seed_default=42, structural_default=False,
                       iterations_help="iterations: OpenEvolve children, each scored by the cascade (default: the "
                                       "profile's search_iterations)",
                       root_help="the arena's folder with --board (default: data/results/arena/<profile>)",
                       out_help="run folder (default: data/results/search/<profile>_<seed program>_<mutator>)")
    ev.add_argument("--mutator", default="offline", choices=["offline", "ollama", "openai"],
                    help="offline: deterministic code edits, not an LLM; ollama: local qwen3.5:35b-a3b-q4_K_M; "
                         "openai: any OpenAI-compatible endpoint (--llm-model, --api-base, --api-key) (default: %(default)s)")
    ev.add_argument("--llm-model", default="qwen3.5:35b-a3b-q4_K_M", help="model name for ollama/openai (default: %(default)s)")
    ev.add_argument("--api-base", default="http://localhost:11434/v1", help="OpenAI-compatible base URL (default: %(default)s)")
    ev.add_argument("--api-key", default=None,
                    help=f"API key; better: set {KEY_VAR} (read by default; a key given here warns). Without "
                         f"either, '{NO_KEY}' is sent (Ollama and a local server accept any non-empty string) (default: none)")
    ev.add_argument("--max-tokens", type=int, default=8192,
                    help="cap on each LLM answer (ollama/openai); e.g. 256 for a small model served on a CPU (default: %(default)s)")
    ev.add_argument("--adversarial", type=float, default=0.0, help="probability of proposing a reward hack (offline) (default: %(default)s)")
    ev.add_argument("--profile", default="cpu", choices=sorted(PROFILES),
                    help="scale: smoke (CI, seconds), cpu, gpu (the embedded model on CUDA), paper (the "
                         "paper's models); its search_iterations are the default --iterations (default: %(default)s)")
    ev.add_argument("--ratio", type=float, default=0.83, help="compression ratio of the search (paper: 0.83) (default: %(default)s)")
    ev.add_argument("--fresh", action="store_true", help="do not resume from the last checkpoint (default: off, resume)")
    ev.set_defaults(func=_cmd_evolve)
