"""`corral-monty subprocess` driven with raw frames: the refusals a parent (or an attacker posing
as one) meets, each a clear error, with the child and its session going on where they can."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.monty import monty_v1_pb2 as pb
from corral.monty.codec import MAX_NODES

SOURCE = Path(__file__).resolve().parents[2] / 'src'


class Child:
    """A `corral-monty subprocess` child and its two pipes."""

    def __init__(self) -> None:
        env = {**os.environ, 'PYTHONPATH': str(SOURCE)}
        self.proc = subprocess.Popen([sys.executable, '-m', 'corral.monty', 'subprocess'], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, request: pb.ParentRequest) -> None:
        data = request.SerializeToString()
        self.raw(struct.pack('<I', len(data)) + data)

    def event(self) -> pb.ChildEvent:
        assert self.proc.stdout is not None
        head = self.proc.stdout.read(4)
        assert len(head) == 4, 'the child closed its stdout'
        event = pb.ChildEvent()
        event.ParseFromString(self.proc.stdout.read(struct.unpack('<I', head)[0]))
        return event

    def ask(self, request: pb.ParentRequest) -> pb.ChildEvent:
        self.send(request)
        return self.event()

    def configure(self, **fields: object) -> None:
        assert self.ask(pb.ParentRequest(configure=pb.Configure(protocol_version=6, **fields))).WhichOneof('kind') == 'ok'

    def feed(self, code: str, **fields: object) -> pb.ChildEvent:
        return self.ask(pb.ParentRequest(feed=pb.Feed(code=code, **fields)))


def error_text(event: pb.ChildEvent) -> tuple[str, str]:
    assert event.WhichOneof('kind') == 'error', event
    return event.error.exception.exc_type, event.error.exception.message


def complete(event: pb.ChildEvent) -> pb.MontyNode:
    assert event.WhichOneof('kind') == 'complete', event
    return event.complete.values.nodes[event.complete.value]


@pytest.fixture
def child() -> Iterator[Child]:
    child = Child()
    yield child
    child.proc.kill()
    child.proc.wait()


def test_a_feed_and_a_host_call(child: Child) -> None:
    child.configure()
    event = child.feed('x = 20\nadd(x, b=1) + 1')
    call = event.function_call
    assert (call.function_name, call.call_id) == ('add', 0)
    assert [call.values.nodes[i].int for i in call.args] == [20]
    assert [(call.values.nodes[p.key].str, call.values.nodes[p.value].int) for p in call.kwargs] == [('b', 1)]
    values = pb.Arena(nodes=[pb.MontyNode(int=21)])
    event = child.ask(pb.ParentRequest(resume_call=pb.ResumeCall(call_id=0, result=pb.ExtFunctionResult(return_value=0), values=values)))
    assert complete(event).int == 22


def test_malformed_protobuf_is_refused_and_the_session_goes_on(child: Child) -> None:
    child.configure()
    assert complete(child.feed('x = 5\nx')).int == 5
    child.raw(struct.pack('<I', 3) + b'\xff\xff\xff')
    assert error_text(child.event()) == (
        'ValueError',
        'malformed request: 3 bytes that are no ParentRequest',
    )
    assert complete(child.feed('x + 1')).int == 6


def test_an_oversized_frame_is_fatal(child: Child) -> None:
    child.raw(struct.pack('<I', 2**31) + b'\x00')
    event = child.event()
    assert event.fatal_error.message == 'a request of 2147483648 bytes is longer than the 67108864 this child reads'
    assert child.proc.wait(timeout=30) == 0


def test_an_unserved_protocol_version_is_fatal_naming_the_range(child: Child) -> None:
    event = child.ask(pb.ParentRequest(configure=pb.Configure(protocol_version=7)))
    assert event.fatal_error.message == 'protocol version 7 is not served: this child serves versions 5 to 6'
    assert child.proc.wait(timeout=30) == 0


def test_requests_out_of_turn(child: Child) -> None:
    assert error_text(child.feed('1')) == ('RuntimeError', 'feed needs a session: send Configure first')
    child.configure()
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=0, result=pb.ExtFunctionResult(return_value=0)))
    assert error_text(child.ask(answer)) == ('RuntimeError', 'resume_call is out of turn: no feed is waiting for an answer')
    assert error_text(child.ask(pb.ParentRequest(configure=pb.Configure(protocol_version=6)))) == (
        'RuntimeError',
        'Configure is out of turn: this child has a session; send Reset first',
    )
    assert complete(child.feed('2')).int == 2


def test_a_forged_call_id_is_refused_and_the_call_still_waits(child: Child) -> None:
    child.configure()
    assert child.feed('f(1) * 2').function_call.call_id == 0
    values = pb.Arena(nodes=[pb.MontyNode(int=4)])
    forged = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=7, result=pb.ExtFunctionResult(return_value=0), values=values))
    assert error_text(child.ask(forged)) == ('ValueError', 'ResumeCall answers call 7, but the child waits for call 0')
    feed = pb.ParentRequest(feed=pb.Feed(code='1'))
    assert error_text(child.ask(feed)) == ('RuntimeError', 'feed is out of turn: the child waits for resume_call')
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=0, result=pb.ExtFunctionResult(return_value=0), values=values))
    assert complete(child.ask(answer)).int == 8


def test_a_forged_future_id_is_refused(child: Child) -> None:
    child.configure()
    event = child.feed('import asyncio\nawait asyncio.gather(f(1), f(2))')
    assert event.function_call.call_id == 0
    future = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=0, result=pb.ExtFunctionResult(future=0)))
    assert child.ask(future).function_call.call_id == 1
    future = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=1, result=pb.ExtFunctionResult(future=1)))
    assert list(child.ask(future).resolve_futures.pending_call_ids) == [0, 1]
    values = pb.Arena(nodes=[pb.MontyNode(int=10), pb.MontyNode(int=20)])
    forged = pb.ParentRequest(resume_futures=pb.ResumeFutures(results=[pb.FutureResult(call_id=5, result=pb.ExtFunctionResult(return_value=0))], values=values))
    assert error_text(child.ask(forged)) == ('ValueError', 'ResumeFutures answers call 5, which is not pending; pending: [0, 1]')
    both = pb.ParentRequest(
        resume_futures=pb.ResumeFutures(
            results=[pb.FutureResult(call_id=0, result=pb.ExtFunctionResult(return_value=0)), pb.FutureResult(call_id=1, result=pb.ExtFunctionResult(return_value=1))],
            values=values,
        )
    )
    event = child.ask(both)
    assert [event.complete.values.nodes[i].int for i in complete(event).list.items] == [10, 20]


@pytest.mark.parametrize(
    ('nodes', 'message'),
    [
        ([pb.MontyNode(list=pb.Indexes(items=[0]))], 'the inputs cannot enter the sandbox: node 0 refers to node 0, which does not come before it'),
        ([pb.MontyNode(int=1), pb.MontyNode(list=pb.Indexes(items=[0, 9]))], 'the inputs cannot enter the sandbox: node 1 refers to node 9, which does not come before it'),
        ([pb.MontyNode(cycle='[...]')], 'the inputs cannot enter the sandbox: node 0: a cycle node cannot be a value sent into the sandbox'),
        ([pb.MontyNode()], 'the inputs cannot enter the sandbox: node 0 is empty'),
        ([pb.MontyNode(list=pb.Indexes()), pb.MontyNode(set=pb.Indexes(items=[0]))], "the inputs cannot enter the sandbox: node 1: unhashable type: 'list'"),
    ],
    ids=['self', 'dangling', 'cycle', 'empty', 'unhashable'],
)
def test_arenas_that_cannot_be_built_are_refused(child: Child, nodes: list[pb.MontyNode], message: str) -> None:
    child.configure()
    root = len(nodes) - 1
    event = child.feed('x', inputs=[pb.NamedRef(name='x', value=root)], values=pb.Arena(nodes=nodes))
    assert error_text(event) == ('ValueError', message)
    assert complete(child.feed('3')).int == 3


def test_a_dangling_root_is_refused(child: Child) -> None:
    child.configure()
    event = child.feed('x', inputs=[pb.NamedRef(name='x', value=5)], values=pb.Arena(nodes=[pb.MontyNode(int=1)]))
    assert error_text(event) == ('ValueError', 'the inputs cannot enter the sandbox: value index 5 is past the end of an arena of 1 nodes')


@pytest.mark.slow
def test_an_arena_of_too_many_nodes_is_refused(child: Child) -> None:
    child.configure()
    arena = pb.Arena()
    arena.nodes.extend(pb.MontyNode(boolean=True) for _ in range(MAX_NODES + 1))
    event = child.feed('x', inputs=[pb.NamedRef(name='x', value=0)], values=arena)
    assert error_text(event) == ('ValueError', f'the inputs cannot enter the sandbox: the arena has {MAX_NODES + 1} nodes, more than the {MAX_NODES} a message may carry')
    assert complete(child.feed('4')).int == 4


def test_an_os_answer_of_the_wrong_kind_is_the_scripts_error(child: Child) -> None:
    child.configure()
    event = child.feed('from pathlib import Path\nPath("/data/a.txt").read_bytes()')
    assert event.os_call.read_bytes == '/data/a.txt'
    values = pb.Arena(nodes=[pb.MontyNode(str='not bytes')])
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(return_value=0), values=values))
    assert error_text(child.ask(answer)) == ('TypeError', 'os.read: read_bytes answered str, not bytes')


def test_an_os_call_not_handled_is_a_permission_error_naming_the_path(child: Child) -> None:
    child.configure()
    event = child.feed('open("/etc/passwd").read()')
    assert event.os_call.read_bytes == '/etc/passwd'
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(not_handled=pb.Unit())))
    assert error_text(child.ask(answer)) == ('PermissionError', "Permission denied: '/etc/passwd'")



def test_paths_reach_the_parent_as_written_and_its_mounts_resolve_them(child: Child) -> None:
    # The parent's mounts are the filesystem: `..` through a folder only they know of, and a name
    # longer than Linux allows, are theirs to resolve or refuse; `os.chdir` asks them whether
    # the folder exists and keeps it, normalized, for the next feeds' relative paths.
    child.configure()
    yes = pb.Arena(nodes=[pb.MontyNode(boolean=True)])
    event = child.feed('from pathlib import Path\nPath("sub/../a.txt").exists()', cwd='/data')
    assert event.os_call.exists == '/data/sub/../a.txt'
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(return_value=0), values=yes))
    assert complete(child.ask(answer)).boolean is True
    event = child.feed('import os\nos.chdir("./sub//x/..")\nos.getcwd()')
    assert event.os_call.stat == '/data/./sub//x/..'
    folder = pb.Arena(nodes=[pb.MontyNode(int=0o40755), *[pb.MontyNode(int=0)] * 9, pb.MontyNode(tuple=pb.Indexes(items=list(range(10))))])
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(return_value=10), values=folder))
    assert complete(child.ask(answer)).str == '/data/sub'
    event = child.feed('open("../" + "a" * 300).read()')
    assert event.os_call.read_bytes == '/data/sub/../' + 'a' * 300
    raised = pb.RaisedException(exc_type='OSError', message="[Errno 36] File name too long: '/data/sub/../aaa…aaa'")
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(error=raised)))
    assert error_text(child.ask(answer)) == ('OSError', "[Errno 36] File name too long: '/data/sub/../aaa…aaa'")


def scan_reply(*entries: tuple[str, bool, bool, bool]) -> pb.Arena:
    """A `Path.scan` answer: a list of `(path, is_dir, is_file, is_symlink)` tuples."""
    nodes: list[pb.MontyNode] = []
    tuples = []
    for path, *flags in entries:
        first = len(nodes)
        nodes += [pb.MontyNode(str=path), *(pb.MontyNode(boolean=flag) for flag in flags)]
        nodes.append(pb.MontyNode(tuple=pb.Indexes(items=list(range(first, first + 4)))))
        tuples.append(len(nodes) - 1)
    nodes.append(pb.MontyNode(list=pb.Indexes(items=tuples)))
    return pb.Arena(nodes=nodes)


def test_a_folder_is_listed_with_its_kinds_in_one_scan_of_one_level(child: Child) -> None:
    child.configure()
    event = child.feed('import os\n[(e.name, e.is_dir(), e.is_file()) for e in os.scandir("/d")]')
    assert (event.os_call.scan.path, event.os_call.scan.max_depth) == ('/d', 1)
    values = scan_reply(('', True, False, False), ('a.txt', False, True, False), ('sub', True, False, True), ('gone', False, False, True))
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(return_value=len(values.nodes) - 1), values=values))
    event = child.ask(answer)
    rows = [[event.complete.values.nodes[i] for i in event.complete.values.nodes[row].tuple.items] for row in complete(event).list.items]
    assert [(name.str, is_dir.boolean, is_file.boolean) for name, is_dir, is_file in rows] == [('a.txt', False, True), ('gone', False, False), ('sub', True, False)]
    for root, expected in [(('', False, True, False), ('NotADirectoryError', "[Errno 20] Not a directory: '/d'")), (('', False, False, True), ('FileNotFoundError', "[Errno 2] No such file or directory: '/d'"))]:
        event = child.feed('os.listdir("/d")')
        values = scan_reply(root)
        answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(return_value=len(values.nodes) - 1), values=values))
        assert error_text(child.ask(answer)) == expected

def test_a_reset_while_a_call_waits_ends_the_feed_and_the_session(child: Child) -> None:
    child.configure()
    assert complete(child.feed('kept = 1\nkept')).int == 1
    assert child.feed('try:\n    f(1)\nexcept Exception:\n    g(2)').function_call.function_name == 'f'
    assert child.ask(pb.ParentRequest(reset=pb.Reset())).WhichOneof('kind') == 'ok'
    child.configure()
    assert child.feed('kept').name_lookup.name == 'kept'  # a name the new session does not have
    undefined = pb.ParentRequest(resume_name_lookup=pb.ResumeNameLookup(undefined=pb.Unit()))
    assert error_text(child.ask(undefined)) == ('NameError', "name 'kept' is not defined")


def test_a_shutdown_while_a_call_waits_ends_the_child(child: Child) -> None:
    child.configure()
    assert child.feed('f(1)').function_call.function_name == 'f'
    assert child.ask(pb.ParentRequest(shutdown=pb.Shutdown())).WhichOneof('kind') == 'ok'
    assert child.proc.wait(timeout=30) == 0


def test_a_parents_os_error_reaches_the_script_with_its_errno_and_paths(child: Child) -> None:
    child.configure()
    event = child.feed('import os\ntry:\n    os.rename("/a", "/a/moved")\nexcept OSError as e:\n    r = [type(e).__name__, e.errno, e.filename, e.filename2]\nr')
    raised = pb.RaisedException(exc_type='OSError', message="[Errno 22] Invalid argument: '/a' -> '/a/moved'")
    answer = pb.ParentRequest(resume_call=pb.ResumeCall(call_id=event.os_call.call_id, result=pb.ExtFunctionResult(error=raised)))
    event = child.ask(answer)
    assert [event.complete.values.nodes[i].WhichOneof('kind') for i in complete(event).list.items] == ['str', 'int', 'str', 'str']
    assert [getattr(event.complete.values.nodes[i], event.complete.values.nodes[i].WhichOneof('kind')) for i in complete(event).list.items] == ['OSError', 22, '/a', '/a/moved']


def test_a_parent_that_goes_away_while_a_call_waits_ends_the_child(child: Child) -> None:
    # A child serves one parent, which alone waits on a call it never answers; once the parent
    # closes its end, the feed ends, its worker is killed and the child exits.
    child.configure()
    assert child.feed('while True:\n    f(1)').function_call.function_name == 'f'
    assert child.proc.stdin is not None
    child.proc.stdin.close()
    assert child.proc.wait(timeout=30) == 0
    assert child.proc.stdout is not None and child.proc.stdout.read() == b''


def test_dump_and_load_carry_a_session_to_another_checkout(child: Child) -> None:
    child.configure()
    assert complete(child.feed('kept = [1, 2]\nlen(kept)')).int == 2
    state = child.ask(pb.ParentRequest(dump=pb.Dump())).dump_result.state
    assert child.ask(pb.ParentRequest(reset=pb.Reset())).WhichOneof('kind') == 'ok'
    assert child.ask(pb.ParentRequest(load=pb.Load(state=state))).WhichOneof('kind') == 'ok'
    assert complete(child.feed('sum(kept)')).int == 3
    assert child.ask(pb.ParentRequest(reset=pb.Reset())).WhichOneof('kind') == 'ok'
    altered = pb.ParentRequest(load=pb.Load(state=state[:-1] + bytes([state[-1] ^ 1])))
    assert error_text(child.ask(altered)) == (
        'ValueError',
        "the session state was altered, or signed with another key: its signature does not match this pool's state key",
    )
    child.configure()  # the refused Load left no session behind
    assert complete(child.feed('5')).int == 5


def test_output_goes_out_in_runs_before_the_turn_ends(child: Child) -> None:
    child.configure()
    child.send(pb.ParentRequest(feed=pb.Feed(code='import sys\nfor i in range(3):\n    print(i)\nprint("oops", file=sys.stderr)\nprint("end")\n7')))
    printed = child.event()
    assert [(segment.stream, segment.text) for segment in printed.print.segments] == [
        (pb.PRINT_STREAM_STDOUT, '0\n1\n2\n'),
        (pb.PRINT_STREAM_STDERR, 'oops\n'),
        (pb.PRINT_STREAM_STDOUT, 'end\n'),
    ]
    assert complete(child.event()).int == 7


@pytest.mark.parametrize('name', ['foo.bar', 'x = 1\nimport os #', 'class', ''])
def test_an_input_name_that_is_no_identifier_is_refused(child: Child, name: str) -> None:
    child.configure()
    event = child.feed('1', inputs=[pb.NamedRef(name=name, value=0)], values=pb.Arena(nodes=[pb.MontyNode(int=1)]))
    assert error_text(event) == ('SyntaxError', f'Input name {name!r} not a valid identifier')


def test_an_unknown_type_check_format_is_refused_and_the_child_goes_on(child: Child) -> None:
    event = child.ask(pb.ParentRequest(configure=pb.Configure(protocol_version=6, type_check=True, type_check_format=99)))  # type: ignore[arg-type]
    assert error_text(event) == (
        'ValueError',
        'unknown type check format 99, expected one of: full, concise, azure, json, jsonlines, rdjson, pylint, gitlab, github',
    )
    child.configure(type_check=True, type_check_format=pb.TYPE_CHECK_FORMAT_PYLINT)
    event = child.feed('x: int = "a"')
    assert event.typing_error.diagnostics == 'main.py:1: [invalid-assignment] Object of type `Literal["a"]` is not assignable to `int`\n'


@pytest.mark.parametrize(
    'raised,expected',
    [
        (  # bytes where the class wants text: the message alone, as the ValueError it is a kind of
            pb.RaisedException(
                exc_type='UnicodeEncodeError', message='m', data=pb.ExcData(unicode=pb.UnicodeErrorData(encoding='ascii', object_bytes=b'x', start=0, end=1, reason='r'))
            ),
            ('ValueError', 'm'),
        ),
        (  # offsets past any index
            pb.RaisedException(
                exc_type='UnicodeDecodeError', message='m', data=pb.ExcData(unicode=pb.UnicodeErrorData(encoding='ascii', object_bytes=b'x', start=2**64 - 1, end=1, reason='r'))
            ),
            ('ValueError', 'm'),
        ),
        (  # data of another class's kind
            pb.RaisedException(exc_type='UnicodeDecodeError', message='m', data=pb.ExcData(json=pb.JsonErrorData(msg='x', doc='y', pos=0))),
            ('ValueError', 'm'),
        ),
        (  # a position past the document still makes a JSONDecodeError, as CPython's constructor does
            pb.RaisedException(exc_type='json.JSONDecodeError', message='m', data=pb.ExcData(json=pb.JsonErrorData(msg='bad', doc='[1', pos=2**64 - 1))),
            ('JSONDecodeError', 'bad: line 1 column 18446744073709551616 (char 18446744073709551615)'),
        ),
        (pb.RaisedException(exc_type='os.system', message='m'), ('RuntimeError', 'm')),  # a dotted name of nothing known
    ],
)
def test_forged_exception_data_from_the_parent_is_the_message_alone(child: Child, raised: pb.RaisedException, expected: tuple[str, str]) -> None:
    child.configure()
    event = child.feed('try:\n    f()\nexcept Exception as e:\n    r = type(e).__name__ + "|" + str(e)\nr')
    answer = pb.ResumeCall(call_id=event.function_call.call_id, result=pb.ExtFunctionResult(error=raised))
    assert complete(child.ask(pb.ParentRequest(resume_call=answer))).str == '|'.join(expected)
    assert complete(child.feed('1 + 1')).int == 2


@pytest.mark.parametrize(
    ('exc_type', 'expected'),
    [('TimeoutError', 'TimeoutError'), ('json.JSONDecodeError', 'json.JSONDecodeError'), ('not a name', 'RuntimeError')],
)
def test_abort_feed_ends_the_feed_where_the_script_cannot_catch_it(child: Child, exc_type: str, expected: str) -> None:
    child.configure()
    event = child.feed('n = 0\ntry:\n    f()\nexcept BaseException:\n    n = 1\nn')
    assert event.WhichOneof('kind') == 'function_call'
    abort = pb.AbortFeed(exception=pb.RaisedException(exc_type=exc_type, message='sleep limit exceeded: 625ms > 250ms'))
    assert error_text(child.ask(pb.ParentRequest(abort_feed=abort))) == (expected, 'sleep limit exceeded: 625ms > 250ms')
    assert complete(child.feed('n')).int == 0


def test_a_feeds_working_folder_rides_in_a_dump(child: Child) -> None:
    child.configure()
    assert complete(child.feed('import os\nos.getcwd()', cwd='/data/in')).str == '/data/in'
    state = child.ask(pb.ParentRequest(dump=pb.Dump())).dump_result.state
    assert child.ask(pb.ParentRequest(reset=pb.Reset())).WhichOneof('kind') == 'ok'
    assert child.ask(pb.ParentRequest(load=pb.Load(state=state))).WhichOneof('kind') == 'ok'
    assert complete(child.feed('os.getcwd()')).str == '/data/in'  # a feed naming no folder keeps the session's


def test_an_eager_calls_awaited_answer_must_name_that_call_alone(child: Child) -> None:
    child.configure()
    call = child.feed('(await f(1)) * 2').function_call
    assert (call.call_id, call.allow_eager_await) == (0, True)
    values = pb.Arena(nodes=[pb.MontyNode(int=4)])

    def futures(*ids: int) -> pb.ParentRequest:
        results = [pb.FutureResult(call_id=i, result=pb.ExtFunctionResult(return_value=0)) for i in ids]
        return pb.ParentRequest(resume_futures=pb.ResumeFutures(results=results, values=values))

    assert error_text(child.ask(futures(7))) == ('ValueError', 'ResumeFutures answers calls [7], but the child waits for call 0')
    assert error_text(child.ask(futures(0, 1))) == ('ValueError', 'ResumeFutures answers calls [0, 1], but the child waits for call 0')
    assert complete(child.ask(futures(0))).int == 8
    gathered = child.feed('import asyncio\n(await asyncio.gather(f(1)))[0]').function_call
    assert gathered.allow_eager_await is False  # another task could run: the parent answers it later


def test_abort_feed_while_gathered_calls_wait_on_their_futures(child: Child) -> None:
    child.configure()
    code = 'import asyncio\ntry:\n    r = await asyncio.gather(f(), g(), return_exceptions=True)\nexcept BaseException as e:\n    r = e\nr'
    assert child.feed(code).function_call.function_name == 'f'
    future = pb.ExtFunctionResult(future=0)
    assert child.ask(pb.ParentRequest(resume_call=pb.ResumeCall(call_id=0, result=future))).function_call.function_name == 'g'
    event = child.ask(pb.ParentRequest(resume_call=pb.ResumeCall(call_id=1, result=future)))
    assert list(event.resolve_futures.pending_call_ids) == [0, 1]
    abort = pb.AbortFeed(exception=pb.RaisedException(exc_type='RuntimeError', message='suspension limit 3 exceeded'))
    assert error_text(child.ask(pb.ParentRequest(abort_feed=abort))) == ('RuntimeError', 'suspension limit 3 exceeded')
    assert complete(child.feed('2')).int == 2
