import unittest

from text import upper_first


class TextTest(unittest.TestCase):
    def test_upper_first(self) -> None:
        self.assertEqual(upper_first("abc"), "Abc")
