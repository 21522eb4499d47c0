"""The base of every spec: validated, immutable and hashable by value, so compiled op lists and
step models are memoised with functools on the specs themselves."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


def _hashable(value: Any) -> Any:
    """A hashable stand-in for a field value (mappings and lists become tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


class Spec(BaseModel):
    """A frozen pydantic model whose hash follows its field values (equal specs, equal hashes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    def __hash__(self) -> int:
        return hash((type(self).__name__, *(_hashable(v) for v in self.__dict__.values())))
