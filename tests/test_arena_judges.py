"""The offline rule judge and the ledger effect of a review: copies are caught whatever their names, the shipped
FRC entry is not a copy, false numbers are caught and true ones pass, a flag zeroes points in a valid chain."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.judges import BundleError, load_bundle, review, review_rules
from cachecraft_lib.arena.judges.record import record_review
from cachecraft_lib.arena.judges.similarity import normalise, similarity
from cachecraft_lib.arena.scoring import leaderboard, points
from cachecraft_lib.arena.scoring.ledger import Ledger

ASSETS = Path(__file__).parent / "assets" / "judges"
JUDGE_ASSETS = ASSETS
FRC = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples" / "frc"
KNORM_RENAMED = '''import numpy as np


class Method:
    def score(self, block):
        return -np.linalg.norm(block.keys, axis=-1)
'''
EVIDENCE = ("## Evidence\nOn board A's dev items FRC reaches overall {overall} (accuracy 0.701), a gain of +0.034 "
            "over snapkv.\n")


def _folder(tmp_path: Path, src: Path, name: str, **replace: str) -> Path:
    """A copy of a submission folder with parts of its files replaced (file name -> (old, new))."""
    out = tmp_path / name
    shutil.copytree(src, out)
    for file, (old, new) in replace.items():
        path = out / file.replace("_", ".", 1) if "_" in file else out / file
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new))
    return out


def _with_evidence(tmp_path: Path, overall: str) -> Path:
    out = tmp_path / f"frc_{overall.replace('.', '_')}"
    shutil.copytree(FRC, out)
    desc = (out / "DESCRIPTION.md").read_text()
    desc = re.sub(r"## Evidence\n.*?\n\n", EVIDENCE.format(overall=overall) + "\n", desc, flags=re.S)
    (out / "DESCRIPTION.md").write_text(desc)
    return out


def _report() -> dict:
    """The arena's dev report for FRC (as ``dev_report_json`` writes it), passed by the caller."""
    return json.loads((ASSETS / "frc_dev_report.json").read_text())


def test_similarity_survives_renaming_and_ignores_comments():
    a = "def f(x, y):\n    # add\n    return np.linalg.norm(x @ y.T, axis=-1)\n"
    b = "def g(left, right):\n    '''doc'''\n    return torch.linalg.vector_norm(torch.matmul(left, right.T), dim=-1)\n"
    assert normalise("def f(x):\n    return x.mean(axis=1)\n") == normalise("def h(z):\n    return z.mean(axis=2)\n")
    assert similarity(a, a.replace("x", "q").replace("y", "k")) == 1.0
    assert 0.5 < similarity(a, b) < 1.0  # numpy and torch spellings of one computation read alike
    assert similarity(a, "def f(x):\n    for i in range(3):\n        x = x + i\n    return x\n") < 0.5


def test_a_renamed_snapkv_is_a_copy_flagged_as_undisclosed_prior_art():
    result = review(load_bundle(ASSETS / "renamed_snapkv"))
    assert result.novelty == 0
    assert "UNDISCLOSED_PRIOR_ART" in result.flags and "MISSTATED_METHOD" not in result.flags
    assert result.details["closest"][0]["method"] == "SnapKV"
    assert any("a copy of arena form of SnapKV" in n for n in result.notes)
    assert any("never names it" in n for n in result.notes)
    assert any("not assessed offline" in n for n in result.notes)


def test_a_renamed_knorm_is_a_copy_and_naming_the_source_clears_the_flag(tmp_path):
    folder = _folder(tmp_path, ASSETS / "renamed_snapkv", "knorm_renamed")
    (folder / "method.py").write_text(KNORM_RENAMED)
    flagged = review(load_bundle(folder))
    assert flagged.novelty == 0 and flagged.flags == ("UNDISCLOSED_PRIOR_ART",)
    assert flagged.details["closest"][0]["method"] == "K-norm"
    desc = folder / "DESCRIPTION.md"
    desc.write_text(desc.read_text().replace("Nothing beyond the arena's method interface.",
                                             "KVPress's KnormPress (K-norm, Devoto et al., 2024), ported to numpy."))
    honest = review(load_bundle(folder))
    assert honest.novelty == 0 and honest.flags == ()


