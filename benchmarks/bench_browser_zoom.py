"""A zoom as the user sees it: the time axis of a `TimelineView` moved in a real JupyterLab (headless
Chromium), until the new bars are in the page's data source. The round trip is the page -> kernel message
(jupyter_bokeh), the kernel's re-query (what `bench_requery.py` times alone) and the patch back into
BokehJS.

    python benchmarks/bench_browser_zoom.py --quick     # 100 MB (330k events)
    python benchmarks/bench_browser_zoom.py             # 1 GB (3.3M events)

Needs what the browser tests need (scripts/test.sh installs it: JupyterLab, Playwright, Debian chromium).
Windows of 0.01 %, 1 %, 10 % and all of the trace, 5 each; prints the median and max round trip of each.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "browser"))

CELL = """\
import warnings
warnings.simplefilter("ignore")
import nbprofiler
from nbprofiler.views.timeline import TimelineView
prof = nbprofiler.load({run!r})
view = TimelineView(prof)
view.levels_built.join()
view"""

# Moves the axis and resolves when the bars' source has new data: the full round trip, in ms.
ZOOM_JS = """async ([t0, t1]) => {
  const doc = Bokeh.documents.find(d => d.get_model_by_name('timeline_src'));
  const xr = doc.get_model_by_name('timeline_x_range'), src = doc.get_model_by_name('timeline_src');
  const before = src.data;
  const start = performance.now();
  return await new Promise((resolve, reject) => {
    const give_up = setTimeout(() => reject(new Error('no new bars within 30 s')), 30000);
    const check = () => { if (src.data !== before) { clearTimeout(give_up); resolve(performance.now() - start); }
                          else requestAnimationFrame(check); };
    xr.setv({start: t0, end: t1});
    requestAnimationFrame(check);
  });
}"""


def main(argv=None) -> dict:
    from bench_dashboard import ensure_run
    from conftest import CHROMIUM, CHROMIUM_ARGS, start_lab, stop_lab
    from helpers import cell_errors, open_and_run_all, write_notebook
    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 MB instead of 1 GB")
    ap.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "nbprofiler-bench-dashboard")
    args = ap.parse_args(argv)
    run = ensure_run(args.scratch, 100 if args.quick else 1000)
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-lab-") as work:
        lab = start_lab(Path(work))
        try:
            write_notebook(lab.root / "zoom.ipynb", [CELL.format(run=str(run.resolve()))])
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(300_000)
                open_and_run_all(page, lab, "zoom.ipynb", 1, timeout_ms=600_000)
                try:
                    page.wait_for_function("() => window.Bokeh && Bokeh.documents.some("
                                           "d => d.get_model_by_name('timeline_src'))", timeout=120_000)
                except Exception:
                    page.screenshot(path=str(Path(work) / "failed.png"))
                    raise SystemExit("the timeline did not render: " + " | ".join(cell_errors(page))
                                     + f" (screenshot {Path(work) / 'failed.png'}; lab log: {lab.log_tail()})")
                lo, hi = page.evaluate("""() => { const d = Bokeh.documents.find(
                    d => d.get_model_by_name('timeline_src')); const r = d.get_model_by_name('timeline_x_range');
                    return [r.start, r.end]; }""")
                out = {}
                for frac in (0.0001, 0.01, 0.1, 1.0):
                    times = []
                    for k in range(5):
                        mid, width = lo + (hi - lo) * (0.2 + 0.12 * k), (hi - lo) * frac
                        t0, t1 = (lo, hi - 1e-3 * k) if frac == 1.0 else (mid - width / 2, mid + width / 2)
                        times.append(page.evaluate(ZOOM_JS, [t0, t1]))
                    out[str(frac)] = {"median_ms": statistics.median(times), "max_ms": max(times)}
                browser.close()
        finally:
            stop_lab(lab)
    print(json.dumps(out))
    print("\n| window | browser round trip, median | max |")
    print("|---|---|---|")
    for frac, r in out.items():
        print(f"| {float(frac):.2%} | {r['median_ms']:.0f} ms | {r['max_ms']:.0f} ms |")
    return out


if __name__ == "__main__":
    main()
