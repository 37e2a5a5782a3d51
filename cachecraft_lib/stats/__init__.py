"""Statistics: paired intervals over samples (every comparison's uncertainty) and the spread of timings."""
