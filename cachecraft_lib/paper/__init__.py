"""The paper's side: its tables (analysis), claims, checks against its numbers, and latency."""
