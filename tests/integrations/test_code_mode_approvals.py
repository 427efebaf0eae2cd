"""Code Mode approvals that wait for a person: a script pauses on a tool call that needs approval or
runs outside the agent, the agent run ends with `DeferredToolRequests` naming the inner calls, and the
next run's `deferred_tool_results` resume the stored session from that call, in any process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import corral

pytest.importorskip('pydantic_ai')

from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter

from .approval_agent import approval_pool, mail_agent
from .scripted_model import Script, answers

CHILD = str(Path(__file__).parent / 'approval_agent.py')
INNER_ID = re.compile(r'call_(?P<step>[0-9]+)__corral-(?P<session>[0-9a-f]{32})-(?P<call>[0-9]+)')


@pytest.fixture
async def pool(tmp_path):
    async with approval_pool(tmp_path / 'store') as pool:
        yield pool


def asked(requests: DeferredToolRequests) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    """(approvals, calls) of `requests` as (tool name, args); every id names the paused script's call."""
    for part in (*requests.approvals, *requests.calls):
        assert INNER_ID.fullmatch(part.tool_call_id), part.tool_call_id
    return [(p.tool_name, p.args) for p in requests.approvals], [(p.tool_name, p.args) for p in requests.calls]


#: The carets 3.12 and later draw under the `True` of a `while True:` a stopped script was in (3.11 draws none).
_WHILE_TRUE = '          ^^^^\n' if sys.version_info >= (3, 12) else ''
STOPPED = (
    'The script failed: Traceback (most recent call last):\n  File "main.py", line 2, in <module>\n    while True:\n'
    + _WHILE_TRUE
    + 'TimeoutError: the script ran past the wall_time limit of 1 second\n\n'
    'Before the failure, the script made 1 function call; whatever it did has happened:\n'
    "- send_email(to='a@b.c', body='hi') returned 'sent to a@b.c'\nDo not repeat a call that changed something."
)
SEND = "n = await count_inbox()\nr = await send_email(to='a@b.c', body=f'{n} new')\n[n, r]"


async def test_an_approved_call_runs_and_the_script_goes_on_without_repeating_earlier_calls(pool):
    made: list[Any] = []
    script = Script(SEND)
    agent = mail_agent(script, pool, made)
    first = await agent.run('mail a@b.c')
    assert asked(first.output) == ([('send_email', {'to': 'a@b.c', 'body': '3 new'})], [])
    assert first.output.metadata == {}
    assert made == ['count_inbox']
    assert answers(first.all_messages()) == []

    (request,) = first.output.approvals
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={request.tool_call_id: True}))
    assert made == ['count_inbox', 'send_email a@b.c']
    assert answers(second.new_messages()) == [[3, 'sent to a@b.c']]
    assert second.output == 'done'
    (returned,) = [part for message in second.new_messages() for part in getattr(message, 'parts', []) if getattr(part, 'tool_name', None) == 'run_code']
    assert returned.tool_call_id == 'call_1'
    assert [(call.tool_name, call.args, call.tool_call_id) for call in returned.metadata['tool_calls'].values()] == [
        ('send_email', {'to': 'a@b.c', 'body': '3 new'}, request.tool_call_id)
    ]


async def test_the_same_answers_given_twice_do_not_run_the_call_twice(pool):
    from pydantic_ai.exceptions import UserError

    made: list[Any] = []
    agent = mail_agent(Script(SEND), pool, made)
    first = await agent.run('x')
    (request,) = first.output.approvals
    results = DeferredToolResults(approvals={request.tool_call_id: True})
    await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    with pytest.raises(UserError) as info:
        await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert str(info.value) == f'deferred tool results answer calls the paused script does not wait on: [{INNER_ID.fullmatch(request.tool_call_id)["call"]}]'
    assert made == ['count_inbox', 'send_email a@b.c']


async def test_a_denied_call_raises_permission_error_with_the_denial_message(pool):
    made: list[Any] = []
    code = (
        "n = await count_inbox()\n"
        "try:\n"
        "    r = await send_email(to='boss@b.c', body='quit')\n"
        "except PermissionError as e:\n"
        "    r = 'refused: ' + str(e)\n"
        "r"
    )
    agent = mail_agent(Script(code), pool, made)
    first = await agent.run('x')
    (request,) = first.output.approvals
    results = DeferredToolResults(approvals={request.tool_call_id: ToolDenied('not to the boss')})
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert answers(second.new_messages()) == ['refused: send_email() was denied: not to the boss']
    assert made == ['count_inbox']


