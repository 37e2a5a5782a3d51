"""The embedded model's training recipe: curriculum stages, learning-rate schedule, and loading or extending a recipe."""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field, replace
from itertools import pairwise
from pathlib import Path

from ..ruler.templates import TASKS

SHIPPED_BUDGET_MB = 20.0  # weights and tokenizer of the model shipped in data/models/ (float32 safetensors)
NIAH_TASKS = tuple(t for t in TASKS if t.startswith("niah"))
# context lengths of the refine cycles from step 7400 on: more of them at the cpu profile's longer 2048
REFINE_LENGTHS = (768, 1024, 1536, 2048, 2048, 2200)


@dataclass(frozen=True)
class Stage:
    """One curriculum stage: up to step ``until`` (exclusive), which tasks, which lengths.

    ``weights`` (one per task) oversample the tasks the model still fails; ``dense_qa`` adds questions
    about the other documents of a QA context, dense supervision as NIAH's extra questions give.
    ``ordered_sets`` writes answers that form a set (the values of niah_multivalue, the words of cwe)
    in the order they appear in the context: RULER's order is a shuffle the context does not show, so
    the model could only guess it.
    ``set_orders`` adds that many more blocks asking a set-answer question again, each with the answer
    in another random order (RULER scores sets by recall, in any order): each is a context the model
    already paid for, supervised at every item to pick one not yet written.
    ``unlikelihood`` (a loss weight; 0 = off) adds, wherever an answer lists several items, the loss
    ``-log(1 - p)`` on each token that would continue the item being written into one already written
    (Welleck et al.'s unlikelihood training): the cross-entropy alone only says which item comes next,
    never that the one just written is wrong.
    """

    until: int
    tasks: tuple[str, ...]
    lengths: tuple[int, ...]
    weights: tuple[float, ...] | None = None
    dense_qa: bool = False
    ordered_sets: bool = False
    set_orders: int = 0
    unlikelihood: float = 0.0

    def pick_task(self, tasks: list[str], rng: random.Random) -> str:
        if self.weights is None:
            return rng.choice(tasks)
        by_task = dict(zip(self.tasks, self.weights, strict=True))
        return rng.choices(tasks, weights=[by_task[t] for t in tasks])[0]


