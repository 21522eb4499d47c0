"""What to predict: `Scenario` (a deployment, a speculation method, the context or the prompt and
output lengths) and the memory limits it implies with speculation off and on."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from ..errors import CrossoverError
from ..specs.deployment import Deployment
from . import memory
from .speculation import Speculation


@dataclass(frozen=True)
class Scenario:
    """What to predict: a deployment, a speculation method and the context length (tokens in cache).

    With `prompt_len` and `output_len` (means, tokens) the curves carry the prefill share too: every
    step also prefills the prompts of the requests that replace the finished ones, and `batch` is the
    number of requests in flight (the concurrency). Without them, every step is pure decode.
    """

    deployment: Deployment
    speculation: Speculation
    context: float = 2048.0
    prompt_len: float | None = None
    output_len: float | None = None
    tp_auto: bool = False  # the TP was chosen automatically (the smallest that holds enough sequences)
    # Inputs the builder took from crossover.defaults because none was given ((name, value) pairs):
    # what the answer assumes besides the acceptance (analysis/assumptions.py lists them).
    defaults_used: tuple = field(default=(), compare=False)

    def __post_init__(self) -> None:
        if (self.prompt_len is None) != (self.output_len is None):
            raise CrossoverError("give both prompt and output lengths, or neither")
        if self.prompt_len is not None and (self.prompt_len < 1 or self.output_len < 1):  # type: ignore[operator]
            raise CrossoverError(f"prompt and output lengths must be >= 1 token (got {self.prompt_len:g}, "
                                 f"{self.output_len:g})")
        pads = self.speculation.method == "ngram" and self.deployment.engine.ngram_miss == "padded"
        if self.speculation.pad_misses != pads:  # the engine decides how n-gram misses are verified
            object.__setattr__(self, "speculation", replace(self.speculation, pad_misses=pads))

    @property
    def held_tokens(self) -> float:
        """Tokens each sequence's KV cache holds at its longest: the whole prompt + output when the
        lengths are given, else the context."""
        return self.prompt_len + self.output_len if self.mixed else self.context  # type: ignore[operator]

    @property
    def mixed(self) -> bool:
        """Whether the prefill/decode mix is modelled."""
        return self.prompt_len is not None

    def with_engine(self, engine) -> "Scenario":
        """This scenario with another engine profile (or the same one configured otherwise), validated as
        a new deployment: the engine as it runs on this GPU (Deployment's validators: capture limits,
        MLA graphs)."""
        dep = self.deployment
        return Scenario(type(dep)(**{**dict(dep), "engine": engine}), self.speculation, self.context,
                        self.prompt_len, self.output_len, self.tp_auto, self.defaults_used)

    @cached_property
    def memory_limits(self) -> tuple[int, int]:
        """The largest batch without and with speculation (its draft's weights and KV cache), each
        request's KV held at its longest; a one-line error when not one sequence fits. Found once
        per scenario (it is immutable)."""
        dep, peak = self.deployment, self.held_tokens
        memory.check_fits(dep, peak)
        w, kv = draft_memory(self)
        return (memory.max_batch(dep, peak, slack_tokens=1),
                memory.max_batch(dep, peak, extra_weights_per_gpu=w, extra_kv_per_seq_per_gpu=kv,
                                 slack_tokens=self.speculation.k + 1))


def draft_memory(sc: Scenario) -> tuple[float, float]:
    """(weights per GPU, KV bytes per sequence per GPU) the scenario's speculation adds, each
    sequence holding its whole prompt + output (or the context)."""
    return sc.speculation.memory(sc.deployment, sc.held_tokens)


def memory_limits(sc: Scenario) -> tuple[int, int]:
    """The largest batch without and with speculation (Scenario.memory_limits)."""
    return sc.memory_limits