async def test_an_uncaught_denial_is_a_script_failure_the_model_reads(pool):
    made: list[Any] = []
    agent = mail_agent(Script(SEND), pool, made)
    first = await agent.run('x')
    (request,) = first.output.approvals
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={request.tool_call_id: False}))
    assert answers(second.new_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 2, in <module>\n'
            "    r = await send_email(to='a@b.c', body=f'{n} new')\n"
            '        ' + '^' * 45 + '\n'
            'PermissionError: send_email() was denied: The tool call was denied.',
        )
    ]
    assert made == ['count_inbox']


async def test_two_gathered_approvals_are_asked_together_and_answered_one_each_way(pool):
    made: list[Any] = []
    code = (
        "import asyncio\n"
        "async def attempt(call):\n"
        "    try:\n"
        "        return await call\n"
        "    except PermissionError as e:\n"
        "        return str(e)\n"
        "await asyncio.gather(attempt(send_email(to='a@b.c', body='one')), attempt(archive(folder='old')), count_inbox())"
    )
    agent = mail_agent(Script(code), pool, made)
    first = await agent.run('x')
    assert asked(first.output) == ([('send_email', {'to': 'a@b.c', 'body': 'one'}), ('archive', {'folder': 'old'})], [])
    send, archive = first.output.approvals
    assert first.output.metadata == {archive.tool_call_id: {'reason': 'archiving old cannot be undone'}}
    assert INNER_ID.fullmatch(send.tool_call_id)['session'] == INNER_ID.fullmatch(archive.tool_call_id)['session']
    assert made == ['count_inbox']
    results = DeferredToolResults(approvals={send.tool_call_id: ToolDenied('not today'), archive.tool_call_id: True})
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert answers(second.new_messages()) == [['send_email() was denied: not today', 'archived old', 3]]
    assert made == ['count_inbox', 'archive old']


async def test_two_approvals_one_after_the_other_pause_twice(pool):
    made: list[Any] = []
    code = "a = await archive(folder='2023')\nb = await send_email(to='a@b.c', body=a)\n[a, b]"
    agent = mail_agent(Script(code), pool, made)
    first = await agent.run('x')
    assert asked(first.output) == ([('archive', {'folder': '2023'})], [])
    (archive,) = first.output.approvals
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={archive.tool_call_id: True}))
    assert asked(second.output) == ([('send_email', {'to': 'a@b.c', 'body': 'archived 2023'})], [])
    (send,) = second.output.approvals
    assert made == ['archive 2023']
    third = await agent.run(
        message_history=second.all_messages(),
        deferred_tool_results=DeferredToolResults(approvals={send.tool_call_id: ToolApproved(override_args={'to': 'a@b.c', 'body': 'edited'})}),
    )
    assert answers(third.new_messages()) == [['archived 2023', 'sent to a@b.c']]
    assert made == ['archive 2023', 'send_email a@b.c']
    assert answers(third.all_messages()) == [['archived 2023', 'sent to a@b.c']]


async def test_a_deferred_call_is_answered_later_with_its_value(pool):
    made: list[Any] = []
    code = "p = await lookup_price(sku='X-1')\nround(p * 1.2, 2)"
    agent = mail_agent(Script(code), pool, made)
    first = await agent.run('x')
    assert asked(first.output) == ([], [('lookup_price', {'sku': 'X-1'})])
    (call,) = first.output.calls
    assert first.output.metadata == {call.tool_call_id: {'queue': 'pricing'}}
    assert made == ['lookup_price X-1']
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(calls={call.tool_call_id: 10.0}))
    assert answers(second.new_messages()) == [12.0]
    assert made == ['lookup_price X-1']  # the answer came from outside: the tool did not run again


async def test_a_paused_script_resumes_in_another_process(pool, tmp_path):
    made: list[Any] = []
    code = "n = await count_inbox()\nr = await send_email(to='a@b.c', body=f'{n} new')\n[n, r]"
    first = await mail_agent(Script(code), pool, made).run('x')
    (request,) = first.output.approvals
    assert made == ['count_inbox']
    data = {
        'steps': [code],
        'history': ModelMessagesTypeAdapter.dump_python(first.all_messages(), mode='json'),
        'approvals': {request.tool_call_id: True},
    }
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, CHILD, str(tmp_path / 'store')], input=json.dumps(data), capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {'answers': [[3, 'sent to a@b.c']], 'output': 'done', 'made': ['send_email a@b.c']}


