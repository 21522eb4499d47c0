"""The one error type users see: a single line that says what is wrong and what would be right."""

from __future__ import annotations


class CrossoverError(ValueError):
    """Bad input or an impossible request; the CLI prints its message as one line and exits 2."""

    def __init__(self, message: str) -> None:
        # Collapse to one line: the message is the whole interface.
        super().__init__(" ".join(str(message).split()))
