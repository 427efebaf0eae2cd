"""The schema of Monty's wire protocol, as the project writes it, and protoc's module for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.monty import monty_v1_pb2 as pb

PACKAGE = Path(__file__).resolve().parents[2] / 'src' / 'corral' / 'monty'


def test_the_committed_module_is_protocs_output_for_the_schema(tmp_path: Path) -> None:
    protoc = pytest.importorskip('grpc_tools.protoc')
    source = tmp_path / 'corral' / 'monty'
    source.mkdir(parents=True)
    (source / 'monty_v1.proto').write_bytes((PACKAGE / 'monty_v1.proto').read_bytes())
    assert protoc.main(['protoc', f'-I{tmp_path}', f'--python_out={tmp_path}', 'corral/monty/monty_v1.proto']) == 0
    assert (source / 'monty_v1_pb2.py').read_text() == (PACKAGE / 'monty_v1_pb2.py').read_text()


def test_field_numbers_the_clients_rely_on() -> None:
    request = pb.ParentRequest.DESCRIPTOR
    assert {field.name: field.number for field in request.fields} == {
        'configure': 1, 'install_dependencies': 2, 'feed': 3, 'resume_call': 4, 'resume_name_lookup': 5,
        'resume_futures': 6, 'dump': 7, 'load': 8, 'reset': 9, 'shutdown': 10, 'abort_feed': 11, 'trace_parent': 20,
    }
    event = pb.ChildEvent.DESCRIPTOR
    assert {field.name: field.number for field in event.fields} == {
        'print': 1, 'function_call': 2, 'os_call': 3, 'name_lookup': 4, 'resolve_futures': 5, 'complete': 6, 'error': 7,
        'typing_error': 8, 'dump_result': 9, 'ok': 10, 'fatal_error': 11, 'shutdown': 12, 'total_execution_micros': 20,
        'max_suspensions': 22, 'restored_script_name': 23, 'feed_execution_micros': 24, 'max_feed_duration_micros': 25,
        'max_turn_duration_micros': 26, 'max_total_sleep_micros': 27, 'session_id': 28,
    }
    assert pb.MontyNode.DESCRIPTOR.fields_by_name['int'].type == pb.MontyNode.DESCRIPTOR.fields_by_name['int'].TYPE_SINT64
    assert pb.MontyNode.DESCRIPTOR.fields_by_name['decimal'].number == 33


def test_a_frame_of_the_reference_client_decodes() -> None:
    # The bytes pydantic_monty 1.4.0 sends for `feed_run('1 + 1')` on a fresh session.
    request = pb.ParentRequest.FromString(b'\x1a\x0c\n\x051 + 1\x1a\x00*\x01/')
    assert (request.feed.code, request.feed.cwd) == ('1 + 1', '/')