async def test_the_variables_of_a_conversation_come_back_in_its_next_run(pool):
    made: list[Any] = []
    script = Script("inbox = await count_inbox()\nnotes = ['first']")
    agent = mail_agent(script, pool, made)
    first = await agent.run('one')
    kept = list(pool._checkpoints._kept)  # the run's session, closed: its worker is a live checkpoint
    assert len(kept) == 1
    # the model's responses are counted over the whole history: the first run's 'done' was the second
    script.steps += ['(answered: done)', "notes.append('second')\n[inbox, notes]"]
    second = await agent.run('two', message_history=first.all_messages())
    assert answers(second.new_messages()) == [[3, ['first', 'second']]]
    assert made == ['count_inbox']
    assert kept[0] not in pool._checkpoints._kept  # the second run's fork started from it
    # The history of the first run, again: its variables as the first run left them (a fork, its
    # checkpoint used already: replayed).
    script.steps[2] = 'notes'
    again = await agent.run('two again', message_history=first.all_messages())
    assert answers(again.new_messages()) == [['first']]


async def test_without_a_store_a_call_that_needs_approval_is_refused_as_before():
    made: list[Any] = []
    result = await mail_agent(Script(SEND), None, made).run('x')
    assert answers(result.all_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n'
            '  File "main.py", line 2, in <module>\n'
            "    r = await send_email(to='a@b.c', body=f'{n} new')\n"
            '        ' + '^' * 45 + '\n'
            'PermissionError: send_email() needs approval before it runs, and calls made from run_code cannot be approved on this agent\n\n'
            'Before the failure, the script made 1 function call; whatever it did has happened:\n'
            '- count_inbox() returned 3\n'
            'Do not repeat a call that changed something.',
        )
    ]
    assert made == ['count_inbox']


async def test_answers_naming_a_call_or_session_the_script_does_not_wait_on_are_refused(pool):
    from pydantic_ai.exceptions import UserError

    from corral import SandboxStateError

    made: list[Any] = []
    agent = mail_agent(Script(SEND), pool, made)
    first = await agent.run('x')
    (request,) = first.output.approvals
    match = INNER_ID.fullmatch(request.tool_call_id)
    other_call = f'call_1__corral-{match["session"]}-7'
    with pytest.raises(UserError) as info:
        await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={other_call: True}))
    assert str(info.value) == 'deferred tool results answer calls the paused script does not wait on: [7]'
    other_session = f'call_1__corral-{"0" * 32}-{match["call"]}'
    with pytest.raises(SandboxStateError) as info:
        await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={other_session: True}))
    assert str(info.value) == f"no stored session with id {'0' * 32!r}"
    # Nothing ran, and the script still waits: the right answer resumes it.
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={request.tool_call_id: True}))
    assert answers(second.new_messages()) == [[3, 'sent to a@b.c']]
    assert made == ['count_inbox', 'send_email a@b.c']


async def test_a_handler_that_approves_the_paused_run_code_call_itself_is_refused(pool):
    from pydantic_ai.capabilities import HandleDeferredToolCalls
    from pydantic_ai.exceptions import UserError

    seen: list[list[str]] = []

    def approve_run_code_only(ctx: Any, requests: DeferredToolRequests) -> DeferredToolResults:
        seen.append([part.tool_name for part in requests.approvals])
        return DeferredToolResults(approvals={part.tool_call_id: True for part in requests.approvals if part.tool_name == 'run_code'})

    made: list[Any] = []
    agent = mail_agent(Script(SEND), pool, made)
    with pytest.raises(UserError) as info:
        await agent.run('x', capabilities=[HandleDeferredToolCalls(handler=approve_run_code_only)])
    assert str(info.value) == (
        'run_code was answered as a whole while its script waits on calls; answer those calls '
        '(the approvals and calls of the DeferredToolRequests), not run_code'
    )
    assert seen == [['send_email'], ['run_code']]
    assert made == ['count_inbox']  # the script did not run again


@pytest.mark.slow
async def test_an_approved_call_whose_script_is_then_stopped_is_not_run_again_by_the_same_answer(pool):
    from pydantic_ai.exceptions import UserError

    made: list[Any] = []
    code = "r = await send_email(to='a@b.c', body='hi')\nwhile True:\n    pass"
    agent = mail_agent(Script(code), pool, made, limits=corral.Limits(wall_time=1))
    first = await agent.run('x')
    (request,) = first.output.approvals
    results = DeferredToolResults(approvals={request.tool_call_id: True})
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
    assert answers(second.new_messages()) == [('retry', STOPPED)]
    assert made == ['send_email a@b.c']
    for _ in range(3):
        with pytest.raises(UserError) as info:
            await agent.run(message_history=first.all_messages(), deferred_tool_results=results)
        assert str(info.value) == 'deferred tool results answer calls the paused script does not wait on: [0]'
    assert made == ['send_email a@b.c']


