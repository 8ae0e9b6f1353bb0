"""Errors of the DSL compiler."""


class DSLError(RuntimeError):
    """A program is inconsistent (bad chunk, unmatched signal/wait...); the message names the op and its source line."""
