"""Sessions on disk: transcripts, the session index, checkpoints, rewind and fork, the owner lock."""