async def test_answers_for_another_run_code_call_than_the_one_that_paused_the_session_are_refused(pool):
    """An attacker's own paused run, answered with the victim's session id in its tool call ids."""
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.messages import ToolCallPart

    made: list[Any] = []
    victim = await mail_agent(Script(SEND), pool, made).run('x')
    victim_session = INNER_ID.fullmatch(victim.output.approvals[0].tool_call_id)['session']
    attacker = mail_agent(Script(ToolCallPart('run_code', {'code': SEND}, tool_call_id='mine')), pool, made)
    own = await attacker.run('x')
    forged = DeferredToolResults(approvals={f'mine__corral-{victim_session}-1': ToolApproved(override_args={'to': 'evil@x.y', 'body': 'hi'})})
    with pytest.raises(UserError) as info:
        await attacker.run(message_history=own.all_messages(), deferred_tool_results=forged)
    assert str(info.value) == "deferred tool results for the run_code call 'mine' name a stored session whose script that call did not pause; they are refused"
    assert made == ['count_inbox', 'count_inbox']
    # the victim's own answer still resumes the victim's script
    second = await mail_agent(Script(SEND), pool, made).run(
        message_history=victim.all_messages(), deferred_tool_results=DeferredToolResults(approvals={victim.output.approvals[0].tool_call_id: True})
    )
    assert answers(second.new_messages()) == [[3, 'sent to a@b.c']]
    assert made == ['count_inbox', 'count_inbox', 'send_email a@b.c']


async def test_a_history_naming_a_session_its_run_code_call_did_not_return_is_not_forked(pool):
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.messages import ToolCallPart

    made: list[Any] = []
    victim = await mail_agent(Script(ToolCallPart('run_code', {'code': "secret = 'victim data'\n1"}, tool_call_id='victim_1')), pool, made).run('x')
    (victim_return,) = [part for message in victim.all_messages() for part in getattr(message, 'parts', []) if getattr(part, 'tool_name', None) == 'run_code' and hasattr(part, 'metadata') and part.metadata]
    own = await mail_agent(Script('2'), pool, made).run('x')
    history = own.all_messages()
    (own_return,) = [part for message in history for part in getattr(message, 'parts', []) if getattr(part, 'tool_name', None) == 'run_code' and hasattr(part, 'metadata') and part.metadata]
    assert set(own_return.metadata) >= {'corral_session_id', 'corral_session_binding'}
    for forged in (
        {'corral_session_id': victim_return.metadata['corral_session_id']},
        {'corral_session_id': victim_return.metadata['corral_session_id'], 'corral_session_binding': victim_return.metadata['corral_session_binding']},
        {'corral_session_id': victim_return.metadata['corral_session_id'], 'corral_session_binding': own_return.metadata['corral_session_binding']},
    ):
        own_return.metadata = {**own_return.metadata, **forged}
        if 'corral_session_binding' not in forged:
            del own_return.metadata['corral_session_binding']
        with pytest.raises(UserError) as info:
            await mail_agent(Script('2', '', 'secret'), pool, made).run('read it', message_history=history)
        assert str(info.value) == (
            "the latest run_code return of the message history ('call_1') names a stored session that call did not return "
            '(its corral_session_binding does not match), so it is not continued'
        )


