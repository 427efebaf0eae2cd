import asyncio

from billing import billing
from pydantic_monty import MontyTypingError

import logfire

logfire.configure()

FIRST_TRY = """
from billing import list_invoices

unpaid = list_invoices('cus_1', status='unpaid')
sum(i['amount'] for i in unpaid)
"""

SECOND_TRY = """
from billing import list_invoices

unpaid = list_invoices('cus_1', status='open')
sum(i['amount_cents'] for i in unpaid) / 100
"""


async def main():
    async with logfire.agent_sandboxes() as pool:
        async with pool.checkout(type_check=True, external_modules={'billing': billing}) as session:
            try:
                await session.feed_run(FIRST_TRY)
            except MontyTypingError as e:
                print(e.display())  # send this back to the model
            print(await session.feed_run(SECOND_TRY))


asyncio.run(main())
