"""The rules `evaluate` applies, one family per module (docs/design.md's core table lists
them). Rules read recorded facts only, never the machine; policy.py orders them."""
