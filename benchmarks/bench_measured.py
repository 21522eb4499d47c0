"""How `crossover measured` scales (issue 12 item 20): time for a sweep of many levels, with and
without the model beside it, as a command and in-process, and peak memory against the size of a
large CSV.

    python benchmarks/bench_measured.py [--levels 10000] [--mb 20,200] [--repeats 5]

Every file is generated under a temporary directory (removed at the end); nothing large is kept.
Goals: 10,000 levels <= 1 s as a command (with and without --model), peak RSS <= 3 x the file size.
Times are medians; the load average is printed with them (on a shared machine, wall time follows
the load: the CPU time of the command, user + system, is printed beside it).

The commands run with their bytecode cached (in a temporary PYTHONPYCACHEPREFIX, written by each
measurement's warm-up run), as an installed package has it, whatever PYTHONDONTWRITEBYTECODE says in
the calling shell; `--no-bytecode` writes none (PYTHONDONTWRITEBYTECODE=1): a module without a
current .pyc, this checkout's under such a shell, is compiled on every run.

Two shapes of large file: `repeats` (1,000 levels per arm, each measured many times: the median
run represents a level, as for `vllm bench sweep`'s repeats) and `distinct` (every row pair its own
level, so the output has as many levels as the file has row pairs: its JSON is about as large as
the file itself).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the checkout's crossover, installed or not
HEADER = "arm,concurrency,output_throughput,median_tpot_ms,p99_tpot_ms,median_ttft_ms,mean_e2el_ms,acceptance_length\n"
MODEL_FLAGS = ["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "1", "--k", "3"]


def rows_at(c: float, noise: float = 1.0) -> tuple[str, str]:
    """The off and on rows at concurrency `c` (a crossover near 100), throughput scaled by `noise`."""
    off = 140.0 * c / (1 + c / 400) * noise
    on = 290.0 * c / (1 + c / 60) * noise
    tpot_off, tpot_on = 1000.0 * c / off, 1000.0 * c * 2.5 / on
    return (f"off,{c},{off:.3f},{tpot_off:.4f},{1.2 * tpot_off:.4f},{20 + c / 10:.3f},{200 * tpot_off:.3f},\n",
            f"on,{c},{on:.3f},{tpot_on:.4f},{1.3 * tpot_on:.4f},{22 + c / 9:.3f},{200 * tpot_on:.3f},2.5\n")


def rows(levels: int):
    """Both arms at `levels` concurrency levels 1..levels."""
    for c in range(1, levels + 1):
        yield from rows_at(c)


def write_levels(path: Path, levels: int) -> None:
    with path.open("w") as f:
        f.write(HEADER)
        f.writelines(rows(levels))


def write_mb(path: Path, mb: float, levels: int | None = 1000) -> int:
    """About `mb` MB of rows; returns the number of rows. `levels`: the rows cycle through this many
    levels, each measured again and again with a few % of run-to-run noise; None: every row pair is a
    level of its own (fractional concurrency)."""
    target, n = int(mb * 1e6), 0
    with path.open("w") as f:
        f.write(HEADER)
        size, i = len(HEADER), 0
        while size < target:
            chunk = []
            for _ in range(1000):
                i += 1
                if levels is None:
                    pair = rows_at(i + 0.5)
                else:
                    pair = rows_at((i - 1) % levels + 1, 1.0 + 0.03 * (((i * 7919) % 101) / 50.0 - 1.0))
                chunk.extend(pair)
            text = "".join(chunk)
            f.write(text)
            size += len(text)
            n += len(chunk)
    return n


CHILD_ENV = {**os.environ, "PYTHONPATH": str(REPO)}  # main() sets where bytecode is cached


def run_child(argv: list[str]) -> tuple[float, float, float, int, str]:
    """(wall s, CPU s (user + system), peak RSS in bytes, exit status, stderr) of one command,
    measured on that child alone (os.wait4)."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=err, env=CHILD_ENV)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        err.seek(0)
        text = err.read().decode(errors="replace")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024.0, p.returncode, text


