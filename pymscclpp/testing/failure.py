"""``RankFailure``: what a rank pool raises when a rank raised or a call ran past its budget."""

from __future__ import annotations


class RankFailure(AssertionError):
    """A rank raised (the message names the rank, the exception's type, text and traceback) or ranks still ran
    when the call's ``timeout`` passed (it names them, with each one's Python stack). ``ranks``: those ranks;
    ``errors``: rank -> the exception's type name, for the ranks that raised."""

    def __init__(self, message: str, ranks: list[int], errors: dict[int, str]):
        super().__init__(message)
        self.ranks, self.errors = ranks, errors
