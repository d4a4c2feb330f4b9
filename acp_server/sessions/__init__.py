"""Sessions bound to the connection: the session methods, their editor, ids, quiescence."""
