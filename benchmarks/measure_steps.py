"""Time target forward passes of a random-weight model of a named architecture, KV cache in place.

For each batch size and context: a decode step (q = 1) and a verify step (q = k + 1), with warm-up,
device-event timing on a GPU (wall clock on the CPU) and medians. Writes the step-time CSV that
`crossover.measurements.read_step_times` takes (format: docs/measured_csv.md), hardware named.

  python benchmarks/measure_steps.py --model llama-3.1-8b --hardware h100-sxm --out steps.csv
  python benchmarks/measure_steps.py --model qwen2.5-0.5b --tiny --device cpu --out /tmp/steps.csv  (CI)

Dense (GQA) architectures only; MoE and MLA models are refused rather than mis-measured.
Needs the `measure` extra (torch).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
try:
    from crossover.specs import load_model
except ImportError:  # a GPU machine may have torch and PyYAML but not pydantic: read the YAML itself
    load_model = None


class _Shape:
    """The model fields this script needs, read straight from models/NAME.yaml, with the spec's
    head-dimension rule (crossover.specs.Model.hd)."""

    def __init__(self, name: str):
        path = Path(__file__).resolve().parent.parent / "models" / f"{name}.yaml"
        if not path.exists():
            path = Path(name)
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        self.name = data.get("name", path.stem)
        self.hidden_size, self.intermediate_size = data["hidden_size"], data["intermediate_size"]
        self.num_hidden_layers, self.vocab_size = data["num_hidden_layers"], data["vocab_size"]
        self.num_attention_heads, self.num_key_value_heads = data["num_attention_heads"], data["num_key_value_heads"]
        self.hd = data.get("head_dim") or self.hidden_size // self.num_attention_heads
        self.moe, self.mla = data.get("moe"), data.get("mla")


def load_shape(name: str):
    """The model spec (through crossover when its dependencies are installed, else the YAML itself)."""
    return _Shape(name) if load_model is None else load_model(name)


def build_shape(model, tiny: bool, layers: int | None) -> dict:
    """Dimensions to instantiate: the spec's own, or a tiny model with the same structure (GQA ratio)."""
    group = model.num_attention_heads // model.num_key_value_heads
    if tiny:
        heads = 2 * min(group, 4)
        return {"hidden": 256, "heads": heads, "kv_heads": 2, "head_dim": 256 // heads, "inter": 512,
                "layers": layers or 2, "vocab": 1024}
    return {"hidden": model.hidden_size, "heads": model.num_attention_heads, "kv_heads": model.num_key_value_heads,
            "head_dim": model.hd, "inter": model.intermediate_size, "layers": layers or model.num_hidden_layers,
            "vocab": model.vocab_size}


class Decoder:
    """A minimal pre-norm decoder (RMSNorm, GQA attention over a preallocated KV cache, SwiGLU MLP).

    Weights are drawn once, on the device; `alloc_cache` sizes the KV cache for each batch."""

    def __init__(self, shape: dict, dtype, device):
        import torch

        g = torch.Generator(device=device).manual_seed(0)
        h, nq, nkv, hd, inter = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["inter"]

        def w(*dims):
            return torch.randn(*dims, generator=g, device=device, dtype=dtype) * 0.02

        self.shape, self.torch, self.dtype, self.device = shape, torch, dtype, device
        self.layers = [{"qkv": w(h, (nq + 2 * nkv) * hd), "o": w(nq * hd, h), "up": w(h, 2 * inter),
                        "down": w(inter, h)} for _ in range(shape["layers"])]
        self.lm_head = w(h, shape["vocab"])
        self.k_cache: list = []
        self.v_cache: list = []

    def alloc_cache(self, batch: int, max_len: int) -> None:
        """A KV cache for `batch` sequences of up to `max_len` tokens (the previous one is freed)."""
        torch = self.torch
        self.k_cache = self.v_cache = []
        nkv, hd = self.shape["kv_heads"], self.shape["head_dim"]
        self.k_cache = [torch.zeros(batch, nkv, max_len, hd, device=self.device, dtype=self.dtype)
                        for _ in self.layers]
        self.v_cache = [torch.zeros(batch, nkv, max_len, hd, device=self.device, dtype=self.dtype)
                        for _ in self.layers]

    def forward(self, x, context: int):
        """x: [batch, q, hidden] new positions written at [context, context + q) of the cache."""
        torch = self.torch
        F = torch.nn.functional
        b, q, _ = x.shape
        nq, nkv, hd = self.shape["heads"], self.shape["kv_heads"], self.shape["head_dim"]
        # the new positions see the whole prefix and, among themselves, only earlier positions
        mask = torch.ones(q, context + q, dtype=torch.bool, device=x.device).tril(diagonal=context)
        for i, layer in enumerate(self.layers):
            hx = F.rms_norm(x, (x.shape[-1],))
            qkv = hx @ layer["qkv"]
            qh, kh, vh = qkv.split([nq * hd, nkv * hd, nkv * hd], dim=-1)
            qh = qh.view(b, q, nq, hd).transpose(1, 2)
            self.k_cache[i][:, :, context:context + q] = kh.view(b, q, nkv, hd).transpose(1, 2)
            self.v_cache[i][:, :, context:context + q] = vh.view(b, q, nkv, hd).transpose(1, 2)
            k = self.k_cache[i][:, :, : context + q]
            v = self.v_cache[i][:, :, : context + q]
            att = F.scaled_dot_product_attention(qh, k, v, attn_mask=mask, enable_gqa=nkv != nq)
            x = x + att.transpose(1, 2).reshape(b, q, nq * hd) @ layer["o"]
            hx = F.rms_norm(x, (x.shape[-1],))
            gate, up = (hx @ layer["up"]).chunk(2, dim=-1)
            x = x + (F.silu(gate) * up) @ layer["down"]
        return x @ self.lm_head


