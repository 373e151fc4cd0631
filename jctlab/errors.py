"""Errors that the command line turns into one line and an exit code."""

from __future__ import annotations


class InputError(Exception):
    """Bad input: a file, the field in it, and what is wrong. The CLI prints it and exits 2."""

    def __init__(self, source: str, field: str, reason: str):
        self.source, self.field, self.reason = str(source), field, reason
        where = f"{self.source}: {field}" if field else self.source
        super().__init__(f"{where}: {reason}")


class InvalidSchedule(Exception):
    """A schedule that breaks a validity rule of SPEC §4 (exit code 1)."""
