"""The paper's side: its tables (analysis), claims, consistency checks, latency, and the grid's precision."""
