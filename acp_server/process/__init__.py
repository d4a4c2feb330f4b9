"""The server process: early answers before heavy imports, bytecode, import costs, watchdog."""
