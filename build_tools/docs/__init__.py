"""The docs' generated tables: the README's compatibility table and docs/troubleshooting.md."""
