"""The skeleton: environment files agree, profiles, report helpers, CLI help, committed notebooks clean."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
import yaml

from cachecraft_lib import cli
from cachecraft_lib.profiles import PROFILES, get_profile
from cachecraft_lib.report import figures as report
from cachecraft_lib.report.notebooks import list_notebooks, notebook_has_outputs

REPO = Path(__file__).resolve().parents[1]


def _norm(req: str) -> str:
    return re.sub(r"\s+", "", req).lower()


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = {_norm(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]}
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    have = {_norm(r) for r in pip_section if not r.startswith("-e")}
    assert have == wanted, f"only in environment.yml: {have - wanted}; only in pyproject: {wanted - have}"
    assert any(r.startswith("-e") for r in pip_section)  # it installs the package itself


def test_user_packages_are_declared():
    deps = " ".join(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    for pkg in ("jupyterlab", "papermill", "torch", "transformers", "kvpress==0.5.5", "openevolve==0.4.1",
                "matplotlib", "seaborn", "pandas", "tqdm", "pyarrow", "wonderwords", "ipykernel"):
        assert pkg in deps


def test_ci_calls_the_readme_test_command():
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in readme and "make reproduce" in readme
    commands = [ln.strip() for ln in ci.splitlines() if ln.strip() and not ln.startswith(("#", "set ", "cd ", "export "))]
    # the README's command, the figures check and the sandbox's other boundary modes, all three named in the README
    assert [c.split("#")[0].strip() for c in commands] == ["make test", "make check-figures",
                                                           "scripts/ci_sandbox_modes.sh"]
    assert "scripts/ci_sandbox_modes.sh" in readme and "make check-figures" in readme


def test_profiles_define_the_paper_grid():
    paper = PROFILES["paper"]
    assert paper.models == ("meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B")
    assert paper.lengths == (4096, 8192) and paper.ratios == (0.25, 0.50, 0.75, 0.80, 0.88)
    assert paper.samples_per_task is None and not paper.embedded
    cpu, smoke = PROFILES["cpu"], PROFILES["smoke"]
    assert cpu.embedded and smoke.embedded and cpu.models == smoke.models
    assert cpu.lengths[1] == 2 * cpu.lengths[0] and cpu.lengths[0] >= 1024
    assert "embedded" in cpu.label and "not the paper" in cpu.label


def test_profile_overrides_are_checked():
    assert get_profile("smoke", samples_per_task=1).samples_per_task == 1
    assert get_profile("cpu", lengths=[512]).lengths == (512,)
    with pytest.raises(ValueError, match="unknown profile field"):
        get_profile("cpu", sample_per_task=3)
    with pytest.raises(ValueError, match="unknown profile"):
        get_profile("laptop")


def test_savefig_writes_png_and_pdf(tmp_path):
    report.set_style()
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    paths = report.savefig("fig_test", fig, out_dir=tmp_path, label="embedded tiny model")
    assert [p.suffix for p in paths] == [".png", ".pdf"]
    assert all(p.stat().st_size > 1000 for p in paths)
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_bytes()[:4] == b"%PDF"
    with pytest.raises(ValueError):
        report.savefig("../escape", fig, out_dir=tmp_path)
    plt.close(fig)


def test_save_table_writes_csv_markdown_latex(tmp_path):
    df = pd.DataFrame({"method": ["frc", "snapkv"], "ruler": [84.5, 61.25]}).set_index("method")
    paths = report.save_table(df, "table_test", out_dir=tmp_path, caption="RULER at r=0.88", label="offline RULER")
    csv, md, tex = (p.read_text() for p in paths)
    assert "frc,84.5" in csv
    assert "| method | ruler |" in md and "| snapkv | 61.25 |" in md and "_offline RULER_" in md
    assert "\\begin{tabular}" in tex and "84.50" in tex and "offline RULER" in tex
    assert pd.read_csv(paths[0], index_col=0).equals(df)


def test_every_subcommand_has_help():
    parser = cli.build_parser()
    commands = [["reproduce"], ["ruler"], ["ruler", "generate"], ["ruler", "score"], ["train-tiny"], ["tiny-card"], ["grid"], ["latency"], ["evolve"]]
    for command in [[]] + commands:
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args([*command, "--help"])
        assert exit_info.value.code == 0
    out = subprocess.run([sys.executable, "-m", "cachecraft_lib.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "reproduce" in out.stdout and "train-tiny" in out.stdout


def test_ruler_score_cli(tmp_path, capsys):
    path = tmp_path / "predictions.csv"
    pd.DataFrame({"task": ["cwe", "cwe"], "answer": [["a", "b"], ["c"]],
                  "predicted_answer": ["A b", "x"]}).to_csv(path, index=False)
    assert cli.main(["ruler", "score", str(path)]) == 0
    assert '"string_match": 50.0' in capsys.readouterr().out
    assert cli.main(["ruler", "score", str(tmp_path / "missing.csv")]) == 2
    (tmp_path / "bad.csv").write_text("task,answer\nvt,\"['A']\"\n")
    assert cli.main(["ruler", "score", str(tmp_path / "bad.csv")]) == 2


def test_ruler_generate_cli(tmp_path):
    tok = REPO / "tests" / "assets" / "tokenizer"
    assert cli.main(["ruler", "generate", "--length", "1024", "--tokenizer", str(tok), "--samples", "1",
                     "--tasks", "vt", "cwe", "--out", str(tmp_path)]) == 0
    df = pd.read_parquet(tmp_path / "ruler_1024.parquet")
    assert list(df.task) == ["vt", "cwe"]


def test_committed_notebooks_have_no_outputs():
    books = list_notebooks()
    assert books, "no notebooks found"
    for book in books:
        assert notebook_has_outputs(book) == [], f"{book.name} was committed with outputs: run make clean-notebooks"


def test_notebooks_have_a_parameters_cell_with_profile():
    import nbformat

    for book in list_notebooks():
        nb = nbformat.read(str(book), as_version=4)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1 and "PROFILE" in tagged[0].source, book.name
        assert nb.metadata.kernelspec["name"] == "cachecraft"
