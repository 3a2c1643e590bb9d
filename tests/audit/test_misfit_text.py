"""How a misfit message shows a value from the data (audit.misfit.text)."""
from __future__ import annotations

from audit.misfit import VALUE_CHARS, text


def test_a_long_id_in_a_misfit_keeps_its_end():
    """Misfits name ids that differ only at the end (a scale set's VMs): a long one is cut in the
    middle, never its end."""
    arm = ("/subscriptions/31374172-9700-9ec8-49c1-ace5b7b7f570/resourcegroups/mc_rg_aks_eastus/providers/"
           "microsoft.compute/virtualmachinescalesets/aks-h100pool-93958326-vmss/virtualmachines/7")
    shown = text(arm)
    assert len(shown) == VALUE_CHARS and shown.startswith("/subscriptions/") and shown.endswith("/virtualmachines/7")
    assert "…" in shown and text("i-0abc") == "i-0abc" and text("a\nb") == "a\\nb"
