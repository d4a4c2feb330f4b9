"""agent_core: sessions, the turn loop, the model client, prompt building and refinement."""
