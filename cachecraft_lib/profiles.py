"""Named scales for every notebook and command: ``smoke`` (CI), ``cpu`` (default), ``gpu`` (the embedded model on
one GPU), ``paper`` (the paper's models on GPUs).

A notebook's ``parameters`` cell names a profile; every size it uses comes from here, so one
switch moves the whole suite between the embedded model on a laptop and the paper's grid.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .models.names import INSTRUCT_DIR, TINY_DIR, is_embedded, is_instruct, model_label, resolve

EMBEDDED_MODEL = str(TINY_DIR)
INSTRUCT_MODEL = str(INSTRUCT_DIR)  # SmolLM2-135M-Instruct after `cachecraft fetch-instruct`; select with models=
PAPER_MODELS = ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B")
PAPER_RATIOS = (0.25, 0.50, 0.75, 0.80, 0.88)
PAPER_METHODS = ("frc", "chunkkv", "snapkv", "adasnapkv", "finch", "expected_attention")
# what the gpu profile's CPU stand-in (``gpu_standin``) takes from the smoke profile, so every notebook runs in CI's
# minutes; everything else (name, model, dtype, boards, figure folder) stays the gpu profile's
STANDIN_SIZES = ("lengths", "ratios", "methods", "samples_per_task", "tasks", "max_new_tokens", "latency_lengths",
                 "latency_repeats", "search_iterations")
STANDIN_EXTRAS = ("search_stage_samples", "board_search")


@dataclass(frozen=True)
class Profile:
    """One scale of the suite. ``embedded`` marks results that come from the stand-in model."""

    name: str
    description: str
    models: tuple[str, ...]
    lengths: tuple[int, ...]
    ratios: tuple[float, ...]
    methods: tuple[str, ...]
    samples_per_task: int | None  # None = the full 500 per task
    tasks: tuple[str, ...] | None = None  # None = all 13 RULER tasks (grid, decomposition, search)
    max_new_tokens: int | None = None  # None = each row's own (128/30/120/50/32)
    ruler_source: str = "auto"  # auto | hf | offline
    embedded: bool = False
    seed: int = 42
    device: str | None = None  # None = cuda if available, else cpu
    dtype: str = "auto"
    query_aware: bool = False
    feature_queries: int = 64  # Q: tail queries of the shared attention pass
    feature_window: int = 32  # W: the "local" window of the last queries
    latency_lengths: tuple[int, ...] = ()
    latency_repeats: int = 10
    search_iterations: int = 0
    extras: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def label(self) -> str:
        """How results of this profile are labelled in tables and figures."""
        if "label" in self.extras:
            return str(self.extras["label"])
        if self.embedded and not any(is_instruct(m) for m in self.models):
            return f"embedded tiny model ({self.name} profile), not the paper's models"
        return f"{', '.join(model_label(m) for m in self.models)} ({self.name} profile)"


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke", description="CI scale: minutes on two CPU cores; checks that everything runs",
        models=(EMBEDDED_MODEL,), lengths=(1024, 2048), ratios=(0.5, 0.88), methods=("frc", "snapkv", "chunkkv"),
        samples_per_task=1, tasks=("niah_single_1", "niah_multikey_2", "vt", "qa_1"), max_new_tokens=12,
        ruler_source="offline", embedded=True, device="cpu", dtype="float32",
        latency_lengths=(1024,), latency_repeats=2, search_iterations=3,
        extras={"search_stage_samples": (1, 1), "board_search": (2, 3)}),
    "cpu": Profile(
        name="cpu", description="default main job: the embedded model on two CPU cores, the paper's grid shape",
        models=(EMBEDDED_MODEL,), lengths=(1024, 2048), ratios=PAPER_RATIOS, methods=PAPER_METHODS,
        samples_per_task=12, ruler_source="offline", embedded=True, device="cpu", dtype="float32",
        latency_lengths=(1024, 2048), latency_repeats=10, search_iterations=100,
        extras={"search_stage_samples": (1, 2), "board_search": (14, 8)}),  # the goal run (docs/board_fitness.md)
    "gpu": Profile(
        name="gpu", description="the embedded model on one GPU: every notebook in minutes at sample sizes that "
                                "resolve what the cpu profile cannot (docs/running_on_a_gpu.md)",
        models=(EMBEDDED_MODEL,), lengths=(1024, 2048), ratios=PAPER_RATIOS, methods=PAPER_METHODS,
        samples_per_task=100, ruler_source="offline", embedded=True, device="cuda", dtype="float32",
        latency_lengths=(1024, 2048), latency_repeats=20, search_iterations=100,
        extras={"search_stage_samples": (2, 4), "board_search": (14, 8), "label": "gpu profile, embedded stand-in"}),
    # its arena boards: arena/boards/gpu.yaml (4x the cpu profile's dev contexts per task)
    "paper": Profile(
        name="paper", description="the paper's grid on a GPU with Hugging Face access",
        models=PAPER_MODELS, lengths=(4096, 8192), ratios=PAPER_RATIOS, methods=PAPER_METHODS,
        samples_per_task=None, ruler_source="hf", embedded=False, device="cuda", dtype="bfloat16",
        latency_lengths=(4096, 8192), latency_repeats=100, search_iterations=25,
        extras={"search_stage_samples": (10, 25), "search_seeds": 3}),  # the paper's fractions 0.02 and 0.05 of 500 per task
}


GPU_STANDIN_ENV = "CACHECRAFT_GPU_STANDIN"


def gpu_standin() -> bool:
    """True when ``$CACHECRAFT_GPU_STANDIN`` is set (not "" or "0"): the ``gpu`` profile then runs on the CPU at
    the smoke profile's sizes, keeping its name, boards, figure folder and code paths (tests/test_gpu_profile.py)."""
    return os.environ.get(GPU_STANDIN_ENV, "") not in ("", "0")


