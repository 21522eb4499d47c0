"""`crossover serve`: the JSON endpoints over plain HTTP (the library's numbers, 400 on bad input,
no file outside the static folder, the spec libraries and uploads; the upload limit), the verb,
the static files in a built wheel, and the page itself in headless Chromium driven by Selenium.

The browser test needs Debian's chromium and chromium-driver (`.ci/run` installs them where
apt-get is available) and the `selenium` package (the test extra); without them it is skipped,
saying which is missing. CROSSOVER_WEB_SCREENSHOT=PATH saves the page as PNG (docs/serve.png).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

import crossover
from conftest import FIXTURES, REPO, assert_one_line_error, clean_env, run_cli
from raw_http import served
from crossover.web import make_server
from crossover.web.store import MAX_UPLOAD_BYTES

CROSSING = {"context": "256", "acceptance": "0.5"}  # the README's crossing case (inside the batch range)
IMPOSSIBLE = FIXTURES / "edge_sweeps" / "impossible.csv"  # one point faster than an H100 can run


@pytest.fixture(scope="module")
def server():
    with served(make_server("127.0.0.1", 0), poll_interval=0.1) as srv:
        yield srv


def call(srv, path: str, *, method: str = "GET", body: bytes | None = None, headers: dict | None = None):
    """(status, parsed JSON or raw bytes) for a raw request path (sent exactly as written)."""
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        res = conn.getresponse()
        data = res.read()
    finally:
        conn.close()
    if res.getheader("Content-Type", "").startswith("application/json"):
        return res.status, json.loads(data)
    return res.status, data


def qs(**kw) -> str:
    from urllib.parse import urlencode
    return urlencode(kw)


def upload(srv, path: Path) -> str:
    status, d = call(srv, f"/api/upload?{qs(name=path.name)}", method="POST", body=path.read_bytes(),
                     headers={"X-Crossover": "1"})
    assert status == 200, d
    return d["id"]


# ------------------------------------------------------------------ JSON endpoints

def test_options_list_the_spec_libraries_methods_and_cost_modes(server):
    status, d = call(server, "/api/options")
    assert status == 200
    assert {"llama-3.1-70b", "llama-3.1-8b"} <= {m["name"] for m in d["models"]}
    assert "h100-sxm" in {h["name"] for h in d["hardware"]}
    assert "eagle" in d["methods"] and "draft" in d["methods"]
    assert "roofline" in d["cost_modes"] and d["engines"]
    assert d["defaults"]["model"] == "llama-3.1-70b" and "sharegpt" in d["workloads"]


def test_whatif_returns_the_library_s_own_prediction_policy_and_breakdown(server):
    status, d = call(server, "/api/whatif?" + qs(**CROSSING, bmin=1, bmax=512, points=64, at=64))
    assert status == 200, d
    batches = [p["batch"] for p in d["predict"]["points"]]
    expect = crossover.predict(context=256, acceptance=0.5, batches=batches).to_dict()
    assert d["predict"]["crossover_batch"] == expect["crossover_batch"] is not None
    assert d["predict"]["points"] == expect["points"]
    status, pol = call(server, "/api/policy?" + qs(**CROSSING, bmax=512))
    assert status == 200, pol
    assert pol["schedule"] == crossover.policy(context=256, acceptance=0.5, batch_max=512).to_dict()["schedule"]
    assert {"vllm", "sglang", "tensorrt_llm"} <= set(pol["engine_configs"]) and pol["batch_max"] == 512
    assert d["breakdown"] == crossover.predict(context=256, acceptance=0.5, batches=[64], breakdown=64).breakdown
    assert d["breakdown"]["total_on_ms"] > d["breakdown"]["total_off_ms"] > 0
    assert d["inputs"]["context"] == 256 and d["inputs"]["k"] == 3


def test_each_k_of_the_default_scenario_answers(server):
    """The page's what-if call answers for every k a user steps through (its speed is measured by
    benchmarks/bench_web.py, not here)."""
    for k in (2, 3, 4, 5):
        status, d = call(server, f"/api/whatif?k={k}")
        assert status == 200 and d["inputs"]["k"] == k


def test_engine_and_cost_mode_reach_the_scenario_where_the_library_takes_them(server):
    from crossover.web.params import scenario_takes

    status, opts = call(server, "/api/options")
    engine, cost = opts["engines"][-1], opts["cost_modes"][0]
    status, d = call(server, "/api/whatif?" + qs(engine=engine, cost=cost))
    assert status == 200, d
    if scenario_takes("engine"):
        assert d["inputs"]["engine"] == engine
    if scenario_takes("cost"):
        assert d["inputs"]["cost"] == cost
    status, d = call(server, "/api/whatif?engine=bogus")
    assert status == 400 and "engine must be one of" in d["error"]


@pytest.mark.parametrize("query, words", [
    ("k=abc", "k must be a number"),
    ("k=0", "k must lie in"),
    ("model=nope", "unknown model 'nope'"),
    ("acceptance=70", "did you mean 0.70"),
    ("tp=3", "tp"),
    ("bmin=64&bmax=8", "bmax must exceed bmin"),
    ("context=inf", "finite"),
    ("method=magic", "method must be one of"),
    ("acc=tau&tau=9&k=3", "k+1"),
])
def test_bad_input_is_a_400_with_one_line(server, query, words):
    status, d = call(server, "/api/whatif?" + query)
    assert status == 400, d
    assert words in d["error"] and "\n" not in d["error"] and "Traceback" not in d["error"]


@pytest.mark.parametrize("path", [
    "/static/../server.py", "/static/../../../pyproject.toml", "/static/%2e%2e/server.py", "/static/..%2fparams.py",
    "/../README.md", "//etc/passwd", "/etc/passwd", "/static/app.js/../../endpoints.py", "/crossover/web/server.py",
    "/static/", "/static/.",
])
def test_no_file_outside_the_static_folder_is_served(server, path):
    status, body = call(server, path)
    assert status == 404
    assert b"import" not in (body if isinstance(body, bytes) else json.dumps(body).encode())


@pytest.mark.parametrize("key", ["model", "hardware", "draft"])
def test_specs_are_read_by_library_name_never_by_path(server, key):
    path = str(REPO / "models" / "llama-3.1-8b.yaml")
    status, d = call(server, "/api/whatif?" + qs(**{key: path, "method": "draft"}))
    assert status == 400 and "choose a name from the spec library" in d["error"]
    status, d = call(server, "/api/simulate?" + qs(workload="/etc/hostname"), method="POST", headers={"X-Crossover": "1"})
    assert status == 400 and "unknown workload" in d["error"]


def test_the_page_and_its_scripts_are_served(server):
    status, html = call(server, "/")
    assert status == 200 and b'src="/static/app.js"' in html
    for name in ("app.js", "chart.js", "measured.js", "sim.js", "style.css"):
        status, body = call(server, f"/static/{name}")
        assert status == 200 and body, name
    assert b"https://" not in html  # nothing from a CDN: the page works offline


def test_uploads_are_size_limited_and_need_the_page_s_header():
    assert MAX_UPLOAD_BYTES == 10 * 1024 * 1024
    srv = make_server("127.0.0.1", 0, upload_limit=1000)
    with served(srv, poll_interval=0.1):
        status, d = call(srv, "/api/upload?name=big.json", method="POST", body=b"x" * 2000, headers={"X-Crossover": "1"})
        assert status == 413 and "exceeds the limit of 1000 bytes" in d["error"]
        status, d = call(srv, "/api/upload?name=a.csv", method="POST", body=IMPOSSIBLE.read_bytes())
        assert status == 403 and "X-Crossover" in d["error"]
        status, d = call(srv, "/api/options", headers={"Host": "attacker.example:80"})
        assert status == 403
    assert not srv.uploads.root.exists()  # uploads go with the server


def test_measured_upload_is_checked_against_physics_as_the_library_does(server):
    uid = upload(server, IMPOSSIBLE)
    status, d = call(server, "/api/measured?" + qs(hardware="h100-sxm", files=f"{uid}:auto"))
    assert status == 200, d
    expect = crossover.measured(files=[IMPOSSIBLE], hardware="h100-sxm").to_dict()
    assert [c["beats_physics"] for c in d["physics"]] == [c["beats_physics"] for c in expect["physics"]] \
        == [False, True, False, False]
    assert d["model"] == "llama-3.1-8b" and d["crossover"] == expect["crossover"]
    assert all(c["source"].startswith("impossible.csv:") for c in d["physics"])  # no server paths


def test_measured_arms_from_the_page_and_one_line_errors_naming_the_file(server):
    on = [upload(server, p) for p in sorted((FIXTURES / "measured" / "vllm_on").glob("*[0-9].json"))]
    off = [upload(server, p) for p in sorted((FIXTURES / "measured" / "vllm_off").glob("*.json"))]
    files = ",".join([f"{u}:on" for u in on] + [f"{u}:off" for u in off])
    status, d = call(server, "/api/measured?" + qs(hardware="h100-sxm", method="eagle3", files=files))
    assert status == 200, d
    assert [p["level"] for p in d["points"]] == [1, 16, 64] and len(d["physics"]) == 6
    bad = upload(server, FIXTURES / "measured" / "broken" / "truncated.json")
    status, d = call(server, "/api/measured?" + qs(hardware="h100-sxm", files=f"{bad}:on,{off[0]}:off"))
    assert status == 400 and d["error"].startswith("truncated.json") and str(server.uploads.root) not in d["error"]
    status, d = call(server, "/api/measured?files=0123456789abcdef:on")
    assert status == 400 and "no upload" in d["error"]


VLLM_ON = sorted((FIXTURES / "measured" / "vllm_on").glob("*[0-9].json"))
VLLM_OFF = sorted((FIXTURES / "measured" / "vllm_off").glob("*.json"))  # no spec_decode_* keys: no arm of their own
SWEEP = FIXTURES / "measured" / "sweep.csv"
README_SWEEP = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "method": "eagle3"}  # the README's measured example
CLI_FLAGS = ("--on", "--off", "--files", "--model", "--hardware", "--tp", "--method", "--k ", "--prompt-len", "--output-len")


def test_uploads_say_what_each_file_names_itself_and_which_the_server_no_longer_holds(server):
    on, off, sweep = upload(server, VLLM_ON[0]), upload(server, VLLM_OFF[0]), upload(server, SWEEP)
    bad = upload(server, FIXTURES / "measured" / "broken" / "truncated.json")
    status, d = call(server, "/api/uploads?" + qs(ids=",".join([on, off, sweep, bad, "0123456789abcdef"])))
    assert status == 200, d
    info = {u["id"]: u for u in d["uploads"]}
    assert info[on]["arm"] == "on" and info[on]["formats"] == ["vllm"] and info[on]["loads"] == [1.0]
    assert info[on]["name"] == VLLM_ON[0].name and info[on]["bytes"] == VLLM_ON[0].stat().st_size
    assert info[off]["arm"] is None and "set its arm to on or off in the file list" in info[off]["needs_arm"]
    assert info[sweep]["arm"] == "both" and info[sweep]["loads"] == [1, 8, 32, 128] and info[sweep]["runs"] == 8
    assert info[bad]["problem"].startswith("truncated.json") and str(server.uploads.root) not in info[bad]["problem"]
    assert d["missing"] == ["0123456789abcdef"]  # a link after a restart: named, not a failure
    status, d = call(server, "/api/uploads?" + qs(ids=",".join(f"{i:016x}" for i in range(65))))
    assert status == 400 and "at most 64" in d["error"]


def test_a_file_without_its_arm_asks_for_it_in_the_page_s_words(server):
    on, off = [upload(server, p) for p in VLLM_ON], [upload(server, p) for p in VLLM_OFF]
    q = {"hardware": "h100-sxm", "method": "eagle3"}
    status, d = call(server, "/api/measured?" + qs(**q, files=",".join([f"{u}:auto" for u in on + off])))
    assert status == 400 and "set its arm to on or off in the file list" in d["error"], d
    assert not any(flag in d["error"] for flag in CLI_FLAGS) and "\n" not in d["error"]
    status, d = call(server, "/api/measured?" + qs(**q, files=",".join([f"{u}:auto" for u in on] + [f"{u}:off" for u in off])))
    assert status == 200 and [p["level"] for p in d["points"]] == [1, 16, 64], d
    status, d = call(server, "/api/measured?" + qs(**q, files=f"{on[0]}:off,{on[1]}:on,{off[0]}:off"))
    assert status == 400 and "marked off in the file list but" in d["error"] and "set its arm to on" in d["error"], d
    status, d = call(server, "/api/measured?" + qs(**q, files=f"{on[0]}:on"))
    assert status == 400 and "mark the uploads as speculation on and off" in d["error"], d
    for bad in (f"{on[0]}:both", f"{on[0]}:ON"):
        status, d = call(server, "/api/measured?" + qs(**q, files=bad))
        assert status == 400 and "arm must be on, off or auto" in d["error"]
    status, d = call(server, "/api/measured?" + qs(**q, axis="sideways", files=f"{on[0]}:auto,{off[0]}:off"))
    assert status == 400 and "axis must be one of concurrency, request_rate, batch" in d["error"]


def test_the_page_s_words_name_its_controls_and_keep_the_engines_flags():
    from crossover.web.words import page_words

    assert page_words("x.json: cannot tell whether speculation was on; pass it under --on or --off (no keys)") == \
        "x.json: cannot tell whether speculation was on; set its arm to on or off in the file list (no keys)"
    said = page_words("check the lengths (--prompt-len / --output-len) the sweep ran; give --model and --hardware")
    assert "--" not in said and "prompt and output tokens under Load" in said and "pick the Model and Hardware" in said
    kept = "SGLang's cap (--max-running-requests sets another); vLLM --speculative-config; VLLM_USE_V1=0"
    assert page_words(kept) == kept


def test_measured_gives_the_library_s_diagnosis_and_both_physics_bounds(server):
    uid = upload(server, SWEEP)
    status, d = call(server, "/api/measured?" + qs(**README_SWEEP, mix=1, prompt=1024, output=128, files=f"{uid}:auto"))
    assert status == 200, d
    lib = crossover.measured(files=[SWEEP], **README_SWEEP, prompt_len=1024, output_len=128).to_dict()
    g, want = d["diagnosis"], lib["diagnosis"]
    assert g["verdict"] == want["verdict"] == "engine" and g["message"] == want["message"]
    assert [r["level"] for r in g["levels"]] == [1, 8, 32, 128]
    assert [round(r["ln_shortfall"], 9) for r in g["levels"]] == [round(r["ln_shortfall"], 9) for r in want["levels"]]
    assert g["expectation"]["basis"] == "off_arm_fit" and g["engine"]["label"] == want["engine"]["label"]
    assert d["physics_bounds"]["with_prefill"] == {"prompt_len": 1024, "output_len": 128} and d["lengths_from"] == "page"
    assert [(c["bound"], c["bound_with_prefill"]) for c in d["physics"]] == \
        [(c["bound"], c["bound_with_prefill"]) for c in lib["physics"]]
    assert all(c["bound_with_prefill"] < c["bound"] for c in d["physics"] if c["level"] >= 32)  # the prompts' share
    status, d = call(server, "/api/measured?" + qs(**README_SWEEP, files=f"{uid}:auto"))  # no lengths: decode only
    assert status == 200 and d["physics_bounds"]["with_prefill"] is None and d["lengths_from"] is None
    assert all(c["bound_with_prefill"] is None for c in d["physics"])
    status, d = call(server, "/api/measured?" + qs(hardware="h100-sxm", files=f"{upload(server, IMPOSSIBLE)}:auto"))
    assert d["diagnosis"]["verdict"] == "impossible" and d["diagnosis"]["impossible"][0]["level"] == 1


def test_calibrate_fits_the_points_and_draws_the_calibrated_curves_beside_the_defaults(server):
    uid = upload(server, SWEEP)
    status, d = call(server, "/api/calibrate?" + qs(**README_SWEEP, bootstrap=0, files=f"{uid}:auto"))
    assert status == 200, d
    lib = crossover.calibrate(files=[SWEEP], **README_SWEEP, bootstrap=0)
    want = lib.to_dict()
    assert d["fit"]["parameters"] == json.loads(json.dumps(want["parameters"]))
    assert d["fit"]["crossover"] == want["crossover"] and d["fit"]["reproduces"] is lib.reproduces is True
    assert d["yaml"].startswith("crossover_calibration: 1") and d["model"] == "llama-3.1-8b"
    c = d["curves"]
    assert c["axis"] == "concurrency" and c["per_level_tau"] and c["points"][0]["batch"] == 1
    assert abs(c["calibrated_crossover"] / want["crossover"] - 1) < 0.01  # the drawn curves cross where the fit does
    first = want["residuals"][0]  # level 1 at its own tau: the curves' first point (predict rounds to 0.01)
    assert c["points"][0]["calibrated_on"] == pytest.approx(first["tokens_per_s_on"]["predicted"], abs=0.01)
    assert c["points"][0]["calibrated_off"] == pytest.approx(first["tokens_per_s_off"]["predicted"], abs=0.01)
    default = crossover.predict(crossover.scenario(**README_SWEEP, tau=2.62), batches=[1]).to_dict()["points"][0]
    assert c["points"][0]["default_on"] == default["tokens_per_s_on"]  # the model's defaults at the file's tau
    assert c["default_crossover"] is None and c["points"][-1]["default_speedup"] > 1
    status, d = call(server, "/api/calibrate?" + qs(**README_SWEEP, bootstrap=1000, files=f"{uid}:auto"))
    assert status == 400 and "bootstrap must lie in [0, 200]" in d["error"]
    on = upload(server, VLLM_ON[0])
    status, d = call(server, "/api/calibrate?" + qs(**README_SWEEP, files=f"{on}:on"))
    assert status == 400 and "mark the uploads as speculation on and off" in d["error"]


def test_a_rate_sweep_is_judged_on_latency_and_fitted_against_requests_in_flight(server, tmp_path):
    rows = [("off", 1, 128, 2100, 15.1), ("on", 1, 128, 1200, 8.4), ("off", 4, 510, 2300, 16.5), ("on", 4, 509, 1400, 9.8),
            ("off", 16, 2000, 3100, 22.0), ("on", 16, 1990, 2600, 19.0), ("off", 32, 3800, 5200, 36.0),
            ("on", 32, 3700, 6400, 46.0)]
    path = tmp_path / "rate.csv"
    path.write_text("arm,request_rate,output_throughput,mean_e2el_ms,mean_tpot_ms,total_input_tokens,total_output_tokens,"
                    "completed\n" + "".join(f"{a},{r},{t},{e},{tp},102400,12800,100\n" for a, r, t, e, tp in rows))
    uid, q = upload(server, path), {"model": "llama-3.1-8b", "hardware": "h100-sxm", "method": "eagle3"}
    status, d = call(server, "/api/measured?" + qs(**q, files=f"{uid}:auto"))
    assert status == 200 and d["load_axis"] == "request_rate", d
    lib = crossover.measured(files=[path], **q).to_dict()["diagnosis"]
    g = d["diagnosis"]
    assert g["verdict"] == lib["verdict"] and g["expectation"]["basis"] == "serving_simulator"
    assert g["load_fit"]["qps"] == pytest.approx(lib["load_fit"]["qps"]) and "e2el_on_measured" in g["levels"][0]
    status, d = call(server, "/api/calibrate?" + qs(**q, bootstrap=0, files=f"{uid}:auto"))
    assert status == 200 and d["curves"]["axis"] == "in_flight" and len(d["curves"]["points"]) == 48, d


def test_a_simulation_job_reports_progress_and_the_library_s_result(server):
    q = qs(model="llama-3.1-8b", workload="random-1024-128", levels="1,4", num_prompts=40)
    status, job = call(server, "/api/simulate?" + q, method="POST", headers={"X-Crossover": "1"})
    assert status == 200 and job["state"] == "running" and job["total"] == 2
    deadline = time.time() + 120
    while job["state"] == "running" and time.time() < deadline:
        time.sleep(0.2)
        job = call(server, f"/api/job?id={job['id']}")[1]
    assert job["state"] == "done" and job["done"] == job["total"] == 2, job
    expect = crossover.simulate("random-1024-128", [1, 4], run={"num_prompts": 40}, model="llama-3.1-8b").to_dict()
    assert job["result"]["levels"] == expect["levels"]
    status, d = call(server, "/api/simulate?" + qs(levels="1,x"), method="POST", headers={"X-Crossover": "1"})
    assert status == 400 and "no whole number" in d["error"]
    assert call(server, "/api/job?id=nope")[0] == 400


def test_serve_prints_the_url_and_answers_there():
    proc = subprocess.Popen([sys.executable, "-m", "crossover", "serve", "--port", "0"], cwd=REPO, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert "http://127.0.0.1:" in line, line + proc.stderr.read()
        url = line.split("http://", 1)[1].split()[0]
        host, port = url.rstrip("/").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.request("GET", "/api/options")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)
    assert proc.returncode == 0
    assert_one_line_error(run_cli("serve", "--port", "70000", timeout=60), "--port")  # refused before it binds


@pytest.mark.slow  # the wheel (built once per session: tests/conftest.py built_wheel)
def test_a_built_wheel_ships_the_page(built_wheel):
    names = set(zipfile.ZipFile(built_wheel).namelist())
    static = {f"crossover/web/static/{p.name}" for p in (REPO / "crossover" / "web" / "static").iterdir()}
    assert static and static <= names, sorted(static - names)
    assert "crossover/web/server.py" in names


# ------------------------------------------------------------------ the page in a real browser

def _browser():
    """A headless Chromium WebDriver, or pytest.skip saying what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install '.[test]')")
    from selenium.webdriver.chrome.service import Service

    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver") or next((p for p in ("/usr/lib/chromium/chromedriver",) if Path(p).exists()), None)
    if binary is None or driver is None:
        pytest.skip("no headless browser: install Debian's chromium and chromium-driver "
                    f"(missing: {', '.join(n for n, v in (('chromium', binary), ('chromedriver', driver)) if v is None)})")
    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1500,1150"):
        opts.add_argument(arg)
    opts.binary_location = binary
    return webdriver.Chrome(options=opts, service=Service(driver))


