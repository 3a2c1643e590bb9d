"""An Azure scale set's per-VM rows → the VM's own ARM id (shared by the ``azure`` and ``focus`` readers).

Cost details bill a virtual machine scale set one row per VM, meter and day: ResourceId is the set,
and the VM is named in AdditionalInfo's ``VMName`` (``aks-gpu-12345678-vmss_1``); Microsoft's FOCUS
export (FocusCost) keeps the rows and carries AdditionalInfo as SkuPriceDetails (1.2) or
x_SkuDetails (1.0). Such a row gets ``<set>/virtualMachines/1``, the id the node's Kubernetes
``azure://`` provider id names (audit.lines.vm_key), so that each VM's hours go to its own node. A
row whose VMName is not ``<set name>_<number>`` keeps the set's id.
"""
from __future__ import annotations

#: FOCUS columns that may hold Azure's AdditionalInfo (lower case)
INFO_COLUMNS = ("skupricedetails", "x_skudetails")


def vm_resource_id_sql(resource: str, info: str) -> str:
    """SQL: ``resource`` (a ResourceId expression), or the VM's ARM id when ``info`` (a JSON text
    expression) names a VM of that scale set."""
    valid = f"CASE WHEN json_valid({info}) THEN {info} END"
    vm = f"coalesce(json_extract_string({valid}, '$.VMName'), json_extract_string({valid}, '$.vmName'))"
    scale_set = f"regexp_extract({resource}, '(?i)/virtualmachinescalesets/([^/]+)$', 1)"
    number = f"regexp_extract({vm}, '_([0-9]+)$', 1)"
    own = f"lower({vm}) = lower({scale_set}) || '_' || {number}"
    return (f"CASE WHEN {scale_set} <> '' AND {number} <> '' AND {own} "
            f"THEN {resource} || '/virtualMachines/' || {number} ELSE {resource} END")
