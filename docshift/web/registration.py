"""The marketplace's landing page: a registration token in, an API key out (shown once)."""

import logging

from flask import Blueprint, current_app, jsonify, render_template, request

from docshift.accounts import keys
from docshift.errors import InvalidRequest, MarketplaceUnavailable, RegistrationTokenInvalid, ServiceUnavailable
from docshift.storage import db
from docshift.web.context import get_db, get_marketplace
from docshift.web.problems import problem

log = logging.getLogger("docshift.registration")
bp = Blueprint("registration", __name__)

MISSING = "registration token missing: open the setup link from the marketplace"
INVALID = "registration token invalid or expired: restart setup from the marketplace"
BUSY = "the marketplace did not answer: open the setup link again in a minute"


@bp.route("/marketplace/register", methods=["GET", "POST"])
def register():
    token = request.form.get("x-amzn-marketplace-token") or request.args.get("token") \
        or request.args.get("x-amzn-marketplace-token")
    if not token:
        return _refused(MISSING)
    backend = get_marketplace()
    try:
        customer = backend.resolve(token)
    except RegistrationTokenInvalid as error:
        log.info("registration refused: %s", error)
        return _refused(INVALID)
    except MarketplaceUnavailable as error:
        log.warning("marketplace unavailable during registration: %s", error)
        return _refused(BUSY, 503)

    conn = get_db()
    account = db.find_account(conn, backend.name, customer.customer_id)
    # the local operator's later changes (plan, status) outlive an old token; AWS is asked afresh
    if account is None or backend.name != "local":
        account = db.apply_subscription(conn, backend.name, customer)
    api_key = keys.generate()
    db.replace_key(conn, account["id"], keys.digest(api_key), keys.hint(api_key))
    log.info("account %s registered, new key %s", account["id"], keys.hint(api_key))

    if _wants_json():
        response = jsonify(account_id=account["id"], plan=account["plan"], api_key=api_key)
    else:
        response = current_app.make_response(
            render_template("registered.html", account=account, api_key=api_key))
    response.headers["Cache-Control"] = "no-store"
    response.headers["Pragma"] = "no-cache"
    return response


def _refused(message, status=400):
    if _wants_json():
        error = InvalidRequest(message) if status == 400 else ServiceUnavailable(message)
        return problem(error)
    return render_template("registration_failed.html", message=message), status


def _wants_json():
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return best == "application/json" and request.accept_mimetypes[best] > request.accept_mimetypes["text/html"]