def board_data_profile(profile: str) -> str:
    """Whose arena board data a profile reads: its own, except the ``gpu`` stand-in, which reads the smoke boards."""
    return "smoke" if profile == "gpu" and gpu_standin() else profile


def _standin(profile: Profile) -> Profile:
    """The gpu profile on the CPU at the smoke profile's sizes (``STANDIN_SIZES``), labelled as such."""
    smoke = PROFILES["smoke"]
    extras = {**profile.extras, **{k: smoke.extras[k] for k in STANDIN_EXTRAS},
              "label": f"{profile.extras['label']} (CPU stand-in sizes)"}
    return replace(profile, **{k: getattr(smoke, k) for k in STANDIN_SIZES}, device="cpu", extras=extras)


def get_profile(name: str | Profile, **overrides: Any) -> Profile:
    """The named profile, with any field overridden (unknown fields are an error, not ignored).

    ``models`` may name aliases (``"smollm2"``, ``"tiny"``): they become folders, and unless ``embedded`` is
    given too it follows the models, so a real model's results are not marked as the stand-in's.
    """
    if isinstance(name, Profile):
        profile = name
    else:
        if name not in PROFILES:
            raise ValueError(f"unknown profile {name!r}; choose one of {sorted(PROFILES)}")
        profile = PROFILES[name]
        if name == "gpu" and gpu_standin():
            profile = _standin(profile)
    unknown = set(overrides) - set(Profile.__dataclass_fields__)
    if unknown:
        raise ValueError(f"unknown profile field(s) {sorted(unknown)}; known: {sorted(Profile.__dataclass_fields__)}")
    overrides = {k: tuple(v) if isinstance(v, list) else v for k, v in overrides.items()}
    if "models" in overrides:
        models = overrides["models"]
        overrides["models"] = tuple(resolve(m) for m in ([models] if isinstance(models, str) else models))
        overrides.setdefault("embedded", all(is_embedded(m) for m in overrides["models"]))
    return replace(profile, **overrides)
