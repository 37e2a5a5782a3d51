"""Hostile submission folders, one test per class of attack on the arena's static checks (issue 47, item 4).

Each case is written here (none is a copy of a hidden list): every one is refused with its own kind, by
``arena check`` as one line on stderr (exit status 2, never a traceback), with a message that is short, has no
escape or control character, and never quotes the hostile input back; nothing is left behind.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cachecraft_lib.arena.submissions.errors import STATIC_MESSAGE_MAX
from cachecraft_lib.arena.submissions.folder import SubmissionError, load_submission
from cachecraft_lib.cli import main

EXAMPLES = Path(__file__).parents[1] / "cachecraft_lib" / "arena" / "examples"
FRC, KVPRIOR = EXAMPLES / "frc", EXAMPLES / "kvprior"


def _copy(tmp_path: Path, src: Path = FRC, name: str = "entry") -> Path:
    """A copy of a shipped example under a submitter's identity (the organiser's author and the examples'
    names are reserved outside arena/examples)."""
    out = tmp_path / name
    shutil.copytree(src, out)
    meta = (out / "metadata.yaml").read_text()
    meta = meta.replace("author: cachecraft", "author: tester").replace("name: ", "name: copy-of-", 1)
    (out / "metadata.yaml").write_text(meta)
    return out


def _listing(root: Path) -> list[tuple[str, bytes | None]]:
    return sorted((str(p.relative_to(root)), p.read_bytes() if p.is_file() and not p.is_symlink() else None)
                  for p in root.rglob("*"))


def refused(folder: Path, kind: str, capsys, must_not_echo: str | None = None) -> str:
    """``folder`` is refused with ``kind`` by ``load_submission`` and by ``arena check`` (one line on stderr, exit
    status 2), the message bounded and clean; the tree it lies in is unchanged. Returns the message."""
    root = folder.parent
    before = _listing(root)
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    message = str(err.value)
    assert err.value.kind == kind, message
    assert len(message) <= STATIC_MESSAGE_MAX + len(kind) + 2, len(message)
    assert all(ch.isprintable() for ch in message), message
    if must_not_echo:
        assert must_not_echo not in message, message
    capsys.readouterr()
    assert main(["arena", "check", str(folder)]) == 2
    out, errtext = capsys.readouterr()
    assert out == "" and errtext.count("\n") == 1 and "Traceback" not in errtext and kind in errtext, errtext
    assert _listing(root) == before  # nothing written, moved or removed
    return message


# ------------------------------------------------------------------------------------ class: bad files
def _npy_bytes(header: dict, data: bytes) -> bytes:
    """An ``.npy`` file with any header (numpy's writer would refuse a lying one)."""
    text = repr(header).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text) + pad + 1) + text + b" " * pad + b"\n" + data


def _npz(**members: bytes) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, raw in members.items():
            zf.writestr(name, raw)
    return buf.getvalue()


def _object_npy() -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    return buf.getvalue()


ALIAS_BOMB = "name: bomb\nauthor: me\nboards: [A]\n" + "a0: &a0 [lolololol, lolololol, lolololol]\n" + "".join(
    f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 10))
