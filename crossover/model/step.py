"""The step model: what one engine step costs, for any mix of sequences decoding (q = 1),
verifying drafts (q = verify width), prefilling prompt chunks and drafting.

`StepModel.price` is the only code that adds a step's terms: the target forward, the engine's
per-step overhead, each sequential draft pass with its launch overhead, the draft reading new
prompts, and the speculative bookkeeping (per step and per verifying sequence). Every caller
(curves, adaptive, what-if, trees, policy, the serving simulator, plots, validation) describes its
step as a `Mix` and calls it.

A forward's seconds come from a cost mode: `Roofline` (bytes / bandwidth against FLOPs / FLOP/s,
op by op, roofline.py) or `KernelTables` (measured kernel tables of the engine's framework on the
GPU, kernels.py); a further mode is one class with the same two methods, registered in COST_MODES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Protocol

import numpy as np

from ..errors import CrossoverError
from .kernels.mode import cost_mode as kernel_cost_mode
from .roofline import CompiledOps, StepCost, compiled_target
from ..specs.deployment import Deployment
from .forward import Forward, Mix, joined, prompts, ragged, uniform
from .graphs import eager_steps, padding, per_arm, ragged_host
from .speculation import Speculation, compiled_draft
from .step_terms import draft_positions, host_seconds, lookup_seconds, mla_prefill_seconds, sampler_seconds


@dataclass
class StepBreakdown:
    """Seconds of a step by term (arrays over the broadcast inputs) and the target forward per op."""

    terms: dict[str, np.ndarray]  # each broadcasts to `total`
    total: np.ndarray
    target: StepCost | None = None  # per-op detail of the target forward (price(detail=True))
    drafts: list[StepCost] = field(default_factory=list)  # per-op detail of each draft pass group (detail)

    TERMS = ("target_forward", "step_overhead", "draft_forwards", "draft_step_overhead", "draft_prefill",
             "spec_overhead", "spec_overhead_per_seq", "spec_overhead_per_position", "sampler", "proposer_lookup",
             "ragged_attention", "mla_verify_prefill", "host_work")

    def term(self, name: str) -> np.ndarray:
        """One term's seconds, broadcast to the shape of `total`."""
        return np.broadcast_to(self.terms[name], self.total.shape)

    @property
    def verify(self) -> np.ndarray:
        """The target's part: its forward plus the engine step overhead."""
        return np.broadcast_to(self.terms["target_forward"] + self.terms["step_overhead"], self.total.shape)

    @property
    def draft(self) -> np.ndarray:
        """The draft's time: its passes with their launch overheads and its reading of new prompts."""
        t = self.terms
        return np.broadcast_to(t["draft_forwards"] + t["draft_step_overhead"] + t["draft_prefill"], self.total.shape)

    @property
    def ops(self):
        """Per-op costs of the target forward (requires price(detail=True))."""
        if self.target is None:
            raise CrossoverError("the per-op breakdown needs price(mix, detail=True)")
        return self.target.ops


class CostMode(Protocol):
    """How a forward's seconds are found (the seam for the roofline and measured kernel tables)."""

    name: str

    def forward(self, ops: CompiledOps, work: Forward) -> StepCost:
        """Seconds of one forward with the per-op breakdown."""

    def seconds(self, ops: CompiledOps, work: Forward) -> np.ndarray:
        """Seconds of one forward (total only: the hot path)."""


class Roofline:
    """Each op at combine(bytes / achieved bandwidth, FLOPs / achieved FLOP/s) (roofline.py)."""

    name = "roofline"

    def forward(self, ops: CompiledOps, work: Forward) -> StepCost:
        return ops.evaluate(work.tokens, work.kv, work.qk, work.sampled)

    def seconds(self, ops: CompiledOps, work: Forward) -> np.ndarray:
        if np.asarray(work.tokens).dtype.kind in "iu":
            return ops.seconds(work.tokens, work.kv, work.qk, work.sampled)
        return ops.evaluate(work.tokens, work.kv, work.qk, work.sampled, detail=False).total


class KernelTables:
    """Each op from the measured kernel tables of the deployment's engine framework on its GPU
    (kernels.py, crossover[kernels]); ops without a table at the roofline, marked in the breakdown."""

    name = "kernels"

    @staticmethod
    def mode(ops: CompiledOps):
        """The table-backed cost mode of these ops' deployment (memoised per framework and GPU)."""
        dep = ops.deployment
        if dep is None:
            raise CrossoverError("these compiled ops carry no deployment to find kernel tables for")
        return kernel_cost_mode(dep.engine.framework, dep.hardware.name)

    def forward(self, ops: CompiledOps, work: Forward) -> StepCost:
        return self.mode(ops).forward(ops, work)

    def seconds(self, ops: CompiledOps, work: Forward) -> np.ndarray:
        return self.mode(ops).seconds(ops, work)


