# A stale cache left by an older version of the build, as on a developer's machine.
mkdir -p .cache && echo "format=1" > .cache/state
