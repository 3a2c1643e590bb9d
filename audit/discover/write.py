"""The proposal of :mod:`audit.discover.propose` as case.toml text, every proposal commented.

The text is TOML 1.0 that :func:`audit.case.load_case` reads: ``[case]``, ``[scope]``, the
sources, ``[services.*]``, ``[nodes]`` and the ``[[rules]]`` of a case given to ``--from``. Each
key the data decided carries, above it, the evidence it rests on; a source that cannot be used as
it is (a profile no service fits, a file that could not be read) is written commented out with
the reason. Paths inside the case folder are written relative to it, others absolute.
"""
from __future__ import annotations

import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from audit.discover.propose import Proposal, ServiceEntry, SourceEntry

BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in str(text):
        if ch in ESCAPES:
            out.append(ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    return key if BARE_KEY.match(key) else toml_string(key)


def toml_value(value: Any) -> str:
    """A TOML value: string, bool, whole or decimal number, array, inline table."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{toml_key(str(k))} = {toml_value(v)}" for k, v in value.items()) + " }"
    if isinstance(value, datetime):
        return toml_string(value.isoformat())
    return toml_string(str(value))


def render(proposal: Proposal, folder: Path) -> str:
    """The whole case.toml text."""
    parts = [_header(proposal), _case(proposal), _scope(proposal)]
    parts += [_source(entry, folder) for entry in proposal.sources]
    parts += [_service(entry) for entry in proposal.services]
    parts += [_nodes(proposal), _rules(proposal)]
    return "\n".join(p for p in parts if p).rstrip() + "\n"


def _comment(lines: list[str], indent: str = "") -> list[str]:
    return [f"{indent}# {line}".rstrip() for text in lines for line in str(text).splitlines()]


def _header(p: Proposal) -> str:
    lines = ["# case.toml proposed by `costaudit init --from` from the sources below"
             + (f" (and the case {p.origin})" if p.origin else "") + ".",
             "# Each proposal says what it rests on: check them, then `costaudit validate` and `costaudit run`."]
    lines += _comment([f"warning: {w}" for w in p.warnings])
    return "\n".join(lines) + "\n"


def _case(p: Proposal) -> str:
    out = ["[case]", f"name = {toml_string(p.name)}", *_comment([p.window_note]),
           f"window = [{toml_string(_day(p.window[0]))}, {toml_string(_day(p.window[1]))}]"]
    out += _comment([p.currency_note])
    out.append(f"currency = {toml_string(p.currency)}" if p.currency else '# currency = "XXX"')
    s = p.settings
    out += [f"cost_basis = {toml_string(s['cost_basis'])}", f"tolerance = {s['tolerance']}"]
    if p.step:
        out += _comment([p.step_note]) + [f"step = {toml_string(p.step)}"]
    else:
        out += _comment([p.step_note])
    out.append(f"target_utilisation = {s['target_utilisation']}")
    if not s.get("from_case"):
        out += _comment(["loaded cost of one engineering hour in the case currency: a placeholder, put yours"])
    out.append(f"loaded_rate = {s['loaded_rate']}")
    return "\n".join(out) + "\n"


def _day(moment: datetime) -> str:
    moment = moment.astimezone(timezone.utc)
    if (moment.hour, moment.minute, moment.second, moment.microsecond) == (0, 0, 0, 0):
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _scope(p: Proposal) -> str:
    if not p.scope_notes:
        return ""
    out = ["[scope]"] if p.scope_accounts else ["# [scope]"]
    out += _comment(["the billing accounts (SubAccountId, else BillingAccountId) and their spend:"]
                    + [f"  {n}" for n in p.scope_notes])
    if p.scope_accounts:
        out.append(f"accounts = {toml_value(p.scope_accounts)}")

    return "\n".join(out) + "\n"


def _source(entry: SourceEntry, folder: Path) -> str:
    key, where = entry.location
    if key == "path":
        where = _path(Path(where), folder)
    body = [f"[[{entry.kind}]]", f"name = {toml_string(entry.name)}", f"format = {toml_string(entry.format)}",
            f"{key} = {toml_string(where)}"]
    body += [f"{toml_key(k)} = {toml_value(v)}" for k, v in entry.options.items() if v is not None]
    notes = _comment(entry.comments)
    if entry.disabled:
        return "\n".join(notes + [f"# {line}" for line in body]) + "\n"
    return "\n".join([body[0], *notes, *body[1:]]) + "\n"


def _path(path: Path, folder: Path) -> str:
    """Relative to the case folder when the file lies inside it, else absolute."""
    real, base = Path(os.path.realpath(path)), Path(os.path.realpath(folder))
    if real == base or base in real.parents:
        return str(real.relative_to(base))
    return str(path)


def _service(entry: ServiceEntry) -> str:
    body = [f"[services.{toml_key(entry.name)}]"]
    body += [f"{k} = {toml_string(v)}" for k, v in entry.match.items()]
    body += [f"tags = {toml_value(entry.tags)}"] if entry.tags else []
    body += [f"{k} = {v}" for k, v in (("gpus_per_replica", entry.gpus_per_replica),
                                      ("min_replicas", entry.min_replicas)) if v is not None]
    if entry.disabled:
        return "\n".join(_comment(entry.comments) + [f"# {line}" for line in body]) + "\n"
    return "\n".join([body[0], *_comment(entry.comments), *body[1:]]) + "\n"


def _nodes(p: Proposal) -> str:
    fit = p.nodes
    if not (fit.links or fit.unmet or p.declared_nodes):
        if not fit.met:
            return ""
        return "\n".join(_comment([f"[nodes] is not needed: every billed GPU machine meets a telemetry node "
                                   f"({len(fit.met)}), e.g. {fit.met[0]}"])) + "\n"
    out = ["[nodes]" if (fit.links or p.declared_nodes) else "# [nodes]"]
    out += _comment(["telemetry node = billing ResourceId, where provider_id does not tie them (METHOD §2)"])
    out += _comment([f"already tied: {m}" for m in fit.met[:8]]
                    + ([f"… and {len(fit.met) - 8} more"] if len(fit.met) > 8 else []))
    for node, resource in p.declared_nodes.items():
        out.append(f"{toml_string(node)} = {toml_string(resource)}  # from the case")
    for link in fit.links:
        out += _comment([link.why]) + [f"{toml_string(link.node)} = {toml_string(link.resource_id)}"]
    if fit.unmet:
        out += _comment(["not tied (write \"node\" = \"ResourceId\" for the ones that are one machine):"]
                        + [f"  {u}" for u in fit.unmet])
    return "\n".join(out) + "\n"


def _rules(p: Proposal) -> str:
    out = []
    for rule in p.rules:
        out += ["[[rules]]  # from the case", f"when = {toml_value(rule['when'])}",
                f"class = {toml_string(rule['class'])}", f"reason = {toml_string(rule['reason'])}", ""]
    return "\n".join(out)