def test_a_rewrite_with_other_operations_is_caught_by_its_behaviour():
    """SnapKV in plain loops shares little structure with any source, but keeps exactly what SnapKV keeps."""
    bundle = load_bundle(ASSETS / "snapkv_loops")
    by_tokens = review_rules(bundle, probe=False)
    assert by_tokens.details["closest"][0]["similarity"] < 0.7 and not by_tokens.flags
    result = review(bundle)
    assert result.details["behaviour"]["snapkv"] == 1.0
    assert result.novelty == 0 and result.flags == ("UNDISCLOSED_PRIOR_ART",)


EXAMPLES = FRC.parent
PROBING = """import numpy as np


class Method:
    def score(self, layer):
        assert layer.probe_queries.shape[1] == int(layer.probe_lengths.sum()) > 0
        q = layer.probe_queries.sum(axis=1).reshape(layer.n_kv_heads, layer.groups, -1).sum(axis=1)
        return np.einsum("hld,hd->hl", layer.keys, q)
"""


def _hooked(tmp_path: Path, name: str, code: str, meta: str) -> Path:
    folder = _folder(tmp_path, ASSETS / "renamed_snapkv", name)
    (folder / "method.py").write_text(code)
    (folder / "metadata.yaml").write_text(f"name: {name}\nauthor: agent9\n{meta}")
    return folder


def test_the_posts_whole_cache_and_probing_methods_are_reviewed_through_their_hooks():
    for name, label in (("spanvote", "probe whole_cache"), ("probevr", "probe")):
        result = review_rules(load_bundle(EXAMPLES / name))
        assert "CRASHED_ON_JUDGE_INPUTS" not in result.flags
        assert not any("would be refused" in n or "not measured" in n for n in result.notes), name
        assert set(result.details["behaviour_by_layers"]) == {label}
        assert 0 < max(result.details["behaviour"].values()) < 0.98  # measured, and no baseline's copy


def test_a_whole_cache_copy_of_snapkv_is_still_found_to_be_snapkv(tmp_path):
    """SnapKV per layer inside whole_cache (in loops, so its tokens resemble nothing): the hook hides nothing."""
    loops = (ASSETS / "snapkv_loops" / "method.py").read_text().replace("def score(self, layer):", "def one(self, layer):")
    code = loops + "\n    def whole_cache(self, layers):\n        return [self.one(layer) for layer in layers]\n"
    result = review_rules(load_bundle(_hooked(tmp_path, "whole-snap", code, "boards: [B_offline]\n")))
    assert result.details["behaviour_by_layers"]["probe whole_cache"]["snapkv"] == 1.0
    assert result.novelty == 0 and result.flags == ("UNDISCLOSED_PRIOR_ART",)
    assert any("behaves as arena form of SnapKV" in n for n in result.notes)


def test_a_probing_method_gets_probe_queries_on_the_judges_layers(tmp_path):
    from cachecraft_lib.arena.judges.behaviour import probe_layers, probe_tokens, with_probes

    probes = ["List every name and number above.", "What codes appear?"]
    meta = "boards: [B_online]\nprobes:\n" + "".join(f"  - {p!r}\n" for p in probes)
    result = review_rules(load_bundle(_hooked(tmp_path, "prober", PROBING, meta)))
    assert result.flags == () and set(result.details["behaviour_by_layers"]) == {"probe"}
    first, again = with_probes(probe_layers(), tuple(probes)), with_probes(probe_layers(), tuple(probes))
    assert [int(x) for x in first[0].probe_lengths] == [probe_tokens(p) for p in probes] == [6, 3]
    assert all(np.array_equal(a.probe_queries, b.probe_queries) for a, b in zip(first, again, strict=True))
    assert np.array_equal(first[0].probe_queries, first[1].probe_queries)  # both budgets of layer 0: one probe
    assert not np.array_equal(first[0].probe_queries, first[2].probe_queries)  # another layer, other queries


