python3 tools/gen.py >/dev/null
