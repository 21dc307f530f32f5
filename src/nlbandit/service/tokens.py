"""The bearer tokens ``nlbandit serve`` accepts: one token (``--token`` or ``$NLBANDIT_SERVE_TOKEN``), or a file
of them (``--token-file``), so that tokens can be given per client and rotated without a restart.

Token file: a regular file of at most :data:`MAX_FILE` bytes of UTF-8 text (a byte-order mark allowed), one token
per line; spaces, tabs and carriage returns around a line are ignored, as are blank lines and lines that start with
``#`` (no comments after a token); a token is printable ASCII without spaces and does not start with
``#``. The service reads it at start-up (a file that cannot be used stops it, naming the file and the line) and
again when it may have changed: at once where its status shows a change (device, inode, size, modification or
status-change time, looked at on every request), and in any case at most :data:`RECHECK` seconds after the last
read, so that a token removed is refused within that time even where an edit in place kept the file's status (two
writes within the file system's time resolution, a tool restoring the times). A file that cannot be used after a
change (removed, unreadable, no token, a malformed line) refuses every request with 503 (fail closed) until it is
fixed; the reason goes to the service's standard error, once per change, never to clients. Tokens are compared in
constant time, each of them on every request.
"""

from __future__ import annotations

import hmac
import os
import stat
import sys
import time
from pathlib import Path

from nlbandit.core.hyper import ConfigError

MAX_FILE = 2**20
"""The largest token file read (bytes): it is read on the event loop."""
RECHECK = 1.0
"""Seconds after which the token file is read again even where its status shows no change."""


class Tokens:
    """The tokens a service accepts: ``token`` alone, or those of the file ``path`` (module docstring).

    Raises:
      ConfigError: neither or both given; a token that is not printable ASCII without spaces; a token file that
        cannot be used (naming it and the line).
    """

    def __init__(self, token: str | None = None, path: str | os.PathLike | None = None):
        if token is None and path is None:
            raise ConfigError("serve: no token given: --token TOKEN, $NLBANDIT_SERVE_TOKEN or --token-file PATH")
        if token is not None and path is not None:
            raise ConfigError("serve: give --token (or $NLBANDIT_SERVE_TOKEN) or --token-file, not both")
        self.path = None if path is None else Path(path)
        self._seen: tuple | None = None  # the file's status when it was last read, and when
        self._read_at = 0.0
        given = () if token is None else (_checked(token, "the token (--token or $NLBANDIT_SERVE_TOKEN)"),)
        self._tokens: tuple[bytes, ...] = given
        self._broken: str | None = None
        if self.path is not None:
            self._reload()
            if self._broken:
                raise ConfigError(f"serve: token file {self._broken}")

    def check(self, given: bytes) -> tuple[int, str] | None:
        """None where ``given`` (the presented token) is accepted; else the refusal's status and message: 401
        for a missing or wrong token, 503 while the token file cannot be used."""
        if self.path is not None:
            was = self._broken
            self._reload()
            if self._broken != was:  # (the operator's news, once per change; a client is told no more than 503)
                print(f"nlbandit serve: token file {self._broken}; every request is refused (503) until it is fixed"
                      if self._broken else f"nlbandit serve: token file {self.path} read again: "
                      f"{len(self._tokens)} token(s)", file=sys.stderr, flush=True)
            if self._broken:
                return 503, ("the service's token file cannot be used, so no request is accepted (its operator "
                             "is told why)")
        accepted = False
        for token in self._tokens:  # (every one compared: the time does not tell which matched)
            accepted |= hmac.compare_digest(given, token)
        return None if accepted else (401, "missing or wrong token: send 'Authorization: Bearer TOKEN'")

    def _reload(self) -> None:
        """Read the token file again where its status changed since it was last read, or :data:`RECHECK` seconds
        have passed."""
        try:
            info = os.stat(self.path)
        except OSError as e:
            self._seen, self._broken = None, f"{self.path}: {e.strerror or e}"
            return
        seen = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        now = time.monotonic()
        if seen == self._seen and now - self._read_at < RECHECK:
            return
        self._seen, self._read_at = seen, now
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE:
            self._broken = f"{self.path}: not a regular file of at most {MAX_FILE} bytes"
            return
        try:
            text = self.path.read_text(encoding="utf-8-sig")
        except OSError as e:
            self._broken = f"{self.path}: {e.strerror or e}"
            return
        except UnicodeDecodeError:
            self._broken = f"{self.path}: not UTF-8 text"
            return
        try:
            lines = [line.strip(" \t\r") for line in text.split("\n")]
            tokens = tuple(_checked(line, f"{self.path}, line {n}") for n, line in enumerate(lines, 1)
                           if line and not line.startswith("#"))
        except ConfigError as e:
            self._broken = str(e)
            return
        if not tokens:
            self._broken = f"{self.path} holds no token (one per line; a line starting with '#' is a comment)"
            return
        self._tokens, self._broken = tokens, None


def _checked(token: str, where: str) -> bytes:
    """``token`` as bytes if it is printable ASCII without spaces, not starting with ``#``; else ConfigError
    naming ``where``."""
    if not token or not all("!" <= ch <= "~" for ch in token) or token.startswith("#"):
        raise ConfigError(f"{where}: a token must be printable ASCII characters without spaces, not starting "
                          "with '#'")
    return token.encode()


__all__ = ["MAX_FILE", "RECHECK", "Tokens"]
