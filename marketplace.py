"""Marketplace backends: who a registration token belongs to, and on which plan.

``DOCSHIFT_MARKETPLACE`` picks one. ``local`` (the default, for self-hosting)
resolves tokens that the operator CLI signs with the service's secret key.
"""

from dataclasses import dataclass

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from settings import PLANS


class RegistrationTokenInvalid(Exception):
    """The token is unknown, tampered with or expired."""


@dataclass
class Customer:
    customer_id: str
    plan: str
    status: str = "active"
    license_arn: str | None = None


class LocalMarketplace:
    name = "local"

    def __init__(self, config):
        self.serializer = URLSafeTimedSerializer(config["SECRET_KEY"], salt="docshift.registration")
        self.max_age = int(config["REGISTRATION_TOKEN_MAX_AGE"])

    def issue_token(self, customer_id, plan):
        if plan not in PLANS:
            raise ValueError(f"unknown plan {plan!r}")
        return self.serializer.dumps({"customer": customer_id, "plan": plan})

    def resolve(self, token):
        """The customer a registration token stands for; raises RegistrationTokenInvalid."""
        try:
            data = self.serializer.loads(token, max_age=self.max_age)
        except (BadSignature, SignatureExpired) as error:
            raise RegistrationTokenInvalid(str(error)) from error
        return Customer(customer_id=data["customer"], plan=data["plan"])


BACKENDS = {"local": LocalMarketplace}


def backend(config):
    name = config["MARKETPLACE"]
    if name not in BACKENDS:
        raise RuntimeError(f"DOCSHIFT_MARKETPLACE={name!r} is not available; use one of {sorted(BACKENDS)}")
    return BACKENDS[name](config)
