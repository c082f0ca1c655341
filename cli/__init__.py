"""Commands for a deployed stack: ``python -m cli start`` (and more as they come)."""