BAD_FILES = {  # case -> (file, bytes, kind, what the refusal says: the check that caught it)
    "description_latin1": ("DESCRIPTION.md", "## Idea\nCaf\u00e9 cr\u00e8me\n".encode("latin-1"),
                           "bad_description", "not UTF-8"),
    "description_binary": ("DESCRIPTION.md", b"\x7fELF\x02\x01\x01\x00" + b"\x00" * 64, "bad_description", "not a text file"),
    "description_escapes": ("DESCRIPTION.md", b"## Idea\n\x1b]0;owned\x07\x1b[2J\n", "bad_description", "not a text file"),
    "description_huge": ("DESCRIPTION.md", b"## Idea\n" + b"words " * 200_000, "bad_description", "limit"),
    "params_claims_terabytes": ("params.npz", _npz(**{"w.npy": _npy_bytes(
        {"descr": "<f8", "fortran_order": False, "shape": (1 << 40,)}, b"\x00" * 8)}), "bad_params", "claims"),
    "params_header_lies_short": ("params.npz", _npz(**{"w.npy": _npy_bytes(
        {"descr": "<f4", "fortran_order": False, "shape": (4,)}, b"\x00" * 4096)}), "bad_params", "does not match"),
    "params_object_array": ("params.npz", _npz(**{"w.npy": _object_npy()}), "bad_params", "never unpickled"),
    "params_raw_pickle": ("params.npz", _npz(**{"w.pkl": b"\x80\x04cposix\nsystem\n."}), "bad_params", "not an array"),
    "params_bad_header_text": ("params.npz", _npz(**{"w.npy": b"\x93NUMPY\x01\x00\x10\x00__import__('os')\n"}),
                               "bad_params", "header"),
    "params_not_zip": ("params.npz", b"PK\x03\x04 truncated", "bad_params", "npz archive"),
    "metadata_alias_bomb": ("metadata.yaml", ALIAS_BOMB.encode(), "bad_metadata", "alias"),
    "metadata_python_tag": ("metadata.yaml", b"name: x\nauthor: me\nboards: [A]\nexploit: "
                                             b"!!python/object/apply:os.system ['touch pwned']\n",
                            "bad_metadata", "tag"),
    "metadata_custom_tag": ("metadata.yaml", b"name: !secret x\nauthor: me\nboards: [A]\n", "bad_metadata", "tag"),
    "metadata_huge_number": ("metadata.yaml", b"name: x\nauthor: me\nboards: [A]\nseed: " + b"9" * 9000 + b"\n",
                             "bad_metadata", "9000 characters"),
    "metadata_deep": ("metadata.yaml", b"name: x\nauthor: me\nboards: " + b"[" * 400 + b"]" * 400 + b"\n",
                      "bad_metadata", "nests deeper"),
    "metadata_oversized": ("metadata.yaml", b"name: x\nauthor: me\nboards: [A]\nnote: '" + b"y" * 100_000 + b"'\n",
                           "bad_metadata", "limit"),
    "metadata_not_utf8": ("metadata.yaml", b"name: x\nauthor: \xff\xfeme\nboards: [A]\n", "bad_metadata", "not UTF-8"),
    "metadata_long_boards": ("metadata.yaml", b"name: x\nauthor: me\nboards: ['" + b"\xe2\x80\xae" * 300 + b"']\n",
                             "bad_metadata", "board names"),
}


NEVER_ECHOED = ("Caf", "ELF", "owned", "words words", "posix", "__import__", "lolol", "touch", "secret", "99999",
                "[[[", "yyyy", "\u202e", "\\u202e\\u202e\\u202e")


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files_are_refused_with_their_kind_never_echoed(tmp_path, capsys, case):
    """Text files that are not text, params whose headers lie or hold objects, YAML with anchors, aliases,
    tags, huge or deep values: each refused by the check named in its message, none of it quoted back."""
    name, raw, kind, says = BAD_FILES[case]
    folder = _copy(tmp_path, KVPRIOR if name == "params.npz" else FRC)
    (folder / name).write_bytes(raw)
    message = refused(folder, kind, capsys)
    assert says in message and not any(s in message for s in NEVER_ECHOED), message


# ------------------------------------------------------------------------------- class: links in the folder
def _linked(tmp_path: Path, case: str) -> Path:
    """A folder that passes every check but for one link (or a file that is not its own) somewhere in it."""
    other = _copy(tmp_path, FRC, "other_author")  # another author's entry beside it
    assert load_submission(other).author  # the entry linked to is itself fine
    folder = _copy(tmp_path)
    if case == "method_links_to_another_entry":
        (folder / "method.py").unlink()
        (folder / "method.py").symlink_to(other / "method.py")
    elif case == "relative_link_inside":
        (folder / "notes.md").symlink_to("DESCRIPTION.md")
    elif case == "linked_subfolder":
        (folder / "vendor").symlink_to(other, target_is_directory=True)
    elif case == "link_deep_in_subfolders":
        (folder / "a" / "b" / "c").mkdir(parents=True)
        (folder / "a" / "b" / "c" / ".cache").symlink_to("/etc/hostname")
    elif case == "dangling_link":
        (folder / "params.npz").symlink_to(tmp_path / "not_yet_there.npz")
    elif case == "hard_link_to_another_entry":
        (folder / "method.py").unlink()
        (folder / "method.py").hardlink_to(other / "method.py")
    elif case == "pipe_as_description":
        (folder / "DESCRIPTION.md").unlink()
        os.mkfifo(folder / "DESCRIPTION.md")
    elif case == "folder_is_a_link":
        shutil.rmtree(folder)
        folder.symlink_to(other, target_is_directory=True)
    return folder


