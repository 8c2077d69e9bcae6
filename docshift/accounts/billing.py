"""The billing rule: a success is INCLUDED while the period's included count is below the plan's
quota, else OVERAGE.

Storage records the class in the transaction that makes the task SUCCEEDED
(``storage.tasks.mark_succeeded``), calling the rule given to it with what it read there, so the
decision and its counting stay one atomic step; storage itself knows no plan.
"""


from collections.abc import Mapping

from docshift.contract import BillingClass
from docshift.storage.connection import Row
from docshift.storage.tasks import BillingRule


def billing_class(quota: int, included_used: int) -> BillingClass:
    return BillingClass.INCLUDED if included_used < quota else BillingClass.OVERAGE


def rule(quotas: Mapping[str, int]) -> BillingRule:
    """The rule for these plan quotas, as storage calls it: ``(account, period) -> class``.
    A plan without a quota includes nothing."""
    def bill(account: Row, period: Row) -> BillingClass:
        return billing_class(quotas.get(account["plan"], 0), period["included_used"])
    return bill
