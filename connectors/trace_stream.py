"""Stream a Chrome trace's ``traceEvents`` array in decoded chunks, never the whole file at once.

The file (plain or gzip) is read in blocks. The top-level object before ``"traceEvents": [`` and
after its closing ``]`` is decoded on its own; the array between is cut at candidate event
boundaries (``}``, comma, ``{``) roughly every ``CHUNK`` bytes and each piece is decoded by msgspec
as a JSON array. A cut that falls inside a string or a nested value cannot decode (the piece would
end inside an open string, object or array), so a failed piece is simply extended to the next
candidate. Memory is bounded by a few chunks, whatever the size of the trace.
"""
from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path
from typing import Any, Iterator

import msgspec

from connectors.errors import InputError

CHUNK = 1 << 20
READ = 1 << 20
HEAD_LIMIT = 64 << 20
MAX_PIECE = 8 * CHUNK
KEY = re.compile(rb'"traceEvents"\s*:\s*')
BOUNDARY = re.compile(rb"\}\s*,\s*\{")
PATH_INDEX = re.compile(r"`\$\[(\d+)\]")
EXPECTED_OBJECT = "a Chrome trace JSON object with a 'traceEvents' list"
EXPECTED_TRACE = "a PyTorch profiler (Kineto) Chrome trace, .json or .json.gz"


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes in blocks, gunzipped when they start with the gzip magic number."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    handle = gzip.open(path, "rb") if gzipped else open(path, "rb")
    with handle:
        while True:
            try:
                block = handle.read(READ)
            except (OSError, EOFError, zlib.error) as exc:
                raise InputError(path, f"cannot decompress gzip: {exc}",
                                 expected="a complete .json.gz Chrome trace") from None
            if not block:
                return
            yield block


