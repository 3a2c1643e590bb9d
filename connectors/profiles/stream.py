"""Stream a Chrome trace's ``traceEvents`` array in decoded chunks, never the whole file at once.

The file (plain, or gzip inflated by ISA-L when the ``isal`` package is there, else by zlib) is
read in blocks of ``READ`` bytes. The top-level object before ``"traceEvents": [`` and after its
closing ``]`` is decoded on its own. The array between is gathered in one buffer that opens with a
bracket; once it holds ``CHUNK`` bytes it is cut at its last candidate event boundary (``}``,
comma, ``{``): the comma is overwritten by ``]`` in place and msgspec decodes the buffer up to it
as a JSON array, with no copy; the rest, reopened by ``[``, starts the next piece. A cut that
falls inside a string or a nested value cannot decode (the piece would end inside an open string,
object or array), so the candidate before it is tried, and failing that the piece waits for more
data. Memory is bounded by a few chunks, whatever the size of the trace.
"""
from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from connectors.bounds import nested_too_deep
from connectors.errors import InputError

try:                                   # optional: ISA-L inflates gzip 3-4x faster than zlib
    from isal import igzip, isal_zlib
    GZIP_ERRORS: tuple = (isal_zlib.error,)
except ImportError:                    # pragma: no cover - the stdlib reader is the fallback
    igzip, GZIP_ERRORS = None, ()

CHUNK = 1 << 20
READ = 1 << 20
HEAD_LIMIT = 64 << 20
MAX_PIECE = 8 * CHUNK
KEY = re.compile(rb'"traceEvents"\s*:\s*')
BOUNDARY = re.compile(rb"\}\s*(,)\s*\{")
WINDOW = 8 << 10
LAST_TRIES = 3
PATH_INDEX = re.compile(r"`\$\[(\d+)\]")
BYTE = re.compile(r"\(byte (\d+)\)")
EXPECTED_OBJECT = "a Chrome trace JSON object with a 'traceEvents' list"
EXPECTED_TRACE = "a PyTorch profiler (Kineto) Chrome trace, .json or .json.gz"


def _open(path: Path, gzipped: bool):
    """A binary reader of the file: ISA-L's gzip reader when installed (3-4x zlib's speed)."""
    if not gzipped:
        return open(path, "rb")
    return igzip.open(path, "rb") if igzip is not None else gzip.open(path, "rb")


def _blocks(path: Path) -> Iterator[bytes]:
    """The file's bytes in blocks of READ, gunzipped when they start with the gzip magic number."""
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    with _open(path, gzipped) as handle:
        while True:
            try:
                block = handle.read(READ)
            except (OSError, EOFError, zlib.error, *GZIP_ERRORS) as exc:
                raise InputError(path, f"cannot decompress gzip: {exc}",
                                 expected="a complete .json.gz Chrome trace") from None
            if not block:
                return
            yield block


