"""Mutators: an offline, deterministic code editor (not an LLM) and the Ollama / OpenAI-compatible LLM.

``OfflineMutator`` plugs into OpenEvolve through ``LLMModelConfig.init_client``. It reads the current
program from OpenEvolve's prompt, edits the linear scorer inside the EVOLVE-BLOCK and answers with
SEARCH/REPLACE diffs, as an LLM would: perturb weights, change the smoothing window, swap, add or remove
one of the 17 features, switch tokenwise and chunked selection. It is seeded by OpenEvolve's
per-iteration seed, so a run is deterministic for a seed, and a proposal depends only on that seed and
the program it edits (not on what happened to earlier children: a hang or a crash changes nothing next).
``adversarial`` > 0 makes it propose, with that probability, one of the reward hacks the paper met (keep
everything, duplicate or out-of-range indices, edit outside the EVOLVE-BLOCK) or a hang, a memory blow-up,
tampering or a network call, each tagged ``# hack: <name>`` so a run can show every one caught.
"""

from __future__ import annotations

import ast
import hashlib
import random
import re
from typing import Any

from ..methods.features import FEATURES
from .operators import structural_edit
from .seeds import SEEDS

OFFLINE_NAME = "offline-mutator (not an LLM)"
PROGRAM_RE = re.compile(r"# Current Program\n```[a-zA-Z]*\n(.*?)\n```", re.DOTALL)
LINE_RE = {name: re.compile(rf"^{name} = (.+)$", re.MULTILINE) for name in ("FEATURES", "WEIGHTS", "SMOOTH", "SELECTION")}
HACKS = ("keep_all", "duplicate", "out_of_range", "outside_block", "hang", "memory", "tamper", "network")


def parse_scorer(code: str) -> dict[str, Any] | None:
    """FEATURES, WEIGHTS, SMOOTH and SELECTION of a linear-scorer program (None if it is not one)."""
    out = {}
    for name, pattern in LINE_RE.items():
        match = pattern.search(code)
        if not match:
            return None
        try:
            out[name] = ast.literal_eval(match.group(1).split("#")[0].strip())
        except (ValueError, SyntaxError):
            return None
    return out


