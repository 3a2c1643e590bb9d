"""An OpenMetrics file ends with ``# EOF``; the Prometheus text format (0.0.4) has none.

Before: a file cut at a line boundary (no ``# EOF``) was read as whole, exit 0 (gke 10206's
metrics.om.gz cut to 60 % of its lines: chat and embed requests None, reconciliation not_measured,
no word). Now a file that is OpenMetrics (``.om`` / ``.om.gz``, or OpenMetrics-only syntax) without
``# EOF`` is an error naming its last line; a Prometheus text file is read as before.
"""
from __future__ import annotations

import pytest

from connectors.errors import InputError
from connectors.telemetry import om_stream, omtext

T0 = 1725148800
GAUGE = "# TYPE x gauge\n" + "".join(f'x{{gpu="0"}} 0.5 {T0 + i}\n' for i in range(3))
COUNTER = "# TYPE r counter\n" + "".join(f'r_total{{pod="p"}} {i} {T0 + i}\n' for i in range(3))
READERS = [om_stream.read_families, omtext.read_families]


def cut_message(path, line: int) -> str:
    return (f"{path}: row {line}: OpenMetrics text ends at line {line} without '# EOF' "
            "(expected `# EOF` as the last line (the file looks cut))")


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize(("name", "text", "line"), [
    ("m.om", GAUGE, 4),                                           # named OpenMetrics
    ("m.txt", COUNTER, 4),                                        # counter x, samples x_total
    ("m.txt", "# UNIT x seconds\n" + GAUGE, 5),                   # # UNIT
    ("m.txt", GAUGE + f'x{{gpu="1"}} 1 {T0} # {{id="a"}} 1\n', 5),  # an exemplar
])
def test_openmetrics_without_eof_is_named_cut(tmp_path, read, name, text, line):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError) as info:
        read(path)
    assert str(info.value) == cut_message(path, line)


@pytest.mark.parametrize("read", READERS)
@pytest.mark.parametrize(("name", "text"), [
    ("m.om", GAUGE + "# EOF\n"),
    ("m.txt", GAUGE),                                                  # Prometheus text: no # EOF
    ("m.txt", COUNTER.replace("TYPE r counter", "TYPE r_total counter")),  # its counters' own names
])
def test_complete_openmetrics_and_prometheus_text_are_read(tmp_path, read, name, text):
    path = tmp_path / name
    path.write_text(text)
    assert read(path)[1].rows == 3
