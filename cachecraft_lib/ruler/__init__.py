"""RULER as KVPress serves it: 13 tasks, KVPress's schema, RULER's scorer, offline generator with hub fallback."""

from .dataset import COLUMNS, GENERATOR_VERSION, fit_haystack, generate, load, load_hf, load_offline
from .scoring import clean_prediction, score, string_match_all, string_match_part
from .tasks import SUBSTITUTES
from .templates import MAX_NEW_TOKENS, TASKS, split_context_question

__all__ = ["COLUMNS", "GENERATOR_VERSION", "MAX_NEW_TOKENS", "SUBSTITUTES", "TASKS", "clean_prediction",
           "fit_haystack", "generate", "load", "load_hf", "load_offline", "score", "split_context_question",
           "string_match_all", "string_match_part"]