def _diff(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def _fmt(values: tuple) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def _normalise(weights: list[float]) -> tuple[float, ...]:
    total = sum(abs(w) for w in weights) or 1.0
    return tuple(round(w / total, 3) for w in weights)


def edit_scorer(code: str, rng: random.Random) -> tuple[str, str]:
    """One legitimate edit of the EVOLVE-BLOCK: (diff, description)."""
    s = parse_scorer(code)
    if s is None:
        raise ValueError("the current program is not a linear scorer this mutator can edit")
    feats, weights = list(s["FEATURES"]), list(s["WEIGHTS"])
    kind = rng.choice(["weights", "weights", "weights", "swap", "add", "remove", "smooth", "selection"])
    if kind == "remove" and len(feats) < 2:
        kind = "add"
    if kind == "weights":
        i = rng.randrange(len(weights))
        weights[i] = max(0.0, weights[i] * rng.uniform(0.6, 1.4) + rng.choice([-0.05, 0.05]))
        desc = f"perturb the weight of {feats[i]}"
    elif kind == "swap":
        i = rng.randrange(len(feats))
        new = rng.choice([f for f in FEATURES if f not in feats])
        desc, feats[i] = f"swap {feats[i]} for {new}", new
    elif kind == "add":
        new = rng.choice([f for f in FEATURES if f not in feats])
        feats.append(new)
        weights.append(0.1)
        desc = f"add {new}"
    elif kind == "remove":
        i = rng.randrange(len(feats))
        desc = f"remove {feats.pop(i)}"
        weights.pop(i)
    elif kind == "smooth":
        new_smooth = rng.choice([v for v in (1, 3, 5, 9) if v != s["SMOOTH"]])
        return _diff(LINE_RE["SMOOTH"].search(code).group(0), f"SMOOTH = {new_smooth}"), f"smoothing window {new_smooth}"
    else:
        other = "tokenwise" if s["SELECTION"] == "chunked" else "chunked"
        return (_diff(LINE_RE["SELECTION"].search(code).group(0), f'SELECTION = "{other}"'),
                f"switch to {other} selection")
    new_weights = _normalise(weights)
    diff = _diff(LINE_RE["FEATURES"].search(code).group(0) + "\n" + LINE_RE["WEIGHTS"].search(code).group(0),
                 f"FEATURES = {_fmt(tuple(feats))}\nWEIGHTS = {_fmt(new_weights)}")
    return diff, desc


def _function_text(code: str, name: str) -> str:
    """The exact source lines of a top-level function (for a SEARCH block)."""
    tree = ast.parse(code)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return "\n".join(code.splitlines()[node.lineno - 1 : node.end_lineno])


def hack(code: str, name: str) -> str:
    """A reward hack or abuse as a SEARCH/REPLACE diff, tagged ``# hack: <name>``."""
    tag = f"  # hack: {name}"
    select = _function_text(code, "select_tokens_to_keep")
    header = "def select_tokens_to_keep(scores, ctx):"
    bodies = {
        "keep_all": f"    return np.arange(ctx.L){tag}",  # the paper's: the [-k:] slice dropped
        "duplicate": f"    kept = topk_tokens(scores, ctx)\n    return np.concatenate([kept[:-1], kept[:1]]){tag}",
        "out_of_range": f"    return topk_tokens(scores, ctx) + ctx.L{tag}",
        "hang": f"    while True:{tag}\n        pass",
        "memory": f"    waste = np.ones(10**11){tag}\n    return topk_tokens(scores, ctx)",
        "tamper": f"    ctx.local_attn[:] = 1.0{tag}\n    return topk_tokens(scores, ctx)",
        "network": f"    import socket{tag}\n    socket.create_connection(('example.org', 80))\n    return topk_tokens(scores, ctx)",
    }
    if name == "outside_block":
        return _diff("import numpy as np", f"import numpy as np\nimport os{tag}")
    return _diff(select, f"{header}\n{bodies[name]}")


def repair(code: str) -> str | None:
    """Undo an earlier hack in ``code`` (a diff back to the seeds' selection), or None if it carries none.

    Invalid programs stay in OpenEvolve's database and can be sampled as parents; an LLM reads the
    INVALID artifact in its prompt and fixes the program, so the offline mutator does the same instead
    of stacking edits on a program that can never be valid.
    """
    if "# hack:" not in code:
        return None
    select = _function_text(code, "select_tokens_to_keep")
    if "# hack:" not in select:
        return None  # a hack outside the selection (e.g. an import) is reverted by OpenEvolve itself
    clean = _function_text(SEEDS["v5"].read_text(), "select_tokens_to_keep")  # every seed's selection
    return _diff(select, clean)


def propose(code: str, rng: random.Random, structural: bool = False) -> tuple[str, str]:
    """One legitimate proposal: a linear-scorer edit, or (``structural``) half the time a structural operator.
    Without ``structural`` the random draws are exactly the ones the mutator always made."""
    if structural and rng.random() < 0.5:
        scorer = parse_scorer(code)
        if scorer is None:
            raise ValueError("the current program is not a linear scorer this mutator can edit")
        return structural_edit(code, scorer, rng)
    return edit_scorer(code, rng)


def proposal_rng(seed: int | None, prompt: str) -> random.Random:
    """The random source of one proposal: OpenEvolve's per-iteration seed (from the run's seed and the
    iteration), else the prompt itself; never how many calls this process has served, which a restarted
    worker or an earlier failure would change."""
    if seed is not None:
        return random.Random(f"{seed}:0")
    return random.Random(hashlib.sha256(prompt.encode()).hexdigest())


class OfflineMutator:
    """OpenEvolve LLM interface without an LLM: deterministic code edits from the per-iteration seed."""

    def __init__(self, model_cfg: Any = None, adversarial: float = 0.0, structural: bool = False) -> None:
        self.model_cfg = model_cfg
        self.adversarial = adversarial
        self.structural = structural  # opt-in: also the structural operators (operators.py); off = as before
        self.last_usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self.calls = 0

    async def generate(self, prompt: str, **kwargs: Any) -> str:
        return await self.generate_with_context("", [{"role": "user", "content": prompt}], **kwargs)

    async def generate_with_context(self, system_message: str, messages: list[dict[str, str]], **kwargs: Any) -> str:
        self.calls += 1
        text = messages[-1]["content"]
        match = PROGRAM_RE.search(text)
        if not match:
            return "I cannot find the current program in the prompt."
        code = match.group(1)
        rng = proposal_rng(kwargs.get("seed"), text)
        fix = repair(code)
        if fix is not None:
            return "Proposed change: repair the selection the evaluator rejected as INVALID\n\n" + fix
        if self.adversarial and rng.random() < self.adversarial:
            name = rng.choice(HACKS)
            return f"Proposed change: {name} (adversarial test)\n\n" + hack(code, name)
        diff, desc = propose(code, rng, self.structural)
        return f"Proposed change: {desc}\n\n{diff}"


STRUCTURAL_TAG = " structural"


def _mode(model_cfg: Any) -> float:
    name = str(getattr(model_cfg, "name", ""))
    match = re.search(r"adversarial=([0-9.]+)", name)
    return float(match.group(1)) if match else 0.0


def _structural(model_cfg: Any) -> bool:
    return STRUCTURAL_TAG.strip() in str(getattr(model_cfg, "name", "")).split()


def init_offline_client(model_cfg: Any) -> OfflineMutator:
    """OpenEvolve ``init_client`` factory (module-level, so it pickles into worker processes); the mode
    travels in the model's name (``adversarial=p``, ``structural``)."""
    return OfflineMutator(model_cfg, adversarial=_mode(model_cfg), structural=_structural(model_cfg))


SYSTEM_MESSAGE = """You improve a KV-cache eviction policy for long-context LLM inference (CacheCraft).

The program defines two functions over a per-layer feature context `ctx`:
  score_tokens(ctx) -> numpy array of L scores (higher = keep)
  select_tokens_to_keep(scores, ctx) -> integer indices of the tokens to keep
`ctx[name]` (or `ctx.name`) gives one of 17 read-only float32 arrays of length L: local_attn (attention from the
last 32 queries), global_attn (from the last 64), density (global_attn averaged over a window of Wd tokens),
max_head (the most attentive KV head), head_consistency, head_concentration, last_query_attn, query_variance,
key_norm, key_change, value_norm, chunk_mean, chunk_rank, position, rel_position, sink_mask, recent_mask.
Scalars: ctx.L (tokens), ctx.K (tokens to keep), ctx.H (KV heads), ctx.Q (queries), ctx.layer.
Helpers you may import from cachecraft_lib.policy: maxabs (x / max|x|), topk_tokens(scores, ctx) (exactly K tokens),
topk_chunks(scores, ctx) (whole chunks of 20 tokens). Allowed imports: numpy, math, functools, itertools.

Rules, checked outside your program (a violation makes it INVALID, not low-scoring):
- keep exactly K tokens (tokenwise) or exactly the rule's number of whole 20-token chunks (chunked);
- indices unique, integers, within [0, L); do not modify ctx; no files, no network; finish within seconds.
- Only edit between `# EVOLVE-BLOCK-START` and `# EVOLVE-BLOCK-END`; anything outside is reverted.
Fitness = 0.25*S1 + 0.75*S2, RULER accuracy under compression on two data slices (S1 gates at a threshold).
Answer with SEARCH/REPLACE diffs of the current program."""
