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


def test_the_reason_names_the_accounts_left_out_beside_the_scope():
    """Before: 'account not in [scope].accounts (111111111111)', naming the account kept."""
    frame = lines("111111111111", "222222222222", "222222222222")
    mask, reasons = in_scope(frame, {"accounts": ["111111111111"]})
    assert mask.tolist() == [True, False, False]
    assert reasons == ["sub account 222222222222 not in [scope].accounts (111111111111)"]
    frame = pd.concat([lines("333", "444"), lines("")]).assign(billing_account_id=["1", "1", "9"])
    _, reasons = in_scope(frame, {"accounts": ["1", "9"]})
    assert reasons == []  # every line's billing account is in scope: nothing left out
    _, reasons = in_scope(frame, {"accounts": ["555"]})
    assert reasons == ["sub accounts 333, 444 and billing account 9 not in [scope].accounts (555)"]


def test_the_reason_names_the_services_and_tag_values_left_out():
    frame = lines("1", "1", "1").assign(service_name=["Virtual Machines", "Storage", "Bandwidth"],
                                        tags=['{"team": "ml"}', '{"team": "data"}', "{}"],
                                        resource_id=["r1", "r2", "r3"])
    _, reasons = in_scope(frame, {"services": ["Virtual Machines"]})
    assert reasons == ["services Bandwidth, Storage not in [scope].services (Virtual Machines)"]
    _, reasons = in_scope(frame, {"tags": {"team": "ml"}})
    assert reasons == ["no team tag, team=data not in [scope].tags (team=ml)"]
    _, reasons = in_scope(frame, {"accounts": ["1"], "services": ["Storage", "Virtual Machines"],
                                  "tags": {"team": "ml"}})
    assert reasons == ["service Bandwidth not in [scope].services (Storage, Virtual Machines)",
                       "team=data not in [scope].tags (team=ml)"]


def test_the_lines_left_out_are_counted_as_invoice_lines():
    """A row the reader summed from identical lines (``line_count``) counts as all of them: the
    reasons counted rows (1 line naming no account; 1 tax / credit line) where 3 and 2 were left out."""
    frame = lines("111", "").assign(billing_account_id=["1", ""], line_count=[1, 3])
    _, reasons = in_scope(frame, {"accounts": ["111"]})
    assert reasons == ["3 line(s) naming no account not in [scope].accounts (111)"]
    frame = lines("1", "1", "1").assign(charge_category=["Usage", "Usage", "Tax"], resource_id=["r1", "r2", "r2"],
                                        tags=['{"team": "ml"}', '{"team": "data"}', '{"team": "ml"}'],
                                        line_count=[1, 1, 2])
    _, reasons = in_scope(frame, {"tags": {"team": "ml"}})
    assert reasons == ["team=data not in [scope].tags (team=ml)",
                       "2 tax / credit line(s) tagged team=ml that apply to charges outside [scope].tags"]
