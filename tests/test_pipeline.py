"""The reproduction pipeline (dvc.yaml, dvc.lock; docs/reproducing.md): each notebook's stage lists every library
module it can import and every committed file it writes, and the check names stale and hand-edited outputs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from cachecraft_lib.paths import NOTEBOOKS, REPO
from cachecraft_lib.report import pipeline
from cachecraft_lib.report.pipeline_deps import (
    imported_modules,
    module_closure,
    module_files,
    notebook_modules,
    notebook_source,
)
from cachecraft_lib.report.pipeline_outs import NOT_OUTPUTS, saved_names, top_level
from cachecraft_lib.report.pipeline_reads import notebook_reads, results_owners, source_reads

NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _declared() -> dict:
    return yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_closure_follows_imports_at_any_depth_but_not_type_checking_ones(tmp_path):
    _write(tmp_path, "cachecraft_lib/__init__.py", "")
    _write(tmp_path, "cachecraft_lib/a/__init__.py", "")
    _write(tmp_path, "cachecraft_lib/a/x.py", "def f():\n    from .y import g\n    return g()\n")
    _write(tmp_path, "cachecraft_lib/a/y.py", "from typing import TYPE_CHECKING\nfrom ..b import z\n"
                                             "if TYPE_CHECKING:\n    from ..c import never\ndef g(): pass\n")
    _write(tmp_path, "cachecraft_lib/b/__init__.py", "from . import z\n")
    _write(tmp_path, "cachecraft_lib/b/z.py", "import json\n")
    _write(tmp_path, "cachecraft_lib/c/__init__.py", "")
    _write(tmp_path, "cachecraft_lib/c/never.py", "")
    start = imported_modules("from cachecraft_lib.a import x as renamed\n", root=tmp_path)
    assert start == {"cachecraft_lib.a.x"}
    assert module_closure(start, tmp_path) == {"cachecraft_lib", "cachecraft_lib.a", "cachecraft_lib.a.x",
                                               "cachecraft_lib.a.y", "cachecraft_lib.b", "cachecraft_lib.b.z"}


def test_dvc_yaml_is_what_the_notebooks_imports_imply():
    """Fails after a notebook (or a module it reaches) gains an import until `make pipeline` is run."""
    assert (REPO / "dvc.yaml").read_text() == pipeline.render(pipeline.stages()), \
        "dvc.yaml is out of date: run `make pipeline` and commit it"


@pytest.mark.parametrize("notebook", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_each_stage_depends_on_every_module_its_notebook_reaches(notebook):
    direct = imported_modules(notebook_source(notebook))
    assert direct, f"{notebook.name} imports nothing from the library?"
    needed = module_files(notebook_modules(notebook)) | {notebook.relative_to(REPO).as_posix()}
    stages = [s for s in _declared().values() if f"--only {notebook.stem}" in s["cmd"]]
    assert stages, f"no stage runs {notebook.name}"
    for stage in stages:
        missing = needed - set(stage["deps"])
        assert not missing, f"{notebook.name}'s stage omits {sorted(missing)}"


def test_the_reads_scanner_finds_other_notebooks_samples_and_run_folders():
    source = ('from cachecraft_lib.paths import DATA, results_dir\n'
              'run = results_dir("search", f"{PROFILE}_v5_offline")\n'
              'out = DATA / "results" / "grid" / profile.name\n'
              'best = report.figures_dir() / "samples" / "05_search_best_program.txt"\n'
              'grid = pd.read_csv("figures/samples/03_ruler_grid.csv.gz")\n'
              'report.save_samples(frame, "07_arena")\n'  # its own output, not a read
              'latency = Path("data/results/latency/cpu")\nnumbers = "data/paper_numbers.csv"\n')
    reads = source_reads(source, "07")
    assert reads.samples == {"figures/samples/05_search_best_program.txt", "figures/samples/03_ruler_grid.csv.gz"}
    assert reads.results == {"data/results/search", "data/results/grid", "data/results/latency"}
    assert reads.data == {"data/paper_numbers.csv"}
    assert source_reads('x = "05_search_dynamics"\n', "07").samples == {"figures/samples/05_search_dynamics.csv.gz"}


@pytest.mark.parametrize("notebook", NOTEBOOK_FILES, ids=lambda p: p.stem)
def test_a_notebook_reads_no_figures_or_data_file_its_stage_does_not_depend_on(notebook):
    """A committed file of another notebook (figures/samples) or of data/ that a notebook names is a dependency of
    its stage, and an output of the stage that makes it; another notebook's run folder (data/results, not
    committed) is never read: a fresh clone would not have it, so the outputs would differ from a developer's."""
    reads = notebook_reads(notebook)
    owners = results_owners(NOTEBOOK_FILES)
    foreign = {kind: owners[kind] for kind in reads.results if owners[kind] != notebook.stem}
    assert not foreign, (f"{notebook.name} reads another notebook's run folder {foreign} (not committed, so no "
                         "stage can depend on it): read that notebook's committed output under figures/samples")
    declared = _declared()
    stages = [s for s in declared.values() if f"--only {notebook.stem}" in s["cmd"]]
    for stage in stages:
        deps = set(stage["deps"])
        missing = {p for p in reads.samples | reads.data if p not in deps and not any(d.startswith(p + "/")
                                                                                       for d in deps)}
        assert not missing, f"{notebook.name} reads {sorted(missing)}, which its stage does not depend on"
    for path in reads.samples:
        makers = [n for n, s in declared.items() if any(next(iter(o)) == path for o in s["outs"])]
        assert makers and all(n[:2] == path.split("/")[-1][:2] for n in makers), f"no stage makes {path}"