def test_a_keep_that_rewrites_is_measured_not_flagged(tmp_path):
    code = """import numpy as np
from method_api import Rewrite


class Method:
    def keep(self, layer):
        idx = np.arange(layer.n_tokens - layer.budget, layer.n_tokens)
        return Rewrite(np.tile(idx, (layer.n_kv_heads, 1)), values=layer.values[:, idx] * np.float32(0.5))
"""
    result = review_rules(load_bundle(_hooked(tmp_path, "recent-half", code, "boards: [A]\n")))
    assert "CRASHED_ON_JUDGE_INPUTS" not in result.flags and result.details["behaviour"]


def test_a_sign_flip_reads_like_knorm_but_keeps_other_tokens():
    result = review(load_bundle(Path(__file__).parent / "assets" / "arena" / "good_scores"))  # largest key norms
    assert result.details["closest"][0]["similarity"] > 0.9 and result.details["behaviour"]["knorm"] < 0.5
    assert not result.flags and result.novelty == 1


def test_a_copy_of_another_authors_entry_lacks_attribution(tmp_path):
    mine = _folder(tmp_path, FRC, "frc_copy", **{"metadata_yaml": ("author: cachecraft", "author: agent7"),
                                                  "DESCRIPTION.md": ("FRC was found", "It was found")})
    desc = mine / "DESCRIPTION.md"
    desc.write_text(re.sub(r"(?i)\bfrc\b|cachecraft", "the method", desc.read_text()))
    result = review(load_bundle(mine))
    assert result.novelty == 0 and "MISSING_ATTRIBUTION" in result.flags
    assert result.details["closest"][0]["reference"] == "entry frc"


def test_the_shipped_frc_submission_is_not_a_copy():
    result = review(load_bundle(FRC))
    assert not result.flags
    assert result.novelty >= 1
    assert result.details["closest"][0]["similarity"] < 0.7
    assert result.effectiveness == 0 and any("no dev report" in n for n in result.notes)


def test_a_one_liner_sharing_a_few_tokens_with_a_baseline_is_not_a_copy():
    """``keep the first budget tokens`` reads 0.70 like the random form: short code needs 0.9 to be a copy."""
    result = review(load_bundle(Path(__file__).parent / "assets" / "arena" / "good_keep"))
    assert not result.flags and result.novelty >= 1


def test_a_false_number_is_fabricated_evidence_and_a_true_one_is_not(tmp_path):
    true = review(load_bundle(_with_evidence(tmp_path, "0.612"), _report()))
    assert "FABRICATED_EVIDENCE" not in true.flags and not true.flags
    assert [c["matched"] for c in true.details["claims"]] == [True, True, True]
    assert true.soundness == 3
    assert true.effectiveness == 5  # accuracy 0.701 / 0.66 and the gain's interval above 0
    rounded = review(load_bundle(_with_evidence(tmp_path, "0.61"), _report()))  # within its rounding
    assert not rounded.flags
    false = review(load_bundle(_with_evidence(tmp_path, "0.712"), _report()))
    assert false.flags == ("FABRICATED_EVIDENCE",) and false.soundness == 0
    assert any("claims overall 0.712" in n and "0.612" in n for n in false.notes)


def test_a_forbidden_import_is_a_rule_violation(tmp_path):
    folder = _folder(tmp_path, FRC, "frc_os", **{"method.py": ("import math\n", "import math\nimport os\n")})
    result = review(load_bundle(folder))
    assert "RULE_VIOLATION" in result.flags and any("os" in n for n in result.notes)


