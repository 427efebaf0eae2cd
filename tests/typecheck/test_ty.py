"""Tests for corral.typecheck (ty 0.0.99 must be installed: it is a dependency)."""

from __future__ import annotations

import asyncio
import os
import stat
import tempfile
import textwrap

import pytest

from corral import SandboxCheckerError
from corral.examples.billing import BILLING_STUB
from corral.typecheck import TypeChecker
from corral.typecheck import _render

from .scripts import ASYNC_STUBS, TOP_LEVEL_ASYNC

ORDER_STUBS = "\nasync def get_order(order_id: str) -> dict:\n    '''Return one order, with its `status` and number of `items`.'''\n"

BILLING_CODE = "\nfrom billing import list_invoices\n\nunpaid = list_invoices('cus_1', status='unpaid')\nsum(i['amount'] for i in unpaid)\n"

ORDER_EXPECTED = """\
error[invalid-argument-type]: Argument to function `get_order` is incorrect
 --> main.py:1:17
  |
1 | await get_order(42)
  |                 ^^ Expected `str`, found `Literal[42]`
info: Function defined here
 --> repl_type_stubs.pyi:2:11
  |
2 | async def get_order(order_id: str) -> dict:
  |           ^^^^^^^^^ ------------- Parameter declared here
3 |     '''Return one order, with its `status` and number of `items`.'''
  |"""

BILLING_EXPECTED = """\
error[invalid-argument-type]: Argument to function `list_invoices` is incorrect
 --> main.py:4:33
  |
2 | from billing import list_invoices
3 |
4 | unpaid = list_invoices('cus_1', status='unpaid')
  |                                 ^^^^^^^^^^^^^^^ Expected `Literal["paid", "open", "void"] | None`, found `Literal["unpaid"]`
5 | sum(i['amount'] for i in unpaid)
  |
info: Function defined here
  --> billing.pyi:10:5
   |
 8 |     status: Literal['paid', 'open', 'void']
 9 |
10 | def list_invoices(customer_id: str, status: Literal['paid', 'open', 'void'] | None = None) -> list[Invoice]: ...
   |     ^^^^^^^^^^^^^                   ----------------------------------------------------- Parameter declared here

error[invalid-key]: Unknown key "amount" for TypedDict `Invoice`
 --> main.py:5:7
  |
4 | unpaid = list_invoices('cus_1', status='unpaid')
5 | sum(i['amount'] for i in unpaid)
  |     - ^^^^^^^^ Unknown key "amount"
  |     |
  |     TypedDict `Invoice`"""


@pytest.fixture
async def checker():
    tc = TypeChecker()
    yield tc
    await tc.aclose()


# ------------------------------------------------------------ product examples


async def test_stub_function_used_without_import(checker: TypeChecker) -> None:
    assert await checker.check('await get_order(42)', stubs=ORDER_STUBS) == ORDER_EXPECTED


async def test_module_stub(checker: TypeChecker) -> None:
    assert await checker.check(BILLING_CODE, modules={'billing': BILLING_STUB}) == BILLING_EXPECTED


async def test_corrected_script_is_clean(checker: TypeChecker) -> None:
    code = (
        "\nfrom billing import list_invoices\n\nunpaid = list_invoices('cus_1', status='open')\n"
        "sum(i['amount_cents'] for i in unpaid) / 100\n"
    )
    assert await checker.check(code, modules={'billing': BILLING_STUB}) is None


async def test_clean_script_with_stubs(checker: TypeChecker) -> None:
    code = "order = await get_order('o_1')\nprint(len(order), order['status'])\n"
    assert await checker.check(code, stubs=ORDER_STUBS) is None


async def test_builtins_still_work_with_stubs(checker: TypeChecker) -> None:
    result = await checker.check("len(1)\nprint(get_order)\n", stubs=ORDER_STUBS)
    assert result is not None
    assert result.startswith('error[invalid-argument-type]: Argument to function `len` is incorrect\n')
    assert 'unresolved-reference' not in result
    assert result.count('\n\nerror') == 0  # only the len() error


# --------------------------------------------------------------------- context


