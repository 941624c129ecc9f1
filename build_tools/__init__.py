"""Build-time helpers for wheelops: used by setup.py and by dev mode (build_tools.dev).

Nothing here is shipped in the wheel.
"""
