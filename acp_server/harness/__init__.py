"""The server's refinement surface: what a client sees of the session's continual harness.

`events` (the one subscription to a session's harness events), `cards` (review cards, quiescence
frames), `review` (asking a proposal with the permission prompt), `commands` (the harness slash
commands), `methods` (the `_harness/*` extension methods) and `wire` (their camelCase shapes).
All of it asks agent_core's `HarnessSurface` and formats the answer.
"""
