"""A prompt's turn: session/prompt, the presenter and the cards it shows."""
