"""Real properties of every generated RULER task, checked on the tokenizer shipped with the tests."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from cachecraft_lib.ruler import COLUMNS, MAX_NEW_TOKENS, SUBSTITUTES, TASKS, generate

NEEDLE = re.compile(r"One of the special magic (?:numbers|uuids) for ([\w-]+) is: ([\w-]+)\.")


def _rows(df, prefix):
    return df[df.task.str.startswith(prefix)].itertuples()


def test_schema_matches_kvpress(ruler_1024):
    assert list(ruler_1024.columns) == COLUMNS
    assert list(dict.fromkeys(ruler_1024.task)) == list(TASKS)
    assert (ruler_1024.groupby("task").size() == 4).all()
    for row in ruler_1024.itertuples():
        assert isinstance(row.answer, list) and row.answer and all(isinstance(a, str) for a in row.answer)
        assert row.max_new_tokens == MAX_NEW_TOKENS[row.task.split("_")[0]]
    assert ruler_1024.attrs["source"] == "offline"
    assert set(ruler_1024.attrs["substitutes"]) == set(SUBSTITUTES)


def test_kvpress_split_strings(ruler_1024):
    for row in ruler_1024.itertuples():
        family = row.task.split("_")[0]
        if family == "niah":
            assert row.question.startswith(("What is the special magic", "What are all the special magic"))
            assert row.question.endswith("mentioned in the provided text? ")
            assert row.answer_prefix.startswith("The special magic")
            assert row.context.startswith(("A special magic", "Some special magic")) and row.context.endswith("\n")
        elif family == "vt":
            assert row.context.startswith(" ") and row.question.startswith("Question: Find all variables")
            assert row.answer_prefix.endswith("they are: ") and "assgined" in row.answer_prefix
        elif family == "cwe":
            assert row.question == "Question: What are the 10 most common words in the above list? "
            assert row.answer_prefix == "Answer: The top 10 words that appear most often in the list are:"
        elif family == "fwe":
            assert row.question.startswith("Question: Do not provide any explanation.")
        else:
            assert row.context.endswith("\n\n") and row.answer_prefix == "Answer:"
            assert row.question.startswith("Answer the question based on the given documents.")


def test_singular_plural_rewrite(ruler_1024):
    for row in _rows(ruler_1024, "niah"):
        plural = row.task in ("niah_multivalue", "niah_multiquery")
        assert row.question.startswith("What are all" if plural else "What is")
        assert row.context.startswith("Some special magic" if plural else "A special magic")
        assert len(row.answer) == (4 if plural else 1)
        if row.task == "niah_multiquery":
            assert ", and " in row.question


def test_niah_answers_are_the_needles_of_the_queried_keys(ruler_1024):
    for row in _rows(ruler_1024, "niah"):
        needles = NEEDLE.findall(row.context)
        queried = [k for k, _ in needles if f" {k} " in f" {row.question} ".replace(",", " ")]
        assert queried, row.task
        values = [v for k, v in needles if k in queried]
        assert sorted(values) == sorted(row.answer), row.task
        distractors = {k for k, _ in needles} - set(queried)
        assert not (distractors & set(queried))
        if row.task in ("niah_multikey_2", "niah_multikey_3"):
            assert len(distractors) >= 5  # the haystack itself is made of distractor needles
        if row.task == "niah_single_1":
            assert "The grass is green." in row.context and len(needles) == 1
        if row.task.endswith("_3"):
            assert all(re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", a)
                       for a in row.answer)
        else:
            assert all(re.fullmatch(r"\d{7}", a) for a in row.answer)


def _resolve_chain(text: str, value: str) -> set[str]:
    assign = re.findall(r"VAR ([A-Z]+) = (VAR [A-Z]+|\d+)", text)
    found: set[str] = set()
    frontier = {value}
    while frontier:
        new = {name for name, rhs in assign if rhs in frontier or rhs.removeprefix("VAR ") in frontier}
        new -= found
        found |= new
        frontier = new
    return found


def test_vt_chain_resolves_to_exactly_the_answer(ruler_1024):
    for row in _rows(ruler_1024, "vt"):
        value = re.search(r"assigned the value (\d+)", row.question).group(1)
        main = row.context.split("\n\n\n\n", 1)[1]  # after the one-shot example
        assert _resolve_chain(main, value) == set(row.answer)
        assert len(row.answer) == 5 and all(len(a) == 5 for a in row.answer)
        example = row.context.split("\n\n\n\n", 1)[0]
        assert "VAR" in example and "Answer:" in example  # the one-shot example is present


def test_cwe_answers_are_strictly_the_ten_most_common(ruler_1024):
    for row in _rows(ruler_1024, "cwe"):
        listing = row.context.split("Memorize the ones that appear most often.\n")[-1]
        counts = Counter(re.findall(r"\d+\. (\S+)", listing))
        top = [w for w, _ in counts.most_common()]
        assert set(top[:10]) == set(row.answer)
        assert min(counts[w] for w in row.answer) > max(counts[w] for w in top[10:])


def test_fwe_answers_are_ranks_two_to_four(ruler_1024):
    for row in _rows(ruler_1024, "fwe"):
        coded = row.context.split("coded words. ", 1)[1]
        counts = Counter(coded.split())
        ranked = [w for w, _ in counts.most_common()]
        assert ranked[0] == "..."
        assert ranked[1:4] == row.answer
        assert counts[ranked[3]] > counts[ranked[4]]


def test_qa_substitutes_answer_from_documents(ruler_1024):
    for row in _rows(ruler_1024, "qa"):
        assert "Document 1:" in row.context and row.answer[0] in row.context
        if row.task == "qa_2":  # two hops: the entity's founder, then the founder's birthplace
            name = re.search(r"who established the (.+?) born\?", row.question).group(1)
            founder = re.search(rf"The {re.escape(name)} is an institution .*? by (.+?)\. ", row.context).group(1)
            assert f"{founder} was born in {row.answer[0]} " in row.context


@pytest.mark.parametrize("length", [1024, 2048])
def test_length_budget_holds_and_is_well_used(tokenizer, length):
    df = generate(length, tokenizer, samples_per_task=3, seed=5)
    for row in df.itertuples():
        used = len(tokenizer(row.context + row.question + row.answer_prefix, add_special_tokens=False).input_ids)
        total = used + row.max_new_tokens
        assert total <= length, (row.task, total)
        assert total >= 0.9 * length, (row.task, total)


def test_deterministic_for_a_seed(tokenizer):
    a = generate(1024, tokenizer, samples_per_task=2, seed=3, tasks=["niah_single_2", "vt", "fwe", "qa_2"])
    b = generate(1024, tokenizer, samples_per_task=2, seed=3, tasks=["niah_single_2", "vt", "fwe", "qa_2"])
    c = generate(1024, tokenizer, samples_per_task=2, seed=4, tasks=["niah_single_2", "vt", "fwe", "qa_2"])
    assert a.equals(b)
    assert not a.equals(c)
    for task in ("niah_single_2", "vt", "fwe", "qa_2"):
        assert list(a[a.task == task].answer) != list(c[c.task == task].answer)


def test_subset_gives_the_same_rows(tokenizer, ruler_1024):
    sub = generate(1024, tokenizer, samples_per_task=4, seed=42, tasks=["cwe"])
    full = ruler_1024[ruler_1024.task == "cwe"].reset_index(drop=True)
    assert sub.equals(full)


def test_unknown_task_is_a_clear_error(tokenizer):
    with pytest.raises(ValueError, match="unknown RULER task"):
        generate(1024, tokenizer, samples_per_task=1, tasks=["niah_single_9"])
