"""``python -m codepool``: the same as the ``codepool`` command."""

from codepool.cli import app

app()
