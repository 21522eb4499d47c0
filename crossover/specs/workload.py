"""Workloads: prompt and output length distributions (and optionally acceptance), by name or path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from ..errors import CrossoverError
from ..files import read_text
from .loader import resolve_path


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min: PositiveInt = 1
    max: PositiveInt = 1_000_000

    def _clip(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(x), self.min, self.max).astype(np.int64)


class Fixed(_Dist):
    """Every request has `value` tokens."""

    dist: Literal["fixed"]
    value: PositiveInt

    @property
    def mean(self) -> float:
        """Mean length in tokens."""
        return float(self.value)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` lengths in tokens."""
        return np.full(n, self.value, dtype=np.int64)


class Uniform(_Dist):
    """Uniform integer lengths in [low, high]."""

    dist: Literal["uniform"]
    low: PositiveInt
    high: PositiveInt

    @model_validator(mode="after")
    def _check(self) -> "Uniform":
        if self.high < self.low:
            raise ValueError("uniform: high must be >= low")
        return self

    @property
    def mean(self) -> float:
        """Mean length in tokens."""
        return (self.low + self.high) / 2.0

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` lengths in tokens."""
        return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)


class LogNormal(_Dist):
    """Lognormal lengths with the given mean and standard deviation (tokens), clipped to [min, max]."""

    dist: Literal["lognormal"]
    mean_: PositiveFloat = Field(alias="mean")
    sd: PositiveFloat

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @property
    def mean(self) -> float:
        """Mean length in tokens (before clipping)."""
        return float(self.mean_)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` lengths in tokens."""
        sigma2 = np.log1p((self.sd / self.mean_) ** 2)
        mu = np.log(self.mean_) - sigma2 / 2.0
        return self._clip(rng.lognormal(mu, np.sqrt(sigma2), size=n))


class Empirical(_Dist):
    """Lengths drawn with replacement from a list (or a file of one integer per line)."""

    dist: Literal["empirical"]
    values: list[PositiveInt] = Field(default_factory=list)
    file: str | None = None

    @model_validator(mode="after")
    def _check(self) -> "Empirical":
        if not self.values and not self.file:
            raise ValueError("empirical: give `values` or a `file` of lengths")
        return self

    def lengths(self, base: Path | None = None) -> np.ndarray:
        """The empirical lengths (read from `file`, relative to the workload file's folder)."""
        if self.values:
            return np.asarray(self.values, dtype=np.int64)
        path = Path(self.file).expanduser()  # type: ignore[arg-type]
        if not path.is_absolute() and base is not None:
            path = base / path
        text = read_text(path, "an empirical lengths file (integers)")
        try:
            vals = np.asarray([int(x) for x in text.replace(",", " ").split()], dtype=np.int64)
        except ValueError:
            raise CrossoverError(f"{path}: expected whitespace- or comma-separated integer lengths") from None
        if vals.size == 0 or (vals <= 0).any():
            raise CrossoverError(f"{path}: lengths must be positive integers (found none or a non-positive one)")
        return vals

    @property
    def mean(self) -> float:
        """Mean length in tokens."""
        return float(self.lengths().mean()) if self.values else float("nan")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` lengths in tokens."""
        return rng.choice(self.lengths(), size=n, replace=True)


LengthDist = Annotated[Union[Fixed, Uniform, LogNormal, Empirical], Field(discriminator="dist")]


class WorkloadAcceptance(BaseModel):
    """Acceptance a workload brings (used unless the command line sets one)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rate: float | None = Field(default=None, ge=0, lt=1)
    tau: float | None = Field(default=None, ge=1)
    per_position: list[float] | None = None
    ngram_match_rate: float | None = Field(default=None, ge=0, le=1)


class Workload(BaseModel):
    """Prompt and output length distributions of a benchmark or of real traffic."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    display_name: str = ""
    prompt_len: LengthDist
    output_len: LengthDist
    acceptance: WorkloadAcceptance | None = None
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""

    def sample(self, rng: np.random.Generator, n: int, base: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(prompt lengths, output lengths) of `n` requests, in tokens."""
        out = []
        for d in (self.prompt_len, self.output_len):
            if isinstance(d, Empirical) and d.file:
                vals = d.lengths(base)
                out.append(rng.choice(vals, size=n, replace=True))
            else:
                out.append(d.sample(rng, n))
        return out[0], out[1]

    def means(self, rng_seed: int = 0, base: Path | None = None, samples: int = 20_000) -> tuple[float, float]:
        """Mean prompt and output lengths, from `samples` draws (so clipping and empirical files count)."""
        p, o = self.sample(np.random.default_rng(rng_seed), samples, base)
        return float(p.mean()), float(o.mean())


def fixed(prompt_len: int, output_len: int, name: str = "fixed") -> Workload:
    """A workload of fixed lengths."""
    if prompt_len < 1 or output_len < 1:
        raise CrossoverError(f"lengths must be >= 1 token (got prompt {prompt_len}, output {output_len})")
    return Workload(name=name, prompt_len=Fixed(dist="fixed", value=prompt_len),
                    output_len=Fixed(dist="fixed", value=output_len))


def load_workload(ref: str | Workload) -> tuple[Workload, Path | None]:
    """A workload by name or path, with the folder its relative files resolve against."""
    if isinstance(ref, Workload):
        return ref, None
    spec, path = resolve_path(ref, "workloads", Workload)
    return spec, path.parent  # type: ignore[return-value]
