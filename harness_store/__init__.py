"""harness_store: the continual harness (entries, proposals, apply, rollback, persistence)."""
