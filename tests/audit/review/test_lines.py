"""Lines that appeared or vanished between two audits, above max(0.5 % of the later total, 1.00)."""
from __future__ import annotations

from audit.review import review
from audit.review.load import checked
from tests.audit.review.documents import audit, component


def lines(earlier: dict, later: dict) -> dict:
    return review([checked(earlier, "a.json"), checked(later, "b.json")])["pairs"][0]["lines"]


def test_appeared_and_vanished_above_the_threshold():
    big = {"chat": {"requests": 10, "components": {"line:x": component("1000")}}}
    earlier = audit("q2", big, skus={"AmazonEC2|p5": "900.00", "AWSLogs|ingest": "50.00", "S3|tiny": "4.00"},
                    accounts={"111": "950.00", "222": "30.00"})
    later = audit("q3", {**big, "search": {"requests": 5, "components": {"line:y": component("6")}}},
                  skus={"AmazonEC2|p5": "800.00", "AmazonEC2|g6e": "120.00", "S3|other": "4.99"},
                  accounts={"111": "900.00", "333": "26.00"})
    found = lines(earlier, later)
    # later total 1,006.00: 0.5 % is 5.03, above the 1.00 floor
    assert found["threshold"] == "5.03"
    assert found["appeared"] == [{"kind": "service", "id": "search", "amount": "6.00"},
                                 {"kind": "sku", "id": "AmazonEC2|g6e", "amount": "120.00"},
                                 {"kind": "account", "id": "333", "amount": "26.00"}]
    assert found["vanished"] == [{"kind": "sku", "id": "AWSLogs|ingest", "amount": "50.00"},
                                 {"kind": "account", "id": "222", "amount": "30.00"}]
    assert found["note"] is None


def test_the_floor_of_one_unit_and_the_note_on_other_skus():
    earlier = audit("q2", {"chat": {"requests": 1, "components": {"line:x": component("10")}}}, skus={})
    later = audit("q3", {"chat": {"requests": 1, "components": {"line:x": component("10")}}},
                  skus={"S3|a": "1.00", "S3|b": "0.99"})
    earlier["lines"]["other_skus"] = "3.00"
    found = lines(earlier, later)
    assert found["threshold"] == "1.00"
    assert [x["id"] for x in found["appeared"]] == ["S3|a"]
    assert "a.json lists its top SKUs only (3.00 in the others)" in found["note"]
