"""The steps of the nox sessions (noxfile.py): build, repair, test, serve, whole e2e rows."""
