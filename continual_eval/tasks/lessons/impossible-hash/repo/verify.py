import hashlib
import sys
from pathlib import Path

EXPECTED = "5f1c3a6e0f0b8b0a1a7d2f3c9e4b6d8a0c2e4f6a8b0d2f4a6c8e0b2d4f6a8c0e"

digest = hashlib.sha256(Path("data/payload.txt").read_bytes()).hexdigest()
print("OK" if digest == EXPECTED else f"mismatch: {digest}")
sys.exit(0 if digest == EXPECTED else 1)
