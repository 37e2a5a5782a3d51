"""RULER's prompt templates (model template ``base``) and KVPress's context/question split.

The strings follow RULER at the commit KVPress's ``simonjegou/ruler`` was built from: the
generator template is ``task_template + answer_prefix`` and KVPress then splits the full input
into ``context``, ``question`` and ``answer_prefix`` with the patterns below.
"""

from __future__ import annotations

import re

TASKS: tuple[str, ...] = (
    "niah_single_1", "niah_single_2", "niah_single_3",
    "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
)

MAX_NEW_TOKENS = {"niah": 128, "vt": 30, "cwe": 120, "fwe": 50, "qa": 32}

NIAH_TEMPLATE = (
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. "
    "I will quiz you about the {type_needle_v} afterwards.\n{context}\n"
    "What are all the special magic {type_needle_v} for {query} mentioned in the provided text?"
)
NIAH_PREFIX = " The special magic {type_needle_v} for {query} mentioned in the provided text are"
NIAH_NEEDLE = "One of the special magic {type_needle_v} for {key} is: {value}."
NOISE_SENTENCE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

VT_TEMPLATE = (
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n{context}\n"
    "Question: Find all variables that are assigned the value {query} in the text above."
)
# "assgined" is RULER's typo at the commit KVPress's data was built from; kept for fidelity.
VT_PREFIX = (" Answer: According to the chain(s) of variable assignment in the text above, "
             "{num_v} variables are assgined the value {query}, they are: ")

CWE_TEMPLATE = (
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n{context}\n"
    "Question: What are the 10 most common words in the above list?"
)
CWE_PREFIX = " Answer: The top 10 words that appear most often in the list are:"

FWE_TEMPLATE = (
    "Read the following coded text and track the frequency of each coded word. Find the three most "
    "frequently appeared coded words. {context}\nQuestion: Do not provide any explanation. Please ignore "
    "the dots '....'. What are the three most frequently appeared words in the above coded text?"
)
FWE_PREFIX = " Answer: According to the coded text above, the three most frequently appeared words are:"

QA_TEMPLATE = (
    "Answer the question based on the given documents. Only give me the answer and do not output any "
    "other words.\n\nThe following are given documents.\n\n{context}\n\nAnswer the question based on the "
    "given documents. Only give me the answer and do not output any other words.\n\nQuestion: {query}"
)
QA_PREFIX = " Answer:"
QA_DOCUMENT = "Document {i}:\n{document}"

QUESTION_PATTERNS = {
    "niah": re.compile(r"What (?:is|are all) the special magic"),
    "vt": re.compile(r"Question: Find all variables that are assigned the value"),
    "cwe": re.compile(r"Question: What are the 10 most common words in the above list\?"),
    "fwe": re.compile(r"Question: Do not provide any explanation\."),
    "qa": re.compile(r"Answer the question based on the given documents\."),
}
ANSWER_PATTERNS = {
    "niah": re.compile(r"The special magic"),
    "vt": re.compile(r"Answer:"),
    "cwe": re.compile(r"Answer:"),
    "fwe": re.compile(r"Answer:"),
    "qa": re.compile(r"Answer:"),
}


def task_family(task: str) -> str:
    """``niah_single_1`` -> ``niah``; ``vt`` -> ``vt`` (KVPress keys metrics and max tokens this way)."""
    return task.split("_")[0]


def fill(template: str, **fields: object) -> str:
    """``str.format`` that tolerates braces inside the field values (haystacks are inserted last)."""
    context = fields.pop("context", None)
    out = template.replace("{context}", "\x00CONTEXT\x00").format(**fields)
    return out.replace("\x00CONTEXT\x00", str(context)) if context is not None else out


def niah_number(template: str, singular: bool) -> str:
    """RULER's singular rewrite of the NIAH template (applied when one query asks for one value)."""
    if not singular:
        return template
    return (template.replace("Some", "A").replace("are all", "is").replace("are", "is")
            .replace("answers", "answer"))


def split_context_question(text: str, task: str) -> tuple[str, str, str]:
    """KVPress's split of a RULER input (answer prefix included) into context, question, prefix.

    The context ends at the *last* question marker (so vt/cwe one-shot examples stay in the
    context); the answer prefix starts at the first answer marker after it.
    """
    family = task_family(task)
    matches = list(QUESTION_PATTERNS[family].finditer(text))
    if not matches:
        raise ValueError(f"{task}: question marker {QUESTION_PATTERNS[family].pattern!r} not found")
    idx = matches[-1].start()
    context, qa = text[:idx], text[idx:]
    found = ANSWER_PATTERNS[family].search(qa)
    if found is None:
        raise ValueError(f"{task}: answer marker {ANSWER_PATTERNS[family].pattern!r} not found")
    return context, qa[: found.start()], qa[found.start():]
