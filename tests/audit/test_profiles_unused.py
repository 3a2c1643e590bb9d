"""A second profile of a service is named as unused (rule 5).

One profile per service gives its gap ratio and kernel figures, the first declared. Before: the
demo with the prefill-only trace added as a second chat profile was audited without a word of it
(audit.json listed one profile, no note, no warning).
"""
from __future__ import annotations

import json
import shutil

from tests.audit.cli.test_cli import costaudit
from tests.paths import FIXTURES

SECOND = ('\n[[profiles]]\nname = "chat-prefill-only"\nformat = "kineto"\n'
          'path = "profiles/h100_qwen1.5-0.5b-chat.json.gz"\nservice = "chat"\n')


def test_a_second_profile_of_a_service_is_named(tmp_path):
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + SECOND, encoding="utf-8")
    done = costaudit("validate", case)
    assert done.returncode == 0, done.stderr
    assert ("warning: profile chat-prefill-only is not used: service chat's gap ratio and kernel figures come from "
            "profile chat-qwen-prefill-decode, declared before it (one profile per service)") in done.stderr
    out = tmp_path / "out"
    costaudit("run", case, "--out", out, "--format", "json", "--quiet")
    fit = json.loads((out / "audit.json").read_text())["fit"]
    assert [(f["kind"], f["subject"], f["nearest"]) for f in fit] == [
        ("profile_unused", "profile chat-prefill-only", ["chat-qwen-prefill-decode"])]
