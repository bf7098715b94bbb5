"""Code that runs inside the jail, in the sandbox's interpreter (stdlib only, Python 3.11+)."""
