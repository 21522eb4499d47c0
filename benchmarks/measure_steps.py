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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


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
    """A minimal pre-norm decoder (RMSNorm, GQA attention over a preallocated KV cache, SwiGLU MLP)."""

    def __init__(self, shape: dict, batch: int, max_len: int, dtype, device):
        import torch

        g = torch.Generator(device="cpu").manual_seed(0)
        h, nq, nkv, hd, inter = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"], shape["inter"]

        def w(*dims):
            return (torch.randn(*dims, generator=g) * 0.02).to(device=device, dtype=dtype)

        self.shape, self.torch = shape, torch
        self.layers = [{"qkv": w(h, (nq + 2 * nkv) * hd), "o": w(nq * hd, h), "up": w(h, 2 * inter),
                        "down": w(inter, h)} for _ in range(shape["layers"])]
        self.lm_head = w(h, shape["vocab"])
        self.k_cache = [torch.zeros(batch, nkv, max_len, hd, device=device, dtype=dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(batch, nkv, max_len, hd, device=device, dtype=dtype) for _ in self.layers]

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


def time_forward(dec: Decoder, batch: int, q: int, context: int, warmup: int, repeats: int, device) -> list[float]:
    """Milliseconds of `repeats` forwards after `warmup` untimed ones."""
    torch = dec.torch
    x = torch.randn(batch, q, dec.shape["hidden"], device=device, dtype=dec.lm_head.dtype)
    out = []
    with torch.inference_mode():
        for i in range(warmup + repeats):
            if device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                dec.forward(x, context)
                end.record()
                torch.cuda.synchronize()
                ms = start.elapsed_time(end)
            else:
                t0 = time.perf_counter()
                dec.forward(x, context)
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
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("measure_steps: error: needs torch (pip install '.[measure]')", file=sys.stderr)
        return 2
    from crossover.specs import load_model

    model = load_model(args.model)
    if model.moe is not None or model.mla is not None:
        print(f"measure_steps: error: {model.name} is MoE/MLA; this script times dense GQA models only",
              file=sys.stderr)
        return 2
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if device.type == "cuda" and not args.hardware:
        print("measure_steps: error: name the GPU's hardware spec with --hardware (e.g. h100-sxm)", file=sys.stderr)
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    shape = build_shape(model, args.tiny, args.layers)
    batches = [int(x) for x in args.batch.split(",")]
    contexts = [int(x) for x in args.context.split(",")]
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    rows = []
    for b in batches:
        dec = Decoder(shape, b, max(contexts) + args.k + 1, dtype, device)
        for c in contexts:
            for q in (1, args.k + 1):
                ms = time_forward(dec, b, q, c, args.warmup, args.repeats, device)
                ms.sort()
                rows.append({"hardware": args.hardware or "cpu", "device": device_name, "model": model.name,
                             "layers": shape["layers"], "tiny": int(args.tiny), "dtype": args.dtype, "batch": b,
                             "q": q, "context": c, "step_ms": round(statistics.median(ms), 4),
                             "step_ms_p10": round(ms[len(ms) // 10], 4), "step_ms_p90": round(ms[(9 * len(ms)) // 10], 4),
                             "repeats": len(ms)})
        del dec
        if device.type == "cuda":
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
