"""Models used by the benchmark tasks."""