def _wait(driver, condition, what: str, timeout: float = 30):
    end = time.time() + timeout
    while time.time() < end:
        value = driver.execute_script(condition)
        if value:
            return value
        time.sleep(0.05)
    shown = driver.execute_script("return document.getElementById('error').textContent")
    raise AssertionError(f"timed out waiting for {what}; the page's error line: {shown!r}")


@pytest.mark.slow  # a browser
def test_the_page_in_headless_chromium(server):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    driver = _browser()
    try:
        driver.get(server.url + "#" + qs(**CROSSING))
        _wait(driver, "return document.body.dataset.state === 'ready'", "the first drawing")
        cross0 = driver.find_element(By.ID, "crossover").text
        path0 = driver.find_element(By.ID, "series-on").get_attribute("d")
        expect = crossover.predict(context=256, acceptance=0.5, batches=[1, 512]).crossover_batch
        assert cross0 == f"batch {expect:.1f}"
        assert driver.find_element(By.ID, "crossover-line") is not None
        _wait(driver, "return document.body.dataset.policy !== undefined", "the best-k schedule")
        assert "--speculative-config" in driver.find_element(By.ID, "configs").text
        slider = driver.find_element(By.ID, "k")
        redraws = int(driver.execute_script("return document.body.dataset.redraws"))
        slider.send_keys(Keys.ARROW_RIGHT)  # k 3 -> 4, as a user moves it
        _wait(driver, f"return Number(document.body.dataset.redraws) > {redraws}", "the redraw after moving k")
        cross1 = driver.find_element(By.ID, "crossover").text
        assert driver.find_element(By.ID, "k-out").text == "4"
        assert cross1 != cross0 and cross1.startswith("batch ")
        assert driver.find_element(By.ID, "series-on").get_attribute("d") != path0
        assert "k=4" in driver.current_url
        # more moves for the redraw time, then the link reproduces the what-if exactly
        for key in [Keys.ARROW_RIGHT, Keys.ARROW_LEFT, Keys.ARROW_LEFT, Keys.ARROW_RIGHT] * 2:
            redraws = int(driver.execute_script("return document.body.dataset.redraws"))
            slider.send_keys(key)
            _wait(driver, f"return Number(document.body.dataset.redraws) > {redraws}", "a redraw")
        timings = driver.execute_script("return window.crossoverTimings")[1:]
        med = statistics.median(t["total"] for t in timings)
        rt = statistics.median(t["roundTrip"] for t in timings)
        print(f"\nredraw after a k change: median {med:.0f} ms (round trip {rt:.0f} ms) over {len(timings)} changes")
        assert med < 1000
        link, shown = driver.current_url, driver.find_element(By.ID, "crossover").text
        driver.get("about:blank")
        driver.get(link)
        _wait(driver, "return document.body.dataset.state === 'ready'", "the page from the link")
        assert driver.find_element(By.ID, "crossover").text == shown
        assert driver.find_element(By.ID, "k-out").text == "4"
        # a measured file dropped on the page: its points over the curves, the impossible one flagged
        driver.find_element(By.ID, "file-input").send_keys(str(IMPOSSIBLE))
        _wait(driver, "return document.querySelectorAll('#chart-tput .marker.measured-on').length > 0",
              "the measured overlay")
        assert "BEATS PHYSICS" in driver.find_element(By.ID, "physics").text
        assert driver.find_elements(By.CSS_SELECTOR, "#chart-speedup .marker.measured-speedup")
        # the simulation tab: a small sweep with progress, then its charts
        driver.find_element(By.ID, "tab-sim").click()
        for el_id, value in (("levels", "1,4"), ("num_prompts", "40")):
            box = driver.find_element(By.ID, el_id)
            box.clear()
            box.send_keys(value, Keys.TAB)
        Select(driver.find_element(By.ID, "model")).select_by_value("llama-3.1-8b")
        driver.find_element(By.ID, "sim-run").click()
        _wait(driver, "return document.body.dataset.sim === 'done'", "the simulation", timeout=120)
        assert driver.find_element(By.ID, "sim-on").get_attribute("d")
        assert driver.find_element(By.ID, "sim-p99-on").get_attribute("d")
        assert "tab=sim" in driver.current_url and "levels=1%2C4" in driver.current_url
        shot = os.environ.get("CROSSOVER_WEB_SCREENSHOT")
        if shot:  # the README's picture: Llama-3.1-8B + EAGLE-3 on an H100 beside a measured sweep
            _screenshot(driver, server, shot)
    finally:
        driver.quit()