async def test_a_tenant_per_user_keeps_one_user_s_approvals_and_histories_from_another_s_sessions(pool):
    from pydantic_ai.exceptions import UserError

    from corral import SandboxStateError

    made: list[Any] = []
    alice = mail_agent(Script(SEND), pool, made, tenant=lambda ctx: ctx.deps)
    first = await alice.run('x', deps='alice')
    (request,) = first.output.approvals
    results = DeferredToolResults(approvals={request.tool_call_id: ToolApproved(override_args={'to': 'evil@x.y', 'body': 'hi'})})
    with pytest.raises(SandboxStateError) as info:  # everything alice's client has, sent by mallory
        await mail_agent(Script(SEND), pool, made, tenant=lambda ctx: ctx.deps).run(
            message_history=first.all_messages(), deferred_tool_results=results, deps='mallory'
        )
    assert str(info.value) == f"no stored session with id {INNER_ID.fullmatch(request.tool_call_id)['session']!r}"
    second = await mail_agent(Script(SEND, 'n'), pool, made, tenant=lambda ctx: ctx.deps).run(
        message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={request.tool_call_id: True}), deps='alice'
    )
    assert answers(second.new_messages()) == [[3, 'sent to a@b.c'], 3]
    assert made == ['count_inbox', 'send_email a@b.c']
    later = Script(SEND, 'n', '', 'n + 1')
    with pytest.raises(UserError) as info:  # alice's whole history, continued as mallory
        await mail_agent(later, pool, made, tenant=lambda ctx: ctx.deps).run('go on', message_history=second.all_messages(), deps='mallory')
    assert str(info.value) == (
        "the latest run_code return of the message history ('call_2') names a stored session that call did not return "
        '(its corral_session_binding does not match), so it is not continued'
    )
    third = await mail_agent(later, pool, made, tenant=lambda ctx: ctx.deps).run('go on', message_history=second.all_messages(), deps='alice')
    assert answers(third.new_messages()) == [4]


async def test_max_tool_calls_counts_the_calls_of_a_script_across_its_pauses(pool):
    made: list[Any] = []
    code = "sent = []\nfor i in range(4):\n    sent.append(await send_email(to=f'{i}@b.c', body='hi'))\nsent"
    agent = mail_agent(Script(code), pool, made, max_tool_calls=3)
    result = await agent.run('x')
    for _ in range(3):
        (request,) = result.output.approvals
        result = await agent.run(message_history=result.all_messages(), deferred_tool_results=DeferredToolResults(approvals={request.tool_call_id: True}))
    assert made == ['send_email 0@b.c', 'send_email 1@b.c', 'send_email 2@b.c']
    assert answers(result.new_messages()) == [
        (
            'retry',
            'The script failed: Traceback (most recent call last):\n  File "main.py", line 3, in <module>\n'
            "    sent.append(await send_email(to=f'{i}@b.c', body='hi'))\n                " + '^' * 42 + '\n'
            'RuntimeError: a script may make at most 3 tool calls, and this one tried to make more; make fewer calls per script '
            '(filter first, or split the work across run_code calls)\n\n'
            'Before the failure, the script made 1 function call; whatever it did has happened:\n'
            "- send_email(to='2@b.c', body='hi') returned 'sent to 2@b.c'\nDo not repeat a call that changed something.",
        )
    ]


async def test_max_tool_calls_counts_the_calls_gathered_with_a_paused_one(pool):
    made: list[Any] = []
    code = (
        'import asyncio\n'
        "r = await asyncio.gather(send_email(to='a@b.c', body='hi'), count_inbox(), count_inbox())\n"
        'n = await count_inbox()'
    )
    agent = mail_agent(Script(code), pool, made, max_tool_calls=3)
    first = await agent.run('x')
    (request,) = first.output.approvals
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=DeferredToolResults(approvals={request.tool_call_id: True}))
    assert made == ['count_inbox', 'count_inbox', 'send_email a@b.c']
    (retry,) = answers(second.new_messages())
    assert retry[1].splitlines()[4] == (
        'RuntimeError: a script may make at most 3 tool calls, and this one tried to make more; make fewer calls per script '
        '(filter first, or split the work across run_code calls)'
    )


def test_a_tenant_is_a_str_or_a_function_and_not_for_a_remote_pool():
    from pydantic_ai.exceptions import UserError

    from corral.pydantic_ai import CodeMode

    with pytest.raises(UserError) as info:
        CodeMode(pool=corral.RemotePool('ws://127.0.0.1:9'), tenant='alice')
    assert str(info.value) == (
        "CodeMode tenant scopes the sessions of a Pool's store; a RemotePool's tenant is its API key's: give each user a key of their own"
    )
    with pytest.raises(UserError) as info:
        CodeMode(tenant=7)
    assert str(info.value) == 'CodeMode tenant must be a str or a function of the run context, not int'
    assert CodeMode(tenant='alice').tenant == 'alice'


async def test_a_tenant_function_that_gives_no_str_is_refused(pool):
    from pydantic_ai.exceptions import UserError

    made: list[Any] = []
    with pytest.raises(UserError) as info:
        await mail_agent(Script('1'), pool, made, tenant=lambda ctx: None).run('x')
    assert str(info.value) == 'CodeMode tenant must give a str, not NoneType'
