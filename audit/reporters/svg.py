"""Plain SVG for the report's charts, written directly: rectangles, lines, markers and ``<text>``.

No drawing library: a chart is a :class:`Canvas` of a few dozen elements, returned as a
``data:image/svg+xml;base64`` URI. The bytes are the same for the same figures (coordinates are
written with two decimals at most; hatch patterns are named for their colours, never numbered).
Every string that comes from the data (service names, option ids, input names) goes through
:func:`esc`, so a name holding ``<``, ``&`` or quotes stays text. Nothing is referenced outside
the document and there are no scripts; the text is in DejaVu Sans, the report's own font, with the
generic ``sans-serif`` where a browser lacks it.

A :class:`Frame` maps data coordinates to the canvas, as a plot's axes do; the axis, grid, bar and
legend helpers draw in data coordinates. Text widths are estimated (:func:`text_width`), which is
enough to leave room for labels: the charts never measure glyphs.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Sequence

from audit.reporters.formatting import shown

FONT = "DejaVu Sans, Verdana, sans-serif"
INK, SPINE, GRID = "#3b3b3b", "#555555", "#e2e2e2"
#: about how wide DejaVu Sans draws characters, in em: narrow ones, wide ones, capitals, the rest
NARROW, WIDE = frozenset("ijlt.,:;'!|()[]{} -frI"), frozenset("mwMW%@<>=+~#&")
NARROW_EM, WIDE_EM, CAPITAL_EM, CHAR_EM = 0.34, 0.92, 0.72, 0.63


#: characters XML 1.0 does not allow that :func:`esc` does not escape already (controls and lone
#: surrogates it does): one in a name would make the whole chart an invalid image
NOT_XML = {0xFFFE: "\ufffd", 0xFFFF: "\ufffd"}


def esc(text: object) -> str:
    """``text`` safe inside an element or a double- or single-quoted attribute; control, bidi and
    lone surrogate characters written as escapes, as the rest of the report shows them
    (:func:`audit.reporters.formatting.shown`), anything else XML cannot hold as U+FFFD."""
    return (shown(str(text)).translate(NOT_XML).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def num(value: float) -> str:
    """A coordinate with two decimals at most, never "-0"."""
    text = f"{round(value, 2) + 0.0:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def text_width(text: str, size: float) -> float:
    """About how wide ``text`` is at ``size``, for leaving room (never for placing glyphs)."""
    return size * sum(NARROW_EM if ch in NARROW else WIDE_EM if ch in WIDE else CAPITAL_EM if ch.isupper() else CHAR_EM
                      for ch in text)


@dataclass
class Canvas:
    """An SVG document being written: ``width`` × ``height`` user units (points at 100 %)."""

    width: float
    height: float
    parts: list[str] = field(default_factory=list)
    patterns: dict[str, str] = field(default_factory=dict)

    def rect(self, x: float, y: float, w: float, h: float, fill: str, hatch: str | None = None,
             stroke: str | None = None) -> None:
        """A rectangle; ``hatch`` (a colour) fills it with diagonal lines of that colour over ``fill``."""
        paint = self.hatch(hatch, fill) if hatch else fill
        edge = f' stroke="{stroke}" stroke-width="0.6"' if stroke else ""
        self.parts.append(f'<rect x="{num(x)}" y="{num(y)}" width="{num(max(w, 0))}" '
                          f'height="{num(max(h, 0))}" fill="{paint}"{edge}/>')

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str = SPINE, width: float = 0.8) -> None:
        self.parts.append(f'<line x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}" '
                          f'stroke="{stroke}" stroke-width="{num(width)}"/>')

    def polyline(self, points: list[tuple[float, float]], stroke: str, width: float = 1.4) -> None:
        coords = " ".join(f"{num(x)},{num(y)}" for x, y in points)
        self.parts.append(f'<polyline points="{coords}" fill="none" stroke="{stroke}" '
                          f'stroke-width="{num(width)}" stroke-linejoin="round"/>')

    def marker(self, x: float, y: float, shape: str, colour: str, size: float) -> None:
        """A marker centred on (x, y): "o" circle, "s" square, "^" / "v" triangle, "D" diamond, "P" plus."""
        r = size / 2
        if shape == "o":
            self.parts.append(f'<circle cx="{num(x)}" cy="{num(y)}" r="{num(r)}" fill="{colour}"/>')
            return
        outline = {"s": ((-r, -r), (r, -r), (r, r), (-r, r)), "^": ((0, -r), (r, r), (-r, r)),
                   "v": ((0, r), (r, -r), (-r, -r)), "D": ((0, -r), (r, 0), (0, r), (-r, 0)),
                   "P": ((-r / 3, -r), (r / 3, -r), (r / 3, -r / 3), (r, -r / 3), (r, r / 3), (r / 3, r / 3),
                         (r / 3, r), (-r / 3, r), (-r / 3, r / 3), (-r, r / 3), (-r, -r / 3), (-r / 3, -r / 3))}
        points = " ".join(f"{num(x + dx)},{num(y + dy)}" for dx, dy in outline[shape])
        self.parts.append(f'<polygon points="{points}" fill="{colour}"/>')

    def text(self, x: float, y: float, text: str, size: float = 8.5, anchor: str = "start",
             colour: str = INK, bold: bool = False, rotate: float = 0) -> None:
        """``text`` with its baseline at ``y`` (escaped: it may come from the data)."""
        weight = ' font-weight="bold"' if bold else ""
        turn = f' transform="rotate({num(rotate)} {num(x)} {num(y)})"' if rotate else ""
        self.parts.append(f'<text x="{num(x)}" y="{num(y)}" font-size="{num(size)}" text-anchor="{anchor}" '
                          f'fill="{colour}"{weight}{turn}>{esc(text)}</text>')

    def hatch(self, colour: str, ground: str) -> str:
        """The paint of diagonal ``colour`` lines over ``ground``, defined once per pair of colours."""
        name = f"hatch-{colour.strip('#')}-{ground.strip('#')}"
        self.patterns.setdefault(name, (
            f'<pattern id="{name}" patternUnits="userSpaceOnUse" width="5" height="5">'
            f'<rect width="5" height="5" fill="{ground}"/>'
            f'<path d="M-1,1 l2,-2 M0,5 l5,-5 M4,6 l2,-2" stroke="{colour}" stroke-width="0.9"/></pattern>'))
        return f"url(#{name})"

    def document(self) -> bytes:
        defs = f"<defs>{''.join(self.patterns[k] for k in sorted(self.patterns))}</defs>" if self.patterns else ""
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(self.width)}" height="{num(self.height)}" '
                f'viewBox="0 0 {num(self.width)} {num(self.height)}" font-family="{FONT}">'
                f"{defs}{''.join(self.parts)}</svg>").encode("utf-8")

    def data_uri(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.document()).decode("ascii")


@dataclass(frozen=True)
class Frame:
    """A plot area (left, top, width, height on the canvas) showing data x in [x0, x1], y in [y0, y1]."""

    left: float
    top: float
    width: float
    height: float
    x0: float
    x1: float
    y0: float
    y1: float

    def px(self, x: float) -> float:
        return self.left + (x - self.x0) / ((self.x1 - self.x0) or 1.0) * self.width

    def py(self, y: float) -> float:
        return self.top + self.height - (y - self.y0) / ((self.y1 - self.y0) or 1.0) * self.height

    @property
    def bottom(self) -> float:
        return self.top + self.height


def bar(c: Canvas, f: Frame, x: float, bottom: float, height: float, width: float, fill: str,
        hatch: str | None = None, stroke: str | None = None) -> None:
    """An upright bar centred on data ``x``, from ``bottom`` to ``bottom + height``."""
    left, right = f.px(x - width / 2), f.px(x + width / 2)
    top, base = f.py(max(bottom, bottom + height)), f.py(min(bottom, bottom + height))
    c.rect(left, top, right - left, base - top, fill, hatch, stroke)


def barh(c: Canvas, f: Frame, y: float, left: float, length: float, height: float, fill: str,
         hatch: str | None = None, stroke: str | None = None) -> None:
    """A lying bar centred on data ``y``, from ``left`` to ``left + length``, clipped to the frame."""
    a = f.px(max(f.x0, min(left, left + length)))
    b = f.px(min(f.x1, max(left, left + length)))
    c.rect(a, f.py(y + height / 2), b - a, f.py(y - height / 2) - f.py(y + height / 2), fill, hatch, stroke)


def left_axis(c: Canvas, f: Frame, ticks: list[tuple[float, str]], size: float = 8.5,
              marks: bool = True, spine: bool = True, bold: frozenset[str] = frozenset()) -> None:
    """The y axis: its line, and each tick's mark and label (right-aligned, left of the frame)."""
    if spine:
        c.line(f.left, f.top, f.left, f.bottom)
    for value, label in ticks:
        y = f.py(value)
        if marks:
            c.line(f.left - 3.5, y, f.left, y)
        c.text(f.left - (6 if marks else 4), y + size * 0.35, label, size, "end", bold=label in bold)


