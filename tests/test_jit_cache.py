"""The compiled loop's disk cache follows all the sources inlined into it (serving/jit_cache.py)."""

from __future__ import annotations

from crossover.serving import jit_cache


def test_a_changed_inlined_source_drops_the_cached_loop(tmp_path, monkeypatch):
    serving, model = tmp_path / "serving", tmp_path / "model"
    for d, stem in ((serving, "loop"), (serving, "records"), (model, "roofline")):
        (d / "__pycache__").mkdir(parents=True, exist_ok=True)
        (d / f"{stem}.py").write_text(f"# {stem}\n")
        (d / "__pycache__" / f"{stem}.run-1.py311.nbi").write_text("index")
        (d / "__pycache__" / f"{stem}.run-1.py311.1.nbc").write_text("code")
    (serving / "__pycache__" / "other.f-1.py311.nbi").write_text("kept")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.setattr(jit_cache, "_HERE", serving)
    monkeypatch.setattr(jit_cache, "SOURCES", ((serving, "loop"), (serving, "records"), (model, "roofline")))

    def cached():
        return sorted(p.name for d in (serving, model) for p in (d / "__pycache__").glob("*.nb[ic]"))

    jit_cache.refresh()  # no stamp yet: whatever was cached is of unknown sources
    assert cached() == ["other.f-1.py311.nbi"]
    (model / "__pycache__" / "roofline.run-1.py311.nbi").write_text("index")
    jit_cache.refresh()  # unchanged sources: the cache stays
    assert "roofline.run-1.py311.nbi" in cached()
    (serving / "records.py").write_text("# records, edited\n")  # loop.py itself untouched
    jit_cache.refresh()
    assert cached() == ["other.f-1.py311.nbi"]
