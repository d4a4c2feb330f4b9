"""Agent configuration: the environment and config.toml, the settings table, the session settings."""