def bottom_axis(c: Canvas, f: Frame, ticks: list[tuple[float, str]], size: float = 8.5,
                marks: bool = True, slant: float = 0) -> None:
    """The x axis: its line, and each tick's mark and label under it; a label's "\\n" starts a
    new line; ``slant`` turns the labels by that many degrees (anchored at their right end)."""
    c.line(f.left, f.bottom, f.left + f.width, f.bottom)
    for value, label in ticks:
        x = f.px(value)
        if marks:
            c.line(x, f.bottom, x, f.bottom + 3.5)
        for i, text in enumerate(label.split("\n")):
            y = f.bottom + 5 + size * (0.95 + 1.15 * i)
            if slant:
                c.text(x + size * 0.3, y, text, size, "end", rotate=-slant)
            else:
                c.text(x, y, text, size, "middle")


def grid(c: Canvas, f: Frame, xs: Sequence[float] = (), ys: Sequence[float] = ()) -> None:
    """Light lines across the frame at data ``xs`` (upright) and ``ys`` (across)."""
    for x in xs:
        c.line(f.px(x), f.top, f.px(x), f.bottom, GRID, 0.6)
    for y in ys:
        c.line(f.left, f.py(y), f.left + f.width, f.py(y), GRID, 0.6)


def title(c: Canvas, f: Frame, text: str, size: float = 9.5) -> None:
    """A bold title over the frame, flush left (moved left where it would run off the canvas); a "\\n"
    starts a second line above the frame's top."""
    lines = text.split("\n")
    widest = max(text_width(line, size) for line in lines) * 1.2  # bold is wider
    x = max(2.0, min(f.left, c.width - widest - 2))
    for i, line in enumerate(lines):
        c.text(x, f.top - 7 - size * 1.2 * (len(lines) - 1 - i), line, size, bold=True)