async def test_context_variable_type_and_line_numbers(checker: TypeChecker) -> None:
    result = await checker.check('y: str = x', context=['x = 1'])
    assert result == (
        'error[invalid-assignment]: Object of type `Literal[1]` is not assignable to `str`\n'
        ' --> main.py:1:10\n'
        '  |\n'
        '1 | y: str = x\n'
        '  |    ---   ^ Incompatible value of type `Literal[1]`\n'
        '  |    |\n'
        '  |    Declared type'
    )


async def test_future_imports_open_the_file_wherever_the_snippet_stands(checker: TypeChecker) -> None:
    # each feed ran as a file of its own: its `from __future__` import is valid where it opens that feed
    code = 'from __future__ import annotations\ndef f(n: Later) -> Later:\n    return n\nclass Later:\n    pass\n'
    assert await checker.check(code, context=['x = 1']) is None
    assert await checker.check('x + 1', context=['x = 1', code]) is None
    result = await checker.check('from __future__ import annotations\ny: str = x', context=['x = 1'])
    assert result is not None and ' --> main.py:2:10' in result  # the script's own line numbers


async def test_context_variable_is_usable(checker: TypeChecker) -> None:
    assert await checker.check('x + 1', context=['x = 1']) is None


async def test_context_function(checker: TypeChecker) -> None:
    context = ['def add(a: int, b: int) -> int:\n    return a + b', 'total = add(1, 2)\n']
    assert await checker.check('print(add(total, 3) + 1)', context=context) is None
    result = await checker.check('\nadd(total, "3")\n', context=context)
    # The sub-diagnostic pointing at `add` in an earlier snippet is dropped,
    # and nothing from the earlier snippets is shown.
    assert result == (
        'error[invalid-argument-type]: Argument to function `add` is incorrect\n'
        ' --> main.py:2:12\n'
        '  |\n'
        '2 | add(total, "3")\n'
        '  |            ^^^ Expected `int`, found `Literal["3"]`'
    )


async def test_context_errors_are_not_reported(checker: TypeChecker) -> None:
    context = ['x: int = "not an int"\nundefined_name\n', 'await get_order(1)']
    assert await checker.check('print(x)', context=context, stubs=ORDER_STUBS) is None


async def test_declaration_in_context_is_not_shown(checker: TypeChecker) -> None:
    result = await checker.check('x = "s"\n', context=['x: int = 1'])
    assert result == (
        'error[invalid-assignment]: Object of type `Literal["s"]` is not assignable to `int`\n'
        ' --> main.py:1:5\n'
        '  |\n'
        '1 | x = "s"\n'
        '  |     ^^^ Incompatible value of type `Literal["s"]`'
    )


async def test_fix_diff_dropped_with_context(checker: TypeChecker) -> None:
    result = await checker.check('reveal_type(x)\n', context=['x = 1'])
    assert result is not None
    assert 'help: Import `reveal_type` from `typing`\n\n' in result
    assert 'x = 1' not in result and '+ from typing' not in result
    assert 'unsafe fix' not in result


# ---------------------------------------------------------------------- async


async def test_top_level_async_constructs_are_valid(checker: TypeChecker) -> None:
    code = TOP_LEVEL_ASYNC + textwrap.dedent(
        """\
        results = [await fetch(i) for i in range(3)]
        pairs = {i: await fetch(i) for i in range(3)}
        print(total, squares, results, pairs, f"{await fetch(2)}")
        """
    )
    assert await checker.check(code, stubs=ASYNC_STUBS) is None


async def test_await_inside_sync_function_is_still_an_error(checker: TypeChecker) -> None:
    code = 'def f():\n    return await fetch(1)\n\nvalue = await fetch(2)\n'
    result = await checker.check(code, stubs='async def fetch(n: int) -> int: ...\n')
    assert result == (
        'error[invalid-syntax]: `await` outside of an asynchronous function\n'
        ' --> main.py:2:12\n'
        '  |\n'
        '1 | def f():\n'
        '2 |     return await fetch(1)\n'
        '  |            ^^^^^^^^^^^^^^\n'
        '3 |\n'
        '4 | value = await fetch(2)\n'
        '  |'
    )


async def test_other_syntax_errors_are_kept(checker: TypeChecker) -> None:
    result = await checker.check('x = (1,\nawait fetch(1)\n', stubs='async def fetch(n: int) -> int: ...\n')
    assert result is not None
    assert 'error[invalid-syntax]' in result
    assert 'outside of an asynchronous function' not in result


# ------------------------------------------------------------------- rendering


