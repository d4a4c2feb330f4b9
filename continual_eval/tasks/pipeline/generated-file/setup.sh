mkdir -p src
python3 tools/gen.py >/dev/null
