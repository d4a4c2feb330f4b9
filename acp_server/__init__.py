"""acp_server: the ACP stdio surface (transport, methods, updates, slash commands)."""
