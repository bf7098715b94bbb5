"""Deployment assets; the Python here is the offline check in check/ (not shipped)."""
