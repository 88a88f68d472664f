"""Stand-in for the real server in tests/test_addon.py (shadows it on PYTHONPATH)."""
