"""Ray plumbing shared by the grid (``grid/ray_runner.py``) and the arena (``arena/ray_eval.py``).

What both need: Ray as an optional extra with a clear message when it is missing; what one task asks for (one
GPU on CUDA, else some CPUs); a session that starts a local cluster only when none is running and shuts down
only what it started; a wait loop with a progress bar; and a Ctrl-C that cancels the work, keeps what is
finished and leaves no Ray process behind.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

from .progress import tqdm

INSTALL_HINT = 'Ray is not installed: pip install -e ".[ray]"  (or: pip install "ray==2.60.0")'
POLL_S = 1.0


class RayMissing(RuntimeError):
    """``--ray`` without Ray installed; the message says how to install it."""


def require_ray() -> Any:
    """The ``ray`` module, or ``RayMissing`` with the command that installs it."""
    try:
        import ray
    except ImportError:
        raise RayMissing(INSTALL_HINT) from None
    return ray


def task_resources(device: str | None, cluster: dict[str, float], cpus_per_task: float,
                   what: str = "the grid") -> dict[str, float]:
    """What one task asks Ray for: one GPU when the work runs on CUDA (``device`` "cuda", or None on a cluster
    that has GPUs), else ``cpus_per_task`` CPUs. CUDA work on a cluster without GPUs is an error."""
    if cpus_per_task <= 0:
        raise ValueError(f"cpus_per_task must be > 0, got {cpus_per_task}")
    gpus = cluster.get("GPU", 0)
    wants_gpu = (device or "").startswith("cuda") or (device is None and gpus > 0)
    if wants_gpu and gpus < 1:
        raise ValueError(f"{what} runs on {device or 'cuda'} but the Ray cluster has no GPU "
                         f"(resources: {cluster}); connect to a cluster with GPUs or run a CPU profile")
    return {"num_gpus": 1, "num_cpus": cpus_per_task} if wants_gpu else {"num_cpus": cpus_per_task}


@contextmanager
def ray_session(address: str | None = None) -> Iterator[Any]:
    """``ray`` connected to a cluster: ``address`` None starts a local one on this machine (no dashboard)
    unless Ray is already initialised; "auto" or "ray://host:10001" joins an existing one. Only a session
    started here is shut down on exit (an existing cluster keeps running; its workers are its own)."""
    ray = require_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address=address) if address else ray.init(include_dashboard=False)
    try:
        yield ray
    finally:
        if started:
            with _sigint_ignored():  # a second Ctrl-C must not leave the local cluster half shut down
                ray.shutdown()


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to protect
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class Tracker:
    """A Ray actor (``ray.remote(num_cpus=0)(Tracker)``) that counts settled units by key, so a retried task
    does not count its units twice."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def settled(self, key: str) -> None:
        self.keys.add(key)

    def count(self) -> int:
        return len(self.keys)


def collect(ray: Any, refs: dict[Any, Hashable], total: int, count: Callable[[], int], desc: str,
            progress: bool = True, on_interrupt: Callable[[], None] | None = None,
            resume_hint: str = "finished work is saved; run the same command to resume"
            ) -> tuple[dict[Hashable, Any], dict[Hashable, str]]:
    """Wait for every ref (``{ref: what it computes}``) with a bar over ``count()`` of ``total`` units.

    Returns ({what: result}, {what: reason}) for the refs that finished and those whose task failed as a whole
    (a Ray error: the worker died beyond its retries, the task raised). On Ctrl-C: force-cancels the pending
    tasks (or calls ``on_interrupt`` instead, e.g. to kill actors), says what is kept on stderr, and re-raises
    ``KeyboardInterrupt`` for the caller's session to shut down.
    """
    results: dict[Hashable, Any] = {}
    errors: dict[Hashable, str] = {}
    bar = tqdm(total=total, desc=desc, disable=not progress)
    pending = list(refs)
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
            for ref in ready:
                try:
                    results[refs[ref]] = ray.get(ref)
                except ray.exceptions.RayError as err:
                    errors[refs[ref]] = f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"
            bar.update(count() - bar.n)
    except KeyboardInterrupt:
        with _sigint_ignored():
            bar.close()
            print("\ninterrupted: cancelling the Ray tasks ...", file=sys.stderr, flush=True)
            if on_interrupt is None:
                for ref in pending:
                    ray.cancel(ref, force=True)
            else:  # e.g. actors, whose calls Ray cannot force-cancel: they are killed instead
                on_interrupt()
            print(f"interrupted: Ray tasks cancelled; {resume_hint}", file=sys.stderr, flush=True)
        raise
    bar.close()
    return results, errors
