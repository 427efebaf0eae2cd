import asyncio

from code_tool import pool, run_code


async def main():
    async with pool:
        print(
            await run_code(
                "import asyncio\norders = await asyncio.gather(get_order('o1'), get_order('o2'))\n[o['status'] for o in orders]"
            )
        )
        print(await run_code('await get_order(42)'))


asyncio.run(main())