class EventStream:
    """Iterate decoded chunks of ``traceEvents``; ``top`` holds the rest of the object afterwards.

    ``event_type`` is the msgspec type of one event and ``top_type`` that of the top-level object
    less its events. ``top`` is complete only once iteration has finished.
    """

    def __init__(self, path: Path, event_type: Any, top_type: Any):
        self.path = Path(path)
        self.events = msgspec.json.Decoder(list[event_type])
        self.top_decoder = msgspec.json.Decoder(top_type)
        self.top_type = top_type
        self.top = None
        self.count = 0

    def __iter__(self) -> Iterator[tuple[int, list]]:
        """Yield (index of the first event, decoded events) per chunk."""
        blocks = _blocks(self.path)
        buf, start = self._head(blocks)
        pos, eof = start, False
        while True:
            if not eof and len(buf) - pos < CHUNK + READ:
                block = next(blocks, None)
                if block is None:
                    eof = True
                else:
                    buf = buf[pos:] + block
                    pos = 0
                    continue
            if eof:
                yield from self._last(buf, pos)
                return
            piece, pos = self._piece(buf, pos)
            if piece is None:                 # no boundary decodes yet: read on
                if len(buf) - pos > MAX_PIECE:
                    self._not_json(buf[pos:pos + MAX_PIECE])
                block = next(blocks, None)
                if block is None:
                    eof = True
                else:
                    buf = buf[pos:] + block
                    pos = 0
                continue
            yield self.count, piece
            self.count += len(piece)

    def _head(self, blocks: Iterator[bytes]) -> tuple[bytes, int]:
        """Read up to the opening bracket of traceEvents; decode what precedes it."""
        buf = b""
        for block in blocks:
            buf += block
            first = buf.lstrip()[:1]
            if first and first != b"{":
                self._whole(buf, blocks)
            match = KEY.search(buf)
            if match:
                break
            if len(buf) > HEAD_LIMIT:
                raise InputError(self.path, "no traceEvents list in the first 64 MiB", expected=EXPECTED_OBJECT)
        else:
            self._whole(buf, iter(()))
        end = match.end()
        while len(buf) <= end:
            block = next(blocks, None)
            if block is None:
                self._not_json(buf)
            buf += block
        if buf[end:end + 1] != b"[":
            self._whole(buf, blocks)
        head = buf[:match.start()].rstrip()
        head = head[:-1] if head.endswith(b",") else head
        self.top = self._decode_top(head + b"}")
        return buf, end + 1

    def _whole(self, buf: bytes, blocks: Iterator[bytes]) -> None:
        """Decode a (small) document that is not a streamable trace, to raise the right error."""
        for block in blocks:
            buf += block
            if len(buf) > HEAD_LIMIT:
                break
        try:
            value = msgspec.json.decode(buf)
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"not valid JSON: {exc}", expected=EXPECTED_TRACE) from None
        if not isinstance(value, dict):
            raise InputError(self.path, f"unexpected trace structure: a JSON {type(value).__name__}, not an object",
                             expected=EXPECTED_OBJECT)
        raise InputError(self.path, "no traceEvents list", expected=EXPECTED_OBJECT)

    def _not_json(self, data: bytes) -> None:
        """Raise the decoder's own complaint about ``data`` (or a truncation error)."""
        try:
            msgspec.json.decode(b"[" + data)
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"not valid JSON: {exc}", expected=EXPECTED_TRACE) from None
        raise InputError(self.path, "not valid JSON: truncated", expected=EXPECTED_TRACE)

    def _piece(self, buf: bytes, pos: int) -> tuple[list | None, int]:
        """Decode the events from ``pos`` to the first boundary past CHUNK that decodes."""
        search = pos + CHUNK
        while True:
            match = BOUNDARY.search(buf, search)
            if match is None:
                return None, pos
            events = self._try(buf[pos:match.start() + 1])
            if events is not None:
                return events, match.end() - 1
            search = match.end() - 1

    def _try(self, body: bytes) -> list | None:
        """Events of ``body`` as an array, or None when the cut is not a real boundary."""
        try:
            return self.events.decode(b"[" + body + b"]")
        except msgspec.ValidationError as exc:
            raise InputError(self.path, "unexpected trace structure: " + self._renumber(str(exc)),
                             expected=EXPECTED_OBJECT) from None
        except msgspec.DecodeError:
            return None

    def _renumber(self, message: str) -> str:
        """msgspec's ``$[i]`` paths, relative to a chunk, as absolute traceEvents indices."""
        return PATH_INDEX.sub(lambda m: f"`traceEvents[{self.count + int(m.group(1))}]", message)

    def _last(self, buf: bytes, pos: int) -> Iterator[tuple[int, list]]:
        """The final events and the object's tail after the closing bracket."""
        body = buf[pos:]
        if body.lstrip()[:1] == b"]":
            self._tail(body.lstrip()[1:])
            return
        close = len(body)
        while True:
            close = body.rfind(b"]", 0, close)
            if close < 0:
                self._not_json(body)
            if self._tail_ok(body[close + 1:]):
                events = self._try(body[:close])
                if events is not None:
                    yield self.count, events
                    self.count += len(events)
                    self._tail(body[close + 1:])
                    return

    def _tail_ok(self, tail: bytes) -> bool:
        """Whether ``tail`` closes the top-level object."""
        try:
            self._tail(tail)
        except InputError:
            return False
        return True

    def _tail(self, tail: bytes) -> None:
        """Merge the keys after traceEvents into ``top``."""
        tail = tail.lstrip()
        if tail.startswith(b","):
            tail = tail[1:]
        elif not tail.startswith(b"}"):
            raise InputError(self.path, "not valid JSON: nothing closes the traceEvents list", expected=EXPECTED_TRACE)
        rest = self._decode_top(b"{" + tail)
        for field in self.top_type.__struct_fields__:
            value = getattr(rest, field)
            if value is not None:
                setattr(self.top, field, value)

    def _decode_top(self, data: bytes) -> Any:
        """The top-level keys in ``data`` (an object text)."""
        try:
            return self.top_decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise InputError(self.path, f"unexpected trace structure: {exc}", expected=EXPECTED_OBJECT) from None
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"not valid JSON: {exc}", expected=EXPECTED_TRACE) from None
