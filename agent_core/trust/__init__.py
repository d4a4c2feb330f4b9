"""Trust in harness entries: project scope, promotion, skill checks, `/why` and entry usage."""
