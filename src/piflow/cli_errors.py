"""The error every `piflow` command raises for a bad command line or configuration (exit code 2).

A module of its own so that commands share it without importing each other: `piflow run` would
otherwise load the whole analysis through `cli_check` just for this class.
"""

from __future__ import annotations


class UsageError(Exception):
    """A problem with the command line or the configuration (exit code 2)."""
