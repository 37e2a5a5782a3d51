"""Arena scoring: scores, gate, points, the signed ledger, leaderboards, verification, rounds, refusals."""
