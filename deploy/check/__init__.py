"""The offline deployment check: ``python -m deploy.check`` (see __main__.py)."""
