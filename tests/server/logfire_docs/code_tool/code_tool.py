from pydantic_monty import MontyError, MontyTypingError

import logfire


async def get_order(order_id: str) -> dict:
    return {'id': order_id, 'status': 'shipped', 'items': 3}  # replace with a call to your order system


TOOLS = {'get_order': get_order}

STUBS = """
async def get_order(order_id: str) -> dict:
    '''Return one order, with its `status` and number of `items`.'''
"""

RUN_CODE_DESCRIPTION = f"""Run a Python script and return the value of its last expression.
The script can `await` these functions, and combine several with `asyncio.gather`:
{STUBS}
Only a subset of Python is available. There is no network or file access, and no third-party packages."""

logfire.configure()
pool = logfire.agent_sandboxes()


async def run_code(code: str) -> str:
    try:
        async with pool.checkout(type_check=True, type_check_stubs=STUBS, ephemeral=True) as session:
            result = await session.feed_run(code, external_lookup=TOOLS)
    except MontyTypingError as e:
        return f'The script did not run, because it has type errors:\n{e.display()}'
    except MontyError as e:
        return f'The script failed: {e}'
    return repr(result)