# every pair of texts in a drawn chart whose boxes overlap (labels, legend, ticks, titles)
OVERPRINTS = """return [...document.querySelectorAll("svg")].filter((s) => s.getBoundingClientRect().width).flatMap((svg) => {
  const ts = [...svg.querySelectorAll("text")].map((t) => [t, t.getBoundingClientRect()]).filter(([, b]) => b.width);
  const out = [];
  for (let i = 0; i < ts.length; i++) for (let j = i + 1; j < ts.length; j++) {
    const a = ts[i][1], b = ts[j][1];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      out.push(`${(svg.closest(".chart") || {}).id}: ${ts[i][0].textContent} / ${ts[j][0].textContent}`);
  }
  return out;
});"""
# the file list inside its column: every row, name, arm and remove button within the fieldset, which
# ends before the panel beside it (a long name once widened it under the charts, the arm out of sight)
IN_ITS_COLUMN = """const box = document.getElementById("measured-box").getBoundingClientRect();
const panel = document.getElementById("panel-whatif").getBoundingClientRect();
const parts = [...document.querySelectorAll("#uploads li, #uploads .fname, #uploads select, #uploads .remove")];
return parts.length > 0 && box.right <= panel.left && parts.every((e) => {
  const r = e.getBoundingClientRect(); return r.left >= box.left - 0.5 && r.right <= box.right + 0.5; });"""