def time_forward(dec: Decoder, batch: int, q: int, context: int, warmup: int, repeats: int, device,
                 cuda_graph: bool = False) -> list[float]:
    """Milliseconds of `repeats` forwards after `warmup` untimed ones. With `cuda_graph` the forward
    is captured once and replayed, so launch gaps drop out as in a CUDA-graphed serving engine."""
    torch = dec.torch
    x = torch.randn(batch, q, dec.shape["hidden"], device=device, dtype=dec.dtype)
    out = []
    with torch.inference_mode():
        run = lambda: dec.forward(x, context)  # noqa: E731
        if cuda_graph:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    dec.forward(x, context)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                dec.forward(x, context)
            run = graph.replay
        for i in range(warmup + repeats):
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run()
                end.record()
                torch.cuda.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                run()
                ms = (time.perf_counter() - t0) * 1e3
            if i >= warmup:
                out.append(ms)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--hardware", help="hardware spec name of this machine (required on a GPU)")
    p.add_argument("--batch", default="1,4,16,64")
    p.add_argument("--context", default="512,4096")
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--layers", type=int, help="instantiate only this many layers (the prediction uses the same)")
    p.add_argument("--tiny", action="store_true", help="tiny widths with the same structure (CPU smoke test)")
    p.add_argument("--device", default="auto")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--cuda-graph", action="store_true", help="capture each forward in a CUDA graph and time replays "
                                                              "(as CUDA-graphed engines run decode; GPU only)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("measure_steps: error: needs torch (pip install '.[measure]')", file=sys.stderr)
        return 2
    model = load_shape(args.model)
    if model.moe is not None or model.mla is not None:
        print(f"measure_steps: error: {model.name} is MoE/MLA; this script times dense GQA models only",
              file=sys.stderr)
        return 2
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if device.type == "cuda" and not args.hardware:
        print("measure_steps: error: name the GPU's hardware spec with --hardware (e.g. h100-sxm)", file=sys.stderr)
        return 2
    if args.cuda_graph and device.type != "cuda":
        print("measure_steps: error: --cuda-graph needs a CUDA device", file=sys.stderr)
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    shape = build_shape(model, args.tiny, args.layers)
    batches = [int(x) for x in args.batch.split(",")]
    contexts = [int(x) for x in args.context.split(",")]
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    rows = []
    dec = Decoder(shape, dtype, device)  # weights once; a KV cache per batch size
    elem = {"bf16": 2, "fp16": 2, "fp32": 4}[args.dtype]
    for b in batches:
        fits = [c for c in contexts if device.type != "cuda" or 2 * shape["layers"] * b * shape["kv_heads"]
                * (c + args.k + 1) * shape["head_dim"] * elem < 0.85 * torch.cuda.mem_get_info(device)[0]]
        for c in sorted(set(contexts) - set(fits)):
            print(f"skipped batch {b} at context {c}: its KV cache does not fit in the free GPU memory", file=sys.stderr)
        if not fits:
            continue
        dec.alloc_cache(b, max(fits) + args.k + 1)
        for c in fits:
            for q in (1, args.k + 1):
                ms = time_forward(dec, b, q, c, args.warmup, args.repeats, device, args.cuda_graph)
                ms.sort()
                rows.append({"hardware": args.hardware or "cpu", "device": device_name, "model": model.name,
                             "layers": shape["layers"], "tiny": int(args.tiny), "dtype": args.dtype, "batch": b,
                             "q": q, "context": c, "step_ms": round(statistics.median(ms), 4),
                             "step_ms_p10": round(ms[len(ms) // 10], 4),
                             "step_ms_p90": round(ms[(9 * len(ms)) // 10], 4), "repeats": len(ms),
                             "cuda_graph": int(args.cuda_graph)})
        if device.type == "cuda":
            dec.alloc_cache(1, 1)
            torch.cuda.empty_cache()
    with open(args.out, "w", newline="", encoding="utf-8") as fh:
        fh.write(f"# step times measured by benchmarks/measure_steps.py; torch {torch.__version__}; {device_name}\n")
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
