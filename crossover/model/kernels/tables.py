"""Measured kernel tables in the project's own typed form, read from data files only.

The source is the public `aiconfigurator-core` package (Apache-2.0, PyPI; `pip install
"crossover[kernels]"`), whose wheel ships latencies measured on real GPUs as parquet files under
`aiconfigurator_core/systems/data/<gpu>/<op>/<framework>/<version>/`. We locate that directory
without importing the package (importlib.util.find_spec only finds it; its code never runs) and
read the files with pyarrow. A `<stem>.csv` with the same columns stands in for `<stem>.parquet`
(the tests build their own small tables that way; no download, no pyarrow needed).

Latencies in the files are milliseconds per kernel call; message sizes of collectives count
elements (int8 messages of the same size take about half the time of fp16 ones). Generation
(decode) attention rows are `step` cached tokens plus `isl` = 1 new one, so the KV length read is
step + isl. Every table becomes a `Grid`: log-latency over log-spaced axes, NaN where nothing was
measured, interpolated multilinearly in log space (`Grid.at`).
"""

from __future__ import annotations

import csv
import importlib.metadata
import importlib.util
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import CrossoverError

PACKAGE = "aiconfigurator-core"
INSTALL_HINT = 'pip install "crossover[kernels]"'

# crossover hardware names -> the package's system folders (same chip, memory and board class).
GPU_FOLDERS: dict[str, str] = {
    "h100-sxm": "h100_sxm", "h200": "h200_sxm", "b200": "b200_sxm", "b300": "b300_sxm",
    "gb200": "gb200", "a100-80gb-sxm": "a100_sxm", "l40s": "l40s", "h100-pcie": "h100_pcie", "l4": "l4",
}
# --engine -> the framework whose kernels the tables measured (None: no tables, e.g. Hugging Face).
FRAMEWORKS: dict[str, str | None] = {"vllm": "vllm", "vllm-0.10": "vllm", "vllm-v0": "vllm", "sglang": "sglang",
                                     "sglang-0.4": "sglang",
                                     "trtllm": "trtllm", "hf": None}
# crossover dtypes -> the tables' names (GEMM, KV cache, MoE weights).
GEMM_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
KV_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}
MOE_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8"}

_LOG_TOL = 1e-9  # log-axis slack: a coordinate this close to an end point is on the table


