import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from rates import fetch_rate


class RateTest(unittest.TestCase):
    def test_live_rate(self) -> None:
        self.assertEqual(fetch_rate(), 1.0873)
