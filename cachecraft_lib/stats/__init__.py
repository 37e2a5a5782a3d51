"""Statistics: paired intervals over samples, numeric precision, timing statistics."""