def test_every_committed_output_belongs_to_exactly_one_stage():
    tracked = subprocess.run(["git", "ls-files", "figures"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    import fnmatch

    committed = {top_level(t) for t in tracked} - {t for t in tracked if any(fnmatch.fnmatch(t, n) for n in NOT_OUTPUTS)}
    owners: dict[str, list[str]] = {}
    for name, stage in _declared().items():
        for out in stage["outs"]:
            owners.setdefault(next(iter(out)), []).append(name)
    assert {p: o for p, o in owners.items() if len(o) > 1} == {}
    records = {d for s in _declared().values() if s["meta"]["kind"] == "replay" for d in s["deps"]
               if d.startswith("figures/") and d.endswith(pipeline.RECORD_SUFFIXES)}  # a replayed round's record
    assert committed - set(owners) - records == set(), "committed outputs no stage writes (add them to pipeline_outs)"
    assert all(next(iter(o.values())) == {"cache": False} for s in _declared().values() for o in s["outs"])


def test_an_f_string_name_becomes_a_pattern():
    source = 'report.savefig(f"fig_x{OUT}", fig)\nreport.save_table(df, "table_y", label=l)\n'
    assert saved_names(source) == [("savefig", "fig_x*"), ("save_table", "table_y")]


def test_revealed_rounds_replay_and_unrevealed_ones_are_frozen():
    declared = _declared()
    frozen = {n for n, s in declared.items() if s.get("frozen")}
    assert frozen == {n for n, s in declared.items() if s["meta"]["kind"] == "round"}
    assert set(pipeline.rerunnable()) == set(declared) - frozen
    replays = {n: s for n, s in declared.items() if s["meta"]["kind"] == "replay"}
    assert set(replays) == {"08_search_in_the_arena", "08_search_in_the_arena_B_offline"}  # both rounds revealed
    for name, stage in replays.items():
        stem = "08_search_arena" + name.removeprefix("08_search_in_the_arena")
        record = {f"figures/samples/{stem}{end}" for end in pipeline.RECORD_SUFFIXES}
        outs = {next(iter(o)) for o in stage["outs"]}
        assert record <= set(stage["deps"]) and not record & outs  # the round's record is read, never rewritten
        assert stage["cmd"].endswith("--set ROUND=replay")  # a lost record fails the stage: no silent new study


def test_a_round_without_its_revealed_secret_is_frozen():
    notebook = REPO / "notebooks" / "08_search_in_the_arena.ipynb"
    tracked = pipeline.tracked_files(REPO)
    stages = {s.name: s for s in pipeline.notebook_stages(notebook, tracked - {
        "figures/samples/08_search_arena_B_offline_revealed_secret.txt"})}
    assert stages["08_search_in_the_arena"].kind == "replay" and not stages["08_search_in_the_arena"].frozen
    hidden = stages["08_search_in_the_arena_B_offline"]
    assert hidden.kind == "round" and hidden.frozen and "ROUND" not in hidden.cmd
    assert "figures/samples/08_search_arena_B_offline_ledger.jsonl" in hidden.outs  # a new study writes its record


def test_make_reproduce_reruns_only_what_dvc_yaml_allows():
    declared = _declared()
    assert declared["06_latency"]["meta"]["kind"] == "measurement"
    dry = subprocess.run(["make", "-n", "reproduce", "FORCE=1", f"VENV={sys.prefix}"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    assert "dvc repro --force" in dry and "$(" in dry and "report.pipeline --stages" in dry
    assert dry.index("-m cachecraft_lib.report.pipeline\n") < dry.index("dvc repro")  # dvc.yaml current first


def test_make_without_a_target_creates_the_venv_and_installs(tmp_path):
    dry = subprocess.run(["make", "-n", f"VENV={tmp_path / 'venv'}"], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    assert "-m venv" in dry and 'pip install' in dry and "sandbox-tools" in dry


def test_reproduce_set_reads_notebook_parameters():
    from cachecraft_lib.cli.suite import _parameters

    assert _parameters(["BOARD=B_offline", "N=3", "X=null"]) == {"BOARD": "B_offline", "N": 3, "X": None}
    with pytest.raises(ValueError):
        _parameters(["no equals sign"])


def _copy_of_the_checkout(dest):
    """The tracked files as they are in this working tree, plus the pipeline's own files, in a new git folder."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    for rel in [f for f in files if f] + ["dvc.yaml", "dvc.lock", ".dvc/config", ".dvcignore"]:
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)


def test_the_check_names_what_a_module_change_stales_and_what_was_edited_by_hand(tmp_path):
    """Touch a module a few notebooks import: exactly their stages turn stale (and those reading their outputs);
    change a committed table by hand: the check fails naming it."""
    pytest.importorskip("dvc")
    from cachecraft_lib.report.pipeline_check import Report, collect, describe

    _copy_of_the_checkout(tmp_path)
    declared = _declared()
    before = {s.name: s for s in collect(tmp_path)}
    counts = {}
    for stage in declared.values():
        for dep in stage["deps"]:
            if dep.startswith("cachecraft_lib/") and dep.endswith(".py"):
                counts[dep] = counts.get(dep, 0) + 1
    module = min((d for d in counts if counts[d] >= 1), key=lambda d: (counts[d], d))
    users = {n for n, s in declared.items() if module in s["deps"]}
    assert 0 < len(users) < len(declared)
    with open(tmp_path / module, "a") as f:
        f.write("\n# touched\n")
    table = next(next(iter(o)) for o in declared["02_frc"]["outs"] if next(iter(o)).endswith(".csv"))
    (tmp_path / table).write_text((tmp_path / table).read_text() + "edited,by,hand\n")
    lock = yaml.safe_load((tmp_path / "dvc.lock").read_text())  # as if the notebook reached a file it did not
    notebook = "notebooks/02_frc.ipynb"
    lock["stages"]["02_frc"]["deps"] = [d for d in lock["stages"]["02_frc"]["deps"] if d["path"] != notebook]
    # an output the stage declares but never made (not in the lock, not on disk: notebook 05's best program before
    # its first run) makes the stage stale, not EDITED; a recorded output that was deleted is EDITED
    # an output on disk that the lock never recorded (a run from before the stage declared it made it: 05's
    # search-vs-random figure) cannot be compared with anything: stale, not EDITED
    figs = [next(iter(o)) for o in declared["02_frc"]["outs"] if next(iter(o)).startswith("figures/fig_")]
    never_made, deleted = figs[0], figs[1]
    unrecorded = next(next(iter(o)) for o in declared["02_frc"]["outs"] if next(iter(o)).endswith(".md"))
    lock["stages"]["02_frc"]["outs"] = [o for o in lock["stages"]["02_frc"]["outs"]
                                        if o["path"] not in (never_made, unrecorded)]
    (tmp_path / never_made).unlink()
    (tmp_path / deleted).unlink()
    (tmp_path / "dvc.lock").write_text(yaml.safe_dump(lock, sort_keys=False))
    after = {s.name: s for s in collect(tmp_path)}
    assert after["02_frc"].changed_deps.get(notebook) == "newly reached"
    for name in users:
        assert module in after[name].changed_deps, name
    for name in set(declared) - users - {"02_frc"}:
        assert after[name].changed_deps == before[name].changed_deps, name
    assert table in after["02_frc"].edited_outs and table not in before["02_frc"].edited_outs
    assert after["02_frc"].new_outs == [never_made] and never_made not in after["02_frc"].edited_outs
    assert after["02_frc"].edited_outs.get(deleted) == "deleted"
    assert after["02_frc"].unrecorded_outs == [unrecorded] and unrecorded not in after["02_frc"].edited_outs
    report = Report(list(after.values()))
    assert report.failed
    lines = describe(report)
    assert any(line.startswith("EDITED") and table in line for line in lines)
    assert any(line.startswith("STALE") and module in line for line in lines)
    assert any(line.startswith("STALE   02_frc") and f"not yet made: {never_made}" in line for line in lines)
    assert any(line.startswith("STALE   02_frc") and f"not in dvc.lock yet: {unrecorded}" in line for line in lines)
    print(json.dumps(lines, indent=1))


def test_the_check_says_busy_while_a_reproduce_holds_the_lock(monkeypatch, capsys):
    from dvc.lock import LockError

    from cachecraft_lib.report import pipeline_check

    def locked(*args, **kwargs):
        raise LockError("'figures/x' is busy, it is being blocked by: (PID 1): dvc repro")

    monkeypatch.setattr(pipeline_check, "check", locked)
    assert pipeline_check.run() == 2
    assert "a `make reproduce` (dvc repro) is running" in capsys.readouterr().out
