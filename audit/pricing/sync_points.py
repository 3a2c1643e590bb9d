"""Remove sync points and host work from the hot path: the costed idle they cause (METHOD §6, §7).

Per service with a kernel profile, the idle classification (audit/trace/idle.py) gives the GPU idle
of the profile whose gaps a synchronisation or blocking copy drained (*sync drain*) and the idle
while the host ran work that launches nothing (*host compute*). Both are shown as a share of the
profile's GPU time (what the findings show), and priced as a share of the profile's idle: the
GPU time that the part the option acts on, the service's ``serving_path.in_flight_idle`` (S),
stands for. A share of S × the cost of S is what the evidence stage charges every idle finding and
idle path, so that the idle paths of a profile, untraced included, partition S's cost exactly and
the saving is what the sync and host-compute idle paths cost, summed (METHOD §6, §7):

- expected = in_flight_idle × (sync-drain idle + host-compute idle) ÷ the profile's idle;
- low = in_flight_idle × sync-drain idle ÷ the profile's idle (the host work stays on the critical path, only the
  blocking waits go);
- high = expected (no more than the measured idle of those two classes can be recovered).

A service whose profile has no trace to read, or whose in_flight_idle part was not measured, is
left out (said in the inputs); with none left, the option stays *assumed*, with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from audit.money import ZERO
from audit.pricing import Input, Modelled, ordered

if TYPE_CHECKING:
    from audit.ledger import Ledger
    from audit.normalised import ProfileSummary

NO_PROFILE = ("no service has a kernel profile whose trace could be read to attribute its GPU idle to host "
              "call paths (sync drain, host compute)")
NO_PART = "serving_path.in_flight_idle was not measured for the services that have a kernel profile"
SOURCE = "audit/trace/idle.py"


@dataclass(frozen=True)
class ServiceIdle:
    """What one service's share of the saving stands on."""

    service: str
    profile: str
    sync_share: Decimal        # sync-drain idle ÷ the profile's GPU time (shown)
    host_share: Decimal        # host-compute idle ÷ the profile's GPU time (shown)
    idle_share: Decimal        # the profile's whole idle ÷ its GPU time: the time S stands for
    part: Decimal | None       # its serving_path.in_flight_idle over the window (None: not measured)

    def of_part(self, share: Decimal) -> Decimal:
        """A share of the profile's GPU time as a share of its idle (of the part S); 0 without idle."""
        return share / self.idle_share if self.idle_share > 0 else ZERO


def sync_points(services: list[ServiceIdle]) -> Modelled | str:
    """The saving over the window, or why it cannot be modelled."""
    if not services:
        return NO_PROFILE
    inputs: list[Input] = []
    low = expected = ZERO
    priced = 0
    for s in services:
        if s.part is None:
            inputs.append(("not modelled", f"{s.service}: {NO_PART.split(' was')[0]} not measured", "ledger"))
            continue
        priced += 1
        sync, host = s.of_part(s.sync_share), s.of_part(s.host_share)
        low += s.part * sync
        expected += s.part * (sync + host)
        source = f"kernel profile {s.profile} ({SOURCE})"
        inputs += [(f"sync-drain idle share of the profile's GPU time ({s.service})", f"{s.sync_share:.6f}", source),
                   (f"host-compute idle share of the profile's GPU time ({s.service})", f"{s.host_share:.6f}", source),
                   (f"idle share of the profile's GPU time, the time in_flight_idle stands for ({s.service})",
                    f"{s.idle_share:.6f}", source),
                   (f"sync-drain share of the profile's idle, used for cost ({s.service})", f"{sync:.6f}", source),
                   (f"host-compute share of the profile's idle, used for cost ({s.service})", f"{host:.6f}", source),
                   (f"serving_path.in_flight_idle over the window ({s.service})", f"{s.part:.2f}",
                    "ledger (METHOD §3: S = min(g × B, P − B))")]
    if not priced:
        return NO_PART
    return Modelled(ordered(low, expected, expected), tuple(inputs),
                    "low: the sync-drain idle alone (host work stays on the critical path); high: the expected, "
                    "all of the sync-drain and host-compute idle the profiles measured")


def service_idle(profiles: Mapping[str, ProfileSummary], ledger: Ledger) -> list[ServiceIdle]:
    """Per service whose profile's trace can be read: its idle shares and its in_flight_idle part."""
    from audit.trace.idle import profile_idle_shares

    out = []
    for name, profile in sorted(profiles.items()):
        shares = _idle_shares(profile, profile_idle_shares)
        if shares is None:
            continue
        part = ledger.parts.get(("serving_path", "in_flight_idle", name))
        out.append(ServiceIdle(name, profile.name, shares["sync_drain"], shares["host_compute"],
                               sum(shares.values(), ZERO), None if part is None else part.amount))
    return out


def _idle_shares(profile: ProfileSummary, of_trace) -> dict[str, Decimal] | None:
    """The profile's idle by class as a share of its GPU time: its rank set's
    (audit/trace/rankset.py), its trace's, or its file's parsed here; None without GPU work or trace."""
    if profile.rank_set is not None:
        from audit.trace.rankset import set_evidence

        return set_evidence(profile.rank_set).idle_shares
    trace = profile.trace
    if trace is None and Path(profile.path).is_file():
        from audit.trace.findings import load_profile

        trace = load_profile(Path(profile.path))
    return None if trace is None else of_trace(trace)