@dataclass
class Recipe:
    """Everything that defines the embedded model and its training run (saved in the model card)."""

    name: str = "tiny-ruler-llama"
    vocab_size: int = 4096
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 8
    num_kv_heads: int = 4
    intermediate_size: int = 640
    rope_theta: float = 10000.0
    max_position_embeddings: int = 4096
    seed: int = 1234
    steps: int = 12200
    batch_tokens: int = 4096
    lr: float = 1.5e-3
    warmup: int = 150
    lr_decay_steps: int = 12000  # cosine horizon; the base run ends earlier with a linear cooldown (WSD-style)
    cooldown: int = 900
    base_steps: int = 5000  # end of the base run (lr 0); refine cycles follow up to ``steps``
    refine_ends: tuple[int, ...] = (7400, 9200, 10000, 10800, 11600)  # refine cycles that end before ``steps`` (each anneals to 0)
    refine_lr: float = 6e-4
    refine_warmup: int = 100
    refine_cooldown: int = 500
    context_loss_weight: float = 0.1  # loss weight of a context token (answer tokens weigh 1): the context carries little signal
    # why each refine cycle weights its tasks as it does: docs/journal/embedded_model_journal.md
    stages: tuple[Stage, ...] = field(default_factory=lambda: (
        # short contexts full of needles first: the copy-from-context circuit forms where the signal is dense
        Stage(1200, ("niah_multikey_2", "niah_single_1", "niah_multikey_1", "niah_multivalue"), (256, 320, 384, 512)),
        Stage(2500, NIAH_TASKS, (320, 384, 512, 768, 1024)),
        Stage(3900, TASKS, (384, 512, 768, 1024, 1536, 2048)),
        Stage(5000, TASKS, (768, 1024, 1024, 1536, 2048, 2048, 2200)),
        # refine cycles 1 to 6: the tasks the checkpoint before each still failed most often, QA with dense questions
        Stage(7400, TASKS, (768, 1024, 1024, 1536, 2048, 2048, 2200),
              weights=(0.5, 0.5, 0.5, 1.0, 1.5, 1.5, 1.5, 1.5, 2.0, 1.0, 0.5, 2.0, 2.0), dense_qa=True),
        Stage(9200, TASKS, REFINE_LENGTHS,
              weights=(0.5, 0.5, 0.5, 0.5, 2.0, 1.0, 1.5, 1.0, 2.5, 2.5, 1.0, 1.5, 2.5), dense_qa=True),
        Stage(10000, TASKS, REFINE_LENGTHS,
              weights=(0.5, 0.5, 0.5, 0.5, 1.0, 1.5, 3.0, 1.5, 1.5, 3.0, 1.0, 1.0, 1.5), dense_qa=True),
        Stage(10800, TASKS, REFINE_LENGTHS,
              weights=(0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 3.5, 2.5, 1.0, 1.5, 0.75, 1.0, 1.0), dense_qa=True),
        # shorter contexts, so more steps fit an hour
        Stage(11600, TASKS, (512, 768, 1024, 1024, 1536, 2048),
              weights=(0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 3.0, 3.0, 2.0, 2.0, 1.5, 0.75, 1.0), dense_qa=True),
        # the long lengths only
        Stage(12200, TASKS, (1024, 1536, 2048, 2048, 2200),
              weights=(0.5, 0.5, 1.0, 0.5, 2.0, 2.5, 2.0, 2.0, 1.5, 1.0, 1.0, 1.5, 1.5), dense_qa=True),
    ))

    def scaled(self, steps: int) -> Recipe:
        """The same recipe squeezed or stretched to ``steps`` (stage ends, cosine and cooldown in proportion)."""
        f = steps / self.steps
        stages = tuple(replace(s, until=max(1, round(s.until * f))) for s in self.stages)
        def k(n: int) -> int:
            return max(1, round(n * f))

        return replace(self, steps=steps, stages=stages, warmup=k(self.warmup), lr_decay_steps=k(self.lr_decay_steps),
                       cooldown=k(self.cooldown), base_steps=k(self.base_steps),
                       refine_ends=tuple(k(e) for e in self.refine_ends), refine_warmup=k(self.refine_warmup),
                       refine_cooldown=k(self.refine_cooldown))


def stage_at(recipe: Recipe, step: int) -> Stage:
    """The stage that step ``step`` draws its batch from (the last one past the end)."""
    return next((s for s in recipe.stages if step < s.until), recipe.stages[-1])


def lr_at(recipe: Recipe, step: int) -> float:
    """Base run: warmup, cosine over ``lr_decay_steps`` (floor 10%), then a linear cooldown to 0 at
    ``base_steps``: the run can end before the cosine horizon and still anneal. Refine cycles after it,
    ending at each of ``refine_ends`` and then at ``steps``: re-warm to ``refine_lr``, hold, cool down
    linearly to 0 (further WSD cycles, so every cycle's end is a finished model)."""
    if step >= recipe.base_steps:
        if not refine_cycles(recipe):  # the base run is the whole run, and it has ended
            return 0.0
        start, end = _refine_cycle(recipe, step)
        warm = min(1.0, (step - start + 1) / max(recipe.refine_warmup, 1))
        cool = min(1.0, max(end - step, 0) / max(recipe.refine_cooldown, 1))
        return recipe.refine_lr * warm * cool
    if step < recipe.warmup:
        return recipe.lr * (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(recipe.lr_decay_steps - recipe.warmup, 1)
    cosine = recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))
    return cosine * min(1.0, max(recipe.base_steps - step, 0) / max(recipe.cooldown, 1))


def refine_cycles(recipe: Recipe) -> list[tuple[int, int]]:
    """(first step, end step) of each refine cycle after the base run; empty when there is none."""
    if recipe.base_steps >= recipe.steps:
        return []
    ends = [e for e in recipe.refine_ends if recipe.base_steps < e < recipe.steps]
    return list(pairwise((recipe.base_steps, *ends, recipe.steps)))


