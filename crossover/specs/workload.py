"""Workloads: prompt and output length distributions (and optionally acceptance), by name or path."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal, Union

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    model_validator,
)

from ..errors import CrossoverError, FileError
from ..files import read_text
from .loader import resolve_path

# The longest request length a workload may give, in tokens: a hundred times the longest context a
# served model has (10M positions, Llama 4 Scout). A larger length is a unit slip or garbage, and
# past 2^63 it cannot even be held (int64) - a traceback, not a length.
MAX_LENGTH = 1_000_000_000
# A length in tokens (an integer 1..MAX_LENGTH), and a mean or spread of lengths (finite, > 0, at most
# MAX_LENGTH): with both bounded, every quantity a distribution derives from them stays finite.
Length = Annotated[int, Field(ge=1, le=MAX_LENGTH)]
Tokens = Annotated[float, Field(gt=0, le=MAX_LENGTH, allow_inf_nan=False)]


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    min: Length = 1
    max: Length = 1_000_000

    def _clip(self, x: np.ndarray) -> np.ndarray:
        return np.clip(np.rint(x), self.min, self.max).astype(np.int64)


class Fixed(_Dist):
    """Every request has `value` tokens."""

    dist: Literal["fixed"]
    value: Length

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
    low: Length
    high: Length

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
    mean_: Tokens = Field(alias="mean")
    sd: Tokens

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @property
    def mean(self) -> float:
        """Mean length in tokens (before clipping)."""
        return float(self.mean_)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """`n` lengths in tokens."""
        ratio = self.sd / self.mean_
        if ratio < 1e150:
            sigma2 = np.log1p(ratio**2)
        else:  # ln(1 + ratio^2) in logs: the square overflows (a tiny mean, or a huge sd)
            sigma2 = 2.0 * (math.log(self.sd) - math.log(self.mean_))
        mu = np.log(self.mean_) - sigma2 / 2.0
        return self._clip(rng.lognormal(mu, np.sqrt(sigma2), size=n))


class Empirical(_Dist):
    """Lengths drawn with replacement from a list (or a file of one integer per line)."""

    dist: Literal["empirical"]
    values: list[Length] = Field(default_factory=list)
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
            ints = [int(x) for x in text.replace(",", " ").split()]
        except ValueError:
            raise FileError(f"{path}: expected whitespace- or comma-separated integer lengths") from None
        if not ints or min(ints) <= 0:
            raise FileError(f"{path}: lengths must be positive integers (found none or a non-positive one)")
        if (longest := max(ints)) > MAX_LENGTH:
            shown = f"{longest}" if longest < 10**20 else f"of {len(str(longest))} digits"
            raise FileError(f"{path}: length {shown} is no request length in tokens (at most {MAX_LENGTH:,}; "
                            f"a unit slip?)")
        return np.asarray(ints, dtype=np.int64)

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
    tau: float | None = Field(default=None, ge=1, allow_inf_nan=False)
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
