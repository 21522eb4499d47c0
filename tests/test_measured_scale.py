"""`measured` at scale (issue 12 item 20): linear in levels (it was quadratic: pairing, the load axis asked
per level, a scenario and a curve per physics check) and reads a file into column arrays whose
memory is proportional to the file (it held one Python object per row: 35 x the file).
Times are in benchmarks/bench_measured.py; these tests count work and bytes, not seconds."""

import json
import random
import sys
import tracemalloc

import numpy as np
import pytest
from conftest import REPO

import crossover
from crossover.cli.common import dumps_indented
from crossover.analysis.curves import evaluate
from crossover.errors import CrossoverError
from crossover.measurements import Columns, MeasuredTable, read_columns, read_measurements
from crossover.measurements import csv_table, readers
from crossover.analysis.bounds import check, speed_of_light

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_measured import write_levels, write_mb  # noqa: E402

MODEL = dict(model="llama-3.1-8b", hardware="h100-sxm", tp=1, k=3)


def _calls(fn) -> int:
    """Python and C function calls made by fn() (a count of work that does not depend on the machine)."""
    n = 0

    def count(frame, event, arg):
        nonlocal n
        if event in ("call", "c_call"):
            n += 1

    sys.setprofile(count)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return n


def test_measured_work_grows_linearly_with_levels(tmp_path):
    small, big = tmp_path / "s.csv", tmp_path / "b.csv"
    write_levels(small, 1000)
    write_levels(big, 4000)

    def run(path, **kw):
        res = crossover.measured(files=[str(path)], **kw)
        dumps_indented(res.to_dict())
        res.to_text()

    for kw in ({}, MODEL):
        run(small, **kw)  # warm: imports, compiled op lists, caches
        n_small, n_big = _calls(lambda: run(small, **kw)), _calls(lambda: run(big, **kw))
        # 4 x the levels: linear work is ~4 x the calls; the quadratic reader made ~16 x
        assert n_big < 5 * n_small, (kw, n_small, n_big)
    res = crossover.measured(files=[str(big)])
    assert len(res.to_dict()["points"]) == 4000