def test_the_bundle_never_holds_anything_from_the_arenas_private_folder(tmp_path):
    """Plants a marker where a bundle could reach it: an entry folder inside private/ passed as an earlier entry,
    a DESCRIPTION.md and a dev report that link into private/. None of it may enter the bundle."""
    root = tmp_path / "arena"
    planted = root / "private" / "round1" / "A" / "planted"
    shutil.copytree(FRC, planted)
    marker = "PRIVATE-MARKER-7c41"
    (planted / "method.py").write_text(f"# {marker}\n" + (planted / "method.py").read_text())
    (planted / "metadata.yaml").write_text("name: planted\nauthor: other\nboards: [A]\n")
    (root / "private" / "units.json").write_text(json.dumps({"marker": marker}))
    (root / "ledger.jsonl").write_text("")
    for given in (root, None):  # the arena named, or found by its ledger beside private/
        bundle = load_bundle(FRC, events=[], earlier=[planted], arena_root=given)
        assert marker not in json.dumps(bundle.as_prompt(), default=str)
        assert all(e.folder != planted.resolve() for e in bundle.earlier)
    outside = shutil.copytree(planted, tmp_path / "outside")  # the same entry outside private/ is read: the plant
    assert marker in json.dumps(load_bundle(FRC, events=[], earlier=[outside]).as_prompt())  # is reachable
    linked = _folder(tmp_path, FRC, "linked")
    (linked / "DESCRIPTION.md").unlink()
    (linked / "DESCRIPTION.md").symlink_to(planted / "method.py")
    with pytest.raises(BundleError, match="private|outside"):
        load_bundle(linked, events=[], arena_root=root)
    with pytest.raises(BundleError, match="private"):
        load_bundle(FRC, root / "private" / "units.json", events=[], arena_root=root)
    assert all(e.folder != load_bundle(FRC, events=[]).folder for e in load_bundle(FRC, events=[]).earlier)
    from cachecraft_lib.arena.submissions.folder import load_submission

    assert load_bundle(FRC).code_sha256 == load_submission(FRC).code_sha256  # a review names the ledger's code


def test_a_shipped_dev_report_is_ignored(tmp_path):
    """A dev_report.json inside the submission folder claims a perfect run; the judges never read it."""
    folder = _with_evidence(tmp_path, "0.612")
    fake = _report()
    for row in fake["scores"].values():
        row["accuracy"] = 9.0
    (folder / "dev_report.json").write_text(json.dumps(fake))
    bundle = load_bundle(folder)
    assert bundle.dev_report is None
    result = review_rules(bundle, probe=False)
    assert result.effectiveness == 0 and any("no dev report" in n for n in result.notes)
    with pytest.raises(BundleError, match="inside the submission folder"):
        load_bundle(folder, folder / "dev_report.json")
    assert load_bundle(folder, _report()).dev_report["scores"] == _report()["scores"]  # the arena's one is read


@pytest.fixture(scope="module")
def real_layers(tiny_model):
    """Real layers of smoke board A's model, drawn by the judge (a fixed seed here, for a stable test)."""
    from cachecraft_lib.arena.boards.boards import load_boards
    from cachecraft_lib.arena.judges.layers import board_layers

    return board_layers(*tiny_model, load_boards("smoke")["A"], seed=3_100_000_123)[0]


@pytest.mark.slow
def test_snapkv_on_real_layers_that_dodges_the_probes_is_flagged(real_layers):
    bundle = load_bundle(JUDGE_ASSETS / "snapkv_dodges_probes")
    probes_only = review_rules(bundle)
    assert probes_only.flags == () and probes_only.details["behaviour"]["snapkv"] < 0.9  # the probes are fooled
    result = review_rules(bundle, layers=real_layers)
    assert result.details["behaviour_by_layers"]["real"]["snapkv"] >= 0.98
    assert result.flags == ("UNDISCLOSED_PRIOR_ART",) and result.novelty == 0


