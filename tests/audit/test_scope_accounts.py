"""[scope].accounts names an account the way its user knows it: an Azure subscription by its GUID
(as the cost details export's SubscriptionId spells it) or by its ARM path (``/subscriptions/GUID``,
Microsoft's FOCUS SubAccountId), in either case; every other id is compared as written."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from audit.adjust import in_scope
from audit.fit import scope_fit
from audit.lines import account_key, accounts_in
from tests.builders import make_case

GUID = "3f2d0c8e-1111-4a4a-9b9b-222233334444"


def lines(*subs: str) -> pd.DataFrame:
    return pd.DataFrame({"sub_account_id": list(subs), "billing_account_id": ["8611537"] * len(subs),
                         "charge_category": ["Usage"] * len(subs), "service_name": ["Virtual Machines"] * len(subs)})


@pytest.mark.parametrize("written", [GUID, GUID.upper(), f"/subscriptions/{GUID}", f"/SUBSCRIPTIONS/{GUID.upper()}/"])
@pytest.mark.parametrize("billed", [GUID, f"/subscriptions/{GUID}"])
def test_a_subscription_is_the_same_by_guid_or_arm_path(written, billed):
    frame = lines(billed, "9ec51cfd-5ca7-4d76-8101-dd0a4abc5674", "")
    mask, _ = in_scope(frame, {"accounts": [written]})
    assert mask.tolist() == [True, False, False]
    assert account_key(written) == account_key(billed) == GUID


def test_other_ids_compare_as_written():
    assert accounts_in(pd.Series(["111111111111", "Acme-Inference-Prod", None]),
                       ["111111111111", "acme-inference-prod"]).tolist() == [True, False, False]
    assert account_key("/subscriptions/not-a-guid") == "/subscriptions/not-a-guid"
    assert account_key(" 111111111111 ") == "111111111111"


def test_scope_fit_names_only_the_subscription_no_line_carries(tmp_path: Path):
    case = make_case(accounts=(f"/subscriptions/{GUID.upper()}", "0000"))
    found = scope_fit(case, lines(GUID, "111111111111"))
    assert [m.subject for m in found] == ["[scope] account 0000"]