def _peak_bytes(fn) -> int:
    """Peak memory fn() allocates (Python objects and numpy arrays) beyond what was held before."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_memory_is_proportional_to_the_file_and_about_its_size(tmp_path, monkeypatch):
    """The bytes a larger file adds cost under 2 bytes each (float64 columns, ~1.2 bytes per byte of
    this CSV, reserved with 25% to spare: tracemalloc counts reserved pages that RSS does not), not an
    object per row (the old reader: ~35 bytes per byte of CSV). The file is read in pieces and chunks
    of a fixed size (smaller here, so that both files are many pieces long): their memory does not grow."""
    monkeypatch.setattr(csv_table, "CHUNK_CHARS", 1 << 14)
    chunks = readers.read_text_chunks
    monkeypatch.setattr(readers, "read_text_chunks", lambda p, e: chunks(p, e, size=1 << 16))
    sizes, peaks = [], []
    for mb in (0.5, 2.0):
        path = tmp_path / f"{mb}.csv"
        write_mb(path, mb, levels=200)  # repeated runs at 200 levels per arm
        run = lambda: dumps_indented(crossover.measured(files=[str(path)]).to_dict())  # noqa: E731
        run()
        sizes.append(path.stat().st_size)
        peaks.append(_peak_bytes(run))
    slope = (peaks[1] - peaks[0]) / (sizes[1] - sizes[0])
    assert slope < 2.0, (sizes, peaks, slope)
    assert peaks[1] < 3 * sizes[1], (sizes, peaks)


def test_the_csv_is_read_in_pieces_and_gives_what_one_piece_gives(tmp_path, monkeypatch):
    """Pieces of the file and chunks of lines end anywhere between lines: plain chunks (numpy) and
    odd ones (line by line) give the same points, sources and line numbers as one piece."""
    rng = random.Random(3)
    lines = ["# a comment", "", "arm,concurrency,output_throughput,median_tpot_ms,acceptance_length,k,model_id"]
    for i in range(1, 400):
        c = rng.choice([1, 2, 4, 8, 16, 32])
        row = [rng.choice(["on", "off", "ON"]), str(c), f"{rng.uniform(10, 900):.3f}", rng.choice(["", "3.5"]),
               rng.choice(["", "2.5"]), rng.choice(["", "3"]), rng.choice(["", "m1", "m2"])]
        line = ",".join(row)
        if i % 50 == 0:
            line = line.replace(",", ", ")  # spaces: line by line
        if i % 70 == 0:
            line = '"' + row[0] + '",' + ",".join(row[1:])  # quotes: line by line
        lines.append(line)
        if i % 90 == 0:
            lines += ["", "# between rows"]
    path = tmp_path / "odd.csv"
    path.write_text("\r\n".join(lines) + "\r\n")
    whole = [vars(p) for p in read_measurements([path])]
    monkeypatch.setattr(csv_table, "CHUNK_CHARS", 97)
    chunks = readers.read_text_chunks
    monkeypatch.setattr(readers, "read_text_chunks", lambda p, e: chunks(p, e, size=61))
    assert [vars(p) for p in read_measurements([path])] == whole
    assert {p["source"] for p in whole} >= {f"{path}:4", f"{path}:402"}
    # a cell at fault deep in the file: the same one-line error, naming its line
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines[:300] + ["on,4,abc,,,,"] + lines[300:]) + "\n")
    with pytest.raises(CrossoverError, match=rf"^{bad}:301: column 'output_throughput' must be a number, got 'abc'$"):
        read_measurements([bad])


def test_columns_hold_no_object_per_row_and_absent_columns_take_no_memory(tmp_path):
    path = tmp_path / "s.csv"
    write_levels(path, 500)
    c = read_columns([path])
    assert isinstance(c, Columns) and len(c) == 1000
    for name in ("acceptance_rate", "k", "model", "axis", "base"):  # not in the file, or one value for all rows
        assert getattr(c, name).strides == (0,), name
    assert c.load.dtype == np.float64 and c.on.dtype == bool
    table = MeasuredTable(columns=c)
    assert [p.source for p in table.arm("on")[:2]] == [f"{path}:3", f"{path}:5"]
    assert table.points == read_measurements([path])


def test_vectorised_physics_check_equals_the_per_point_bound(tmp_path):
    path = tmp_path / "s.csv"
    write_levels(path, 30)
    res = crossover.measured(files=[str(path)], **MODEL)
    sc = res.scenario
    for c, p in zip(res.checks, sorted(res.table.points, key=lambda q: (q.load, q.arm != "off", q.source))):
        sol = speed_of_light(sc, p.acceptance_length if p.arm == "on" and p.acceptance_length else None)
        cv = evaluate(sol, [c.batch])
        want = float(cv.tokens_per_s_on[0] if p.arm == "on" else cv.tokens_per_s_off[0])
        assert c.bound == pytest.approx(want, rel=1e-9)
    assert check(sc, []) == []
    # the table's columns and its points give the same checks, in the same order
    assert [vars(x) for x in check(sc, res.table)] == [vars(x) for x in check(sc, res.table.points)]


def test_dumps_indented_is_json_dumps_indent_2():
    rng = random.Random(0)
    leaves = [1, -2, 0.1, 1e300, 1.5e-7, float("nan"), float("inf"), True, False, None, "x", 'é\n\t"{}', "",
              10**20, np.float64(2.5), (1, 2), []]

    def tree(depth=0):
        r = rng.random()
        if depth < 4 and r < 0.25:
            return {rng.choice(["a", 'b\n"x"', "level"]) + str(i): tree(depth + 1) for i in range(rng.randint(0, 4))}
        if depth < 4 and r < 0.45:
            return [tree(depth + 1) for _ in range(rng.randint(0, 4))]
        return rng.choice(leaves)

    for _ in range(2000):
        obj = tree()
        assert dumps_indented(obj) == json.dumps(obj, indent=2)
    mixed = {1: "a", 2.5: [1, {True: None, None: 2}], "k": ()}
    assert dumps_indented(mixed) == json.dumps(mixed, indent=2)
    with pytest.raises(TypeError):
        dumps_indented({"a": np.int64(1)})
    # rows of scalars (one encoder call for all of them), with braces and escapes in keys and values
    tricky = ["}", "{", "}, {", '"', "\\", "\x00", "é", "", "a\nb"]
    for _ in range(500):
        keys = rng.sample(tricky + ["level", 1, 2.5, True, None], rng.randint(1, 4))
        rows = [{k: rng.choice(leaves[:13] + tricky) for k in rng.sample(keys, rng.randint(1, len(keys)))}
                for _ in range(rng.randint(1, 5))]
        for obj in (rows, {"points": rows, "n": [rows, []]}):
            assert dumps_indented(obj) == json.dumps(obj, indent=2)


def test_rounded_columns_are_round_itself():
    """crossings.rounded (numpy over 10,000s of values) gives round()'s exact doubles: random
    magnitudes, decimal ties (x.xx5 as written in a file) and their neighbours, zeros, NaN, infinities."""
    import math
    import struct

    from crossover.analysis.crossings import rounded as _rounded

    rng = random.Random(5)
    values = [rng.choice([1, -1]) * 10 ** rng.uniform(-8, 17) for _ in range(20000)]
    for _ in range(5000):
        x = float(f"{rng.randint(0, 10**6)}.{rng.randint(0, 999):03d}5")
        values += [x, -x, math.nextafter(x, 0), math.nextafter(x, math.inf)]
    values += [0.0, -0.0, -0.004, 0.125, 2.675, 0.5, 2.5, 1.005, 5e-324, 2.0**53, 1e300, float("nan"), float("inf"),
               float("-inf")]
    for digits in (2, 3, 4):
        got = _rounded(values, digits)
        want = [round(v, digits) for v in values]
        assert [struct.pack("<d", x) for x in got] == [struct.pack("<d", x) for x in want]  # -0.0 and NaN too
    assert _rounded([1, 2.5], 2) == [1, 2.5] and type(_rounded([1, 2.5], 2)[0]) is int  # round() keeps ints
