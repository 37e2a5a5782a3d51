"""The reproduction as a DVC pipeline: one stage per notebook (per board for notebook 08), written to ``dvc.yaml``.

Each stage depends on its notebook, the library modules the notebook can reach and the files they read
(``pipeline_deps``), the profile's model, and the committed outputs of another notebook that its cells name
(``pipeline_reads``); its outputs are the committed files it writes (``pipeline_outs``) and those another
notebook reads (even before their first commit), kept in git (``cache: false``). ``dvc.lock`` records their hashes,
so ``dvc status`` (``make check-figures``) says which outputs are stale and why, and ``dvc repro``
(``make reproduce``) reruns only those notebooks, through ``cachecraft reproduce --only``.

Regenerate after adding a notebook or an import: ``python -m cachecraft_lib.report.pipeline`` (``make pipeline``);
``--check`` exits non-zero when ``dvc.yaml`` is not what the source implies (a test runs it).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import NOTEBOOKS, REPO
from .pipeline_deps import data_files, module_files, notebook_modules, tracked_files
from .pipeline_outs import notebook_outputs
from .pipeline_reads import notebook_reads

# a round's record (search.round_replay.RECORD_SUFFIXES; a copy, since report must not import search: the
# house allows search -> report only; tests/test_round_replay.py keeps the two equal)
RECORD_SUFFIXES = ("_ledger.jsonl", "_ledger.pub", "_revealed_secret.txt")

PROFILE = "cpu"  # the profile whose outputs are committed (paths.COMMITTED_PROFILE)
FIGURES_SAMPLES = "figures/samples"
DVC_YAML = "dvc.yaml"
HEADER = ("# Written by `make pipeline` (python -m cachecraft_lib.report.pipeline) from the notebooks' imports: do not\n"
          "# edit by hand. docs/reproducing.md says what the stages are and how `make check-figures` reads them.\n")

# outputs that are measurements: a rerun records new timings, never the same bytes
MEASUREMENTS = {"06_latency": "latency measured on this machine: a rerun records new timings"}
# notebook 08 runs one arena round per board. A round whose secret is revealed (its record committed: ledger, key,
# secret) is replayed: the stage reruns the same plan with that secret (search.round_replay), its record is a
# dependency and its tables come out byte for byte. A round without a revealed secret cannot be regenerated (a rerun
# would draw a fresh secret, a new study): its stage is frozen (`dvc repro` leaves it; the check verifies its bytes)
BOARD_PARAMETER = {"08_search_in_the_arena": ("BOARD", "A")}
ROUNDS = {"08_search_in_the_arena": ("08_search_arena", "an arena round not revealed yet: a rerun draws a fresh "
                                     "secret (a new study), so `make reproduce` leaves it")}
REPLAY_WHY = ("an arena round replayed with its revealed secret and its committed plan (search.round_replay): a "
              "reproduction of that study; `--set ROUND=new` is a new study")


@dataclass
class Stage:
    """One notebook run (one board of notebook 08): what it reads, what it writes, how to rerun it."""

    name: str
    notebook: str
    cmd: str
    deps: list[str]
    outs: list[str]
    kind: str = "computed"  # computed | measurement | replay | round
    why: str = ""
    frozen: bool = False
    parameters: dict[str, str] = field(default_factory=dict)

    def to_yaml(self) -> dict:
        entry: dict = {"cmd": self.cmd, "deps": self.deps, "outs": [{o: {"cache": False}} for o in self.outs]}
        if self.frozen:
            entry["frozen"] = True
        entry["meta"] = {"kind": self.kind, **({"why": self.why} if self.why else {})}
        return entry


def board_names(profile: str = PROFILE, root: Path = REPO) -> list[str]:
    """The profile's board names, read from its YAML without importing the arena (the check stays fast)."""
    import yaml

    return list(yaml.safe_load((root / "cachecraft_lib/arena/boards" / f"{profile}.yaml").read_text())["boards"])


def _expand(paths: set[str], tracked: set[str]) -> set[str]:
    """Folders as their committed files, so untracked files (caches, fitted leftovers) never stale a stage."""
    return {t for p in paths for t in ((p,) if p in tracked else sorted(x for x in tracked if x.startswith(p + "/")))}


def _board_of(path: str, boards: list[str]) -> str | None:
    """The non-default board a file belongs to by its name (``..._B_offline.png``, ``..._B_offline_ledger...``)."""
    name = path.rsplit("/", 1)[-1]
    return next((b for b in boards if f"_{b}." in name or f"_{b}_" in name or name.endswith(f"_{b}")), None)


def _cmd(stem: str, parameters: dict[str, str]) -> str:
    sets = "".join(f" --set {k}={v}" for k, v in parameters.items())
    return f"python -m cachecraft_lib.cli reproduce --profile {PROFILE} --only {stem}{sets}"


