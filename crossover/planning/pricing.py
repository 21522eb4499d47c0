"""What a fleet costs: rental (USD per GPU-hour) and ownership (purchase amortised over `years`, plus
power = board power x utilisation x PUE x USD/kWh). Defaults come from hardware/*.yaml (each price
with its source and date there); `--price` and `--price-file` override them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import yaml

from ..defaults import DEFAULT_PUE, DEFAULT_YEARS  # ownership defaults, with why
from ..errors import CrossoverError
from ..files import read_text, too_deep
from ..specs.hardware import Hardware
from ..specs.loader import safe_load_yaml

HOURS_PER_MONTH = 8760.0 / 12.0  # 365 days x 24 h / 12 months = 730 h
BASES = ("rental", "ownership")
FILE_KEYS = ("price_per_hour_usd", "purchase_usd_per_gpu", "purchase_usd_per_node", "tdp_w")


@dataclass(frozen=True)
class Price:
    """One accelerator's prices, each with where it came from."""

    rent_per_gpu_hour: float | None
    purchase_per_gpu: float | None
    tdp_w: float | None
    sources: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Costs:
    """How to price: per-accelerator prices, power and amortisation, and the basis that ranks."""

    prices: Mapping[str, Price]
    power_usd_per_kwh: float | None = None
    pue: float = DEFAULT_PUE
    years: float = DEFAULT_YEARS
    basis: str = "rental"

    def rental_per_month(self, hardware: str, gpus: int) -> float | None:
        """Renting `gpus` GPUs for a month (None without a price)."""
        p = self.prices[hardware].rent_per_gpu_hour
        if p is None:
            return None
        return _finite(_product(gpus, p, HOURS_PER_MONTH), lambda: (
            f"renting {_count(gpus)} x {hardware} for a month overflows: {_gpus(gpus)} x ${p:g} per GPU-hour "
            f"({self.origin(hardware, 'price_per_hour_usd')}) x {HOURS_PER_MONTH:g} h; give a smaller price or demand"))

    def ownership_per_month(self, hardware: str, gpus: int, utilisation: float) -> float | None:
        """Owning `gpus` GPUs for a month: purchase / (12 years) plus power at `utilisation` (the mean
        share of their capacity the demand uses); None without a purchase price, or without board
        power when power is priced."""
        p = self.prices[hardware]
        if p.purchase_per_gpu is None:
            return None
        buy = p.purchase_per_gpu
        capital = _finite(_product(gpus, buy) / (12.0 * self.years), lambda: (
            f"owning {_count(gpus)} x {hardware} overflows: {_gpus(gpus)} x ${buy:g} "
            f"({self.origin(hardware, 'purchase_usd_per_gpu')}) over 12 months x --years {self.years:g}; give a "
            f"smaller purchase price or demand, or more --years"))
        if (power := self.power_per_month(hardware, gpus, utilisation)) is None:
            return None
        return _finite(capital + power, lambda: (
            f"owning {_count(gpus)} x {hardware} overflows: capital ${capital:g} + power ${power:g} per month "
            f"({self.origin(hardware, 'purchase_usd_per_gpu')}, {self.origin(hardware, 'tdp_w')}, --power-cost "
            f"{self.power_usd_per_kwh:g}); give smaller prices"))

    def power_per_month(self, hardware: str, gpus: int, utilisation: float) -> float | None:
        """Electricity for a month: board power x utilisation x PUE x USD/kWh (0 when --power-cost is
        not given: power unpriced, said in the output; None when the board power is unknown)."""
        if self.power_usd_per_kwh is None:
            return 0.0
        tdp = self.prices[hardware].tdp_w
        if tdp is None:
            return None
        kwh = self.power_usd_per_kwh
        return _finite(_product(gpus, tdp / 1000.0, utilisation, self.pue, kwh, HOURS_PER_MONTH), lambda: (
            f"powering {_count(gpus)} x {hardware} overflows: {_gpus(gpus)} x {tdp:g} W "
            f"({self.origin(hardware, 'tdp_w')}) x utilisation {utilisation:.3g} x --pue {self.pue:g} x "
            f"--power-cost {kwh:g} USD/kWh x {HOURS_PER_MONTH:g} h; give smaller inputs"))

    def per_month(self, hardware: str, gpus: int, utilisation: float) -> float | None:
        """The ranking basis's monthly cost."""
        if self.basis == "rental":
            return self.rental_per_month(hardware, gpus)
        return self.ownership_per_month(hardware, gpus, utilisation)

    def origin(self, hardware: str, key: str) -> str:
        """Where a price came from, as the input that set it: '--price h100-sxm', 'price file F:
        h100-sxm.tdp_w' or 'hardware/h100-sxm.yaml tdp_w'."""
        src = self.prices[hardware].sources.get(key, "")
        if src == "--price":
            return f"--price {hardware}"
        if src.startswith("price file "):
            return f"{src.split(' (node of', 1)[0]}: {hardware}.{key}"
        return f"hardware/{hardware}.yaml {key}"

    def missing(self, hardware: str) -> str | None:
        """Why `hardware` has no cost on this basis (the flag that would give one), else None."""
        p = self.prices[hardware]
        if self.basis == "rental" and p.rent_per_gpu_hour is None:
            return f"no rental price for {hardware} (--price {hardware}=USD_PER_GPU_HOUR)"
        if self.basis == "ownership" and p.purchase_per_gpu is None:
            return f"no purchase price for {hardware} (--price-file with purchase_usd_per_gpu)"
        if self.basis == "ownership" and self.power_usd_per_kwh is not None and p.tdp_w is None:
            return f"no board power for {hardware} (--price-file with tdp_w)"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The pricing inputs, each price with its source."""
        return {"basis": self.basis, "power_usd_per_kwh": self.power_usd_per_kwh, "pue": self.pue,
                "years": self.years, "hours_per_month": HOURS_PER_MONTH,
                "prices": {h: {"rent_usd_per_gpu_hour": p.rent_per_gpu_hour, "purchase_usd_per_gpu": p.purchase_per_gpu,
                               "tdp_w": p.tdp_w, "sources": dict(p.sources)} for h, p in self.prices.items()}}


def _positive(value: Any, what: str) -> float:
    """A finite number > 0; a boolean (YAML's true/yes/on) is not a number."""
    if isinstance(value, (bool, np.bool_)):
        raise CrossoverError(f"{what}: {value!r} is not a number (a YAML boolean: true/yes/on read as one; "
                             "give a number)")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CrossoverError(f"{what}: {value!r} is not a number") from None
    if not (math.isfinite(x) and x > 0):
        raise CrossoverError(f"{what} must be a finite number > 0 (got {value!r})")
    return x


def _product(*factors: float) -> float:
    """The product of positive factors, inf where it overflows (a fleet's int GPU count too large for
    a float included)."""
    out = 1.0
    for f in factors:
        try:
            out *= float(f)
        except OverflowError:
            return math.inf
    return out


def _count(n: float) -> str:
    """A GPU count for a message: exact where short, else in e-notation."""
    return f"{n:,}" if isinstance(n, int) and n < 10**15 else f"{float(n):.3g}"


def _gpus(n: float) -> str:
    return f"{_count(n)} GPU{'' if n == 1 else 's'}"


def _finite(x: float, why: Callable[[], str]) -> float:
    """`x`, or the one-line error `why()` (naming the inputs) where it overflowed."""
    if not math.isfinite(x):
        raise CrossoverError(why())
    return x


def parse_price_flags(items: Sequence[str] | str | None) -> dict[str, float]:
    """`--price h100-sxm=2.49,h200=3.5` (or repeated): rental USD per GPU-hour by accelerator name."""
    if items is None:
        return {}
    parts = [items] if isinstance(items, str) else list(items)
    out: dict[str, float] = {}
    for part in parts:
        for item in (x.strip() for x in part.split(",")):
            if not item:
                continue
            name, eq, value = item.partition("=")
            if not eq or not name.strip():
                raise CrossoverError(f"--price {item!r}: expected GPU=USD_PER_GPU_HOUR, e.g. h100-sxm=2.49")
            out[name.strip()] = _positive(value, f"--price {name.strip()}")
    return out


def read_price_file(path: str | Path) -> dict[str, dict[str, float]]:
    """A YAML mapping of accelerator name to a rental price (a number: USD per GPU-hour) or to a
    mapping of price_per_hour_usd, purchase_usd_per_gpu or purchase_usd_per_node, tdp_w."""
    try:
        raw = safe_load_yaml(read_text(Path(path), "a price file (YAML)"))
    except RecursionError:
        raise too_deep(path, "a price file (YAML)") from None
    except yaml.YAMLError as exc:
        raise CrossoverError(f"price file {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(raw, dict) or not raw:
        raise CrossoverError(f"price file {path}: expected a mapping of accelerator name to prices")
    out: dict[str, dict[str, float]] = {}
    for name, v in raw.items():
        if not isinstance(v, dict):
            v = {"price_per_hour_usd": v}
        bad = sorted(set(v) - set(FILE_KEYS))
        if bad:
            raise CrossoverError(f"price file {path}: {name}: unknown key {bad[0]!r}; expected {', '.join(FILE_KEYS)}")
        if "purchase_usd_per_gpu" in v and "purchase_usd_per_node" in v:
            raise CrossoverError(f"price file {path}: {name}: give purchase_usd_per_gpu or purchase_usd_per_node")
        out[str(name)] = {k: _positive(x, f"price file {path}: {name}.{k}") for k, x in v.items()}
    return out


def costs(hardware: Sequence[Hardware], *, price: Mapping[str, float] | None = None,
          price_file: str | Path | None = None, power_usd_per_kwh: float | None = None, pue: float = DEFAULT_PUE,
          years: float = DEFAULT_YEARS, basis: str = "rental") -> Costs:
    """Prices of the plan's accelerators: the library's, then the price file's, then --price."""
    if basis not in BASES:
        raise CrossoverError(f"--cost-basis {basis!r}: expected {' or '.join(BASES)}")
    if power_usd_per_kwh is not None:
        power_usd_per_kwh = _positive(power_usd_per_kwh, "--power-cost")
    pue, years = _positive(pue, "--pue"), _positive(years, "--years")
    if pue < 1.0:
        raise CrossoverError(f"--pue must be >= 1 (facility power over IT power; got {pue:g})")
    names = {h.name for h in hardware}
    file_prices = read_price_file(price_file) if price_file is not None else {}
    flags = {str(name): _positive(v, f"--price {name}") for name, v in dict(price or {}).items()}
    for name in [*file_prices, *flags]:
        if name not in names:
            where = "--price" if name in flags else f"price file {price_file}"
            raise CrossoverError(f"{where}: {name!r} is not one of this plan's accelerators ({', '.join(sorted(names))})")
    out = {}
    for h in hardware:
        src = {k: h.sources.get(k, "") for k in ("price_per_hour_usd", "purchase_usd_per_gpu", "tdp_w")}
        rent, buy, tdp = h.price_per_hour_usd, h.purchase_price_per_gpu_usd, h.tdp_w
        f = file_prices.get(h.name, {})
        if "price_per_hour_usd" in f:
            rent, src["price_per_hour_usd"] = f["price_per_hour_usd"], f"price file {price_file}"
        if "purchase_usd_per_gpu" in f:
            buy, src["purchase_usd_per_gpu"] = f["purchase_usd_per_gpu"], f"price file {price_file}"
        if "purchase_usd_per_node" in f:
            buy = f["purchase_usd_per_node"] / h.node_size
            src["purchase_usd_per_gpu"] = f"price file {price_file} (node of {h.node_size} GPUs)"
        if "tdp_w" in f:
            tdp, src["tdp_w"] = f["tdp_w"], f"price file {price_file}"
        if h.name in flags:
            rent, src["price_per_hour_usd"] = flags[h.name], "--price"
        out[h.name] = Price(rent, buy, tdp, src)
    return Costs(out, power_usd_per_kwh, pue, years, basis)
