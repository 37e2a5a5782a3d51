"""Policy programs shipped with the suite (FRC in program form, the V1 scorer); see ``cachecraft_lib.methods.policy``."""

from pathlib import Path

POLICIES = Path(__file__).parent
FRC_PROGRAM = POLICIES / "frc_policy.py"
V1_PROGRAM = POLICIES / "v1_generic_scorer.py"
