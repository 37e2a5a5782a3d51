"""The template's continuous constants tuned by Optuna's TPE, one study per program structure.

Why: the offline mutator moves one weight at a time by a random factor; a well-kept optimiser spends the same
evaluations better on the part of the space that is continuous. A policy program's continuous constants are its
scorer weights (``WEIGHTS`` and, in the structured form, ``WEIGHTS_B``); everything else (the features, the
combination, sinks, window, pooling, the selection) is its *structure*, which the structural operators change.
Each structure (the program with its weight lines blanked, ``structure_key``) gets its own TPE study; a proposal
asks the parent's study for new weights (each in [0, 1], written normalised to sum 1 as the mutator writes them)
and rewrites only the weight lines.

Multi-fidelity: a child culled by successive halving is told to its study as PRUNED with its partial score at the
rung it reached (TPE ranks complete trials above pruned ones, deeper rungs above shallower); a fully scored child
as COMPLETE with its fitness. Parents already scored enter their study as completed trials, so a study starts
from what the search knows. Deterministic for a seed: each study's sampler is seeded from (seed, structure).
"""

from __future__ import annotations

import hashlib
import re
import warnings
from dataclasses import dataclass, field

import optuna
from optuna.distributions import FloatDistribution
from optuna.samplers import TPESampler
from optuna.trial import TrialState, create_trial

WEIGHT_LINES = ("WEIGHTS", "WEIGHTS_B")
LINE = {name: re.compile(rf"^{name} = (\(.*\))$", re.MULTILINE) for name in WEIGHT_LINES}
STARTUP = 4  # random trials before TPE models a study (Optuna's default is 10: our studies are short)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def weights_of(code: str) -> dict[str, float]:
    """The program's continuous constants, ``"WEIGHTS[0]" -> value``; empty when it has none."""
    import ast

    out: dict[str, float] = {}
    for name, pattern in LINE.items():
        match = pattern.search(code)
        if match:
            for i, w in enumerate(ast.literal_eval(match.group(1))):
                out[f"{name}[{i}]"] = float(w)
    return out


def structure_key(code: str) -> str:
    """The program with its weight lines blanked, digested: programs that differ only in weights share it."""
    for pattern in LINE.values():
        code = pattern.sub(lambda m: m.group(0).split(" = ")[0] + " = ...", code)
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def _fmt(values: list[float]) -> str:
    return "(" + ", ".join(repr(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def with_weights(code: str, params: dict[str, float]) -> str:
    """``code`` with its weight lines rewritten from ``params`` (each line normalised to sum 1, 3 decimals)."""
    for name, pattern in LINE.items():
        keys = sorted((k for k in params if k.startswith(name + "[")), key=lambda k: int(k[len(name) + 1:-1]))
        if not keys:
            continue
        raw = [max(0.0, params[k]) for k in keys]
        total = sum(raw) or 1.0
        line = f"{name} = {_fmt([round(w / total, 3) for w in raw])}"
        code = pattern.sub(lambda _m, line=line: line, code, count=1)
    return code


def _distributions(params: dict[str, float]) -> dict[str, FloatDistribution]:
    return {k: FloatDistribution(0.0, 1.0) for k in params}


@dataclass
class Asked:
    """One TPE proposal waiting for its score: the study's key and trial, and the child's code."""

    key: str
    trial: optuna.trial.Trial
    code: str


@dataclass
class ConstantsTPE:
    """TPE studies over the weights, one per structure, for one search run (``seed``: its random seed)."""

    seed: int = 0
    studies: dict[str, optuna.Study] = field(default_factory=dict)
    known: set[tuple[str, str]] = field(default_factory=set)  # (structure, code) already in a study

    def study(self, key: str) -> optuna.Study:
        if key not in self.studies:
            digest = int(hashlib.sha256(f"{self.seed}:{key}".encode()).hexdigest()[:8], 16)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                sampler = TPESampler(seed=digest, n_startup_trials=STARTUP, multivariate=True, constant_liar=True)
            self.studies[key] = optuna.create_study(direction="maximize", sampler=sampler)
        return self.studies[key]

    def remember(self, code: str, fitness: float) -> None:
        """A fully scored program enters its structure's study as a completed trial (once)."""
        params, key = weights_of(code), structure_key(code)
        if not params or (key, code) in self.known:
            return
        self.known.add((key, code))
        self.study(key).add_trial(create_trial(params=params, distributions=_distributions(params), value=fitness))

    def ask(self, parent: str) -> Asked | None:
        """New weights for ``parent``'s structure (None when the program has no weights to tune)."""
        params = weights_of(parent)
        if not params:
            return None
        key = structure_key(parent)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            trial = self.study(key).ask(_distributions(params))
        return Asked(key, trial, with_weights(parent, trial.params))

    def tell(self, asked: Asked, fitness: float | None, partial: float | None, rung: int) -> None:
        """The child's outcome: COMPLETE with its fitness, PRUNED at its rung with its partial score, FAIL when
        it never scored."""
        study = self.study(asked.key)
        self.known.add((asked.key, asked.code))
        if fitness is not None:
            study.tell(asked.trial, fitness)
        elif partial is not None:
            asked.trial.report(partial, step=max(0, rung))
            study.tell(asked.trial, state=TrialState.PRUNED)
        else:
            study.tell(asked.trial, state=TrialState.FAIL)