async def test_multi_digit_line_numbers(checker: TypeChecker) -> None:
    lines = [f'v{i} = {i}' for i in range(1, 12)]
    lines.insert(11, 'oops: str = v3')  # line 12
    lines += ['v13 = 13', 'v14 = 14', 'v15 = 15', 'v16 = 16']
    result = await checker.check('\n'.join(lines) + '\n')
    assert result == (
        'error[invalid-assignment]: Object of type `Literal[3]` is not assignable to `str`\n'
        '  --> main.py:12:13\n'
        '   |\n'
        '10 | v10 = 10\n'
        '11 | v11 = 11\n'
        '12 | oops: str = v3\n'
        '   |       ---   ^^ Incompatible value of type `Literal[3]`\n'
        '   |       |\n'
        '   |       Declared type\n'
        '13 | v13 = 13\n'
        '14 | v14 = 14\n'
        '   |'
    )


async def test_multiline_annotation_context_is_indented(checker: TypeChecker) -> None:
    code = 'a = 1\nb = 2\nx: int = {\n    "k": 1,\n}\nc = 3\n\nd = 4\n'
    result = await checker.check(code)
    assert result == (
        'error[invalid-assignment]: Object of type `dict[str, int]` is not assignable to `int`\n'
        ' --> main.py:3:10\n'
        '  |\n'
        '1 |   a = 1\n'
        '2 |   b = 2\n'
        '3 |   x: int = {\n'
        '  |  ____---___^\n'
        '  | |    |\n'
        '  | |    Declared type\n'
        '4 | |     "k": 1,\n'
        '5 | | }\n'
        '  | |_^ Incompatible value of type `dict[str, int]`\n'
        '6 |   c = 3\n'
        '  |'
    )


async def test_snippets_far_apart_stay_separate(checker: TypeChecker) -> None:
    code = 'x: int = 1\n' + ''.join(f'a{i} = {i}\n' for i in range(6)) + 'x = "s"\n'
    result = await checker.check(code)
    assert result == (
        'error[invalid-assignment]: Object of type `Literal["s"]` is not assignable to `int`\n'
        ' --> main.py:8:5\n'
        '  |\n'
        '6 | a4 = 4\n'
        '7 | a5 = 5\n'
        '8 | x = "s"\n'
        '  |     ^^^ Incompatible value of type `Literal["s"]`\n'
        '  |\n'
        ' ::: main.py:1:4\n'
        '  |\n'
        '1 | x: int = 1\n'
        '  |    --- Declared type\n'
        '2 | a0 = 0\n'
        '3 | a1 = 1\n'
        '  |'
    )


async def test_snippets_close_together_are_merged(checker: TypeChecker) -> None:
    code = 'x: int = 1\na = 1\nb = 2\nc = 3\nx = "s"\n'
    result = await checker.check(code)
    assert result == (
        'error[invalid-assignment]: Object of type `Literal["s"]` is not assignable to `int`\n'
        ' --> main.py:5:5\n'
        '  |\n'
        '1 | x: int = 1\n'
        '  |    --- Declared type\n'
        '2 | a = 1\n'
        '3 | b = 2\n'
        '4 | c = 3\n'
        '5 | x = "s"\n'
        '  |     ^^^ Incompatible value of type `Literal["s"]`'
    )


async def test_stdlib_definition_gets_context(checker: TypeChecker) -> None:
    result = await checker.check('len(1)')
    assert result is not None
    assert '\ninfo: Function defined here\n    --> stdlib/builtins.pyi:' in result
    assert ' | def len(obj: Sized, /) -> int:\n' in result


