"""Unit conversions and dtype sizes. Datasheet units are decimal (1 GB = 1e9 bytes)."""

from __future__ import annotations

GB = 1e9  # bytes; datasheet "GB" and "GB/s" are decimal, never 2**30
TFLOPS = 1e12  # FLOP/s

# Bytes per element. int4/fp4 weight-only formats carry block scales: mxfp4 stores one 8-bit
# scale per 32 values (4.25 bits), int4 (GPTQ/AWQ, group 128) one fp16 scale + zero per 128.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + 4.0 / 128,
    "fp4": 0.5 + 1.0 / 16,
    "mxfp4": 0.5 + 1.0 / 32,
}

# Which tensor-core rate a weight dtype computes at. Weight-only int4/mxfp4 kernels dequantise
# to bf16 before the MMA on most hardware, so they compute at the bf16 rate.
COMPUTE_DTYPE: dict[str, str] = {
    "fp32": "bf16",
    "bf16": "bf16",
    "fp16": "bf16",
    "fp8": "fp8",
    "int8": "int8",
    "int4": "bf16",
    "fp4": "fp4",
    "mxfp4": "bf16",
}