def command(path: Path, model: bool) -> list[str]:
    return [sys.executable, "-m", "crossover", "measured", "--files", str(path), "--json",
            *(MODEL_FLAGS if model else [])]


def median_run(argv: list[str], repeats: int) -> tuple[float, float, float]:
    """Median wall and CPU seconds and the largest peak RSS over `repeats` runs (one warm-up run first)."""
    runs = [run_child(argv) for _ in range(repeats + 1)][1:]
    for r in runs:
        if r[3] != 0:
            sys.exit(f"{' '.join(argv)}: exit {r[3]}: {r[4].strip()}")
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), max(r[2] for r in runs)


def time_in_process(path: Path, repeats: int, **kw) -> float:
    """Median seconds of what the command does after its imports: crossover.measured(files=[path],
    ...), its to_dict() and the JSON text."""
    import crossover
    from crossover.cli.common import dumps_indented

    def once() -> float:
        t = time.perf_counter()
        dumps_indented(crossover.measured(files=[str(path)], **kw).to_dict())
        return time.perf_counter() - t

    once()  # warm: imports, compiled op lists
    return statistics.median(once() for _ in range(repeats))


def load() -> str:
    return "load average " + " / ".join(f"{x:.1f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", type=int, default=10_000)
    ap.add_argument("--mb", default="20,200", help="sizes of the large CSVs, comma-separated (0: none)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-bytecode", action="store_true", help="write no bytecode (PYTHONDONTWRITEBYTECODE=1)")
    args = ap.parse_args()
    print(load())
    # Commands first, from a parent that has imported nothing large: a child's peak RSS counts the
    # parent's pages it was forked with, so the in-process runs (which import crossover) come last.
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        if args.no_bytecode:
            CHILD_ENV["PYTHONDONTWRITEBYTECODE"] = "1"
            print("bytecode: none written (a module without a current .pyc is compiled on every run)")
        else:
            CHILD_ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            CHILD_ENV["PYTHONPYCACHEPREFIX"] = str(d / "pycache")
            print("bytecode: cached after each warm-up run, as installed")
        start = median_run([sys.executable, "-c", "pass"], args.repeats)
        print(f"interpreter start (python -c pass): {start[0]:.3f} s wall, {start[1]:.3f} s CPU")
        sweep = d / "sweep.csv"
        write_levels(sweep, args.levels)
        for model in (False, True):
            wall, cpu, peak = median_run(command(sweep, model), args.repeats)
            print(f"measured --json, {args.levels} levels x 2 arms{' with --model' if model else ''}: command "
                  f"{wall:.3f} s wall, {cpu:.3f} s CPU, peak RSS {peak / 1e6:.0f} MB (medians of {args.repeats}; "
                  f"goal <= 1 s)")
        print(load())
        for mb in (float(x) for x in args.mb.split(",") if float(x) > 0):
            for levels in (1000, None):
                if levels is None and mb > 50:
                    continue  # its output alone is about the file's size: see the module docstring
                big = d / "big.csv"
                n = write_mb(big, mb, levels)
                size = big.stat().st_size
                wall, cpu, peak, rc, err = run_child(command(big, False))
                if rc != 0:
                    sys.exit(f"measured on {size / 1e6:.0f} MB: exit {rc}: {err.strip()}")
                shape = f"{levels} levels, repeated runs" if levels else "every row pair its own level"
                print(f"measured --json on a {size / 1e6:.0f} MB CSV ({n} rows, {shape}): {wall:.1f} s wall, "
                      f"{cpu:.1f} s CPU, peak RSS {peak / 1e6:.0f} MB = {peak / size:.2f} x the file (goal <= 3 x)")
                big.unlink()
        print(load())
        for model in (False, True):
            inproc = time_in_process(sweep, args.repeats, **(dict(model="llama-3.1-8b", hardware="h100-sxm", tp=1, k=3)
                                                              if model else {}))
            print(f"in-process (after the imports), {args.levels} levels{' with --model' if model else ''}: "
                  f"{inproc:.3f} s (median of {args.repeats})")
        print(load())


if __name__ == "__main__":
    main()