@pytest.mark.slow
def test_real_layers_keep_honest_entries_unflagged(real_layers):
    for folder in (FRC, Path(__file__).parent / "assets" / "arena_boards" / "snap_nopool"):
        assert review_rules(load_bundle(folder), layers=real_layers).flags == ()


@pytest.mark.slow
def test_real_layers_replay_the_probes_as_the_probe_press_does(real_layers, tiny_model):
    """The probe queries on the judge's real layers are the model's for the probe after the context (layer 0's
    computed here from the weights), and spanvote's whole_cache and probevr's probes run on real layers."""
    import torch
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    from cachecraft_lib.arena.submissions.probes import probe_ids

    model, tokenizer = tiny_model
    text = "List every name, number, code, and key fact stated in the text above."
    layer = real_layers.probed((text,))[0]
    ids = probe_ids(tokenizer, [text])[0]
    attn = model.model.layers[0].self_attn
    with torch.no_grad():
        h = model.model.layers[0].input_layernorm(model.model.embed_tokens(ids))
        cos, sin = model.model.rotary_emb(h, torch.arange(layer.n_tokens, layer.n_tokens + ids.shape[1])[None])
        q = attn.q_proj(h).view(1, ids.shape[1], -1, attn.head_dim).transpose(1, 2)
        expected = apply_rotary_pos_emb(q, q, cos, sin)[0][0].float().numpy()
    assert layer.layer == 0 and layer.probe_lengths.tolist() == [ids.shape[1]]
    assert np.allclose(layer.probe_queries, expected, atol=1e-4)
    for name, label in (("spanvote", "real whole_cache"), ("probevr", "real")):
        result = review_rules(load_bundle(EXAMPLES / name), layers=real_layers)
        assert "CRASHED_ON_JUDGE_INPUTS" not in result.flags and label in result.details["behaviour_by_layers"]


def test_a_method_that_crashes_on_the_judges_inputs_is_flagged():
    result = review_rules(load_bundle(JUDGE_ASSETS / "crashes_on_probes"))
    assert result.flags == ("CRASHED_ON_JUDGE_INPUTS",) and any("failed on the judge" in n for n in result.notes)
    assert "CRASHED_ON_JUDGE_INPUTS" not in review_rules(load_bundle(FRC)).flags