COST_MODES: dict[str, CostMode] = {"roofline": Roofline(), "kernels": KernelTables()}


@dataclass(frozen=True, eq=False)
class StepModel:
    """A deployment's compiled target (and draft) forwards and the one pricing of an engine step."""

    deployment: Deployment
    target: CompiledOps
    draft: CompiledOps | None
    cost: CostMode
    draft_kv_budget: int | None = None  # the draft attends to at most this many cached tokens
    ngram: bool = False  # proposals come from the engine's n-gram lookup (a CPU cost per sequence)
    # An MLA model's MTP draft: the TP its layer runs at (its catch-up pass over the verified positions
    # takes MLA's prefill path where the target's verify does); None: no such draft.
    mtp_mla_tp: int | None = None
    # Whether the speculating server overlaps its host work with the GPU (EngineProfile.overlaps: vLLM
    # V1 keeps async scheduling for EAGLE-type drafts only)
    overlap_on: bool = False

    @staticmethod
    def of(deployment: Deployment, speculation: Speculation | None = None, cost: str | None = None) -> "StepModel":
        """The step model of a deployment (and a speculation method's draft), memoised; the cost
        mode is the deployment's (`cost` overrides it)."""
        if cost is not None and cost != deployment.cost:
            deployment = deployment.model_copy(update={"cost": cost})
        if deployment.cost not in COST_MODES:
            raise CrossoverError(f"unknown cost mode {deployment.cost!r}; choose from {', '.join(COST_MODES)}")
        if speculation is None:
            return _step_model(deployment, None, None, False)
        return _step_model(deployment, speculation.drafter, speculation.draft_kv_budget, speculation.method == "ngram")

    @cached_property
    def target_layers(self) -> float:
        """Layers of the target forward (each launches its kernels when the step runs eagerly)."""
        return _layers(self.target)

    @cached_property
    def draft_layers(self) -> float:
        """Layers of one draft forward (0 without one)."""
        return _layers(self.draft)

    # ------------------------------------------------------------------ the one price

    def price(self, mix: Mix, detail: bool = False) -> StepBreakdown:
        """Seconds of the step(s) described by `mix`, by term, with the deployment's engine profile
        applied (the only code that adds a step's terms: invariant 1, docs/architecture.md): how verify is scored (batch expansion re-reads the KV cache), the CUDA-graph limit
        (an eager forward takes at least its layers' launch time), the n-gram proposer's lookup and
        the per-step, per-sequence and per-draft-pass overheads."""
        dep = self.deployment
        if dep.data_parallel > 1:  # the ranks step in lockstep at the busiest one's work (experts: all ranks')
            mix = mix.busiest_rank(dep.data_parallel)
        run = self.cost.forward if detail else (lambda ops, w: StepCost(self.cost.seconds(ops, w)))
        verifying = np.asarray(mix.verifying, float)
        drafting = verifying > 0
        every = bool(drafting.all())
        any_draft = bool(drafting.any())
        engine = dep.speculating_engine if any_draft else dep.engine  # the speculating server's settings
        # both servers in one array (the curves price off and on together): each element its own server's
        split = engine is not dep.engine and not every
        work = mix.target
        if engine.verify_layout == "batch_expansion" and any_draft:
            work = work.expanded()
        tokens = work.tokens  # the step's own positions: its graph key (padding and the eager limit)
        pad = padding(tokens, verifying, engine, any_draft)
        if any_draft and not every:  # the off elements replay the graphs of a server not speculating
            off_pad = padding(tokens, verifying, dep.engine, False)
            pad = per_arm(drafting, pad, off_pad, 1.0)
        if pad is not None:  # the captured graph it replays: padding rows through the linear layers
            # in the share of the steps that replay a graph: a step with prompt chunks runs outside it
            pad = 1.0 + np.asarray(mix.uniform, float) * (pad - 1.0)
            sampled_rows = work.tokens if work.sampled is None else work.sampled
            work = Forward(work.tokens * pad, work.kv, work.qk, sampled_rows * pad, work.expansion, work.verify_kv)
        target = run(self.target, work)
        target_s = target.total
        eager = eager_steps(tokens, verifying, engine, any_draft)  # outside a captured graph (or None)
        if split:
            eager = per_arm(drafting, eager, eager_steps(tokens, verifying, dep.engine, False), False)
        if eager is not None and dep.eager_layer_s > 0.0:  # at least the layers' launch time
            target_s = np.where(eager, np.maximum(target_s, self.target_layers * dep.eager_layer_s), target_s)
        prompting = np.asarray(mix.prompting, float)
        eager_prompts = not engine.prefill_graphs and dep.eager_layer_s > 0.0 and bool(prompting.any())
        if eager_prompts:  # a step with prompt tokens runs outside the decode graphs: the same floor
            floor = np.maximum(target_s, self.target_layers * dep.eager_layer_s)
            target_s = target_s + prompting * (floor - target_s)

        def gate(x):
            """`x` where sequences verify (and so draft), 0 where none does."""
            return x if every else np.where(drafting, x, 0.0)

        t = mix.target  # the positions that sample their next token (logits): all, or those named
        sampled = np.asarray(t.tokens if t.sampled is None else t.sampled, float)
        positions = draft_positions(mix, verifying, sampled) if any_draft else 0.0  # drafts verified
        terms = {"target_forward": target_s, "step_overhead": dep.step_overhead_s,
                 "draft_forwards": 0.0, "draft_step_overhead": 0.0, "draft_prefill": 0.0,
                 "spec_overhead": gate(dep.spec_overhead_s) if any_draft else 0.0,
                 "spec_overhead_per_seq": gate(verifying * dep.spec_overhead_per_seq_s) if any_draft else 0.0,
                 "spec_overhead_per_position": (gate((verifying + positions) * dep.spec_per_position_s)
                                                if any_draft else 0.0),
                 # a step with drafts to verify runs the rejection sampler: every request's bonus row through it
                 "sampler": sampler_seconds(dep, sampled, positions,
                                          np.where(np.asarray(positions) > 0, verifying, 0.0) if any_draft else 0.0),
                 "proposer_lookup": (gate(lookup_seconds(dep, verifying, mix.target.verify_kv))
                                     if any_draft and self.ngram else 0.0),
                 "ragged_attention": (per_arm(drafting, ragged_host(mix, engine, dep.ragged_per_seq_s, tokens, True),
                                               ragged_host(mix, dep.engine, dep.ragged_per_seq_s, tokens, False), 0.0)
                                      if split else ragged_host(mix, engine, dep.ragged_per_seq_s, tokens, any_draft)),
                 "mla_verify_prefill": (gate(mla_prefill_seconds(self, mix.target.verify_kv))
                                        if any_draft and dep.mla_verify_prefill else 0.0)}
        if mix.draft_passes and self.draft is None:
            raise CrossoverError("this step model has no draft forward to run")
        groups, drafts = (mix.draft_passes if any_draft else ()), []
        if groups:  # every group's forward in one evaluation (joined along the last axis when several)
            if detail or len(groups) == 1:  # each group's per-op detail of its own
                drafts = [run(self.draft, w) for _, w in groups]
                seconds = [d.total for d in drafts]
            else:
                work, shape = joined([w for _, w in groups])
                both, n = run(self.draft, work).total, shape[-1] if shape else 1
                seconds = [both[..., g * n:(g + 1) * n].reshape(shape) for g in range(len(groups))]
            if engine.graph_capture_limit == 0 and dep.eager_layer_s > 0.0:  # the drafter runs eagerly too:
                floor = self.draft_layers * dep.eager_layer_s  # each pass at least its layers' launch time
                seconds = [np.maximum(one, floor) for one in seconds]
            passes = 0.0
            mla = self.mtp_mla_tp is not None and dep.mla_verify_prefill  # the MTP layer's multi-token pass
            for (count, w), one in zip(groups, seconds):
                if mla:  # MLA's prefill path over the context of the positions the pass takes in
                    one = one + mla_prefill_seconds(self, w.verify_kv, self.draft_layers, self.mtp_mla_tp)
                terms["draft_forwards"] = terms["draft_forwards"] + count * one
                passes = passes + count
            if mix.draft_at is not None:  # the passes cover those steps only: 0 at the others
                placed = np.zeros(np.shape(target_s))
                placed[..., mix.draft_at] = terms["draft_forwards"]
                terms["draft_forwards"] = placed
            terms["draft_forwards"] = gate(terms["draft_forwards"])
            terms["draft_step_overhead"] = gate(passes * dep.draft_step_overhead_s)
        if mix.draft_prefill is not None and self.draft is not None:
            pre = run(self.draft, mix.draft_prefill).total
            if mix.draft_passes and any_draft:  # inside the first draft pass: no second launch
                pre = pre - gate(self.draft.overhead_s)
            if eager_prompts:  # the draft reads the prompts eagerly too
                pre = pre + prompting * (np.maximum(pre, self.draft_layers * dep.eager_layer_s) - pre)
            terms["draft_prefill"] = np.where(np.asarray(mix.draft_prefill.tokens) > 0, pre, 0.0)
        total = terms["target_forward"] + terms["step_overhead"]
        for name in StepBreakdown.TERMS[2:-1]:
            total = total + terms[name]
        # the host work per sequence last: a server that overlaps it with the GPU waits only for its excess
        off_overlap = dep.engine.overlaps(None)
        overlapped = (self.overlap_on if every else off_overlap if not any_draft
                      else np.where(drafting, self.overlap_on, off_overlap))
        terms["host_work"] = host_seconds(dep, mix, total, overlapped)
        total = np.asarray(total + terms["host_work"])
        return StepBreakdown(terms, total, target if detail else None, drafts if detail else [])

    # ------------------------------------------------------------------ common mixes

    def ragged_target(self, q: np.ndarray, context: np.ndarray, sampled=None,
                      verifying: np.ndarray | None = None) -> Forward:
        """The target forward of sequences with `q` new positions each over `context` (last axis;
        see `ragged`); `verifying` marks the sequences that verify drafts, whose positions the
        engine scores as separate sequences when it batch-expands (vLLM V0) and whose context MLA's
        prefill path up-projects (Deployment.mla_verify_prefill)."""
        dep = self.deployment
        if dep.speculating_engine.verify_layout != "batch_expansion" and not dep.mla_verify_prefill:
            verifying = None
        return ragged(self.target, q, context, sampled=sampled, verifying=verifying)

    def draft_context(self, context):
        """The context a draft pass attends to (capped by a self-speculation KV budget)."""
        budget = self.draft_kv_budget
        return context if budget is None else np.minimum(context, float(budget))

    def draft_groups(self, spec: Speculation, pass_widths: tuple[int, ...] | None = None, verify_width=None
                     ) -> tuple[tuple[float, int, float], ...]:
        """(positions per sequence, sequential passes, sampled positions per sequence) of each group of
        draft forwards: the method's passes of one width together, and the head's catch-up on the
        positions the target verified where the engine has one (EngineProfile.draft_catch_up: vLLM V1's
        first EAGLE/MTP forward runs over every verified position, vllm/v1/spec_decode/eagle.py propose,
        0.14.1; SGLang extends the draft over them in a forward of its own)."""
        widths = spec.draft_pass_widths if pass_widths is None else pass_widths
        if self.draft is None or not widths:
            return ()
        groups: list[list] = [[float(w), widths.count(w), None] for w in sorted(set(widths))]
        mode = self.catch_up(spec)
        if mode != "none":
            w = np.asarray(spec.verify_width if verify_width is None else verify_width, float)
            if mode == "first_pass":  # the first pass (width widths[0]) takes the verified positions too
                first = next(g for g in groups if g[0] == float(widths[0]))
                first[1] -= 1
                groups.insert(0, [float(widths[0]) + w - 1.0, 1, float(widths[0])])
            else:
                groups.insert(0, [w, 1, 1.0])
        return tuple((g[0], g[1], g[2]) for g in groups if g[1] > 0)

    def catch_up(self, spec: Speculation) -> str:
        """How this engine's head-type draft takes in the verified positions ('none' for other drafts)."""
        if self.draft is None or spec.method not in ("eagle", "eagle3", "mtp"):
            return "none"
        return self.deployment.engine.draft_catch_up

    def draft_passes(self, decoding, context, spec: Speculation, pass_widths: tuple[int, ...] | None = None,
                     verify_width=None) -> tuple[tuple[int, Forward], ...]:
        """Draft pass groups for `decoding` sequences over `context` (draft_groups): passes of each width
        together, logits at every position of a pass (None) or at `sampled` per sequence (a catch-up)."""
        ctx = self.draft_context(context)
        out = []
        for width, count, sampled in self.draft_groups(spec, pass_widths, verify_width):
            f = uniform(self.draft, decoding, width, ctx)
            if sampled is not None:
                f = Forward(f.tokens, f.kv, f.qk, np.asarray(decoding, float) * sampled, f.expansion, f.verify_kv)
            out.append((count, f))
        return tuple(out)

    def decode(self, batch, context, spec: Speculation | None = None, *, width=None,
               passes: tuple | None = None) -> Mix:
        """A pure decode step: `batch` sequences over `context` cached tokens; with `spec`, each
        verifies `width` positions (default the method's verify width) after the draft passes
        (default the method's; give `passes` to override, e.g. k as an array)."""
        if spec is None:
            return Mix(uniform(self.target, batch, 1.0, context))
        width = spec.verify_width if width is None else width
        passes = self.draft_passes(batch, context, spec, verify_width=width) if passes is None else passes
        return Mix(uniform(self.target, batch, width, context), np.asarray(batch, float), passes,
                   uniform=self.uniform_verify(spec), sequences=np.asarray(batch, float))

    def uniform_verify(self, spec: Speculation) -> bool:
        """Whether a speculative decode step is a uniform batch: every sequence verifies the same
        width, unless n-gram sequences without a match verify only their bonus position beside
        those with one (an engine that pads their drafts keeps it uniform)."""
        m = spec.acceptance.match_rate
        return not (spec.method == "ngram" and 0.0 < m < 1.0 and not spec.pad_misses)

    def with_prompts(self, decoding, count, prompt_len: float, context: float,
                     spec: Speculation | None = None) -> Mix:
        """`decoding` sequences over `context` (verifying with `spec`) and `count` whole prompts of
        `prompt_len` tokens prefilled in the same step (a mean step: prompts arrive independently,
        so a share 1 - exp(-count) of the steps carries one, and those are ragged)."""
        target_pre = prompts(self.target, count, prompt_len, prompt_len)
        seqs = np.asarray(decoding, float) + np.asarray(count, float)
        flat = np.exp(-np.maximum(np.asarray(count, float), 0.0))  # share of steps without a prompt chunk
        if spec is None:
            return Mix(uniform(self.target, decoding, 1.0, context) + target_pre, uniform=flat, sequences=seqs,
                       prompting=1.0 - flat, decode_tokens=np.asarray(decoding, float))
        dec = uniform(self.target, decoding, spec.verify_width, context)
        target = dec + target_pre
        passes = self.draft_passes(decoding, context, spec)
        pre = None
        if self.draft is not None and spec.draft_reads_prompts:
            pre = prompts(self.draft, count, prompt_len, float(self.draft_context(prompt_len)))
        return Mix(target, np.asarray(decoding, float), passes, pre, uniform=flat * self.uniform_verify(spec),
                   sequences=seqs, prompting=1.0 - flat, decode_tokens=dec.tokens)


