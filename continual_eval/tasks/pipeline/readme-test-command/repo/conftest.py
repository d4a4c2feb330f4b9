import os

if os.environ.get("CALC_RUNNER") != "1":
    raise SystemExit("error: run the tests with ./run-tests --fast (see README)")
