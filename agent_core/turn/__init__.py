"""One turn: the loop, its recorder and hooks, the model context, the system prompt and compaction."""
