"""The bearer tokens ``nlbandit serve`` accepts: one token (``--token`` or ``$NLBANDIT_SERVE_TOKEN``), or a file
of them (``--token-file``), so that tokens can be given per client and rotated without a restart.

Token file: one token per line, surrounding whitespace ignored, as are blank lines and lines starting with ``#``;
a token is printable ASCII without spaces. The service reads it at start-up (a missing or unreadable file, one
holding no token or a malformed line stops it, naming the file and the line) and again whenever the file changes
(its modification time, size or inode, checked on every request), so that adding a token admits its client and
removing one refuses it from the next request on. A file that cannot be used after a change (removed,
unreadable, no token, a malformed line) refuses every request with 503 naming it (fail closed) until it is
fixed. Tokens are compared in constant time, each of them on every request.
"""

from __future__ import annotations

import hmac
import os
from pathlib import Path

from nlbandit.core.hyper import ConfigError


class Tokens:
    """The tokens a service accepts: ``token`` alone, or those of the file ``path`` (module docstring)."""

    def __init__(self, token: str | None = None, path: str | os.PathLike | None = None):
        if (token is None) == (path is None):
            raise ConfigError("serve: give one token (--token or $NLBANDIT_SERVE_TOKEN) or a token file "
                              "(--token-file), not both")
        self.path = None if path is None else Path(path)
        self._seen: tuple | None = None
        given = () if token is None else (_checked(token, "the token (--token or $NLBANDIT_SERVE_TOKEN)"),)
        self._tokens: tuple[bytes, ...] = given
        self._broken: str | None = None
        if self.path is not None:
            self._reload()
            if self._broken:
                raise ConfigError(f"serve: {self._broken}")

    def check(self, given: bytes) -> tuple[int, str] | None:
        """None where ``given`` (the presented token) is accepted; else the refusal's status and message: 401
        for a missing or wrong token, 503 while the token file cannot be used."""
        if self.path is not None:
            self._reload()
            if self._broken:
                return 503, f"the service's token file cannot be used, so no request is accepted: {self._broken}"
        accepted = False
        for token in self._tokens:  # (every one compared: the time does not tell which matched)
            accepted |= hmac.compare_digest(given, token)
        return None if accepted else (401, "missing or wrong token: send 'Authorization: Bearer TOKEN'")

    def _reload(self) -> None:
        """Read the token file again where it changed since it was last read."""
        try:
            info = os.stat(self.path)
        except OSError as e:
            self._seen, self._broken = None, f"{self.path}: {e.strerror or e}"
            return
        seen = (info.st_mtime_ns, info.st_size, info.st_ino)
        if seen == self._seen:
            return
        try:
            text = self.path.read_text(encoding="utf-8")
        except OSError as e:
            self._seen, self._broken = None, f"{self.path}: {e.strerror or e}"
            return
        except UnicodeDecodeError:
            self._seen, self._broken = None, f"{self.path}: not UTF-8 text"
            return
        try:
            tokens = tuple(_checked(line.strip(), f"{self.path}, line {n}")
                           for n, line in enumerate(text.splitlines(), 1)
                           if line.strip() and not line.strip().startswith("#"))
        except ConfigError as e:
            self._seen, self._broken = None, str(e)
            return
        if not tokens:
            self._seen, self._broken = None, f"{self.path} holds no token (one per line; '#' starts a comment)"
            return
        self._seen, self._tokens, self._broken = seen, tokens, None


def _checked(token: str, where: str) -> bytes:
    """``token`` as bytes if it is printable ASCII without spaces; else ConfigError naming ``where``."""
    if not token or not all("!" <= ch <= "~" for ch in token):
        raise ConfigError(f"{where}: a token must be printable ASCII characters without spaces")
    return token.encode()


__all__ = ["Tokens"]
