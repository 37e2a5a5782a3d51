"""``cachecraft serve-instruct``: an OpenAI-compatible server for ``cachecraft evolve --mutator openai``."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path


def _cmd_serve(args: argparse.Namespace) -> int:
    from ..models.names import INSTRUCT_DIR
    from ..search.llm_server import InstructServer, ServerError

    server = InstructServer(model=args.model or INSTRUCT_DIR, port=args.port, host=args.host, device=args.device,
                            dtype=args.dtype, threads=args.threads, log_path=Path(args.log) if args.log else None)
    print(f"starting transformers serve on {server.model} ...", flush=True)
    try:
        server.start()
    except ServerError as err:
        print(f"cachecraft serve-instruct: {err}")
        return 1
    print(f"serving at {server.base_url} (log: {server.log_path}); Ctrl-C stops it. Search with it:\n"
          f"  cachecraft evolve --mutator openai --api-base {server.base_url} --llm-model smollm2 "
          f"--max-tokens 256 --profile smoke --iterations 2", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the server too (finally below)
    try:
        while server.process is not None and server.process.poll() is None:
            time.sleep(1)
        print(f"the server exited (code {server.process.returncode}):\n{server.log_tail()}")
        return 1
    except KeyboardInterrupt:
        print(f"stopping the server (exit code {server.stop()})")
        return 0
    finally:
        server.stop()


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``serve-instruct``."""
    sv = sub.add_parser("serve-instruct", help="serve a local instruct model (OpenAI-compatible) for the search",
                        description="Start transformers' own OpenAI-compatible server (`transformers serve`, extra "
                                    "[serve]) on SmolLM2-135M-Instruct (after `cachecraft fetch-instruct`) or on "
                                    "--model, for `cachecraft evolve --mutator openai --api-base URL`. A 135M model "
                                    "writes mostly invalid programs: it exercises the LLM path, not the search.")
    sv.add_argument("--model", help="model folder or hub id (default: data/models/smollm2-135m-instruct)")
    sv.add_argument("--port", type=int, default=8000, help="port (0: any free port; default 8000)")
    sv.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    sv.add_argument("--device", default="auto", help="auto, cpu, cuda, ... (default auto)")
    sv.add_argument("--dtype", default="auto", help="auto (the folder's), float32, bfloat16, ... (default auto)")
    sv.add_argument("--threads", type=int, help="CPU threads of the server (1 on a machine shared with other work)")
    sv.add_argument("--log", help="server log file (default: a temporary file)")
    sv.set_defaults(func=_cmd_serve)
