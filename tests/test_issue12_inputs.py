"""Issue 12, inputs real files carry: zero throughput, a UTF-8 BOM, negative latencies; JSON stays JSON."""

import json

from conftest import run_cli


def _csv(tmp_path, text: str, bom: bool = False):
    f = tmp_path / "sweep.csv"
    f.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode())
    return f


def test_zero_off_throughput_is_no_crash_and_the_json_has_no_bare_nan(tmp_path):
    f = _csv(tmp_path, "arm,concurrency,output_throughput\noff,1,0\non,1,150\noff,8,1000\non,8,900\n")
    r = run_cli("measured", "--files", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout
    d = json.loads(r.stdout)
    assert d["points"][0]["speedup"] is None and d["points"][1]["speedup"] == 0.9
    text = run_cli("measured", "--files", str(f))
    assert text.returncode == 0 and "Traceback" not in text.stderr


def test_a_csv_that_starts_with_a_utf8_bom_is_read(tmp_path):
    f = _csv(tmp_path, "arm,concurrency,output_throughput\noff,1,100\non,1,150\n", bom=True)
    r = run_cli("measured", "--files", str(f), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["points"][0]["speedup"] == 1.5


def test_negative_latencies_are_refused_in_one_line(tmp_path):
    f = _csv(tmp_path, "arm,concurrency,output_throughput,median_tpot_ms\noff,1,100,7\non,1,150,-4\n")
    r = run_cli("measured", "--files", str(f))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "median_tpot_ms must be >= 0" in r.stderr
