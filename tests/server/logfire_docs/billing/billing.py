from pydantic_monty import ExternalModule

BILLING_STUB = """
from typing import Literal, TypedDict

class Invoice(TypedDict):
    id: str
    customer_id: str
    amount_cents: int
    status: Literal['paid', 'open', 'void']

def list_invoices(customer_id: str, status: Literal['paid', 'open', 'void'] | None = None) -> list[Invoice]: ...
"""


def list_invoices(customer_id: str, status: str | None = None) -> list[dict]:
    # Check the caller's access to customer_id here before querying real billing data.
    invoices = [  # replace with a call to your billing service
        {'id': 'in_1', 'customer_id': customer_id, 'amount_cents': 5000, 'status': 'open'},
        {'id': 'in_2', 'customer_id': customer_id, 'amount_cents': 900, 'status': 'paid'},
    ]
    return [i for i in invoices if status is None or i['status'] == status]


billing = ExternalModule({'list_invoices': list_invoices}, stubs=BILLING_STUB)
