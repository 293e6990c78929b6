"""Who may reach the simulator's controls: where they listen, whether that is
exposed to other hosts and pods, and the bearer token an exposed listener asks for.

Pure but for reading the token file, so `flags.py` can refuse an exposed
address without a token before anything starts.
"""

import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from driver.httpendpoint import Reply, json_reply, split_address

ADDRESS_FLAG = "--sim-control-address"
TOKEN_FLAG = "--sim-control-token-file"
UNIX_PREFIX = "unix:"


class SimControlError(ValueError):
    """A sim-control flag the daemon cannot start with; names the flag and the fix."""


@dataclass(frozen=True)
class SimControlAddress:
    """Where the controls listen: a unix socket path, or a TCP host and port."""

    unix_path: Path | None = None
    host: str = ""
    port: int = 0

    @property
    def exposed(self) -> bool:
        """Reachable from other hosts or pods: TCP on anything but loopback."""
        if self.unix_path is not None:
            return False
        if self.host == "localhost":
            return False
        try:
            return not ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return True  # a host name: whatever it resolves to, assume it is reachable


def parse_address(text: str) -> SimControlAddress | None:
    """`unix:PATH`, `HOST:PORT`, or "" for no controls at all."""
    if not text:
        return None
    if text.startswith(UNIX_PREFIX):
        path = text.removeprefix(UNIX_PREFIX)
        if not path.startswith("/"):
            raise SimControlError(
                f"{ADDRESS_FLAG}: {text!r} must name an absolute socket path, "
                "e.g. unix:/var/lib/trainium-dra/sim-control.sock"
            )
        return SimControlAddress(unix_path=Path(path))
    host, port = split_address(text, ADDRESS_FLAG)
    return SimControlAddress(host=host.removeprefix("[").removesuffix("]"), port=port)


def check_token_needed(address: SimControlAddress | None, token_file: str) -> None:
    if address is not None and address.exposed and not token_file:
        raise SimControlError(
            f"{TOKEN_FLAG}: required when {ADDRESS_FLAG} listens on {address.host}:"
            f"{address.port}, where other hosts and pods can reach it; give a file with a "
            f"bearer token, or listen on a unix socket or 127.0.0.1"
        )


def read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as err:
        raise SimControlError(f"{TOKEN_FLAG}: cannot read {path} ({err.strerror})") from err
    if not token:
        raise SimControlError(f"{TOKEN_FLAG}: {path} is empty; write a bearer token into it")
    return token


@dataclass(frozen=True)
class BearerGuard:
    """Lets through requests whose Authorization header carries the token."""

    token: str

    def __call__(self, headers: Mapping[str, str]) -> Reply | None:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not given:
            return json_reply(
                401, {"error": "Authorization: a bearer token is required (Bearer <token>)"}
            )
        if not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            return json_reply(403, {"error": "Authorization: the bearer token is not accepted"})
        return None