LINK_CASES = ("method_links_to_another_entry", "relative_link_inside", "linked_subfolder", "link_deep_in_subfolders",
              "dangling_link", "hard_link_to_another_entry", "pipe_as_description", "folder_is_a_link")


@pytest.mark.parametrize("case", LINK_CASES)
def test_a_link_anywhere_in_a_submission_is_refused_before_anything_is_read(tmp_path, capsys, monkeypatch, case):
    """A symbolic link anywhere (even one pointing inside, or dangling), a hard link, a pipe, or a folder that is
    itself a link: ``bad_folder`` before any file is hashed or parsed (nothing is read: ``read_member`` is never
    called), and ``arena check`` says so in one line."""
    from cachecraft_lib.arena.submissions import folder as folder_module

    folder = _linked(tmp_path, case)
    calls = []
    monkeypatch.setattr(folder_module, "read_member", lambda *a, **k: calls.append(a))
    refused(folder, "bad_folder", capsys)
    assert calls == []


def test_a_file_swapped_for_a_link_after_the_scan_is_not_followed(tmp_path):
    """``read_member`` opens by descriptor without following a link: a link put in place after the folder scan
    (a race) is refused, never read through."""
    from cachecraft_lib.arena.submissions.safe_files import folder_problem, read_member

    other, folder = _copy(tmp_path, FRC, "other_author"), _copy(tmp_path)
    assert folder_problem(folder) is None
    (folder / "method.py").unlink()
    (folder / "method.py").symlink_to(other / "method.py")
    with pytest.raises(SubmissionError) as err:
        read_member(folder, "method.py", 1 << 20, "bad_method")
    assert err.value.kind == "bad_folder"
    assert read_member(other, "method.py", 1 << 20, "bad_method") == (other / "method.py").read_bytes()
    (folder / "method.py").unlink()
    (folder / "method.py").mkdir()  # a folder where a file is read: refused, not a traceback
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert err.value.kind == "bad_folder" and "is a folder" in str(err.value)


# ------------------------------------------------------------------- class: strings that act on a terminal
HOSTILE_STRINGS = {  # what each would do printed raw
    "csi_recolour": "\x1b[31;1mbaseline\x1b[0m", "osc_title_and_link": "\x1b]0;owned\x07\x1b]8;;http://x\x1b\\me",
    "bell": "me\x07\x07", "c1_csi": "me\x9b2J", "backspace_overwrite": "mallory\b\b\b\b\b\b\balice",
    "carriage_return": "mallory\ralice", "rtl_override": "alice\u202eeciffo", "bidi_isolate": "\u2066alice\u2069",
    "zero_width": "al\u200bice\u2060\ufeff", "line_separator": "alice\u2028bob", "hangul_filler": "\u3164\u3164",
    "stacked_marks": "a" + "\u0301" * 40, "private_use": "me\ue000", "newline": "alice\nok: forged line",
}


def _clean(text: str) -> bool:
    """Nothing in ``text`` acts on a terminal or hides: every character printable, one line, no filler."""
    import unicodedata

    from cachecraft_lib.util.terminal_text import HIDDEN_CATEGORIES, INVISIBLE, MAX_MARKS

    marks = 0
    for ch in text:
        cat = unicodedata.category(ch)
        if cat in HIDDEN_CATEGORIES or ch in INVISIBLE or (cat.startswith("Z") and ch != " "):
            return False
        marks = marks + 1 if cat in ("Mn", "Me") else 0
        if marks > MAX_MARKS:
            return False
    return True


def _author_folder(tmp_path: Path, author: str, name: str = "entry") -> Path:
    folder = _copy(tmp_path, FRC, name)
    meta = (folder / "metadata.yaml").read_text()
    (folder / "metadata.yaml").write_text("\n".join(line for line in meta.splitlines() if not line.startswith("author"))
                                          + "\nauthor: " + json.dumps(author) + "\n")
    return folder