class EventStream:
    """Iterate decoded chunks of ``traceEvents``; ``top`` holds the rest of the object afterwards.

    ``event_type`` is the msgspec type of one event and ``top_type`` that of the top-level object
    less its events. ``top`` is complete only once iteration has finished. ``fast_type``, when
    given, is tried first on each piece: a cheaper type (a tagged union that skips the fields of
    events the caller drops) whose result is used when it decodes and ``accept`` takes it; a piece
    it refuses is decoded as ``event_type``, whose outcome (and error) is the reference.
    """

    def __init__(self, path: Path, event_type: Any, top_type: Any, fast_type: Any = None,
                 accept: Callable[[list], bool] | None = None):
        self.path = Path(path)
        self.events = msgspec.json.Decoder(list[event_type])
        self.fast = msgspec.json.Decoder(list[fast_type]) if fast_type is not None else None
        self.accept = accept or (lambda events: True)
        self.top_decoder = msgspec.json.Decoder(top_type)
        self.top_type = top_type
        self.top = None
        self.count = 0
        self.offset = 0           # where the piece being read (its opening bracket) lies in the file
        with open(self.path, "rb") as raw:
            self.gzipped = raw.read(2) == b"\x1f\x8b"

    def __iter__(self) -> Iterator[tuple[int, list]]:
        """Yield (index of the first event, decoded events) per piece of at least CHUNK bytes.

        ``data`` always starts with the bracket that opens the current piece; each block read is
        appended to it, and once it holds CHUNK bytes it is cut at its last boundary that decodes.
        """
        blocks = _blocks(self.path)
        buf, start = self._head(blocks)
        data = bytearray(buf[start - 1:])
        self.offset = start - 1
        for block in blocks:
            data += block
            if len(data) < CHUNK:
                continue
            events, comma = self._piece(data)
            if events is None:                # no boundary decodes yet: read on
                if len(data) > MAX_PIECE:
                    self._not_json(bytes(data[1:MAX_PIECE + 1]), self.offset)
                continue
            data[comma] = ord("[")             # the next piece opens where this one was cut
            data = bytearray(memoryview(data)[comma:])
            self.offset += comma
            yield self.count, events
            self.count += len(events)
        yield from self._last(data)

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
                self._not_json(buf, -1)
            buf += block
        if buf[end:end + 1] != b"[":
            self._whole(buf, blocks)
        head = buf[:match.start()].rstrip()
        head = head[:-1] if head.endswith(b",") else head
        self.top = self._decode_top(head + b"}", 0)
        return buf, end + 1

    def _whole(self, buf: bytes, blocks: Iterator[bytes]) -> None:
        """Decode a (small) document that is not a streamable trace, to raise the right error."""
        for block in blocks:
            buf += block
            if len(buf) > HEAD_LIMIT:
                break
        if not buf.strip():               # the decoder's own word was "Input data was truncated"
            raise InputError(self.path, "file is empty" + (" once decompressed" if self.gzipped else "")
                             + (" (whitespace only)" if buf else ""), expected=EXPECTED_TRACE)
        try:
            value = msgspec.json.decode(buf)
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"not valid JSON: {self._at(str(exc), 0)}", expected=EXPECTED_TRACE) from None
        except RecursionError:
            raise self._too_deep() from None
        if not isinstance(value, dict):
            raise InputError(self.path, f"unexpected trace structure: a JSON {type(value).__name__}, not an object",
                             expected=EXPECTED_OBJECT)
        raise InputError(self.path, "no traceEvents list", expected=EXPECTED_OBJECT)

    def _not_json(self, data: bytes, at: int) -> None:
        """Raise the decoder's own complaint about ``data`` (or a truncation error); ``at``: where in
        the file the bracket the decoder is given in front of ``data`` stands."""
        try:
            msgspec.json.decode(b"[" + data)
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"not valid JSON: {self._at(str(exc), at)}", expected=EXPECTED_TRACE) from None
        except RecursionError:
            raise self._too_deep() from None
        raise InputError(self.path, "not valid JSON: truncated", expected=EXPECTED_TRACE)

    def _piece(self, data: bytearray) -> tuple[list | None, int]:
        """Decode ``data`` up to its last boundary that decodes: (events, index of the comma).

        Boundaries are looked for in the last WINDOW bytes first (the whole piece when none is
        there); a cut inside a string or a nested value does not decode, so the one before it is
        tried, LAST_TRIES in all, and failing those the piece waits for the next block.
        """
        found = list(BOUNDARY.finditer(data, max(1, len(data) - WINDOW)))
        if not found and len(data) > WINDOW:
            found = list(BOUNDARY.finditer(data, 1))
        for match in reversed(found[-LAST_TRIES:]):
            comma = match.start(1)
            data[comma] = ord("]")
            events = self._try(memoryview(data)[:comma + 1])
            if events is not None:
                return events, comma
            data[comma] = ord(",")
        return None, 0

    def _try(self, text) -> list | None:
        """Events of ``text`` (a JSON array), or None when its cut is not a real boundary."""
        if self.fast is not None:
            try:
                events = self.fast.decode(text)
            except msgspec.ValidationError:
                pass                           # decided by the reference type below
            except msgspec.DecodeError:
                return None
            except RecursionError:
                raise self._too_deep() from None
            else:
                if self.accept(events):
                    return events
                del events
        try:
            return self.events.decode(text)
        except msgspec.ValidationError as exc:
            raise InputError(self.path, "unexpected trace structure: " + self._renumber(str(exc)),
                             expected=EXPECTED_OBJECT) from None
        except msgspec.DecodeError:
            return None
        except RecursionError:
            raise self._too_deep() from None

    def _at(self, message: str, base: int) -> str:
        """msgspec's ``(byte N)``, N counted in the text it was given (which stands at ``base`` in the
        file), as the byte of the file (of its decompressed text, for a .gz)."""
        where = " of the decompressed trace" if self.gzipped else ""
        return BYTE.sub(lambda m: f"(byte {base + int(m.group(1))}{where})", message)

    def _too_deep(self) -> InputError:
        """The error for events nested deeper than msgspec decodes."""
        return InputError(self.path, f"traceEvents[{self.count}] or an event after it: {nested_too_deep()}",
                          expected=EXPECTED_TRACE)

    def _renumber(self, message: str) -> str:
        """msgspec's ``$[i]`` paths, relative to a chunk, as absolute traceEvents indices."""
        return PATH_INDEX.sub(lambda m: f"`traceEvents[{self.count + int(m.group(1))}]", message)

    def _last(self, data: bytearray) -> Iterator[tuple[int, list]]:
        """The final events and the object's tail after the closing bracket (``data`` opens with '[')."""
        rest = data[1:].lstrip()
        if rest[:1] == b"]":
            self._tail(bytes(rest[1:]), self.offset + len(data) - len(rest) + 1)
            return
        close = len(data)
        while True:
            close = data.rfind(b"]", 1, close)
            if close < 0:
                self._not_json(bytes(data[1:]), self.offset)
            tail = bytes(data[close + 1:])
            at = self.offset + close + 1
            if self._tail_ok(tail, at):
                events = self._try(memoryview(data)[:close + 1])
                if events is not None:
                    yield self.count, events
                    self.count += len(events)
                    self._tail(tail, at)
                    return

    def _tail_ok(self, tail: bytes, at: int) -> bool:
        """Whether ``tail`` closes the top-level object."""
        try:
            self._tail(tail, at)
        except InputError:
            return False
        return True

    def _tail(self, tail: bytes, at: int) -> None:
        """Merge the keys after traceEvents into ``top``; ``at``: where ``tail`` starts in the file."""
        stripped = tail.lstrip()
        at += len(tail) - len(stripped)
        tail = stripped
        if tail.startswith(b","):
            tail, at = tail[1:], at + 1
        elif not tail.startswith(b"}"):
            raise InputError(self.path, "not valid JSON: nothing closes the traceEvents list", expected=EXPECTED_TRACE)
        rest = self._decode_top(b"{" + tail, at - 1)
        for field in self.top_type.__struct_fields__:
            value = getattr(rest, field)
            if value is not None:
                setattr(self.top, field, value)

    def _decode_top(self, data: bytes, base: int) -> Any:
        """The top-level keys in ``data`` (an object text that stands at ``base`` in the file)."""
        try:
            return self.top_decoder.decode(data)
        except msgspec.ValidationError as exc:
            raise InputError(self.path, f"unexpected trace structure: {exc}", expected=EXPECTED_OBJECT) from None
        except msgspec.DecodeError as exc:
            raise InputError(self.path, f"not valid JSON: {self._at(str(exc), base)}", expected=EXPECTED_TRACE) from None
        except RecursionError:
            raise InputError(self.path, f"the object around traceEvents: {nested_too_deep()}",
                             expected=EXPECTED_OBJECT) from None
