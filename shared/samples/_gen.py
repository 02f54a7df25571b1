"""Values the sample bodies are made of: ids in each provider's own shapes, times, money, people.

One ``Gen`` per sample: its random source (seeded for a reproducible sample) and its clock, so every id and
timestamp of one body agrees with the others and with the signature's timestamp.
"""

from __future__ import annotations

import random
import string
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

__all__ = ("Draft", "Gen")

_BASE62 = string.digits + string.ascii_letters
_FIRST = ("Ada", "Grace", "Linus", "Margaret", "Alan", "Katherine", "Dennis", "Barbara", "Ken", "Radia")
_LAST = ("Lovelace", "Hopper", "Torvalds", "Hamilton", "Turing", "Johnson", "Ritchie", "Liskov", "Thompson")
_CITIES = (
    ("New York", "NY", "10001", "350 5th Ave"),
    ("Austin", "TX", "78701", "600 Congress Ave"),
    ("Portland", "OR", "97205", "1120 SW 5th Ave"),
)


class Draft(NamedTuple):
    """A provider module's sample before signing."""

    headers: dict[str, str]
    body: dict[str, Any]
    idempotency_key: str
    """The provider's delivery id: a header's value, or the body's ``id`` (payments)."""


class Gen:
    def __init__(self, rng: random.Random, now: float) -> None:
        self.rng = rng
        self.now = now
        self.first_name = rng.choice(_FIRST)
        self.last_name = rng.choice(_LAST)
        self.email = f"{self.first_name}.{self.last_name}@example.com".lower()

    # -- ids ---------------------------------------------------------------------------------------------

    def token(self, length: int, alphabet: str = _BASE62) -> str:
        return "".join(self.rng.choice(alphabet) for _ in range(length))

    def prefixed(self, prefix: str, length: int = 24) -> str:
        """``cus_NffrFeUfNV2Hib``-style: a prefix and base62 characters."""
        return f"{prefix}_{self.token(length)}"

    def number(self, digits: int) -> int:
        """A positive integer id of exactly ``digits`` digits (the commerce platform's and code host's)."""
        return self.rng.randrange(10 ** (digits - 1), 10**digits)

    def uuid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def hex(self, length: int) -> str:
        return self.token(length, "0123456789abcdef")

    def choice(self, options: tuple[str, ...]) -> str:
        return self.rng.choice(options)

    # -- time ----------------------------------------------------------------------------------------------

    @property
    def seconds(self) -> int:
        return int(self.now)

    @property
    def millis(self) -> int:
        return int(self.now * 1000)

    def iso(self, offset_s: float = 0, *, millis: bool = False) -> str:
        """The instant ``offset_s`` from now, RFC 3339 in UTC with ``Z``."""
        at = datetime.fromtimestamp(self.now, UTC) + timedelta(seconds=offset_s)
        return at.isoformat(timespec="milliseconds" if millis else "seconds").replace("+00:00", "Z")

    def days_ago(self, low: int = 3, high: int = 400) -> float:
        """An offset in seconds some days back (an account created, a product listed)."""
        return -self.rng.uniform(low, high) * 86_400

    # -- money and people ----------------------------------------------------------------------------------

    def cents(self, low: int = 500, high: int = 25_000) -> int:
        """An amount in the smallest currency unit, ending in 0 or 5 like most prices."""
        return self.rng.randrange(low // 5, high // 5) * 5

    @staticmethod
    def money(cents: int) -> str:
        """``"129.50"``: the commerce platform sends amounts as decimal strings."""
        return f"{cents // 100}.{cents % 100:02d}"

    def address(self) -> dict[str, object]:
        city, province, zip_code, street = self.rng.choice(_CITIES)
        return {
            "first_name": self.first_name,
            "last_name": self.last_name,
            "address1": street,
            "address2": None,
            "city": city,
            "province": province,
            "province_code": province,
            "zip": zip_code,
            "country": "United States",
            "country_code": "US",
            "phone": None,
            "company": None,
        }

    def ip(self) -> str:
        """A documentation address (RFC 5737): realistic, and never anyone's."""
        return f"203.0.113.{self.rng.randrange(1, 255)}"
