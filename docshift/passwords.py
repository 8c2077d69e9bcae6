"""A document's password (``Document-Password``) on its way from the request to the engine.

The password is never kept in clear: the task row holds it sealed (Fernet: AES-CBC authenticated with
HMAC-SHA256) with a key derived from ``DOCSHIFT_SECRET_KEY``, which the web and the worker hold and a
conversion node does not, and the row forgets it in the transaction that makes the task final. What an
``Idempotency-Key`` replay compares is a keyed hash (HMAC-SHA256 under another key derived from the secret
key), kept only beside an Idempotency-Key and forgotten with it: never the password, and nothing a guess can
be checked against without the secret key.
"""

import base64
import hashlib
import hmac

from cryptography.fernet import Fernet, InvalidToken

from docshift.settings import Settings

HEADER = "Document-Password"
MAX_CHARACTERS = 255
RULE = f"{HEADER} must be 1 to {MAX_CHARACTERS} characters of UTF-8."


def _key(config: Settings, purpose: bytes) -> bytes:
    return hmac.new(config.secret_key.encode(), b"docshift document password: " + purpose, hashlib.sha256).digest()


def _fernet(config: Settings) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(_key(config, b"seal")))


def from_header(raw: str) -> str:
    """The password a ``Document-Password`` header carries (WSGI hands header bytes over as latin-1), or
    ValueError when it is not 1-255 characters of UTF-8."""
    try:
        password = raw.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise ValueError(RULE) from None
    if not 1 <= len(password) <= MAX_CHARACTERS or "\x00" in password:
        raise ValueError(RULE)
    return password


def seal(config: Settings, password: str) -> str:
    """The password as the task row keeps it while the task waits."""
    return _fernet(config).encrypt(password.encode()).decode("ascii")


def unseal(config: Settings, sealed: str) -> str | None:
    """The password a task row keeps, or None when it was sealed with another secret key."""
    try:
        return _fernet(config).decrypt(sealed.encode("ascii")).decode()
    except (InvalidToken, UnicodeError, ValueError):
        return None


def digest(config: Settings, password: str | None) -> str | None:
    """The keyed hash an Idempotency-Key replay is compared by (None without a password)."""
    if password is None:
        return None
    return hmac.new(_key(config, b"digest"), password.encode(), hashlib.sha256).hexdigest()