def prompts_per_step(batch, tokens_per_step: float, output_len: float) -> tuple[np.ndarray, np.ndarray]:
    """At `batch` requests in flight yielding `tokens_per_step` each, r = batch y / output_len finish, and
    as many prompts are prefilled, per step: floor(r) and the share r - floor(r) of the steps that carry
    one more (StepModel.with_prompts prices each; analysis.curves and predict --breakdown average them)."""
    b = np.asarray(batch, float)
    r = np.minimum(b * tokens_per_step / output_len, b)
    return np.floor(r), r - np.floor(r)


def _layers(ops: CompiledOps | None) -> float:
    return 0.0 if ops is None else float(sum(op.count for op in ops.source_ops if op.kind == "attention"))


@lru_cache(maxsize=256)
def _step_model(deployment: Deployment, drafter: Speculation | None, budget: int | None, ngram: bool) -> StepModel:
    draft = None if drafter is None else compiled_draft(drafter, deployment)
    mtp_tp = None
    if drafter is not None and drafter.method == "mtp" and deployment.model.mla is not None:
        mtp_tp = drafter.draft_deployment(deployment).tp
    overlap = deployment.speculating_engine.overlaps(drafter.method) if drafter is not None else False
    return StepModel(deployment, compiled_target(deployment), draft, COST_MODES[deployment.cost], budget, ngram, mtp_tp,
                     overlap)


def step_time(dep: Deployment, batch, q=1, context=0) -> StepBreakdown:
    """One engine step of the target alone: a forward over `batch` x `q` new tokens plus the step
    overhead, with the per-op breakdown."""
    model = StepModel.of(dep)
    return model.price(Mix(uniform(model.target, batch, q, context)), detail=True)
