import unittest

from dates import is_leap


class DatesTest(unittest.TestCase):
    def test_is_leap(self) -> None:
        self.assertTrue(is_leap(2024))
        self.assertFalse(is_leap(1900))
