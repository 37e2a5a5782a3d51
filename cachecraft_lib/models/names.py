"""Model names, aliases and labels, without importing torch (profiles and the CLI start fast).

Two local folders live under ``data/models``: the embedded stand-in (``tiny``), trained here, and the
converted SmolLM2-135M-Instruct (``smollm2``), a real instruct LLM made by ``cachecraft fetch-instruct``.
Results of either must say they are not the paper's models; ``model_label`` says which one they are.
"""

from __future__ import annotations

from pathlib import Path

from ..paths import MODELS

TINY_DIR = MODELS / "tiny-ruler-llama"
INSTRUCT_DIR = MODELS / "smollm2-135m-instruct"
INSTRUCT_NAME = "SmolLM2-135M-Instruct"
INSTRUCT_LABEL = f"{INSTRUCT_NAME} (real 135M model, not the paper's)"
EMBEDDED_LABEL = "embedded tiny model, not the paper's models"
PROVENANCE = "cachecraft_fetch.json"  # written by fetch-instruct into the converted folder

ALIASES: dict[str, Path] = {
    "tiny": TINY_DIR, "tiny-ruler-llama": TINY_DIR,
    "smollm2": INSTRUCT_DIR, "smollm2-135m-instruct": INSTRUCT_DIR, INSTRUCT_NAME: INSTRUCT_DIR,
}


def resolve(name_or_path: str | Path) -> str:
    """An alias, a local folder, or a Hugging Face id (returned unchanged)."""
    if str(name_or_path) in ALIASES:
        return str(ALIASES[str(name_or_path)])
    return str(name_or_path)


def _folder(name_or_path: str | Path) -> Path | None:
    try:
        return Path(resolve(name_or_path)).resolve()
    except OSError:
        return None


def is_instruct(name_or_path: str | Path) -> bool:
    """True for the converted SmolLM2-135M-Instruct: its alias, its folder, or any folder fetch-instruct wrote."""
    folder = _folder(name_or_path)
    if folder is None:
        return False
    return folder == INSTRUCT_DIR.resolve() or (folder / PROVENANCE).is_file()


def is_embedded(name_or_path: str | Path) -> bool:
    """True for the embedded stand-in model (a folder under data/models that is not the real instruct model)."""
    folder = _folder(name_or_path)
    if folder is None:
        return False
    return folder.parent == MODELS.resolve() and not is_instruct(folder)


def model_label(name_or_path: str | Path) -> str:
    """How one model is named in tables and figures: the stand-in and the 135M model say they are not the paper's."""
    if is_instruct(name_or_path):
        return INSTRUCT_LABEL
    if is_embedded(name_or_path):
        return EMBEDDED_LABEL
    return str(name_or_path).rstrip("/").split("/")[-1]