#: a legend entry: (label, colour, kind, marker shape or ""); kind is "box", "line", or the colour of
#: hatch lines drawn over the box's colour
Entry = tuple[str, str, str, str]


def column_width(entries: list[Entry], size: float) -> float:
    return max((text_width(e[0], size) for e in entries), default=0.0) + size * 3.2


def fitting_columns(entries: list[Entry], most: int, room: float, size: float) -> int:
    """The most columns, up to ``most``, whose entries fit in ``room``; at least one."""
    return max(1, min(most, int(room // column_width(entries, size))))


def legend(c: Canvas, x: float, y: float, entries: list[Entry], columns: int, size: float = 7.5) -> float:
    """Entries in ``columns`` columns from (x, y), the top left; returns the bottom."""
    step, row = column_width(entries, size), size * 1.5
    for i, (label, colour, kind, shape) in enumerate(entries):
        ex, ey = x + (i % columns) * step, y + (i // columns) * row + row / 2
        if kind == "line":
            c.line(ex, ey, ex + size * 2, ey, colour, 1.4)
            if shape:
                c.marker(ex + size, ey, shape, colour, size * 0.55)
        else:
            c.rect(ex, ey - size * 0.4, size * 1.6, size * 0.8, colour, None if kind == "box" else kind)
        c.text(ex + size * 2.5, ey + size * 0.35, label, size)
    return y + -(-len(entries) // columns) * row