# ----------------------------------------------------------------------------------------------- ledger
def _scored_ledger(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    base = {"board": "A", "round": 1, "kind": "baseline", "author": "baseline", "eligible": True, "moved": True}
    ledger.append("baseline", {**base, "name": "snapkv", "overall": 0.50})
    sub = {"board": "A", "round": 1, "kind": "submission", "author": "agent9", "eligible": True, "moved": True,
           "best_before": "snapkv", "gain": 0.05, "gain_lo": 0.02}
    ledger.append("submission", {**sub, "name": "echo-salience", "overall": 0.55})
    ledger.append("points", {"board": "A", "name": "echo-salience", "author": "agent9", "points": 5.0,
                             "rule": "frozen_bar", "round": 1})
    return ledger


def test_a_recorded_flag_zeroes_points_and_the_chain_verifies(tmp_path):
    ledger = _scored_ledger(tmp_path)
    bundle = load_bundle(ASSETS / "renamed_snapkv")
    event = record_review(ledger, review(bundle), bundle, "A")
    assert event["kind"] == "review" and event["payload"]["points_before"] == 5.0
    assert event["payload"]["points_after"] == 0.0
    events = ledger.events()  # verifies the hash chain, head included
    assert [e["kind"] for e in events][-1] == "review" and events[-1]["prev"] == events[-2]["hash"]
    board = leaderboard.leaderboard(events, "A").set_index("name")
    assert board.loc["echo-salience", "points"] == 0.0
    assert "UNDISCLOSED_PRIOR_ART" in board.loc["echo-salience", "flags"]
    assert board.loc["echo-salience", "novelty"] == 0
    assert leaderboard.reviews(events)["flags"].iloc[0] == "UNDISCLOSED_PRIOR_ART"
    # the flagged entry earns nothing and does not count as its author's best: the next honest one earns in full
    state = points.with_flags(pd.DataFrame([e["payload"] for e in events if e["kind"] in ("baseline", "submission")]),
                              events)
    assert points.award("frozen_bar", state, state.iloc[1].to_dict()) == 0.0
    honest = {"board": "A", "round": 1, "kind": "submission", "author": "agent9", "name": "v2", "eligible": True,
              "moved": False, "best_before": "snapkv", "gain": 0.05, "gain_lo": 0.02, "overall": 0.55}
    state2 = pd.concat([state, pd.DataFrame([{**honest, "flags": []}])], ignore_index=True)
    assert points.award("frozen_bar", state2, honest) == pytest.approx(5.0)
    assert points.award("frozen_bar", state2.drop(columns=["flags"]), honest) == 0.0  # without flags: its "best"


def test_a_flag_applies_to_the_code_it_judged(tmp_path):
    ledger = _scored_ledger(tmp_path)
    bundle = load_bundle(ASSETS / "renamed_snapkv")
    record_review(ledger, review(bundle), bundle, "A")
    ledger.append("submission", {"board": "A", "round": 1, "kind": "submission", "author": "agent9",
                                 "name": "echo-salience", "overall": 0.52, "code_sha256": bundle.code_sha256})
    assert points.flagged(ledger.events()) == {("A", "echo-salience"): ("UNDISCLOSED_PRIOR_ART",)}  # same code
    ledger.append("submission", {"board": "A", "round": 1, "kind": "submission", "author": "agent9",
                                 "name": "echo-salience", "overall": 0.53, "code_sha256": "fixed"})
    assert points.flagged(ledger.events()) == {}  # a new version awaits its own review


def test_an_unflagged_review_keeps_the_points(tmp_path):
    ledger = _scored_ledger(tmp_path)
    bundle = load_bundle(FRC)
    event = record_review(ledger, review(bundle), bundle, "A")
    assert event["payload"]["flags"] == [] and event["payload"]["points_after"] == event["payload"]["points_before"]
    assert leaderboard.leaderboard(ledger.events(), "A").set_index("name").loc["echo-salience", "points"] == 5.0


# ------------------------------------------------------------------------------------------------- CLI
def _cli(argv: list[str]) -> int:
    from cachecraft_lib.cli.arena_judge import add_judge_verb

    parser = argparse.ArgumentParser()
    verbs = parser.add_subparsers(dest="verb", required=True)

    def verb(name, func, help_):  # as cli.arena.register's
        p = verbs.add_parser(name, help=help_)
        p.add_argument("--profile", default="cpu")
        p.add_argument("--root")
        p.set_defaults(func=func)
        return p

    add_judge_verb(verb)
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_judges_records_and_refuses_without_a_key(tmp_path, capsys, monkeypatch):
    root = str(tmp_path / "arena")
    assert _cli(["judge", str(ASSETS / "renamed_snapkv"), "--root", root, "--record"]) == 0
    out = capsys.readouterr()
    assert "novelty 0/5" in out.out and "UNDISCLOSED_PRIOR_ART" in out.out and "points 0 -> 0" in out.err
    assert Ledger(Path(root) / "ledger.jsonl").events()[-1]["kind"] == "review"
    for var in ("CACHECRAFT_JUDGE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    code = _cli(["judge", str(FRC), "--root", root, "--judge", "openai", "--llm-model", "gpt-4o-mini",
                 "--llm-model", "claude-3-5-haiku"])
    assert code == 2 and "no API key: set OPENAI_API_KEY" in capsys.readouterr().err
    assert _cli(["judge", str(tmp_path / "nowhere"), "--root", root]) == 2
    assert "not a submission folder" in capsys.readouterr().err