def package_data() -> tuple[Path, str] | None:
    """(data root, version) of the installed aiconfigurator-core, found without importing it."""
    try:
        spec = importlib.util.find_spec("aiconfigurator_core")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / "systems" / "data"
    if not root.is_dir():
        return None
    try:
        version = importlib.metadata.version(PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return root, version


def require_package() -> tuple[Path, str]:
    """The package's data root and version, or one line saying how to install them."""
    found = package_data()
    if found is None:
        raise CrossoverError(f"--cost kernels reads measured kernel tables from {PACKAGE}, which is not installed; "
                             f"{INSTALL_HINT}")
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise CrossoverError(f"--cost kernels reads parquet tables with pyarrow, which is not installed; "
                             f"{INSTALL_HINT}") from None
    return found


# ---------------------------------------------------------------------------------------- grids

@dataclass(frozen=True, eq=False)
class Grid:
    """Seconds on a log-spaced grid: `axes` hold log coordinates (ascending), `values` log seconds
    (NaN: not measured). Interpolation is multilinear in (log coordinate, log seconds)."""

    axes: tuple[np.ndarray, ...]
    values: np.ndarray

    def at(self, *coords) -> np.ndarray:
        """Seconds at the given coordinates (not logged; arrays broadcast). NaN outside the axes or
        where a cell corner with weight was not measured. An axis of one value matches it exactly."""
        logs = [np.log(np.asarray(c, float)) for c in coords]
        shape = np.broadcast_shapes(*(x.shape for x in logs))
        lo, frac, ok = [], [], np.ones(shape, bool)
        for ax, x in zip(self.axes, logs):
            x = np.broadcast_to(x, shape)
            ok &= (x >= ax[0] - _LOG_TOL) & (x <= ax[-1] + _LOG_TOL)
            if len(ax) == 1:
                lo.append(np.zeros(shape, np.int64))
                frac.append(np.zeros(shape))
                continue
            i = np.clip(np.searchsorted(ax, x, side="right") - 1, 0, len(ax) - 2)
            lo.append(i)
            frac.append(np.clip((x - ax[i]) / (ax[i + 1] - ax[i]), 0.0, 1.0))
        total = np.zeros(shape)
        for corner in range(1 << len(self.axes)):
            w = np.ones(shape)
            idx = []
            for d, (i, t) in enumerate(zip(lo, frac)):
                up = (corner >> d) & 1
                if up and len(self.axes[d]) == 1:
                    w = np.zeros(shape)
                    idx.append(i)
                    continue
                w = w * (t if up else 1.0 - t)
                idx.append(i + up)
            v = self.values[tuple(idx)]
            bad = np.isnan(v) & (w > 0)
            ok &= ~bad
            total = total + np.where(w > 0, w * np.nan_to_num(v), 0.0)
        return np.where(ok, np.exp(total), np.nan)


def make_grid(columns: list[np.ndarray], seconds: np.ndarray) -> Grid:
    """A grid over the distinct values of each column (all > 0), the geometric mean where a point repeats."""
    axes, index = [], []
    for col in columns:
        vals, inv = np.unique(np.asarray(col, float), return_inverse=True)
        axes.append(np.log(vals))
        index.append(inv.ravel())
    shape = tuple(len(a) for a in axes)
    flat = np.ravel_multi_index(tuple(index), shape)
    logs = np.log(np.asarray(seconds, float))
    size = int(np.prod(shape))
    count = np.bincount(flat, minlength=size)
    total = np.bincount(flat, weights=logs, minlength=size)
    values = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return Grid(tuple(axes), values.reshape(shape))


# ---------------------------------------------------------------------------------------- files

class Columns:
    """A table's columns: numbers as float arrays, text as (labels, integer codes)."""

    def __init__(self, numeric: dict[str, np.ndarray], text: dict[str, tuple[list[str], np.ndarray]]):
        self.numeric, self.text = numeric, text
        self.rows = len(next(iter(numeric.values()))) if numeric else 0

    def __contains__(self, name: str) -> bool:
        return name in self.numeric or name in self.text

    def num(self, name: str) -> np.ndarray:
        return self.numeric[name]

    def _encode(self, name: str) -> tuple[list, np.ndarray]:
        if name not in self.text:  # numbers: encoded once, on first use
            vals, inv = np.unique(self.numeric[name], return_inverse=True)
            self.text[name] = ([int(v) if float(v).is_integer() else float(v) for v in vals], inv.ravel())
        return self.text[name]

    def codes(self, name: str) -> np.ndarray:
        """Integer codes of a column (text or numeric), equal values equal codes."""
        return self._encode(name)[1]

    def label(self, name: str, code: int):
        """The value a code stands for (str for text, int or float for numbers)."""
        return self._encode(name)[0][code]

    def is_(self, name: str, values) -> np.ndarray:
        """Rows whose text column is one of `values` (all rows when the column is absent)."""
        if name not in self.text or name in self.numeric:
            return np.ones(self.rows, bool)
        labels, codes = self.text[name]
        return np.isin(codes, [i for i, lab in enumerate(labels) if lab in values])


def _numbers(arr) -> np.ndarray:
    """A pyarrow array of numbers without nulls as numpy, read from its data buffer (pyarrow's own
    to_numpy imports pandas on first use, ~0.8 s of the table load)."""
    names = {"double": "float64", "float": "float32", "halffloat": "float16"}
    dtype = np.dtype(names.get(str(arr.type), str(arr.type)))
    if arr.null_count:
        raise CrossoverError(f"a kernel table column of {arr.type} has {arr.null_count} missing values")
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def read_table(path_without_suffix: Path) -> Columns | None:
    """Columns of `<stem>.parquet` (pyarrow) or `<stem>.csv`, or None when neither exists."""
    pq_path = path_without_suffix.with_suffix(".parquet")
    numeric: dict[str, np.ndarray] = {}
    text: dict[str, tuple[list[str], np.ndarray]] = {}
    if pq_path.exists():
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise CrossoverError(f"reading {pq_path.name} needs pyarrow; {INSTALL_HINT}") from None
        table = pq.ParquetFile(pq_path).read()  # (not pq.read_table: its dataset layer costs ~0.8 s on first use)
        for name in table.column_names:
            col = table.column(name).combine_chunks()
            if pa.types.is_integer(col.type) or pa.types.is_floating(col.type):
                numeric[name] = _numbers(col).astype(float)
            else:
                enc = col.cast(pa.string()).dictionary_encode()
                text[name] = ([str(x.as_py()) for x in enc.dictionary], _numbers(enc.indices).astype(np.int64))
        return Columns(numeric, text)
    csv_path = path_without_suffix.with_suffix(".csv")
    if not csv_path.exists():
        return None
    with csv_path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for name in (rows[0].keys() if rows else ()):
        vals = [r[name] for r in rows]
        try:
            numeric[name] = np.array([float(v) for v in vals])
        except ValueError:
            labels, codes = np.unique(np.array(vals, dtype=object).astype(str), return_inverse=True)
            text[name] = ([str(x) for x in labels], codes.ravel().astype(np.int64))
    return Columns(numeric, text)


def _version_key(v: str) -> tuple:
    """Sort key of a version folder name: numeric parts numerically (0.5.14 > 0.5.9; rc23 > rc20)."""
    parts = []
    for piece in v.replace("rc", ".rc.").replace("post", ".post.").split("."):
        parts.append((0, int(piece), "") if piece.isdigit() else (1, 0, piece))
    return tuple(parts)


@lru_cache(maxsize=64)
def _current_versions(root: Path) -> dict:
    """The package's declared current version per (system, framework) (systems/query_versions.yaml)."""
    path = root.parent / "query_versions.yaml"
    if not path.exists():
        return {}
    import yaml

    from ...specs.loader import safe_load_yaml

    try:
        data = safe_load_yaml(path.read_text()) or {}
    except (yaml.YAMLError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def pick_version(root: Path, gpu: str, op: str, framework: str, stem: str) -> str | None:
    """The framework version whose folder has table `stem`: the package's declared current version
    for this GPU where it has it, else the newest folder that does."""
    base = root / gpu / op / framework
    if not base.is_dir():
        return None
    have = [d.name for d in base.iterdir() if d.is_dir() and any((d / (stem + s)).exists() for s in (".parquet", ".csv"))]
    if not have:
        return None
    declared = _current_versions(root)
    cur = ((declared.get("overrides") or {}).get(gpu) or {}).get(framework) or (declared.get("defaults") or {}).get(framework)
    current = cur.get("current") if isinstance(cur, dict) else None
    return current if current in have else max(have, key=_version_key)


def _groups(cols: Columns, keys: tuple[str, ...], mask: np.ndarray):
    """(key values, row indices) per distinct combination of the `keys` columns within `mask`,
    keeping only the kernel implementation measured most often in each group (an engine runs one;
    mixing two would interpolate between implementations)."""
    rows = np.nonzero(mask)[0]
    if not rows.size:
        return
    codes = [cols.codes(k)[rows] for k in keys]
    sizes = [int(c.max()) + 1 for c in codes]
    flat = np.ravel_multi_index(tuple(codes), sizes) if keys else np.zeros(rows.size, np.int64)
    order = np.argsort(flat, kind="stable")
    flat, rows = flat[order], rows[order]
    cells, start = np.unique(flat, return_index=True)
    kernel = cols.codes("kernel_source") if "kernel_source" in cols else None
    for cell, idx in zip(cells, np.split(rows, start[1:])):
        if kernel is not None:
            ks = kernel[idx]
            idx = idx[ks == np.bincount(ks).argmax()]
        parts = np.unravel_index(int(cell), sizes) if keys else ()
        yield tuple(cols.label(k, int(parts[j])) for j, k in enumerate(keys)), idx


# ---------------------------------------------------------------------------------------- typed tables

@dataclass(frozen=True, eq=False)
class OpTable:
    """One op class of one GPU and framework: grids by categorical key, and where they came from."""

    op: str  # gemm, decode_attention, context_attention, moe, allreduce
    framework: str
    version: str
    grids: dict[tuple, Grid] = field(default_factory=dict)

    def grid(self, key: tuple) -> Grid | None:
        return self.grids.get(key)


def _seconds(cols: Columns, idx: np.ndarray) -> np.ndarray:
    return cols.num("latency")[idx] * 1e-3  # the files hold milliseconds


def _gemm(cols: Columns) -> dict[tuple, Grid]:
    """(dtype,) -> seconds over (m, n, k)."""
    return {key: make_grid([cols.num("m")[i], cols.num("n")[i], cols.num("k")[i]], _seconds(cols, i))
            for key, i in _groups(cols, ("gemm_dtype",), np.ones(cols.rows, bool))}


def _attention(cols: Columns, decode: bool) -> dict[tuple, Grid]:
    """(kv heads, head dim, kv dtype) -> seconds over (heads, batch, KV length) for decode
    (KV length = step + isl) or (heads, batch, prompt length) for context attention (no window)."""
    base = np.ones(cols.rows, bool)
    for name in ("window_size",):
        if name in cols:
            base &= cols.num(name) == 0
    if "beam_width" in cols:
        base &= cols.num("beam_width") == 1
    out = {}
    for key, i in _groups(cols, ("num_key_value_heads", "head_dim", "kv_cache_dtype"), base):
        length = cols.num("step")[i] + cols.num("isl")[i] if decode else cols.num("isl")[i]
        out[key] = make_grid([cols.num("num_heads")[i], cols.num("batch_size")[i], length], _seconds(cols, i))
    return out


def _moe(cols: Columns) -> dict[tuple, Grid]:
    """(dtype, hidden, inter, top_k, experts, tp, ep) -> seconds over tokens (balanced routing)."""
    keys = ("moe_dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size")
    return {key: make_grid([cols.num("num_tokens")[i]], _seconds(cols, i))
            for key, i in _groups(cols, keys, cols.is_("distribution", ("balanced",)))}


def _allreduce(cols: Columns, dtype_col: str) -> dict[tuple, Grid]:
    """(GPUs,) -> seconds over message bytes (bf16/half elements x 2), graph-captured where both."""
    mask = cols.is_("op_name", ("all_reduce",)) & cols.is_(dtype_col, ("bfloat16", "half", "float16"))
    if "kernel_source" in cols.text:
        labels = cols.text["kernel_source"][0]
        graph = cols.is_("kernel_source", [lab for lab in labels if "graph" in str(lab)])
        if (mask & graph).any():
            mask &= graph
    return {key: make_grid([cols.num("message_size")[i] * 2.0], _seconds(cols, i))
            for key, i in _groups(cols, ("num_gpus",), mask)}


# (op class) -> (folder, file stem, builder)
_SPECS = {
    "gemm": ("gemm", "gemm_perf", _gemm),
    "decode_attention": ("attention", "generation_attention_perf", lambda c: _attention(c, True)),
    "context_attention": ("attention", "context_attention_perf", lambda c: _attention(c, False)),
    "moe": ("moe", "moe_perf", _moe),
    "allreduce": ("comm", "custom_allreduce_perf", lambda c: _allreduce(c, "allreduce_dtype")),
}


@lru_cache(maxsize=128)
def load_op_table(root: Path, gpu: str, framework: str, op: str) -> OpTable | None:
    """One op class's table for a GPU folder and framework (lazy, memoised), or None if absent.
    All-reduce falls back to the NCCL table when the framework measured no custom all-reduce."""
    folder, stem, build = _SPECS[op]
    version = pick_version(root, gpu, folder, framework, stem)
    fw = framework
    if version is None and op == "allreduce":
        fw, stem = "nccl", "nccl_perf"
        version = pick_version(root, gpu, folder, fw, stem)
        build = lambda c: _allreduce(c, "nccl_dtype")  # noqa: E731
    if version is None:
        return None
    cols = read_table(root / gpu / folder / fw / version / stem)
    if cols is None or "latency" not in cols or not cols.rows:
        return None
    return OpTable(op, fw, version, build(cols))


OP_CLASSES = tuple(_SPECS)
