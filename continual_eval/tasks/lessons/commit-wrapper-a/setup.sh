git init -q
git config user.name dev
git config user.email dev@example.invalid
git add -A
git commit -q -m "initial"
