"""The four effects of METHOD §10 on a case computed by hand, and their conservation on random
components (hypothesis): exact, then rounded once to the cent."""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.review.effects import Component, rounded, split
from audit.review.words import count, percent, service_driver


def F(text) -> Fraction:
    return Fraction(text)


def test_two_components_by_hand():
    # earlier: 1,000 requests; busy GPU 50 s at 2.00 (100.00), egress 20.00
    # later:   1,200 requests; busy GPU 54 s at 1.80 (97.20), egress 30.00
    earlier = {"gpu_busy": Component(F("100"), F("50"), "gpu_second"), "line:egress": Component(F("20"), F("20"))}
    later = {"gpu_busy": Component(F("97.2"), F("54"), "gpu_second"), "line:egress": Component(F("30"), F("30"))}
    found = split(1000, earlier, 1200, later)
    # volume = ΔQ·u₀ = 200 × 0.12; price = Q₁·Δp·x₀ = 1200 × (−0.2) × 0.05;
    # efficiency = Q₁·p₁·Δx = 1200 × 1.8 × (0.045 − 0.05); overhead = 1200 × 1 × (0.025 − 0.02)
    assert found.effects == {"volume": F("24"), "price": F("-12"), "efficiency": F("-10.8"), "overhead": F("6")}
    assert sum(found.effects.values()) == F("127.2") - F("120")
    amounts = rounded(found.effects, Decimal("7.20"))
    assert amounts == {"volume": Decimal("24.00"), "price": Decimal("-12.00"), "efficiency": Decimal("-10.80"),
                       "overhead": Decimal("6.00")}
    assert service_driver(found, amounts) == "volume +20.0 % (requests 1 k → 1.2 k): +24.00"


def test_price_driver_names_gpu_time():
    earlier = {"gpu_busy": Component(F("100"), F("50"), "gpu_second"), "gpu_idle": Component(F("50"), F("25"))}
    later = {"gpu_busy": Component(F("70"), F("50"), "gpu_second"), "gpu_idle": Component(F("35"), F("25"))}
    found = split(1000, earlier, 1000, later)
    amounts = rounded(found.effects, Decimal("-45.00"))
    assert amounts["price"] == Decimal("-45.00") and amounts["volume"] == 0
    assert service_driver(found, amounts) == "price −30.0 % on GPU time: −45.00"


def test_a_component_that_appears_takes_the_other_audits_price():
    earlier = {"gpu_busy": Component(F("100"), F("50"), "gpu_second")}
    later = {"gpu_busy": Component(F("100"), F("50"), "gpu_second"), "gpu_idle": Component(F("40"), F("20"))}
    found = split(1000, earlier, 1000, later)
    assert found.effects == {"volume": 0, "price": 0, "efficiency": 0, "overhead": F("40")}
    assert found.components["gpu_idle"].price_from == 2
    assert "idle GPU-seconds appeared" in service_driver(found, rounded(found.effects, Decimal("40.00")))


def test_a_cost_without_quantity_is_read_as_currency():
    earlier = {"gpu_idle": Component(F("10"), F("0"))}
    later = {"gpu_idle": Component(F("15"), F("5"))}
    found = split(100, earlier, 100, later)
    assert sum(found.effects.values()) == 5 and found.effects["price"] == 0
    assert found.notes and "read as currency" in found.notes[0]


def test_words():
    assert count(1_200_000) == "1.2 M" and count(1_350_000) == "1.35 M" and count(950) == "950"
    assert count(2_100_000_000) == "2.1 bn" and count(12_345) == "12.3 k"
    assert percent(F("0.12")) == "+12.0 %" and percent(F("-0.301")) == "−30.1 %" and percent(F("0")) == "0.0 %"


money = st.decimals(min_value=Decimal("0"), max_value=Decimal("100000"), places=6, allow_nan=False,
                    allow_infinity=False)
seconds = st.decimals(min_value=Decimal("0"), max_value=Decimal("1000000"), places=3, allow_nan=False,
                      allow_infinity=False)
keys = st.sampled_from(["gpu_busy", "gpu_idle", "line:egress", "line:observability", "shared:orchestration"])


@st.composite
def components(draw):
    out = {}
    for key in draw(st.sets(keys, max_size=5)):
        cost = draw(money)
        if key.startswith("gpu"):
            quantity = draw(seconds)
            if quantity == 0:
                cost = Decimal(0)
            out[key] = Component(Fraction(cost), Fraction(quantity), "gpu_second")
        else:
            out[key] = Component(Fraction(cost), Fraction(cost))
    return out


@settings(max_examples=300, deadline=None)
@given(components(), components(), st.integers(1, 10**10), st.integers(1, 10**10))
def test_effects_add_up_to_the_change_exactly(earlier, later, q0, q1):
    found = split(q0, earlier, q1, later)
    c0 = sum((c.cost for c in earlier.values()), Fraction(0))
    c1 = sum((c.cost for c in later.values()), Fraction(0))
    assert sum(found.effects.values()) == c1 - c0
    target = (Decimal(c1.numerator) / c1.denominator).quantize(Decimal("0.01")) - \
        (Decimal(c0.numerator) / c0.denominator).quantize(Decimal("0.01"))
    assert sum(rounded(found.effects, target).values()) == target
