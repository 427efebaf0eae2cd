"""A host process of its own, for the tests that load, resume or kill sessions across processes.

    python child.py load STATE_FILE CODE          load the state, run CODE, print repr of its value
    python child.py resume STATE_FILE VALUE       load a paused state, resume its one pending call with VALUE
    python child.py feeds STORE_DB [SESSION_ID]   check out a stored session; run each line of stdin
                                                  as a feed, printing `session_id value` after each
    python child.py answer STORE_DB SESSION_ID    check out a paused stored session, answer its call 0
                                                  with 'sent', print `answered` a second into the
                                                  feed's going on, and wait to be killed
"""

import asyncio
import sys
from pathlib import Path

import corral

KEY = b'test-state-key-0123456789abcdef!'
CALLS: list[str] = []


def approve(what: str) -> str:
    CALLS.append(what)
    raise corral.Deferred({'approve': what})


async def fetch(n: int) -> int:
    CALLS.append(f'fetch {n}')
    return n * 10


TOOLS = {'approve': approve, 'fetch': fetch}


async def main() -> None:
    command, *rest = sys.argv[1:]
    store = f'sqlite:///{rest[0]}' if command in ('feeds', 'answer') else None
    async with corral.Pool(state_key=KEY, warm_workers=0, store=store, lease_ttl=1.0) as pool:
        if command == 'load':
            async with pool.checkout() as session:
                await session.load_session(Path(rest[0]).read_bytes())
                print(repr(await session.feed_run(rest[1], external_lookup=TOOLS)))
        elif command == 'resume':
            async with pool.checkout() as session:
                await session.load_session(Path(rest[0]).read_bytes())
                (pending,) = session._deferred.values()
                print(repr(await session.resume({pending.call_id: rest[1]}, external_lookup=TOOLS)))
        elif command == 'feeds':
            async with pool.checkout(ephemeral=False, session_id=rest[1] if len(rest) > 1 else None) as session:
                print(session.session_id, flush=True)
                for line in sys.stdin:
                    value = await session.feed_run(line.replace('\\n', '\n'), external_lookup=TOOLS)
                    print(session.session_id, repr(value), flush=True)
        elif command == 'answer':
            async with pool.checkout(session_id=rest[1], limits=corral.Limits(wall_time=60)) as session:
                going_on = asyncio.ensure_future(session.resume({0: 'sent'}))
                await asyncio.sleep(1.0)
                print('answered', flush=True)
                await going_on
    print('calls', CALLS)


asyncio.run(main())
