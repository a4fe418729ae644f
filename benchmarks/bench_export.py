"""What sharing a notebook costs: a notebook showing a run's dashboard (``prof.show()``), executed in a fresh
kernel (nbclient) and exported to one offline HTML file (`nbprofiler export`), for runs of the shared data;
the export's size and its CPU and wall time, and the offline report (``nbprofiler report``) of the same run
beside it, with the load average.

    python benchmarks/bench_export.py                       # the shared runs below
    python benchmarks/bench_export.py ../shared/data/legacy/run_1_widedeep

The export needs require.js and the widget renderer (`nbprofiler export` fetches them once into the user
cache, or set NBPROFILER_JS_DIR).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NBPROFILER_DATA", REPO.parent / "shared" / "data"))
RUNS = ("legacy/run_1_widedeep", "legacy/run_2_lenet", "mindspore2/lenet_pynative", "npu/ascend_pt_text_2rank")


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c


def measure(run: Path, work: Path) -> dict:
    import nbformat
    from nbclient import NotebookClient

    from nbprofiler.faces.nbconvert_offline import export_offline_html
    from nbprofiler.faces.report import write_html_report
    import nbprofiler
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("import warnings; warnings.simplefilter('ignore')\nimport nbprofiler\n"
                                          f"nbprofiler.load({str(run)!r}).show()")]
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}}).execute()
    path = work / f"{run.name}.ipynb"
    nbformat.write(nb, path)
    html, wall, cpu = _timed(lambda: export_offline_html(path, work / f"{run.name}.html"))
    report = work / f"{run.name}_report.html"
    _, r_wall, r_cpu = _timed(lambda: write_html_report(nbprofiler.load(run), report))
    return {"run": str(run.relative_to(SHARED)) if run.is_relative_to(SHARED) else str(run),
            "export_mb": Path(html).stat().st_size / 1e6, "export_wall_s": wall, "export_cpu_s": cpu,
            "report_mb": report.stat().st_size / 1e6, "report_wall_s": r_wall, "report_cpu_s": r_cpu,
            "load_1min": os.getloadavg()[0]}


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path, help="profiler folders (default: four shared runs)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    runs = args.runs or [SHARED / r for r in RUNS if (SHARED / r).is_dir()]
    out = []
    print("| run | dashboard notebook exported (`nbprofiler export`) | wall / CPU | report (`nbprofiler report`, "
          "load included) | wall / CPU | load avg |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="nbprofiler-bench-export-") as work:
        for run in runs:
            r = measure(run.resolve(), Path(work))
            out.append(r)
            print(f"| {r['run']} | {r['export_mb']:.1f} MB | {r['export_wall_s']:.1f} / {r['export_cpu_s']:.1f} s "
                  f"| {r['report_mb']:.1f} MB | {r['report_wall_s']:.1f} / {r['report_cpu_s']:.1f} s "
                  f"| {r['load_1min']:.1f} |", flush=True)
    return out


if __name__ == "__main__":
    main()
