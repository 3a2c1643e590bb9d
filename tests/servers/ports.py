"""Free TCP ports on 127.0.0.1 for the test servers."""
from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port nothing listens on at the moment."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
