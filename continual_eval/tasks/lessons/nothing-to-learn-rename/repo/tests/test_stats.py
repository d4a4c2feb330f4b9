import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from stats import total


class StatsTest(unittest.TestCase):
    def test_total(self) -> None:
        self.assertEqual(total([1, 2, 3]), 6)
