"""The console script's subcommands besides serve: setup, demo, doctor, sessions."""
