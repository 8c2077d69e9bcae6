"""The marketplace's landing page: a registration token in, an API key out (shown once).

Only a POST issues a key. ``GET ?token=...`` (the local marketplace's link) shows a page
whose button POSTs the token: a link preview or a mail scanner that fetches the link
must not rotate the customer's key. A token issues a key once: the link sits in proxies'
logs, and whoever saw it must not be able to take the account over afterwards.

A POST that a browser sends from a page of another site (AWS Marketplace's own, or an
attacker's posting their token to sign the visitor in to their account) only shows the
confirmation page: the key comes from its button, a same-origin POST.
"""

import io
import logging
import secrets
from urllib.parse import urlsplit

from flask import Blueprint, Response, current_app, g, jsonify, render_template, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import RequestEntityTooLarge

from docshift.accounts import keys
from docshift.accounts.marketplace import Customer
from docshift.errors import (
    FileTooLarge,
    InvalidRequest,
    MarketplaceUnavailable,
    RegistrationRefused,
    RegistrationTokenInvalid,
    ServiceUnavailable,
)
from docshift.storage import accounts, registrations
from docshift.web.context import get_db, get_marketplace, get_settings
from docshift.web.problems import problem

log = logging.getLogger("docshift.registration")
bp = Blueprint("registration", __name__)

FIELD = "x-amzn-marketplace-token"
MISSING = "registration token missing: open the setup link from the marketplace"
INVALID = "registration token invalid or expired: restart setup from the marketplace"
BUSY = "the marketplace did not answer: open the setup link again in a minute"
# the form holds one token (a few hundred bytes): anything much bigger is refused unread
FORM_LIMIT = 8 * 1024
TOO_LARGE = f"the registration form is too large: it holds one token, at most {FORM_LIMIT:,} bytes"


# the pages' own inline style and script (by nonce), a form that posts here, never in a frame
POLICY = ("default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; form-action 'self'; "
          "frame-ancestors 'none'; base-uri 'none'")


@bp.before_request
def _nonce() -> None:
    g.csp_nonce = secrets.token_urlsafe(16)


@bp.before_request
def _small_forms() -> ResponseReturnValue | None:
    request.max_content_length = request.max_form_memory_size = FORM_LIMIT
    if request.content_length is not None:
        return _too_large() if request.content_length > FORM_LIMIT else None
    if "wsgi.input_terminated" not in request.environ:
        return None  # werkzeug reads no body of unknown length then
    # A chunked body: werkzeug would parse a form of its first FORM_LIMIT bytes and drop the rest without a word
    # (a token after them read as missing). Read one byte more than the limit, and give it the body read.
    body, stream = b"", request.environ["wsgi.input"]
    while len(body) <= FORM_LIMIT and (piece := stream.read(FORM_LIMIT + 1 - len(body))):
        body += piece
    if len(body) > FORM_LIMIT:
        return _too_large()
    request.environ.update({"wsgi.input": io.BytesIO(body), "CONTENT_LENGTH": str(len(body))})
    return None


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(error: RequestEntityTooLarge | None = None) -> ResponseReturnValue:
    if _wants_json():
        return problem(FileTooLarge(TOO_LARGE))
    return render_template("registration_failed.html", message=TOO_LARGE), 413


