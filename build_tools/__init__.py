"""Build-time helpers for wheelops: used by setup.py and by dev mode (wheelops.jit).

Nothing here is shipped in the wheel.
"""
