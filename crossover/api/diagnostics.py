"""What a verb says beside its result: one structured record per diagnostic (what kind, how serious,
the line a user reads, the numbers it rests on), instead of note strings matched by prefix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Level = Literal["note", "warning"]


@dataclass(frozen=True)
class Diagnostic:
    """`kind` names what happened (e.g. `physics_check_skipped`, `method_from_files`); `message` is
    the one line without its level; `evidence` the values it rests on (JSON-ready)."""

    kind: str
    message: str
    level: Level = "note"
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def line(self) -> str:
        """As the CLI prints it on stderr: `note: ...`."""
        return f"{self.level}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "level": self.level, "message": self.message, "evidence": dict(self.evidence)}