def test_strings_from_a_submission_never_act_on_a_terminal(tmp_path, capsys):
    """Every hostile author is either refused by ``arena check`` (controls and direction overrides: a clean
    ``bad_metadata``) or printed with its characters shown escaped; the same text in a ledger refusal, a judge's
    note and the leaderboard the CLI prints comes out clean."""
    from cachecraft_lib.arena.judges.review import Review
    from cachecraft_lib.arena.scoring.ledger import Ledger
    from cachecraft_lib.arena.scoring.refusals import record_refusal
    from cachecraft_lib.util.terminal_text import safe_table

    for i, (case, author) in enumerate(HOSTILE_STRINGS.items()):
        folder = _author_folder(tmp_path, author, f"e{i}")
        capsys.readouterr()
        code = main(["arena", "check", str(folder)])
        out, err = capsys.readouterr()
        assert code in (0, 2) and _clean((out + err).rstrip("\n")) and (out + err).count("\n") == 1, (case, out, err)
        assert author not in out + err, case
        if code == 2:
            assert "bad_metadata" in err and "Traceback" not in err, case
        note = Review(1, 1, 1, notes=(f"fabricated evidence: '{author}'",)).notes[0]
        assert _clean(note) and author not in note, case
    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")
    for author in HOSTILE_STRINGS.values():
        payload = record_refusal(ledger, tmp_path / "arena", "A", author, author, SubmissionError("crash", author))
        assert all(_clean(payload[k]) for k in ("name", "author", "message")), payload
    table = pd.DataFrame({"name": list(HOSTILE_STRINGS), "author": list(HOSTILE_STRINGS.values()), "overall": 0.5})
    assert _clean(safe_table(table).to_string(index=False).replace("\n", " "))


def test_the_leaderboard_the_cli_prints_escapes_names_and_authors(tmp_path, capsys):
    from cachecraft_lib.arena.scoring.ledger import Ledger

    ledger = Ledger(tmp_path / "arena" / "ledger.jsonl")  # entries an older arena recorded without the checks
    base = {"board": "A", "round": 1, "eligible": True, "moved": True, "overall": 0.5, "lo": 0.4, "hi": 0.6}
    ledger.append("baseline", {**base, "name": "snapkv", "kind": "baseline", "author": "baseline"})
    for i, author in enumerate(HOSTILE_STRINGS.values()):
        ledger.append("submission", {**base, "name": f"m{i}\x1b[2J", "kind": "submission", "author": author,
                                     "best_before": "snapkv", "gain": 0.01, "gain_lo": 0.0})
    capsys.readouterr()
    assert main(["arena", "leaderboard", "--profile", "smoke", "--root", str(tmp_path / "arena")]) == 0
    out = capsys.readouterr().out
    assert "m0" in out and _clean(out.replace("\n", " ")), out