def notebook_stages(notebook: Path, tracked: set[str], root: Path = REPO,
                    read_by_others: set[str] | None = None) -> list[Stage]:
    """The stage(s) of one notebook: one, or one per board whose files are committed (notebook 08).
    ``read_by_others``: files under figures/samples that other notebooks read (``pipeline_reads``): this
    notebook's outputs whether committed yet or not, so DVC runs it before them."""
    rel = notebook.relative_to(root).as_posix()
    modules = notebook_modules(notebook, root)
    reads = notebook_reads(notebook)
    deps = {rel} | module_files(modules, root) | _expand(data_files(modules, root, tracked), tracked)
    deps |= reads.samples | _expand(reads.data, tracked)
    mine = {p for p in read_by_others or () if p.rsplit("/", 1)[-1][:2] == notebook.stem[:2]}
    outs = sorted(set(notebook_outputs(notebook, tracked)) | mine)
    kind, why = ("measurement", MEASUREMENTS[notebook.stem]) if notebook.stem in MEASUREMENTS else ("computed", "")
    if notebook.stem not in BOARD_PARAMETER:
        return [Stage(notebook.stem, rel, _cmd(notebook.stem, {}), sorted(deps), outs, kind, why)]
    parameter, default = BOARD_PARAMETER[notebook.stem]
    boards = [b for b in board_names(root=root) if b != default and any(_board_of(o, [b]) for o in outs)]
    stages = []
    for board in [default, *boards]:
        mine = [o for o in outs if _board_of(o, boards) == (None if board == default else board)]
        name = notebook.stem if board == default else f"{notebook.stem}_{board}"
        stage = Stage(name, rel, _cmd(notebook.stem, {parameter: board}), sorted(deps), mine, kind, why,
                      parameters={parameter: board})
        if notebook.stem in ROUNDS:
            stage = round_stage(stage, ROUNDS[notebook.stem], "" if board == default else f"_{board}", tracked)
        stages.append(stage)
    return stages


def round_stage(stage: Stage, rounds: tuple[str, str], suffix: str, tracked: set[str]) -> Stage:
    """A round's stage: replayed when its record (ledger, key, revealed secret) is committed, the record then a
    dependency rather than an output (a replay leaves it); frozen otherwise."""
    stem, why = rounds
    record = [f"{FIGURES_SAMPLES}/{stem}{suffix}{end}" for end in RECORD_SUFFIXES]
    if not all(p in tracked for p in record):
        stage.kind, stage.why, stage.frozen = "round", why, True
        return stage
    stage.kind, stage.why = "replay", REPLAY_WHY
    stage.parameters = {**stage.parameters, "ROUND": "replay"}  # no silent new study when the record is gone
    stage.cmd = _cmd(Path(stage.notebook).stem, stage.parameters)
    stage.deps = sorted(set(stage.deps) | set(record))
    stage.outs = [o for o in stage.outs if o not in record]
    return stage


def stages(root: Path = REPO) -> list[Stage]:
    """Every stage, in the notebooks' order."""
    tracked = tracked_files(root)
    notebooks = sorted((root / NOTEBOOKS.relative_to(REPO)).glob("[0-9][0-9]_*.ipynb"))
    read = {p for nb in notebooks for p in notebook_reads(nb).samples}
    return [s for nb in notebooks for s in notebook_stages(nb, tracked, root, read)]


def render(all_stages: list[Stage]) -> str:
    """``dvc.yaml``'s text (stable: the same source gives the same bytes)."""
    import yaml

    body = yaml.safe_dump({"stages": {s.name: s.to_yaml() for s in all_stages}}, sort_keys=False, width=120)
    return HEADER + body


def rerunnable(root: Path = REPO) -> list[str]:
    """The stages of ``dvc.yaml`` that are not frozen: ``make reproduce`` names them, so that neither a changed
    dependency nor an edited output ever reruns an arena round (``dvc repro`` would, given no targets)."""
    import yaml

    declared = yaml.safe_load((root / DVC_YAML).read_text())["stages"]
    return [name for name, stage in declared.items() if not stage.get("frozen")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cachecraft_lib.report.pipeline", description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if dvc.yaml differs from what the source implies")
    parser.add_argument("--stages", action="store_true", help="print the stages `make reproduce` may rerun (not "
                        "the frozen ones) from dvc.yaml, and nothing else")
    args = parser.parse_args(argv)
    if args.stages:
        print(" ".join(rerunnable()))
        return 0
    text, path = render(stages()), REPO / DVC_YAML
    if args.check:
        if not path.is_file() or path.read_text() != text:
            print(f"{DVC_YAML} is not current: run `make pipeline` (python -m cachecraft_lib.report.pipeline)")
            return 1
        print(f"{DVC_YAML} is current")
        return 0
    path.write_text(text)
    print(f"wrote {DVC_YAML}: {text.count(chr(10))} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