def _ty_raw(code: str, tmp_path) -> str:
    import subprocess

    from ty import find_ty_bin

    (tmp_path / 'ty.toml').write_text('')
    (tmp_path / 'main.py').write_text(code)
    done = subprocess.run(
        [find_ty_bin(), 'check', '--project', '.', '--output-format', 'full', '--no-progress',
         '--color', 'never', '--python-version', '3.11', 'main.py'],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stdout


def test_parser_round_trips_ty_output(tmp_path) -> None:
    code = textwrap.dedent(
        """\
        reveal_type(1)
        x: int = {
            'a': 1,
        }
        def f(
            a: int,
        ) -> int:
            return "s"
        import json
        json.dumps(1, indent=object())
        y: list[int] = [1, "a"]
        class A:
            def m(self) -> int: ...
        A().m(1)
        A().zzz
        q = 1 +\t"a"
        """
    )
    raw = _ty_raw(code, tmp_path)
    diags = _render.parse_output(raw)
    assert len(diags) >= 8
    rendered = '\n\n'.join(_render.render_diagnostic(d) for d in diags)
    assert rendered == raw.rstrip('\n').rsplit('\n\n', 1)[0]


def test_normalize_line() -> None:
    assert _render.normalize_line('\tx = "\x1b"\u200d') == '    x = "\u241b"'
    assert _render.split_lines('a\r\nb\rc\n') == ['a', 'b', 'c', '']


# ------------------------------------------------------------- infrastructure


async def test_temporary_folder_never_appears(checker: TypeChecker) -> None:
    code = 'import does_not_exist\nimport billing\nopen(1)\n'
    result = await checker.check(code, modules={'billing': BILLING_STUB})
    assert result is not None
    assert 'Cannot resolve imported module `does_not_exist`' in result
    root = checker._root
    assert root is not None
    for needle in (root, os.path.realpath(root), tempfile.gettempdir(), 'corral-ty-', 'site-packages'):
        assert needle not in result


@pytest.mark.slow
async def test_concurrent_checks(checker: TypeChecker) -> None:
    async def one(i: int) -> None:
        code = f'value{i}: str = {i}\n'
        result = await checker.check(code, stubs=ORDER_STUBS if i % 2 else None)
        assert result == (
            f'error[invalid-assignment]: Object of type `Literal[{i}]` is not assignable to `str`\n'
            f' --> main.py:1:{len(f"value{i}: str = ") + 1}\n'
            '  |\n'
            f'1 | value{i}: str = {i}\n'
            f'  |{" " * len(f" value{i}: ")}---   {"^" * len(str(i))} Incompatible value of type `Literal[{i}]`\n'
            f'  |{" " * len(f" value{i}: ")}|\n'
            f'  |{" " * len(f" value{i}: ")}Declared type'
        )

    await asyncio.gather(*(one(i) for i in range(10)))
    results = await asyncio.gather(
        *(checker.check('await get_order(42)', stubs=ORDER_STUBS) for _ in range(5)),
        *(checker.check(BILLING_CODE, modules={'billing': BILLING_STUB}) for _ in range(5)),
    )
    assert results == [ORDER_EXPECTED] * 5 + [BILLING_EXPECTED] * 5
    assert len(checker._free) <= checker.max_idle_slots


async def test_files_change_between_checks(checker: TypeChecker) -> None:
    # Same folder reused: stubs and modules are rewritten or removed.
    assert await checker.check('await get_order(42)', stubs=ORDER_STUBS) == ORDER_EXPECTED
    assert await checker.check("await get_order('a')", stubs=ORDER_STUBS) is None
    other = 'async def get_order(order_id: int) -> dict: ...\n'
    assert await checker.check('await get_order(42)', stubs=other) is None
    result = await checker.check('await get_order(42)')
    assert result is not None and 'Name `get_order` used when not defined' in result
    assert await checker.check(BILLING_CODE, modules={'billing': BILLING_STUB}) == BILLING_EXPECTED
    result = await checker.check(BILLING_CODE)
    assert result is not None and 'Cannot resolve imported module `billing`' in result


async def test_script_name_and_packages(checker: TypeChecker) -> None:
    modules = {'shop.orders': 'def count() -> int: ...\n', 'shop': 'VERSION: str\n'}
    code = 'from shop.orders import count\nimport shop\nn: str = count()\nprint(shop.VERSION)\n'
    result = await checker.check(code, script_name='cell_3.py', modules=modules)
    assert result is not None
    assert result.splitlines()[1] == ' --> cell_3.py:3:10'
    with pytest.raises(ValueError):
        await checker.check('1', script_name='../main.py')
    with pytest.raises(ValueError):
        await checker.check('1', script_name='repl_type_stubs.py')
    with pytest.raises(ValueError):
        await checker.check('1', modules={'repl_type_stubs': ''})
    with pytest.raises(ValueError):
        await checker.check('1', modules={'bad-name': ''})


async def test_user_and_parent_configuration_ignored(tmp_path, monkeypatch) -> None:
    # A pyproject.toml above the checker's folder and a user-level ty.toml that
    # would silence the error must both be ignored.
    (tmp_path / 'pyproject.toml').write_text(
        '[project]\nname = "x"\nrequires-python = ">=3.8"\n'
        '[tool.ty.rules]\ninvalid-argument-type = "ignore"\n'
    )
    config = tmp_path / 'xdg' / 'ty'
    config.mkdir(parents=True)
    (config / 'ty.toml').write_text('[rules]\ninvalid-argument-type = "ignore"\n')
    monkeypatch.setenv('XDG_CONFIG_HOME', str(tmp_path / 'xdg'))
    monkeypatch.setenv('TY_OUTPUT_FORMAT', 'concise')
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    tc = TypeChecker()
    try:
        assert await tc.check('await get_order(42)', stubs=ORDER_STUBS) == ORDER_EXPECTED
    finally:
        await tc.aclose()


async def test_aclose_removes_folders() -> None:
    tc = TypeChecker()
    assert await tc.check('x = 1') is None
    root = tc._root
    assert root is not None and os.path.isdir(root)
    await tc.aclose()
    assert not os.path.exists(root)
    with pytest.raises(SandboxCheckerError) as error:
        await tc.check('x = 1')
    assert str(error.value) == 'the type checker could not check the script, so it did not run: TypeChecker is closed'



async def test_missing_ty_raises_a_checker_error(monkeypatch) -> None:
    import ty

    def missing() -> str:
        raise FileNotFoundError('no ty binary')

    monkeypatch.setattr(ty, 'find_ty_bin', missing)
    tc = TypeChecker()
    with pytest.raises(SandboxCheckerError) as error:
        await tc.check('x = 1')
    assert str(error.value) == 'the type checker could not check the script, so it did not run: ty type checker executable not found: no ty binary'
    await tc.aclose()


async def test_crashing_ty_raises_a_checker_error(tmp_path) -> None:
    fake = tmp_path / 'fake-ty'
    fake.write_text('#!/bin/sh\necho "ty failed: something broke" >&2\nexit 101\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    tc = TypeChecker()
    tc._ty_bin = str(fake)
    try:
        with pytest.raises(SandboxCheckerError) as error:
            await tc.check('x = 1')
        assert str(error.value) == (
            'the type checker could not check the script, so it did not run: ty type checker failed (exit code 101): ty failed: something broke'
        )
        # The checker still works once ty is back.
        tc._ty_bin = None
        assert await tc.check('x = 1') is None
    finally:
        await tc.aclose()


async def test_cancellation_kills_ty_and_frees_the_folder(checker: TypeChecker) -> None:
    task = asyncio.ensure_future(checker.check('x: int = "a"'))
    await asyncio.sleep(0.005)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await checker.check('x: int = 1') is None


def test_vendored_typeshed_reader() -> None:
    from ty import find_ty_bin

    from corral.typecheck._typeshed import VendoredTypeshed

    reader = VendoredTypeshed(os.fsdecode(find_ty_bin()))
    text = reader.read('stdlib/builtins.pyi')
    assert text is not None
    assert _render.split_lines(text)[4200] == 'def len(obj: Sized, /) -> int:'
    assert reader.read('stdlib/does_not_exist.pyi') is None


async def test_stdlib_context_lines(checker: TypeChecker) -> None:
    result = await checker.check('len(1)')
    assert result is not None
    assert result.endswith(
        'info: Function defined here\n'
        '    --> stdlib/builtins.pyi:4201:5\n'
        '     |\n'
        '4199 |     """\n'
        '4200 |\n'
        '4201 | def len(obj: Sized, /) -> int:\n'
        '     |     ^^^ ---------- Parameter declared here\n'
        '4202 |     """Return the number of items in a container."""\n'
        '     |'
    )


async def test_syntax_error_at_end_of_file(checker: TypeChecker) -> None:
    assert await checker.check('a = 1\nb = 2\nx = (1,\n') == (
        'error[invalid-syntax]: unexpected EOF while parsing\n'
        ' --> main.py:4:1\n'
        '  |\n'
        '2 | b = 2\n'
        '3 | x = (1,\n'
        '4 |\n'
        '  | ^'
    )


async def test_a_dict_variable_passed_for_a_typed_dict_gets_how_to_pass_it(checker: TypeChecker) -> None:
    stubs = 'from typing import TypedDict\n\nclass Order(TypedDict):\n    id: str\n    qty: int\n\ndef ship(order: Order) -> int: ...\ndef count(n: int) -> int: ...\n'
    module = 'import typing\n\nclass Item(typing.TypedDict):\n    sku: str\n\ndef add(item: Item) -> None: ...\n'
    code = "d = {'id': 'a', 'qty': 1}\nship(d)\nship({'id': 'a', 'qty': 1})\no: Order = {'id': 'a', 'qty': 1}\nship(o)\nfrom shop import add\ni = {'sku': 'x'}\nadd(i)\ncount({'n': 1})"
    result = await checker.check(code, stubs=stubs, modules={'shop': module})
    assert result is not None
    hints = [line for line in result.splitlines() if 'is a TypedDict' in line]
    assert hints == [
        'info: `Order` is a TypedDict: a dict bound to a variable before the call is a plain `dict` to the checker; '
        'annotate the variable (`x: Order = {...}`) or write the dict in the call',
        'info: `Item` is a TypedDict: a dict bound to a variable before the call is a plain `dict` to the checker; '
        'annotate the variable (`x: Item = {...}`) or write the dict in the call',
    ]
    assert [line for line in result.splitlines() if line.startswith('error[')] == [
        'error[invalid-argument-type]: Argument to function `ship` is incorrect',
        'error[invalid-argument-type]: Argument to function `add` is incorrect',
        'error[invalid-argument-type]: Argument to function `count` is incorrect',
    ]


# ------------------------------------------------------------ one check's files reach no later check


@pytest.mark.parametrize(
    'code,headline',
    [
        ('from a import SECRET', 'error[import-not-found]: Cannot resolve imported module `a`\n --> b.py:1:6'),
        ('import a', 'error[import-not-found]: Cannot resolve imported module `a`\n --> b.py:1:8'),
        ('secret_stub', 'error[unresolved-reference]: Name `secret_stub` used when not defined\n --> b.py:1:1'),
        ('from repl_type_stubs import secret_stub', 'error[import-not-found]: Cannot resolve imported module `repl_type_stubs`\n --> b.py:1:6'),
        ('SECRET', 'error[unresolved-reference]: Name `SECRET` used when not defined\n --> b.py:1:1'),
    ],
)
async def test_a_checks_script_stubs_and_context_do_not_reach_the_next_check(checker: TypeChecker, code: str, headline: str) -> None:
    # the same folder and warm server serve both checks: the first one's script, stubs and
    # earlier snippets are gone from both before the second is checked
    assert await checker.check('SECRET\nsecret_stub', script_name='a.py', stubs='secret_stub: int = 0\n', context=['SECRET = "hunter2"\n']) is None
    diagnostics = await checker.check(code, script_name='b.py')
    assert diagnostics is not None and diagnostics.startswith(headline + '\n')


# ------------------------------------------------------------ ty's concise text of a failed check


CONCISE_CODE = 'pair = ("😀", "😀" + 1)\nf(2)'
CONCISE_EXPECTED = (  # columns in characters (the server counts UTF-16 units), lines in the new code
    'main.py:1:14: error[unsupported-operator] Operator `+` is not supported between objects of type `Literal["😀"]` and `Literal[1]`\n'
    'main.py:2:3: error[invalid-argument-type] Argument to function `f` is incorrect: Expected `str`, found `Literal[2]`\n'
)


async def test_tys_concise_text_from_a_ty_check_and_from_the_warm_server(checker: TypeChecker) -> None:
    context = ['def f(x: str) -> int:\n    return 1\n', 'y = 1 + "a"  # an earlier feed\'s error is not this check\'s\n']
    got: list[str] = []
    # the first check of a checker runs before its warm server is up: a second `ty check` words it
    full = await checker.check(CONCISE_CODE, context=context, on_concise=got.append)
    assert full is not None and got == [CONCISE_EXPECTED]
    for slot in checker._slots:
        if slot.starting is not None:
            await slot.starting
    assert any(slot.server is not None and slot.server.alive for slot in checker._slots)
    assert await checker.check(CONCISE_CODE, context=context, on_concise=got.append) == full
    assert got == [CONCISE_EXPECTED, CONCISE_EXPECTED]  # the warm server's words, the same
    assert await checker.check('f("a")', context=context, on_concise=got.append) is None
    assert len(got) == 2  # a clean check has nothing to word