# -------------------------------------------------------------- class: a refusal under someone else's name
def test_a_refused_folder_is_never_recorded_under_a_reserved_or_chosen_name(tmp_path):
    """Folders named like a baseline, the uncompressed reference or another author's entry, declaring such names
    or an author ``baseline``, each refused by the static checks: the rejection is recorded under a neutral id
    (a hash of the folder's files), with the kind's fixed sentence, and nothing of the submitter's text."""
    import hashlib

    from cachecraft_lib.arena.arena import Arena
    from cachecraft_lib.arena.scoring.refusals import STATIC_SENTENCES, public_message
    from cachecraft_lib.arena.submissions.identity import name_key, reserved_names

    secret = hashlib.sha256(b"cachecraft tests: hostile refusals").hexdigest().encode()
    arena = Arena("smoke", tmp_path / "arena", progress=False)
    arena.ensure_round(secret, 1)
    arena.ledger.append("submission", {"board": "A", "round": 1, "name": "alice-entry", "author": "alice",
                                       "author_key": "alice", "kind": "submission", "overall": 0.5})
    taken = {name_key(e["payload"]["name"]) for e in arena.ledger.events() if "name" in e["payload"]}
    cases = [  # folder, declared name, author, what else is wrong, kind
        ("snapkv", "snapkv", "mallory", None, "reserved_name"),
        ("no_press", "my-entry", "baseline", "## Idea\nVISIT-EVIL-EXAMPLE is the best entry\n", "bad_description"),
        ("alice-entry", "alice-entry", "mallory", None, "reserved_name"),
        ("knorm", "VISIT EVIL EXAMPLE", "mallory", None, "bad_metadata"),
        ("full", "full", "mallory", None, "reserved_name"),
    ]
    for folder_name, name, author, description, kind in cases:
        folder = _author_folder(tmp_path / f"c-{len(arena.ledger.events())}", author, folder_name)
        meta = (folder / "metadata.yaml").read_text().replace("name: copy-of-frc", f"name: {json.dumps(name)}")
        (folder / "metadata.yaml").write_text(meta)
        if description:
            (folder / "DESCRIPTION.md").write_text(description)
        before = [f for f in _listing(tmp_path / "arena") if not f[0].startswith("ledger.jsonl")]
        out = arena.submit(folder, "A", secret, allow_weak=True)
        assert out["rejected"] and out["kind"] == kind, out
        data = arena.ledger.events()[-1]["payload"]
        assert data["name"].startswith("refused-") and name_key(data["name"]) not in reserved_names() | taken
        assert data["message"] == public_message(kind, False) and STATIC_SENTENCES[kind] in data["message"]
        for theirs in (folder_name, name, "VISIT", "EVIL", "mallory"):
            assert theirs not in data["message"] and theirs not in data["name"], (theirs, data)
        assert data["author"] == ("unknown" if author == "baseline" else author)
        assert [f for f in _listing(tmp_path / "arena") if not f[0].startswith("ledger.jsonl")] == before
    ids = [e["payload"]["name"] for e in arena.ledger.events() if e["kind"] == "rejection"]
    assert len(set(ids)) == len(cases)  # each folder its own id


# ----------------------------------------------------------------- class: the question smuggled in a probe
QUESTION = "What is the special magic number for madly-cartridge mentioned in the provided text?"
SMUGGLED = {  # each carries QUESTION to a query-agnostic board's compression
    "zero_width_in_a_word": "Answer: What is the spe\u200bcial ma\u200cgic num\u200dber for madly-cartridge "
                            "mentioned in the provided text?",
    "other_format_chars": "What\u2060 is the\u00ad special \ufeffmagic number for\u200e madly-cartridge mentioned in "
                          "the provided text",
    "space_variants": "What\u00a0is\u3000the\u2003special\tmagic\nnumber for madly\u2011cartridge mentioned in the "
                      "provided text?",
    "fullwidth_and_case": "ＷＨＡＴ IS THE SPECIAL MAGIC NUMBER FOR MADLY-CARTRIDGE MENTIONED IN THE PROVIDED TEXT",
    "look_alike_letters": "Whаt is thе spеcial magic number for madly-cartridge mеntioned in the provided tеxt?",
    "combining_marks": "Wh\u0301at is the spe\u0300cial magic number for madly-cartridge mentioned in the provided "
                       "text?",
    "punctuation_changed": "what-is the special_magic number, for madly/cartridge; mentioned in: the provided text!",
    "words_run_together": "Remember: whatisthespecialmagicnumberformadlycartridgementionedintheprovidedtext",
    "a_word_changed": "Tell me: what is the special magic code for madly-cartridge mentioned in the given text?",
}


@pytest.mark.parametrize("case", sorted(SMUGGLED))
def test_a_probe_carrying_the_question_in_disguise_is_refused(case):
    """Zero-width and other format characters, other spaces, NFKC forms, case, look-alike letters, combining
    marks, changed punctuation, the words run together or one word changed: ``probe_is_question`` each time; a
    probe written without the question passes."""
    from cachecraft_lib.arena.submissions.probes import check_not_question

    with pytest.raises(SubmissionError) as err:
        check_not_question(["List every name and number in the text above.", SMUGGLED[case]], [QUESTION])
    assert err.value.kind == "probe_is_question" and "madly" not in str(err.value)
    check_not_question(["List every name, number, code, and key fact stated in the text above.",
                        "Repeat the previous context exactly.", "Which numbers does the text mention?"], [QUESTION])


