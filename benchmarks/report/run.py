"""Benchmark: the PDF report's rendering time on a case whose long tables hold thousands of rows.

    .venv/bin/python benchmarks/report/run.py [--rows 5000] [--cut-only] [--json]

Builds an audit.json document from the test sample (``tests/data/sample_audit.json``) with
``--rows`` rows in each table that grows with the data (resource classes, GPU split, queue,
coverage by node, reconciliation drivers, sources, bucket parts, findings; options at a tenth),
then, in the same run, times the PDF twice: the PDF as printed before (every row, the HTML page
printed whole) and as costaudit prints it now (audit/reporters/print_view.py: the top
``PDF_ROWS`` rows of each long table and a line naming where the rest is, options not ranked with
their reason only, long strings shortened). It prints both times and their ratio, and the pages.
``--cut-only`` skips the whole print (minutes at 5,000 rows). The HTML is timed too: it keeps every
row. The charts are drawn once and weasyprint imported once, before the timings, so the figures are
the layout alone (as in a run, where the HTML and the PDF share the charts).

Measured (2 cores shared with four other sessions' work, load average 12-14, so every wall time is
several times an idle machine's; ratios against the code before, cf826d1, in the same run, CPU time
of the printing process, the best of three): 5,000 rows a table, the cut PDF 13 pages (20 before),
0.44-0.64x the CPU time of the 25-row cut before (2.43 s against 5.58 s, 2.50 s against 4.60 s,
2.96 s against 4.65 s in three runs; wall 7.7 s against 18.1 s; before, idle, 3.35 s wall), so
about 1.5-2.1 s idle. The 1 M-line CUR case's PDF (audit.json of costaudit run /tmp/bench/case1m):
12 pages (22 before), 0.42-0.55x (1.92 s against 4.56 s, 2.10 s against 3.83 s, 2.08 s against
3.82 s; wall 5.5 s against 10.0 s; before, idle, 3.7 s wall), so about 1.6-2.0 s idle. Where the time
went before: weasyprint's table widths (every cell's text laid out to find its widest word: half
the options section), one option's input listing 245 commitment ids (10 pages), the charts' glyph
outlines (0.4 s of drawing), and 25 rows of ~14 tables. Before any cut (the whole print, an older
run on an idle machine): 364.7 s at 5,000 rows, 39.4 s at 500; with ``--cut-only`` this run prints
the cut alone (8.3 s wall at 5,000 rows under that load).
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SAMPLE = ROOT / "tests" / "data" / "sample_audit.json"


def _money(i: int) -> str:
    return f"{1000 + (i * 7919) % 90000}.{i % 100:02d}"


def large_audit(rows: int = 5000) -> dict:
    """The sample audit with ``rows`` rows in each long table (amounts are not meant to add up:
    the reporters lay out what audit.json holds and check nothing)."""
    audit = copy.deepcopy(json.loads(SAMPLE.read_text(encoding="utf-8")))
    cls, gpu, src = audit["classes"][0], audit["gpu_split"][0], audit["sources"][0]
    node, driver = audit["coverage"]["by_node"][0], audit["reconciliation"]["drivers"][0]
    audit["classes"] = [{**cls, "class": f"class_{i:05d}", "net": _money(i), "gross": _money(i),
                         "lines": i + 1} for i in range(rows)]
    audit["gpu_split"] = [{**gpu, "service": f"svc-{i:05d}"} for i in range(rows)]
    audit["queue"] = [{"service": f"svc-{i:05d}", "mean_waiting": "1.5", "mean_running": "3.25"}
                      for i in range(rows)]
    audit["sources"] = [{**src, "name": f"billing-{i:05d}", "path": f"billing/part-{i:05d}.parquet"}
                        for i in range(rows)]
    audit["coverage"]["by_node"] = [{**node, "node": f"gpu-node-{i:05d}",
                                     "resource_id": f"i-{i:017x}"} for i in range(rows)]
    audit["reconciliation"]["drivers"] = [{**driver, "subject": f"class_{i:05d}"} for i in range(rows)]
    parts = audit["buckets"]["platform_overhead"]["parts"]
    audit["buckets"]["platform_overhead"]["parts"] = parts + [
        {**parts[0], "name": f"other_{i:05d}", "amount": _money(i)} for i in range(rows)]
    audit["findings"] = [{"id": f"f{i}", "title": f"Finding {i}", "service": "chat",
                          "kernel": f"kernel_{i}", "call_path": "a ← b ← c", "share": "0.0100",
                          "bucket": "model_compute", "part": "kernel_active", "cost": _money(i),
                          "fix": "fuse"} for i in range(rows)]
    option = next(o for o in audit["options"] if o.get("status") == "priced")
    audit["options"] = audit["options"] + [
        {**option, "id": f"opt-{i:05d}", "title": f"Option {i}", "rank": None, "status": "not_priced",
         "monthly_saving": None, "reason": "synthetic"} for i in range(rows // 10)]
    return audit


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def pages(path: Path) -> int | None:
    """Pages of a PDF, from pdfinfo (poppler-utils); None without it."""
    if shutil.which("pdfinfo") is None:
        return None
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    found = re.search(r"^Pages:\s+(\d+)", info, re.M)
    return int(found[1]) if found else None


def measure(rows: int, whole: bool = True) -> dict:
    from audit.reporters.html import charts_of, render_html
    from audit.reporters.pdf import PdfReporter, write_pdf
    from audit.reporters.print_view import PDF_ROWS
    from audit.reporters.view import build_model

    model = build_model(large_audit(rows))
    charts_of(model)  # drawn once for both, as in a run
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        write_pdf("<p>warm</p>", out / "warm.pdf")  # weasyprint imported once, before the timings
        html = timed(lambda: (out / "report.html").write_text(render_html(model), encoding="utf-8"))
        before = timed(lambda: write_pdf(render_html(model), out / "before.pdf")) if whole else None
        after = timed(lambda: PdfReporter().report(model, out / "after.pdf"))
        names = ("before.pdf", "after.pdf") if whole else ("after.pdf",)
        sizes = {name: (out / name).stat().st_size for name in names}
        counts = {name: pages(out / name) for name in names}
    return {"rows": rows, "pdf_rows": PDF_ROWS, "html_s": round(html, 2),
            "pdf_every_row_s": round(before, 2) if before is not None else None,
            "pdf_s": round(after, 2), "ratio": round(before / after, 1) if before is not None else None,
            "bytes": sizes, "pages": counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--cut-only", action="store_true", help="skip the whole print (minutes at 5,000 rows)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = measure(args.rows, whole=not args.cut_only)
    if args.json:
        print(json.dumps(result))
        return 0
    cut = (f"PDF as printed (top {result['pdf_rows']} rows a table) {result['pdf_s']} s, "
           f"{result['pages']['after.pdf']} pages")
    if result["pdf_every_row_s"] is None:
        print(f"{result['rows']:,} rows in each long table: HTML {result['html_s']} s; {cut}")
    else:
        print(f"{result['rows']:,} rows in each long table: HTML {result['html_s']} s; "
              f"PDF with every row {result['pdf_every_row_s']} s, {result['pages']['before.pdf']} pages; "
              f"{cut}: {result['ratio']}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
