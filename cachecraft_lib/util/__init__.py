"""Small utilities: atomic writes, Ray helpers, timers, progress lines."""
