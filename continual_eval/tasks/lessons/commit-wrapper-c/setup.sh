git init -q
git config user.name dev
git config user.email dev@example.invalid
git add -A
git commit -q -m "initial"
# The checker's own file is copied in before it runs: never part of the work.
echo check.py >> .git/info/exclude