@bp.after_request
def _unframed(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = POLICY.format(nonce=g.csp_nonce)
    response.headers["X-Frame-Options"] = "DENY"
    return response


@bp.get("/marketplace/register")
def confirm() -> ResponseReturnValue:
    """The link's page: checks the token (which changes nothing) and offers the button."""
    return _confirmation(request.args.get("token") or request.args.get(FIELD))


def _confirmation(token: str | None) -> ResponseReturnValue:
    try:
        customer, _ = _resolve(token)
    except RegistrationRefused as refused:
        return _refused(refused)
    plan = _plan_given(customer)
    if _wants_json():
        response = jsonify(plan=plan, register={"method": "POST", "url": url_for(".register"), "field": FIELD})
    else:
        response = current_app.make_response(render_template("confirm.html", plan=plan, token=token, field=FIELD))
    return _private(response)


def _plan_given(customer: Customer) -> str | None:
    """The plan the button registers: the token's, except for an account of the local marketplace that exists
    already, which keeps its own (its operator's later set-plan outlives an older token). The page showed the
    token's and registered the account's."""
    backend = get_marketplace()
    if backend.name == "local":
        account = accounts.find_account(get_db(), backend.name, customer.customer_id)
        if account is not None:
            return str(account["plan"])
    return customer.plan


@bp.post("/marketplace/register")
def register() -> ResponseReturnValue:
    """The marketplace's form POST (or the confirmation button): issues a new key."""
    token = request.form.get(FIELD) or request.args.get("token")
    if _from_another_site():
        log.info("registration POST from another site: the confirmation page, no key")
        return _confirmation(token)
    try:
        customer, token_id = _resolve(token)
    except RegistrationRefused as refused:
        return _refused(refused)
    backend = get_marketplace()
    api_key = keys.generate()
    try:
        # the local operator's later changes (plan, status) outlive an old token; AWS is asked afresh
        account = registrations.register(get_db(), backend.name, customer, token_id, keys.digest(api_key),
                                         keys.hint(api_key), refresh=backend.name != "local")
    except RegistrationTokenInvalid as error:  # a POST of the same token got there first
        log.info("registration refused: %s", error)
        return _refused(RegistrationRefused(INVALID))
    log.info("account %s registered, new key %s", account["id"], keys.hint(api_key))

    if _wants_json():
        response = jsonify(account_id=account["id"], plan=account["plan"], status=account["status"], api_key=api_key)
    else:
        response = current_app.make_response(
            render_template("registered.html", account=account, api_key=api_key))
    return _private(response)


def _resolve(token: str | None) -> tuple[Customer, str]:
    """The token's customer and the id that marks the token used, or RegistrationRefused."""
    if not token:
        raise RegistrationRefused(MISSING)
    backend = get_marketplace()
    try:
        token_id = backend.token_id(token)
        # refused before the marketplace is asked again; the token's own text for rows older than ids
        if registrations.token_used(get_db(), token_id, token):
            raise RegistrationTokenInvalid("registration token already used")
        return backend.resolve(token), token_id
    except RegistrationTokenInvalid as error:
        log.info("registration refused: %s", error)
        raise RegistrationRefused(INVALID) from error
    except MarketplaceUnavailable as error:
        log.warning("marketplace unavailable during registration: %s", error)
        raise RegistrationRefused(BUSY, busy=True) from error


def _from_another_site() -> bool:
    """True for a browser's request sent by a page of another site. Browsers set ``Sec-Fetch-Site``
    (over HTTPS and to localhost), and ``Origin`` on every POST ("null" when the page hides it): a
    request with neither comes from no page (curl, a script), so no page can ride on it."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site not in ("same-origin", "none")  # none: the user's own action, no page behind it
    origin = request.headers.get("Origin")
    if origin is None:
        return False
    # the public name (DOCSHIFT_BASE_URL) too, whatever Host a proxy passes on
    ours = {request.host.lower(), urlsplit(get_settings().base_url or "").netloc.lower()} - {""}
    # the host alone: a proxy that ends TLS gives the app http for the browser's https
    return urlsplit(origin).netloc.lower() not in ours


def _private(response: Response) -> Response:
    # the key, and the token on the confirmation page, must not stay in a cache
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    return response


def _refused(refused: RegistrationRefused) -> ResponseReturnValue:
    if _wants_json():
        error = ServiceUnavailable(refused.message) if refused.busy else InvalidRequest(refused.message)
        return problem(error)
    return render_template("registration_failed.html", message=refused.message), 503 if refused.busy else 400


def _wants_json() -> bool:
    """A client that prefers JSON (the key, or a problem document) to the HTML page."""
    best = request.accept_mimetypes.best_match(["text/html", "application/json", "application/problem+json"])
    return best in ("application/json", "application/problem+json") and \
        request.accept_mimetypes[best] > request.accept_mimetypes["text/html"]
