"""continual-acp eval: evidence that the harness helps (suites of tasks run through the real server)."""
