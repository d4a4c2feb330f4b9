"""JSON-RPC over stdio: transport, framing, method table, wire models, frames, errors."""