# ------------------------------------------------- class: a method.py the parser itself cannot survive
@pytest.mark.parametrize("body", ["x = " + "-" * 200_000 + "1\n",  # MemoryError inside ast.parse
                                  "x = " + "(" * 100 + "1" + ")" * 100 + "\n",  # operator run, no memory needed
                                  "x = 1\0\n"])  # ValueError (NUL) from the parser
def test_a_method_the_parser_cannot_hold_is_refused_not_a_traceback(tmp_path, capsys, body):
    """Every failure of parsing submission code (MemoryError, RecursionError, ValueError, SyntaxError) is a
    ``bad_method`` refusal, and ``arena check`` exits non-zero with one line."""
    folder = _copy(tmp_path)
    (folder / "method.py").write_text((folder / "method.py").read_text() + body)
    refused(folder, "bad_method", capsys)


# ------------------------------------------- class: identities that read like a reserved one (look-alikes)
@pytest.mark.parametrize("name,author", [("knorrn", "tester"), ("t0va", "tester"), ("streaming-1lm", "tester"),
                                         ("spanv0te", "tester"), ("own-entry", "cachecraf\u1e6d"),
                                         ("own-entry", "cachecr\u0251ft"), ("own-entry", "CACHE craft"),
                                         ("own-entry", "red\U000e0061 team")])
def test_an_identity_that_reads_like_a_reserved_one_is_refused(tmp_path, name, author):
    """Baseline and shipped-example names, and the organiser's author, compared by skeleton (NFKD, marks
    stripped, look-alike letters of any script and ASCII look-alikes such as rn/m, 0/o, 1/l folded); tag and
    other invisible characters refused outright. The shipped examples themselves still load (by their path)."""
    folder = _copy(tmp_path)
    (folder / "metadata.yaml").write_text(f"name: {name}\nauthor: {json.dumps(author)}\nboards: [A]\n")
    with pytest.raises(SubmissionError) as err:
        load_submission(folder)
    assert err.value.kind in ("reserved_name", "bad_metadata")
    assert load_submission(FRC).author == "cachecraft"


def test_a_yaml_merge_key_is_refused(tmp_path, capsys):
    folder = _copy(tmp_path)
    (folder / "metadata.yaml").write_text("base: {boards: [A]}\nname: merged\nauthor: tester\n<<: {boards: [A]}\n")
    refused(folder, "bad_metadata", capsys)


# --------------------------------------- class: probes carrying the question in unlisted look-alikes or reordered
@pytest.mark.parametrize("probe", [
    "Wh\u0251t is the speci\u0251l m\u0251gic number for purple-elephant mentioned in the provided text?",
    "What is the speci\u0251l m\u0585gic number for purple-elephant ment\u0131oned in the provided text?",
    "What is the special magic number mentioned in the provided text?",  # the template without its key
    "In the provided text, the number mentioned for purple-elephant: what is the special magic one?",
    "Summarise the \u0436 facts."])  # a letter the fold does not map, on an ASCII board
def test_a_probe_with_unlisted_lookalikes_or_the_template_is_refused(probe):
    from cachecraft_lib.arena.submissions.probes import check_not_question

    question = "What is the special magic number for purple-elephant mentioned in the provided text?"
    with pytest.raises(SubmissionError):
        check_not_question([probe], [question])
    check_not_question(["List every name, number, code, and key fact stated in the text above."], [question])


# ------------------------------------ class: an entry claiming another's identity hides it from the judge
def test_a_copy_claiming_another_entrys_identity_still_meets_it_in_the_judge(tmp_path):
    """The judge's earlier entries are never dropped for a declared (name, author): a byte copy of a shipped
    example, and a copy declaring a rival's ledger identity, both still see their source."""
    from cachecraft_lib.arena.judges.bundle import load_bundle

    spanvote = tmp_path / "spanvote"
    shutil.copytree(EXAMPLES / "spanvote", spanvote)
    earlier = {(e.name, e.author) for e in load_bundle(spanvote, events=[]).earlier}
    assert ("spanvote", "cachecraft") in earlier
    rival = {"kind": "submission", "payload": {"name": "rival", "author": "alice", "code_sha256": "ab" * 32}}
    (spanvote / "metadata.yaml").write_text("name: rival\nauthor: alice\nboards: [B_offline]\n")
    assert any(e.name == "rival" for e in load_bundle(spanvote, events=[rival]).earlier)
