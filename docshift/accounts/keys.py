"""API keys: ``dsk_`` + 32 random base62 characters + 6 base62 characters of CRC32.

The checksum (GitHub token style) lets a mistyped key be rejected before any
database lookup. Only the SHA-256 hex of a key is stored, beside a display
hint that is safe to show and log.
"""

import hashlib
import hmac
import secrets
import string
import zlib

PREFIX = "dsk_"
ALPHABET = string.digits + string.ascii_letters
RANDOM_LENGTH = 32
CHECKSUM_LENGTH = 6
LENGTH = len(PREFIX) + RANDOM_LENGTH + CHECKSUM_LENGTH


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, rest = divmod(number, 62)
        digits.append(ALPHABET[rest])
    return "".join(reversed(digits)).rjust(width, "0")


def _checksum(random_part: str) -> str:
    return _base62(zlib.crc32(random_part.encode()), CHECKSUM_LENGTH)


def generate() -> str:
    random_part = "".join(secrets.choice(ALPHABET) for _ in range(RANDOM_LENGTH))
    return PREFIX + random_part + _checksum(random_part)


def well_formed(key: str) -> bool:
    """True if ``key`` has the shape and a matching checksum (no database involved)."""
    if len(key) != LENGTH or not key.startswith(PREFIX):
        return False
    body = key[len(PREFIX):]
    if any(c not in ALPHABET for c in body):
        return False
    return hmac.compare_digest(_checksum(body[:RANDOM_LENGTH]), body[RANDOM_LENGTH:])


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def hint(key: str) -> str:
    return key[: len(PREFIX) + 4] + "..."
