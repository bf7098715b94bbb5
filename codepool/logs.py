"""Logging for the commands: one line per event, to stderr."""

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure(level: str = "info") -> None:
    """Sets the root logger's level and format (called by the CLI, never at import)."""
    logging.basicConfig(level=level.upper(), format=FORMAT)
    logging.getLogger("httpx").setLevel(logging.WARNING)
