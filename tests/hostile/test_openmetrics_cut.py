"""An OpenMetrics file cut at a line boundary, so that no ``# EOF`` ends it.

Before: read as whole, exit 0 (gke 10206's metrics.om.gz cut to 60 % of its lines: chat and embed
requests None, reconciliation not_measured, no warning). Now exit 1 naming the file and its last
line (connectors/telemetry/omtext.py ``check_eof``).
"""
from __future__ import annotations

import gzip

from tests.hostile.harness import assert_named_error, costaudit, telemetry, write_case

T0 = 1725148800  # 2024-09-01, the window of write_case


def test_an_openmetrics_file_without_eof_is_refused_as_cut(tmp_path):
    lines = ["# TYPE DCGM_FI_PROF_GR_ENGINE_ACTIVE gauge"] + [
        f'DCGM_FI_PROF_GR_ENGINE_ACTIVE{{gpu="0",UUID="GPU-0",Hostname="n0"}} 0.5 {T0 + 60 * i}' for i in range(50)]
    path = tmp_path / "metrics.om.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    write_case(tmp_path, extra=telemetry("openmetrics", path.name))
    outcome = costaudit("validate", tmp_path, cwd=tmp_path)
    assert_named_error(outcome, path)
    assert outcome.stderr.strip().splitlines()[-1] == (
        f"costaudit: error: {path}: row 51: OpenMetrics text ends at line 51 without '# EOF' "
        "(expected `# EOF` as the last line (the file looks cut))")