def _arms(driver) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('#uploads select.arm')].map((s) => s.value)")


@pytest.mark.slow  # a browser
def test_the_measured_panel_and_its_links_in_headless_chromium(server):
    """Issue 22, item 7: each file's arm set after upload (the page asks for the arm a file does not
    name, in its own words), the verdict with its evidence and both physics bounds, "fit to these
    points" drawing the calibrated curves beside the defaults, every tab's state in the link (the
    uploads, their arms and the fit come back; a link to the simulation runs it), no overprinted
    label in any chart, the file list inside its column."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from crossover.web.words import page_words

    driver = _browser()
    try:
        # a crossover beside the memory limit: their labels used to print over each other
        driver.get(server.url + "#" + qs(context=2048, acceptance=0.627, bmin=180, bmax=256))
        _wait(driver, "return document.body.dataset.state === 'ready'", "the what-if")
        assert driver.find_element(By.ID, "crossover").text.startswith("batch 20")  # memory: 204 on, 209 off
        assert driver.execute_script(OVERPRINTS) == []
        assert len(driver.find_elements(By.CSS_SELECTOR, "#chart-speedup text.vlabel")) == 2

        # 1. an on arm whose files say so, an off arm whose files do not: the page asks for those arms
        driver.get("about:blank")
        driver.get(server.url + "#" + qs(**README_SWEEP))
        _wait(driver, "return document.body.dataset.state === 'ready'", "the what-if")
        driver.find_element(By.ID, "file-input").send_keys("\n".join(str(p) for p in VLLM_ON + VLLM_OFF))
        _wait(driver, "return document.querySelectorAll('#uploads li.needs-arm').length === 3", "the arms to set")
        ask = _wait(driver, "return (document.getElementById('measured-ask') || {}).textContent", "the page's question")
        assert VLLM_OFF[0].name in ask and "set the arm" in ask and not any(f in ask for f in CLI_FLAGS), ask
        assert _arms(driver) == ["auto"] * 6 and "auto (file: on)" in driver.find_element(By.ID, "uploads").text
        assert driver.execute_script(IN_ITS_COLUMN), "the file list overflows its column"
        for _ in VLLM_OFF:
            Select(driver.find_element(By.CSS_SELECTOR, "#uploads li.needs-arm select.arm")).select_by_value("off")
        # 2. the verdict and its evidence, the physics check with both bounds
        verdict = _wait(driver, "return (document.getElementById('diagnosis') || {dataset: {}}).dataset.verdict",
                        "the diagnosis")
        lib = crossover.measured(on=VLLM_ON, off=VLLM_OFF, hardware="h100-sxm", method="eagle3", k=3).to_dict()
        assert verdict == lib["diagnosis"]["verdict"]
        assert driver.find_element(By.ID, "verdict-message").text == page_words(lib["diagnosis"]["message"])
        assert "Expectation: this engine's host time fitted to the sweep's off arm" in driver.find_element(By.ID, "evidence").text
        assert len(driver.find_elements(By.CSS_SELECTOR, "#diag-levels tr")) == 1 + 3
        assert "prompt tokens prefilled per" in driver.find_element(By.ID, "bounds").text  # the files' token counts
        heads = [th.text for th in driver.find_elements(By.CSS_SELECTOR, "#physics th")]
        assert "decode-only bound" in heads and "bound with prefill" in heads
        rows = driver.find_elements(By.CSS_SELECTOR, "#physics tr")[1:]
        assert len(rows) == 6 and all(r.find_elements(By.TAG_NAME, "td")[6].text not in ("", "–") for r in rows)
        assert _arms(driver) == ["auto"] * 3 + ["off"] * 3 and "files=" in driver.current_url

        # 3. fit to these points: the calibrated curves beside the defaults
        driver.find_element(By.ID, "fit-run").click()
        _wait(driver, "return document.body.dataset.fit !== undefined", "the fit", timeout=60)
        for series in ("fit-calibrated-on", "fit-calibrated-off", "fit-default-on", "fit-default-off",
                       "fit-calibrated-speedup", "fit-default-speedup"):
            assert driver.find_element(By.ID, series).get_attribute("d").startswith("M"), series
        assert driver.find_elements(By.CSS_SELECTOR, "#chart-fit-tput .marker.fit-measured-on")
        assert "Crossover: measured" in driver.find_element(By.ID, "fit-crossover").text
        assert "fit=1" in driver.current_url
        assert driver.execute_script(OVERPRINTS) == []

        # 4. the link brings the uploads, their arms and the fit back (the server still holds the files)
        link, said = driver.current_url, driver.find_element(By.ID, "verdict-message").text
        driver.get("about:blank")
        driver.get(link)
        _wait(driver, "return document.body.dataset.fit !== undefined", "the fit from the link", timeout=60)
        assert driver.find_element(By.ID, "verdict-message").text == said
        assert _arms(driver) == ["auto"] * 3 + ["off"] * 3
        assert driver.find_element(By.ID, "fit-calibrated-on").get_attribute("d")
        driver.find_element(By.CSS_SELECTOR, "#uploads .remove").click()  # other points: the fit goes
        _wait(driver, "return !location.hash.includes('fit=1')", "the fit dropped with a file")
        # a link to the simulation tab runs the simulation it names
        driver.get("about:blank")
        driver.get(server.url + "#" + qs(tab="sim", model="llama-3.1-8b", workload="random-1024-128", levels="1,4",
                                         num_prompts=40))
        _wait(driver, "return document.body.dataset.sim === 'done'", "the simulation from the link", timeout=120)
        assert driver.find_element(By.ID, "sim-on").get_attribute("d") and "sim=1" in driver.current_url
        assert not driver.find_element(By.ID, "panel-sim").get_attribute("hidden")
        assert driver.execute_script(OVERPRINTS) == []
    finally:
        driver.quit()


def _screenshot(driver, server, path: str) -> None:
    from selenium.webdriver.common.by import By

    state = qs(model="llama-3.1-8b", hardware="h100-sxm", method="eagle3", acc="tau", tau=2.45, mix=1, prompt=1024,
               output=128, bmax=256, at=64)
    driver.get("about:blank")
    driver.get(server.url + "#" + state)
    _wait(driver, "return document.body.dataset.state === 'ready'", "the README scenario")
    driver.find_element(By.ID, "file-input").send_keys(str(FIXTURES / "measured" / "sweep.csv"))
    _wait(driver, "return document.querySelectorAll('#chart-tput .marker.measured-on').length > 0", "the overlay")
    time.sleep(0.3)
    driver.save_screenshot(path)
