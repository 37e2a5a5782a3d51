"""The papermill runner: parameters injected, values read back, failures name the notebook and cell."""

from __future__ import annotations

import nbformat
import pytest

from cachecraft_lib.report.notebooks import NotebookFailed, notebook_has_outputs, run_notebook, strip_outputs


def _notebook(path, body: str):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('PROFILE = "cpu"\nSCALE = 1')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [nbformat.v4.new_markdown_cell("# test"), params,
                nbformat.v4.new_code_cell("from cachecraft_lib.profiles import get_profile\np = get_profile(PROFILE)"),
                nbformat.v4.new_code_cell(body)]
    nb.metadata["kernelspec"] = {"name": "cachecraft", "display_name": "Python (cachecraft)", "language": "python"}
    nbformat.write(nb, str(path))
    return path


@pytest.mark.slow
def test_runner_injects_profile_and_reads_records(tmp_path):
    book = _notebook(tmp_path / "01_demo.ipynb", "from cachecraft_lib.report.notebooks import record\n"
                                                 "record(profile=p.name, lengths=list(p.lengths), scaled=SCALE * 2)")
    run = run_notebook(book, "smoke", out_dir=tmp_path / "out", parameters={"SCALE": 21}, figures=tmp_path / "f")
    assert run.records == {"profile": "smoke", "lengths": [1024, 2048], "scaled": 42}
    assert run.executed.exists() and notebook_has_outputs(run.executed)
    strip_outputs(run.executed)
    assert notebook_has_outputs(run.executed) == []


@pytest.mark.slow
def test_runner_names_the_failing_cell(tmp_path):
    book = _notebook(tmp_path / "02_broken.ipynb", "raise ValueError('boom')")
    with pytest.raises(NotebookFailed) as info:
        run_notebook(book, "smoke", out_dir=tmp_path / "out", figures=tmp_path / "f")
    message = str(info.value)
    assert "02_broken.ipynb" in message and "boom" in message and "cell" in message
    assert info.value.cell_index is not None
    assert info.value.executed.exists()  # the partial run is kept for inspection
