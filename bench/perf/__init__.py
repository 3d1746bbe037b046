"""bench measuring itself: where a run's wall time went, and `bench perf`."""