def _refine_cycle(recipe: Recipe, step: int) -> tuple[int, int]:
    """(first step, end step) of the refine cycle that ``step`` belongs to."""
    cycles = refine_cycles(recipe)
    return next((c for c in cycles if step < c[1]), cycles[-1])


def recipe_json(recipe: Recipe) -> dict:
    """``recipe`` as plain JSON data (tuples as lists), as ``trainer_state.json`` and ``--print-recipe`` hold it."""
    return json.loads(json.dumps(asdict(recipe)))


def recipe_from_json(data: dict) -> Recipe:
    """The ``Recipe`` stored in a ``trainer_state.json`` (lists back to tuples)."""
    def tup(d: dict) -> dict:
        return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}

    return Recipe(**{**tup(data), "stages": tuple(Stage(**tup(st)) for st in data["stages"])})


def load_recipe(path: str | Path) -> Recipe:
    """The shipped ``Recipe`` with the fields of a JSON file over it: a larger model or batch for a GPU,
    say ``{"num_layers": 8, "batch_tokens": 32768}``. ``stages``, when given, replaces all stages. A
    ``trainer_state.json`` gives the recipe stored in it, to resume a run trained under its own recipe.
    Raises ``ValueError`` saying what is wrong (unreadable JSON, an unknown field, a bad value)."""
    try:
        overrides = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"recipe file {path}: {err}; write a JSON object of Recipe fields "
                         f"(cachecraft train-tiny --print-recipe prints them all)") from err
    if not isinstance(overrides, dict):
        raise ValueError(f"recipe file {path}: expected a JSON object of Recipe fields, got {type(overrides).__name__}")
    if isinstance(overrides.get("recipe"), dict) and "step" in overrides:  # a trainer_state.json
        overrides = overrides["recipe"]
    known = set(recipe_json(Recipe()))
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"recipe file {path}: unknown field(s) {unknown}; known: {sorted(known)}")
    try:
        recipe = recipe_from_json({**recipe_json(Recipe()), **overrides})
    except TypeError as err:
        raise ValueError(f"recipe file {path}: a stage is malformed ({err}); each stage needs "
                         f"until, tasks and lengths") from err
    ends = [s.until for s in recipe.stages]
    if ends != sorted(ends) or ends[-1] < recipe.steps:
        raise ValueError(f"recipe file {path}: stage ends must not decrease and the last must reach steps "
                         f"({recipe.steps}); to stretch the shipped stages to another length, use --steps instead")
    uneven = [st.until for st in recipe.stages if st.weights is not None and len(st.weights) != len(st.tasks)]
    if uneven:
        raise ValueError(f"recipe file {path}: the stage(s) ending at {uneven} need one weight per task")
    unknown_tasks = sorted({t for st in recipe.stages for t in st.tasks} - set(TASKS))
    if unknown_tasks:
        raise ValueError(f"recipe file {path}: unknown task(s) {unknown_tasks}; RULER's tasks are {list(TASKS)}")
    return recipe


def extends(new: Recipe, old: Recipe, done: int) -> bool:
    """True when ``new`` trains the first ``done`` steps exactly as ``old`` did: same model, data and
    learning rate for each of them. Such a recipe (a cycle appended, a later stage changed) may resume."""
    def model_part(r: Recipe) -> Recipe:
        return replace(r, steps=0, stages=(), refine_ends=())

    def data(r: Recipe, step: int) -> Stage:  # what a step draws from (a stage's end is not part of it)
        return replace(stage_at(r, step), until=0)

    return (model_part(new) == model_part(old) and new.steps >= done
            and all(lr_at(new, s) == lr_at(old, s) and data(new, s) == data(old, s) for s in range(done)))


def resumable(recipe: Recipe, state: dict) -> bool:
    """``recipe`` may continue the run in ``state`` (a recipe from another version of this code is not)."""
    try:
        stored = recipe_from_json(state["recipe"])
    except (TypeError, KeyError):  # fields this version does not know, or a damaged state file
        return False
    return extends(recipe, stored, state["step"])
