"""The shipped billing catalogue (connectors/billing/catalogue.py) is read from its files once a process.

Before: moving ``normalise_instance`` beside the table left the table's ``lru_cache`` on it, and the
classifier re-read and re-parsed gpu_instances.csv for every distinct line kind: 48,045 times on the
fleet benchmark's 10 M-line CUR, a third of a 45-second run."""
from __future__ import annotations

from importlib import resources

import pytest

from connectors.billing import catalogue


def test_each_table_is_parsed_once(monkeypatch):
    catalogue.gpu_instances.cache_clear()
    catalogue.gpu_skus.cache_clear()
    catalogue.service_categories.cache_clear()
    reads = []
    real = resources.files

    def counted(package):
        reads.append(package)
        return real(package)

    monkeypatch.setattr(catalogue.resources, "files", counted)
    for _ in range(3):
        assert catalogue.gpu_instances()["p5.48xlarge"].gpus == 8
        assert catalogue.gpu_skus()
        assert catalogue.service_categories()
    assert len(reads) == 3


def test_instance_names_are_spelled_as_the_table_spells_them():
    assert catalogue.normalise_instance(" ml.P4d.24xlarge ") == "p4d.24xlarge"
    assert catalogue.normalise_instance("Standard_NC24ads_A100_v4") == "nc24ads_a100_v4"
    assert catalogue.normalise_instance("a2-highgpu-1g") == "a2-highgpu-1g"
    assert catalogue.normalise_instance("Standard NC6s v3") == "nc6s_v3"


@pytest.mark.parametrize("text, pattern, model, gpus", [
    ("Standard_NCC40ads_H100_v5", "AZURE_RE", "H100 NVL", 1),           # confidential NC H100: 'ncc' was not read
    ("Standard_ND128isr_NDR_GB200_v6", "AZURE_RE", "GB200", 4),
    ("a4x-highgpu-4g running in Americas", "GCP_MACHINE_RE", "GB200", 4),  # 'a4x-' was not read
    ("G4 Instance g4-standard-96", "GCP_MACHINE_RE", "RTX PRO 6000", 2),
    ("$0.42 per On Demand Linux g5g.metal Instance Hour", "INSTANCE_RE", "T4G", 2),
])
def test_newer_gpu_machines_are_read_from_their_descriptions(text, pattern, model, gpus):
    """GPU machines the catalogue lacked billed as no GPU at all: their GPU time was not split and
    telemetry's GPUs on them were warned of as unbilled."""
    regex = getattr(catalogue, pattern)
    found = regex.search(text if pattern == "AZURE_RE" else text.lower())
    kind = catalogue.gpu_instances()[catalogue.normalise_instance(found.group(1))]
    assert (kind.gpu_model, kind.gpus) == (model, gpus)
