"""The base of every spec: validated, immutable and hashable by value, so compiled op lists and
step models are memoised with functools on the specs themselves."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr


def _hashable(value: Any) -> Any:
    """A hashable stand-in for a field value (mappings and lists become tuples)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


class Spec(BaseModel):
    """A frozen pydantic model whose hash follows its field values (equal specs, equal hashes),
    computed once per instance (specs key every memoised builder, so they are hashed often)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    _hash: int | None = PrivateAttr(default=None)

    def __hash__(self) -> int:
        h = self.__pydantic_private__.get("_hash")
        if h is None:
            h = hash((type(self).__name__, *(_hashable(v) for v in self.__dict__.values())))
            self.__pydantic_private__["_hash"] = h
        return h

    def __eq__(self, other: object) -> bool:
        """Equal field values (the cached hash is not part of the value)."""
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__  # type: ignore[union-attr]

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False):  # type: ignore[override]
        """A copy (with `update`d fields) that hashes its own values: every private attribute of a
        spec is a cache derived from its fields, so none is carried over."""
        out = super().model_copy(update=update, deep=deep)
        for name in out.__pydantic_private__:
            out.__pydantic_private__[name] = None
        return out
