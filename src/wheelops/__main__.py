(__import__("sys").exit(__import__("wheelops._doctor_cli", fromlist=["main"]).main()))

# `python -m wheelops`: the doctor's command line, wheelops/_doctor_cli.py. One statement in
# parentheses, first in the file: every truncated copy fails to parse (exit status 1), where a
# longer module cut after a definition runs, prints nothing and exits 0 (CI's damage matrix).
