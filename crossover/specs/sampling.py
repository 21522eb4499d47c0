"""The requests' sampling parameters and the sampler path they select in the engines (vLLM's names
and rules, 0.14.1): what EngineProfile.configured prices the sampler's traffic on."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import ConfigDict, Field

from .frozen import Spec

# The sampler's path, as the requests' sampling parameters select it (vLLM's names: temperature below
# 1e-5 is greedy, top-p below 1 sorts the vocabulary, top-k alone takes a top-k, else a plain random
# draw; vllm/v1/worker/gpu_input_batch.py add_request and sampling_params.py, 0.14.1).
Sampling = Literal["greedy", "random", "top_k", "top_p"]
SAMPLING_PATHS: tuple[str, ...] = get_args(Sampling)
GREEDY_TEMPERATURE = 1e-5  # vllm/sampling_params.py _SAMPLING_EPS: below it a request is greedy
_SAID = {"top_p": "top-p", "top_k": "top-k"}  # the sampling fields' names in words, where not the name itself


class SamplingParams(Spec):
    """The requests' sampling parameters, as the engines' APIs name them (None: not set). They pick
    the sampler's path; acceptance is given on its own (a sampled request accepts fewer drafts)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    temperature: float = Field(default=0.0, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = Field(default=None)
    repetition_penalty: float = Field(default=1.0, gt=0)
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)

    def in_effect(self) -> dict[str, Any]:
        """The fields a request carries to sample this way, by the engines' names: the temperature
        (0 when greedy), top-p and top-k where the path uses them, each penalty that is not off."""
        greedy = self.path == "greedy"
        out: dict[str, Any] = {"temperature": 0 if greedy else self.temperature}
        if not greedy and self.top_p is not None and self.top_p < 1:
            out["top_p"] = self.top_p
        if not greedy and self.top_k is not None and self.top_k > 0:
            out["top_k"] = self.top_k
        for name, off in (("repetition_penalty", 1.0), ("frequency_penalty", 0.0), ("presence_penalty", 0.0)):
            if getattr(self, name) != off:
                out[name] = getattr(self, name)
        return out

    @property
    def penalized(self) -> bool:
        """Whether any penalty applies (vLLM runs all three together when one is set: InputBatch
        no_penalties, gpu_input_batch.py 0.14.1), greedy requests too (penalties move the argmax)."""
        return any(name.endswith("_penalty") for name in self.in_effect())

    @property
    def path(self) -> Sampling:
        """vLLM's choice (0.14.1): greedy below temperature 1e-5, whatever top-p and top-k say
        (sampling_params.py resets them); a sort where top-p < 1; a top-k where 0 < top-k; else a plain
        random draw (gpu_input_batch.py add_request: top-k of -1, 0 or the vocabulary is none)."""
        if self.temperature < GREEDY_TEMPERATURE:
            return "greedy"
        if self.top_p is not None and self.top_p < 1:
            return "top_p"
        if self.top_k is not None and self.top_k > 0:
            return "top_k"
        return "random"

    @property
    def said(self) -> str:
        """The parameters in words, e.g. 'temperature 0.7, top-p 0.9'."""
        fields = self.in_effect()
        temperature = fields.pop("temperature")
        parts = ["greedy" if self.path == "greedy" else f"temperature {temperature:g}"]
        parts += [f"{_SAID.get(name, name.replace('_', ' '))} {v:g}" for name, v in fields.items()]
        return ", ".join(parts)
