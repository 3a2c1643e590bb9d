"""The PDF's break opportunities in long runs of text (audit/reporters/pdf.py breakable): weasyprint
lays out ``overflow-wrap: anywhere`` by breaking a cell after every letter to find its narrowest
width, about twice the layout time of the whole report, so the PDF's HTML gets a zero-width space
every RUN characters of a long run and prints with ``break-word`` (templates/report.css, print)."""
from __future__ import annotations

import re

from audit.reporters.pdf import RUN, breakable
from tests.paths import ROOT

ZW = "\u200b"


def test_a_long_run_of_text_gets_a_break_every_run_characters():
    run = "x" * (2 * RUN + 5)
    assert breakable(f"<td>{run}</td>") == f"<td>{'x' * RUN}{ZW}{'x' * RUN}{ZW}xxxxx</td>"


def test_words_and_runs_up_to_the_limit_are_left_as_they_are():
    text = f"<p>a reason of short words, and one id {'i' * RUN} at the limit</p>"
    assert breakable(text) == text


def test_tags_attributes_styles_and_scripts_are_never_touched():
    long = "y" * (3 * RUN)
    html = (f'<img src="data:image/svg+xml;base64,{long}" title="{long}">'
            f"<style>.a{{background:url(data:{long})}}</style><script>var s='{long}'</script>")
    assert breakable(html) == html


def test_an_entity_counts_as_one_character_and_is_never_cut():
    run = "&amp;" * (RUN + 3)
    out = breakable(f"<td>{run}</td>")
    assert out.replace(ZW, "") == f"<td>{run}</td>"
    assert out.count(ZW) == 1 and re.fullmatch(rf"<td>(&amp;){{{RUN}}}{ZW}(&amp;){{3}}</td>", out)


def test_the_text_reads_the_same_without_the_breaks():
    html = f"<p>pod {'chat-7f9c' * 12} on node {'n' * 100}</p><td>arn:aws:savingsplans::1:savingsplan/{'a' * 40}</td>"
    assert breakable(html).replace(ZW, "") == html


def test_print_wraps_at_the_breaks_and_screens_keep_anywhere():
    css = (ROOT / "templates" / "report.css").read_text(encoding="utf-8")
    printed = css[css.index("@media print {"):]
    assert ".kernel { overflow-wrap: break-word; }" in printed.replace("\n  ", " ")
    assert "p, li, dd, figcaption { overflow-wrap: anywhere; }" in css[:css.index("@media print {")]
