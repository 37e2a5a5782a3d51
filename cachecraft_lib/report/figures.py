"""One look for every figure and one writer for every table.

``savefig(name)`` writes ``figures/<name>.png`` and ``.pdf``; ``save_table(df, name)`` writes
CSV, Markdown and LaTeX; ``save_samples(df, name)`` writes the per-sample scores a notebook's tables are
computed from to ``figures/samples/<name>.csv.gz`` (compact, byte-stable, with models by name, not folder), so
a reader can recompute any interval from the repository. Notebooks use nothing else, so a whole reproduction
lands in one folder with the paper's names (``fig_ruler_vs_ratio``, ``table_ruler_r088``, ...).
"""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path, PurePath

import matplotlib.pyplot as plt
import pandas as pd

from ..paths import figures_dir, use_profile

__all__ = ["METHOD_COLORS", "save_table", "savefig", "set_style", "save_samples", "to_markdown", "use_profile"]

_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
METHOD_COLORS = {"frc": "#d62728", "chunkkv": "#1f77b4", "snapkv": "#2ca02c", "adasnapkv": "#9467bd",
                 "finch": "#8c564b", "expected_attention": "#ff7f0e", "no_press": "#7f7f7f",
                 "streaming_llm": "#bcbd22", "knorm": "#17becf", "tova": "#e377c2", "pyramidkv": "#aec7e8"}


def set_style() -> None:
    """The suite's figure style: seaborn whitegrid, paper-sized fonts, no top/right spines."""
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper", font_scale=1.15)
    plt.rcParams.update({"figure.figsize": (6.4, 4.0), "figure.dpi": 110, "savefig.dpi": 150,
                         "axes.spines.top": False, "axes.spines.right": False, "savefig.bbox": "tight"})


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"figure/table name {name!r} must be a plain file stem (letters, digits, _ . -)")
    return name


def savefig(name: str, fig: plt.Figure | None = None, out_dir: str | Path | None = None,
            label: str | None = None) -> list[Path]:
    """Save ``fig`` (default: the current figure) as PNG and PDF; ``label`` is stamped in a corner.

    ``label`` says where the numbers come from (e.g. "embedded tiny model, offline RULER"), so a
    figure of the stand-in model can never pass for the paper's.
    """
    fig = fig or plt.gcf()
    out = Path(out_dir) if out_dir else figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    if label:
        fig.text(0.99, -0.01, label, ha="right", va="top", fontsize=7, color="#555555")  # below the axes
    paths = []
    for ext in ("png", "pdf"):
        path = out / f"{_check_name(name)}.{ext}"
        fig.savefig(path, metadata={"CreationDate": None} if ext == "pdf" else None)
        paths.append(path)
    return paths


def to_markdown(df: pd.DataFrame, floatfmt: str = ".2f") -> str:
    """A GitHub-flavoured Markdown table (no extra dependency)."""
    def cell(v: object) -> str:
        if v is pd.NA:
            return ""
        if isinstance(v, float):
            return "" if pd.isna(v) else format(v, floatfmt)
        return str(v).replace("|", "\\|")

    frame = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df
    header = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def save_table(df: pd.DataFrame, name: str, out_dir: str | Path | None = None, caption: str | None = None,
               label: str | None = None, floatfmt: str = ".2f") -> list[Path]:
    """Write ``df`` as CSV, Markdown and LaTeX; ``label`` (data source) goes under the table in each."""
    out = Path(out_dir) if out_dir else figures_dir()
    out.mkdir(parents=True, exist_ok=True)
    stem = out / _check_name(name)
    df.to_csv(f"{stem}.csv")
    md = (f"**{caption}**\n\n" if caption else "") + to_markdown(df, floatfmt) + (f"\n_{label}_\n" if label else "")
    Path(f"{stem}.md").write_text(md)
    frame = df.reset_index() if not isinstance(df.index, pd.RangeIndex) else df
    latex = frame.to_latex(index=False, float_format=lambda v: format(v, floatfmt), escape=True,
                           caption=" ".join(x for x in (caption, f"({label})" if label else None) if x) or None,
                           label=f"tab:{name}")
    Path(f"{stem}.tex").write_text(latex)
    return [Path(f"{stem}.{ext}") for ext in ("csv", "md", "tex")]


def portable_model(model: object) -> str:
    """A model as a reader's checkout names it: a local folder by its name, a hub id unchanged."""
    text = str(model)
    return PurePath(text).name if PurePath(text).is_absolute() else text


def save_samples(df: pd.DataFrame, name: str, out_dir: str | Path | None = None) -> Path:
    """Write per-sample scores as ``samples/<name>.csv.gz`` beside the tables (gzip without a timestamp, so
    the same scores give the same bytes); a ``model`` column is written by name (``portable_model``)."""
    out = (Path(out_dir) if out_dir else figures_dir()) / "samples"
    out.mkdir(parents=True, exist_ok=True)
    frame = df.assign(model=df.model.map(portable_model)) if "model" in df.columns else df
    text = frame.to_csv(index=False, lineterminator="\n")
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
        gz.write(text.encode())
    path = out / f"{_check_name(name)}.csv.gz"
    path.write_bytes(buffer.getvalue())
    return path
