"""The agent of the Code Mode approval tests, in the test process and in a host process of its own.

    python approval_agent.py STORE_DIR    read {"history": [...], "approvals": {...}, "calls": {...}} on
                                          stdin, run the agent on with those answers, print
                                          {"answers": [...], "output": ..., "made": [...]} as JSON
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, CallDeferred, DeferredToolRequests, DeferredToolResults, RunContext, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter

import corral
from corral.pydantic_ai import CodeMode

sys.path.insert(0, str(Path(__file__).parent))

from scripted_model import Script, answers  # noqa: E402

KEY = b'test-state-key-0123456789abcdef!'


def approval_pool(store_dir: str | Path) -> corral.Pool:
    Path(store_dir).mkdir(parents=True, exist_ok=True)
    return corral.Pool(state_key=KEY, warm_workers=0, store=f'sqlite:///{store_dir}/sessions.db')


def mail_agent(script: Script, pool: corral.Pool | None, made: list[Any], **code_mode: Any) -> Agent[Any, str | DeferredToolRequests]:
    """`count_inbox` and `send_email` (needs approval), `archive` (raises ApprovalRequired unless
    approved), `lookup_price` (runs outside the agent: CallDeferred); `made` records each call made.
    `code_mode`: more options of its `CodeMode`."""
    agent = Agent(script.model, output_type=[str, DeferredToolRequests], capabilities=[CodeMode(pool=pool, **code_mode)])

    @agent.tool_plain
    def count_inbox() -> int:
        made.append('count_inbox')
        return 3

    @agent.tool_plain(requires_approval=True)
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        made.append(f'send_email {to}')
        return f'sent to {to}'

    @agent.tool
    def archive(ctx: RunContext[None], folder: str) -> str:
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={'reason': f'archiving {folder} cannot be undone'})
        made.append(f'archive {folder}')
        return f'archived {folder}'

    @agent.tool_plain
    def lookup_price(sku: str) -> float:
        made.append(f'lookup_price {sku}')
        raise CallDeferred(metadata={'queue': 'pricing'})

    return agent


def results_from(data: dict[str, Any]) -> DeferredToolResults:
    approvals = {key: (ToolDenied(value['denied']) if isinstance(value, dict) else value) for key, value in data.get('approvals', {}).items()}
    return DeferredToolResults(approvals=approvals, calls=data.get('calls', {}))


async def main() -> None:
    data = json.loads(sys.stdin.read())
    made: list[Any] = []
    history = ModelMessagesTypeAdapter.validate_python(data['history'])
    async with approval_pool(sys.argv[1]) as pool:
        script = Script(*data['steps'])
        result = await mail_agent(script, pool, made).run(message_history=history, deferred_tool_results=results_from(data))
    output = result.output if isinstance(result.output, str) else repr(result.output)
    print(json.dumps({'answers': answers(result.new_messages()), 'output': output, 'made': made}))


if __name__ == '__main__':
    asyncio.run(main())
