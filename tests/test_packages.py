"""numpy, pandas and matplotlib in the sandbox: `Pool(packages=[...])`, loaded before the lockdown.

The pool here runs every lockdown layer (seccomp, the empty mount namespace ...): a worker can
open no file, so each test that works shows the libraries read nothing from disk after the
lockdown (a lazy import or a font read would fail).
"""

from __future__ import annotations

import datetime
import pathlib
import re
import textwrap
from typing import Any

import pytest

import corral
from corral import Mount

pytest.importorskip('pandas')
pytest.importorskip('matplotlib')

from security.package_payloads import NUMPY_OFFERS  # noqa: E402 - numpy is there

pytestmark = pytest.mark.asyncio(loop_scope='module')


@pytest.fixture
def pool(packages_pool: corral.Pool) -> corral.Pool:
    """The module's pool with pandas and matplotlib (tests/conftest.py)."""
    return packages_pool


async def run(pool: corral.Pool, code: str, **checkout: Any) -> Any:
    async with pool.checkout(**checkout) as session:
        return await session.feed_run(textwrap.dedent(code), print_callback=lambda stream, text: None)


async def refusal(pool: corral.Pool, code: str, **checkout: Any) -> str:
    """The last line of the traceback a script's error shows (an import's refusal: its exception
    line, then its note)."""
    with pytest.raises(corral.SandboxError) as caught:
        await run(pool, code, **checkout)
    lines = str(caught.value).strip().splitlines()
    return '\n'.join(lines[-2:]) if len(lines) > 1 and lines[-2].startswith(('ModuleNotFoundError: ', 'ImportError: ')) else lines[-1]


def _maps(pid: int) -> str:
    return pathlib.Path(f'/proc/{pid}/maps').read_text()


# ----- the pool option -------------------------------------------------------------------------------

async def test_unknown_packages_are_refused_with_the_names_there_are():
    with pytest.raises(ValueError) as caught:
        corral.Pool(packages=['numpy', 'scipy'])
    assert str(caught.value) == "unknown package 'scipy': the packages a pool can offer scripts are numpy, pandas, matplotlib"


async def test_a_package_brings_what_it_needs():
    assert corral.Pool(packages=['pandas']).packages == ('numpy', 'pandas')
    assert corral.Pool(packages=['matplotlib', 'numpy']).packages == ('numpy', 'matplotlib')
    assert corral.Pool().packages == ()


def _without(package: str) -> str:
    return (
        f'this sandbox was started without {package}; work with the modules below, or tell the user that its host can add it '
        f"(Pool(packages=['{package}']), packages=['{package}'] on CodeTool and CodeMode, --packages {package} on corral run, corral mcp and corral serve)"
        '. A script may import: abc, asyncio,'
    )


async def test_the_plain_pool_loads_no_package_and_says_how_a_host_adds_one():
    async with corral.Pool(warm_workers=0) as plain:
        assert (await refusal(plain, 'import numpy')).startswith(f"ModuleNotFoundError: No module named 'numpy'\n{_without('numpy')}")
        assert (await refusal(plain, 'import pandas as pd')).startswith(f"ModuleNotFoundError: No module named 'pandas'\n{_without('pandas')}")
        assert (await refusal(plain, 'from pandas import DataFrame')).startswith(f"ModuleNotFoundError: No module named 'pandas'\n{_without('pandas')}")
        assert (await refusal(plain, 'import matplotlib.pyplot as plt')).startswith(
            f"ModuleNotFoundError: No module named 'matplotlib.pyplot'\n{_without('matplotlib')}"
        )
        # a package no pool offers keeps its words
        assert (await refusal(plain, 'import scipy')).startswith(
            "ModuleNotFoundError: No module named 'scipy'\nthird-party packages are not installed in the sandbox; use the "
            'standard library modules below. A script may import: abc, asyncio,'
        )
        assert 'numpy' not in _maps(plain._zygote.pid)
        # the type checker says the same, as a diagnostic
        assert (await typing_error(plain, 'from pandas import DataFrame')).startswith(
            'error[import-not-found]: Cannot resolve imported module `pandas`\n'
            ' --> main.py:1:6\n'
            '  |\n'
            '1 | from pandas import DataFrame\n'
            '  |      ^^^^^^\n'
            f"info: No module named 'pandas': {_without('pandas')}"
        )
    async with corral.Pool(packages=['numpy'], warm_workers=0) as numeric:
        assert (await refusal(numeric, 'import matplotlib.pyplot')).startswith(
            f"ModuleNotFoundError: No module named 'matplotlib.pyplot'\n{_without('matplotlib')}"
        )
        info = (await typing_error(numeric, 'import pandas')).splitlines()[-1]
        assert info.startswith(f"info: No module named 'pandas': {_without('pandas')}") and ', numpy, numpy.fft, numpy.linalg, numpy.random, operator, ' in info


async def test_the_packages_are_in_the_zygote_before_any_script(pool):
    await pool.start()
    maps = _maps(pool._zygote.pid)
    assert '/numpy/' in maps and '/pandas/' in maps and '/matplotlib/' in maps


# ----- the libraries at work, locked down ----------------------------------------------------------------

async def test_a_pandas_group_by_of_ten_thousand_rows(pool):
    assert await run(pool, """
        import pandas as pd
        import numpy as np
        frame = pd.DataFrame({'region': ['north', 'south', 'east', 'west'] * 2500, 'amount': np.arange(10_000)})
        totals = frame.groupby('region')['amount'].sum()
        {name: int(total) for name, total in totals.items()}
    """) == {'east': 12500000, 'north': 12495000, 'south': 12497500, 'west': 12502500}


async def test_numpy_arithmetic_and_linear_algebra(pool):
    assert await run(pool, """
        import numpy as np
        a = np.array([[2.0, 1.0], [1.0, 3.0]])
        x = np.linalg.solve(a, np.array([3.0, 5.0]))
        (np.round(x, 6).tolist(), float(a.mean()), (a @ a).tolist(), np.fft.fft([1, 0, 0, 0]).real.tolist())
    """) == ([0.8, 1.4], 1.75, [[5.0, 5.0], [5.0, 10.0]], [1.0, 1.0, 1.0, 1.0])


async def test_a_plot_is_drawn_with_text_and_written_as_png(pool):
    assert await run(pool, """
        import io
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(figsize=(4, 3), dpi=50)
        axes.plot([1, 2, 3], [1, 4, 9], label='$x^2$')
        axes.set_title('Squares'), axes.set_xlabel('x'), axes.legend()
        buffer = io.BytesIO()
        figure.savefig(buffer, format='png')
        buffer.getvalue()[:8]
    """) == b'\x89PNG\r\n\x1a\n'


async def test_savefig_writes_pdf_postscript_svg_and_pillows_formats_with_the_fonts_in_memory(pool, data):
    heads = await run(pool, """
        import io
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(figsize=(2, 2), dpi=40)
        axes.plot([1, 2, 3], [1, 4, 9])
        axes.set_title('$\\sum_i x_i^2$ ü'), axes.set_xlabel('serif', family='serif'), axes.set_ylabel('mono', family='monospace', fontweight='bold')

        def written(form, **rc):
            buffer = io.BytesIO()
            with plt.rc_context(rc):
                figure.savefig(buffer, format=form)
            return buffer.getvalue()

        pdf = written('pdf')
        embedded = written('pdf', **{'pdf.fonttype': 42})  # the TrueType fonts embedded, subset by fontTools
        core = written('pdf', **{'pdf.use14corefonts': True})  # the AFM metrics of the PDF core fonts
        plt.savefig('/out/figure.pdf')
        plt.savefig('/out/figure.svg')
        (
            [written(form)[:length] for form, length in (('svg', 14), ('ps', 15), ('eps', 23), ('png', 8), ('jpg', 3), ('gif', 6), ('tiff', 4))],
            written('webp')[8:12],
            pdf[:9], b'/FontFile2' in embedded, b'/BaseFont /Helvetica' in core, b'/CreationDate (D:19700101000000Z)' in pdf,
            open('/out/figure.pdf', 'rb').read()[:9], open('/out/figure.svg').read()[:5],
        )
    """, mounts=[Mount(data / 'out', '/out')])
    assert heads == (
        [
            b'<?xml version=', b'%!PS-Adobe-3.0\n', b'%!PS-Adobe-3.0 EPSF-3.0', PNG, b'\xff\xd8\xff', b'GIF87a', b'II*\x00',
        ],
        b'WEBP', b'%PDF-1.4\n', True, True, True, b'%PDF-1.4\n', '<?xml',
    )
    assert not (data / 'out' / 'figure.pdf').exists()  # an overlay: the file stays in the session


async def test_matplotlibs_own_writers_and_readers_of_paths_use_the_mounts(pool, data):
    """Past savefig: the canvas's writers, an image's write_png and an rc file, read and written
    through the sandbox's open() (so on the mounts, as savefig)."""
    (data / 'data' / 'thick.rc').write_text('lines.linewidth: 7\n')
    written = await run(pool, """
        import matplotlib
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(figsize=(1, 1), dpi=10)
        figure.canvas.print_png('/out/a.png')
        figure.canvas.print_figure('/out/b.svg')
        figure.canvas.print_figure('/out/c.pdf.gz', format='pdf')
        axes.imshow([[0, 1], [1, 0]]).write_png('/out/d.png')
        with matplotlib.rc_context(fname='/data/thick.rc'):
            width = matplotlib.rcParams['lines.linewidth']
        (
            open('/out/a.png', 'rb').read()[:8], open('/out/b.svg').read()[:5],
            open('/out/c.pdf.gz', 'rb').read()[:2], open('/out/d.png', 'rb').read()[:8], width,
        )
    """, mounts=[Mount(data / 'data', '/data', mode='read-only'), Mount(data / 'out', '/out')])
    assert written == (PNG, '<?xml', b'\x1f\x8b', PNG, 7.0)  # gzip's magic number
    assert list((data / 'out').iterdir()) == []  # an overlay: the files stay in the session


async def test_a_pillow_write_that_fails_removes_its_file_through_the_sandbox(pool, data):
    """Pillow removes the file it made when writing fails: the sandbox's file, on the mount."""
    assert await run(pool, """
        import os
        import matplotlib.pyplot as plt
        try:
            plt.figure().canvas.print_webp('/out/a.webp', pil_kwargs={'quality': 'high'})
        except ValueError as error:
            caught = str(error)
        caught, os.path.exists('/out/a.webp')
    """, mounts=[Mount(data / 'out', '/out')]) == ("could not convert string to float: 'high'", False)


async def test_savefig_refuses_the_formats_the_sandbox_cannot_write_in_matplotlibs_words(pool):
    supported = 'supported formats: eps, gif, jpeg, jpg, pdf, png, ps, raw, rgba, svg, svgz, tif, tiff, webp'
    code = "import io\nimport matplotlib.pyplot as plt\nplt.plot([1])\nplt.savefig(io.BytesIO(), format='{}')"
    assert await refusal(pool, code.format('pgf')) == f"ValueError: Format 'pgf' is not supported ({supported})"
    assert await refusal(pool, code.format('avif')) == f"ValueError: Format 'avif' is not supported ({supported})"


async def test_numpy_random_draws_from_the_session_seed(pool):
    code = """
        import numpy as np
        (np.random.default_rng().integers(0, 1000, 3).tolist(), int(np.random.randint(0, 1000)))
    """
    first = await run(pool, code, random_seed=7)
    assert first == await run(pool, code, random_seed=7)
    assert first != await run(pool, code, random_seed=8)
    assert await run(pool, 'import numpy as np\nnp.random.default_rng(3).integers(0, 1000, 3).tolist()') == [811, 85, 179]


# ----- files go through the session's mounts -------------------------------------------------------------

@pytest.fixture
def data(tmp_path: pathlib.Path) -> pathlib.Path:
    (tmp_path / 'data').mkdir()
    (tmp_path / 'data' / 'q1.csv').write_text('region,amount\nnorth,10\nsouth,5\nnorth,7\n')
    (tmp_path / 'out').mkdir()
    return tmp_path


async def test_read_csv_and_to_csv_on_mounts(pool, data):
    mounts = [Mount(data / 'data', '/data', mode='read-only'), Mount(data / 'out', '/out')]
    assert await run(pool, """
        import pandas as pd
        import numpy as np
        frame = pd.read_csv('/data/q1.csv')
        totals = frame.groupby('region', as_index=False)['amount'].sum()
        totals.to_csv('/out/totals.csv', index=False)
        np.savetxt('/out/amounts.txt', frame['amount'].to_numpy(), fmt='%d')
        totals.to_json('/out/totals.json', orient='records')
        (open('/out/totals.csv').read(), np.loadtxt('/out/amounts.txt').tolist(), pd.read_json('/out/totals.json')['amount'].tolist())
    """, mounts=mounts) == ('region,amount\nnorth,17\nsouth,5\n', [10.0, 5.0, 7.0], [17, 5])
    assert not (data / 'out' / 'totals.csv').exists()  # an overlay: the write stays in the session


async def test_paths_outside_the_mounts_are_refused_as_open_refuses_them(pool, data):
    mounts = [Mount(data / 'data', '/data', mode='read-only')]
    words = await refusal(pool, "open('/etc/passwd')", mounts=mounts)
    assert words == "PermissionError: [Errno 13] Permission denied (outside the folders the host mounted: /data): '/etc/passwd'"
    assert await refusal(pool, "import pandas as pd\npd.read_csv('/etc/passwd')", mounts=mounts) == words
    assert await refusal(pool, "import numpy as np\nnp.loadtxt('/etc/passwd')", mounts=mounts) == words
    read_only = "OSError: [Errno 30] Read-only file system: '/data/x.csv'"
    assert await refusal(pool, "open('/data/x.csv', 'w')", mounts=mounts) == read_only
    assert await refusal(pool, "import pandas as pd\npd.DataFrame({'a': [1]}).to_csv('/data/x.csv')", mounts=mounts) == read_only
    assert await refusal(pool, "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.savefig('/data/x.csv')", mounts=mounts) == read_only


# ----- values: a plain form crosses, a model reads the library's repr ---------------------------------------

async def test_arrays_tables_and_scalars_cross_in_a_plain_form(pool):
    async with pool.checkout() as session:
        await session.feed_run("import numpy as np\nimport pandas as pd\nframe = pd.DataFrame({'a': [1, 2], 'when': pd.to_datetime(['2024-01-01', None])})")
        assert await session.feed_run('frame') == {
            'columns': ['a', 'when'], 'index': [0, 1], 'data': [[1, datetime.datetime(2024, 1, 1)], [2, None]],
        }
        assert session.value_repr == '   a       when\n0  1 2024-01-01\n1  2        NaT'
        assert await session.feed_run("frame['a']") == {'name': 'a', 'index': [0, 1], 'data': [1, 2]}
        assert session.value_repr == '0    1\n1    2\nName: a, dtype: int64'
        assert await session.feed_run('np.arange(6).reshape(2, 3) / 2') == [[0.0, 0.5, 1.0], [1.5, 2.0, 2.5]]
        assert session.value_repr == 'array([[0. , 0.5, 1. ],\n       [1.5, 2. , 2.5]])'
        assert await session.feed_run("(np.float32(1.5), np.int64(7), np.datetime64('2024-01-02T03:04'), frame.index)") == (
            1.5, 7, datetime.datetime(2024, 1, 2, 3, 4), [0, 1],
        )
        assert session.value_repr is None  # a tuple: the plain value is what a model reads
        assert await session.feed_run('1') == 1 and session.value_repr is None


@pytest.mark.slow
async def test_tables_cross_to_host_functions_and_back():
    import pandas as pd

    seen = []

    def report(table: dict) -> int:
        seen.append(table)
        return len(table['data'])

    def load() -> Any:
        return pd.DataFrame({'x': [1.5]})

    async with corral.Pool(packages=['pandas'], warm_workers=0) as own, own.checkout() as session:
        code = "import pandas as pd\n(report(pd.DataFrame({'a': [1, 2]})), load())"
        assert await session.feed_run(code, external_lookup={'report': report, 'load': load}) == (
            2, {'columns': ['x'], 'index': [0], 'data': [[1.5]]},
        )
    assert seen == [{'columns': ['a'], 'index': [0, 1], 'data': [[1], [2]]}]


async def test_what_an_array_holds_crosses_by_the_rules_of_any_value(pool):
    unpackable = (
        "TypeError: the value of the last expression cannot leave the sandbox: a value of type '{}' cannot cross the "
        'sandbox boundary; use None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset, datetime, Decimal '
        'or UUID values'
    )
    assert await refusal(pool, 'import numpy as np\ndef f():\n    pass\nnp.array([f], dtype=object)') == unpackable.format('function')
    assert await refusal(pool, 'import numpy as np\nnp.array([slice(1)], dtype=object)') == unpackable.format('slice')
    text = await refusal(pool, 'import numpy as np\nnp.zeros(2000)', limits=corral.Limits(value_items=1000))
    assert text == 'OverflowError: the result has at least 2,000 items; at most 1,000 may leave the sandbox (the value_items limit)'


async def test_an_array_or_table_too_large_to_cross_is_refused_by_its_shape_before_it_is_converted(pool):
    # 60 MB of int8 fit in the memory limit; as nested lists they would take some 1.4 GB (a
    # reference and an object per number), which the memory limit would stop first
    limits = corral.Limits(memory=400 * 1024**2, value_items=None)
    tail = 'may leave the sandbox (the value_size limit)'
    assert await refusal(pool, 'import numpy as np\nnp.zeros(60_000_000, dtype=np.int8)', limits=limits) == (
        f'OverflowError: the result takes at least 1,440,000,056 bytes; at most 67,108,864 {tail}'
    )
    assert await refusal(pool, "import numpy as np\n[1, {'a': np.zeros((6_000, 10_000), dtype=np.int8)}]", limits=limits) == (
        f'OverflowError: the result takes at least 1,440,384,056 bytes; at most 67,108,864 {tail}'
    )
    assert await refusal(pool, 'import numpy as np\nimport pandas as pd\npd.DataFrame(np.zeros((6_000_000, 10), dtype=np.int8))', limits=limits) == (
        f'OverflowError: the result takes at least 1,968,000,472 bytes; at most 67,108,864 {tail}'
    )
    async with pool.checkout(limits=limits) as session:
        code = 'import numpy as np\nimport pandas as pd\nreport(pd.Series(np.zeros(60_000_000, dtype=np.int8)))'
        with pytest.raises(corral.SandboxError) as caught:
            await session.feed_run(code, external_lookup={'report': lambda series: 1})
        assert str(caught.value).strip().splitlines()[-1] == (
            f'OverflowError: the call to report() takes at least 2,880,000,176 bytes; at most 67,108,864 {tail}'
        )
        assert await session.feed_run('np.zeros((2, 2), dtype=np.int8)') == [[0, 0], [0, 0]]  # the session goes on
    # the bound counts items as the walk does: exactly
    text = await refusal(pool, 'import pandas as pd\npd.DataFrame({"a": range(400), "b": range(400)})', limits=corral.Limits(value_items=1000))
    assert text == 'OverflowError: the result has at least 1,605 items; at most 1,000 may leave the sandbox (the value_items limit)'


async def test_code_tool_shows_the_library_repr(pool):
    from corral.integrations import CodeTool

    tool = CodeTool(pool=pool, type_check=False)
    assert await tool.run("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})") == '   a  b\n0  1  x\n1  2  y'
    assert await tool.run("import numpy as np\ntotal = np.arange(4).sum()") == (
        'np.int64(6)\n\n(The script ended with an assignment; the value returned is that of `total`.)'
    )


# ----- plots come back as images ---------------------------------------------------------------------

PNG = b'\x89PNG\r\n\x1a\n'


async def test_a_figure_its_axes_or_plt_show_arrive_as_png_images(pool):
    async with pool.checkout() as session:
        await session.feed_run('import matplotlib.pyplot as plt\nimport pandas as pd')
        figure = await session.feed_run('figure, axes = plt.subplots(figsize=(2, 2), dpi=40)\naxes.plot([1, 3, 2])\nfigure')
        assert isinstance(figure, corral.Image) and figure.mime_type == 'image/png' and figure.data.startswith(PNG)
        axes = await session.feed_run("pd.DataFrame({'a': [1, 3, 2]}).plot(figsize=(2, 2))")
        assert isinstance(axes, corral.Image) and axes.data.startswith(PNG)
        assert await session.feed_run('plt.get_fignums()') == [1, 2]
        nested = await session.feed_run('plt.figure(figsize=(2, 2), dpi=40).subfigures(1, 2)[0].subplots()')  # axes in a subfigure
        assert isinstance(nested, corral.Image) and nested.data.startswith(PNG)
        await session.feed_run('plt.close(3)')
        shown = await session.feed_run('plt.close("all")\nplt.figure(figsize=(2, 2))\nplt.plot([1, 2])\nplt.figure(figsize=(2, 2))\nplt.bar(["a"], [1])\nplt.show()')
        assert [type(image) for image in shown] == [corral.Image, corral.Image] and shown[0].data != shown[1].data
        assert await session.feed_run('plt.get_fignums()') == []  # show() closes what it drew
        assert await session.feed_run('plt.plot([1])\nplt.show()\n5') == 5  # the script's own value comes first


async def test_an_image_counts_towards_value_size(pool):
    # each figure of 100 x 100 pixels (40,000 bytes drawn) passes the pixel check; three PNGs of noise do not
    code = 'import matplotlib.pyplot as plt, numpy as np\nplt.figure(figsize=(1, 1), dpi=100)\nplt.figimage(np.random.default_rng(0).random((100, 100, 3)))\n[plt.gcf()] * 3'
    text = await refusal(pool, code, limits=corral.Limits(value_size=60_000))
    assert text.startswith('OverflowError: the result takes ') and text.endswith('bytes; at most 60,000 may leave the sandbox (the value_size limit)')
    assert 'drawn' not in text


async def test_a_figure_too_large_to_cross_is_refused_by_its_pixel_size_before_it_is_drawn(pool):
    """A figure is drawn into width * height * 4 bytes (RGBA) before it becomes a PNG: one past
    value_size is refused before that memory is taken (a 1000-inch figure at 1000 dpi ran into
    the memory limit), as the last expression, in a list, or shown."""
    limits = corral.Limits(value_size=10_000)
    expected = 'OverflowError: the result takes 10,240,000 bytes drawn (a figure of 1,600 x 1,600 pixels, 4 bytes each); at most 10,000 may leave the sandbox (the value_size limit)'
    for last in ('plt.gcf()', 'plt.show()', '[1, plt.gcf()]'):
        code = f'import matplotlib.pyplot as plt\nplt.figure(figsize=(8, 8), dpi=200)\nplt.plot([1, 2])\n{last}'
        assert await refusal(pool, code, limits=limits) == expected
    huge = 'import matplotlib.pyplot as plt\nplt.figure(figsize=(1000, 1000), dpi=1000)'
    assert await refusal(pool, huge) == (
        'OverflowError: the result takes 4,000,000,000,000 bytes drawn (a figure of 1,000,000 x 1,000,000 pixels, 4 bytes each); '
        'at most 67,108,864 may leave the sandbox (the value_size limit)'
    )
    # the savefig.dpi setting draws the figure too
    assert await refusal(pool, "import matplotlib.pyplot as plt\nplt.rcParams['savefig.dpi'] = 5000\nplt.plot([1])\nplt.show()") == (
        'OverflowError: the result takes 3,072,000,000 bytes drawn (a figure of 32,000 x 24,000 pixels, 4 bytes each); '
        'at most 67,108,864 may leave the sandbox (the value_size limit)'
    )
    # past 2**23 pixels a side, matplotlib refuses it in its own words
    assert await refusal(pool, 'import matplotlib.pyplot as plt\nplt.figure(figsize=(100000, 1), dpi=100)') == (
        'TypeError: the value of the last expression cannot leave the sandbox: '
        'Image size of 10000000x100 pixels is too large. It must be less than 2^23 in each direction.'
    )


async def test_savefig_refuses_a_figure_past_the_memory_limit_before_drawing_it(pool, data):
    for target in ('io.BytesIO()', "'/out/big.png'"):
        code = f'import matplotlib.pyplot as plt, io\nplt.plot([1])\nplt.savefig({target}, dpi=20000)'
        assert await refusal(pool, code, mounts=[Mount(data / 'out', '/out')]) == (
            'ValueError: savefig would draw a figure of 128,000 x 96,000 pixels into 49,152,000,000 bytes, '
            'more than the memory limit of 1,073,741,824 bytes: make the figure smaller (figsize) or its dpi lower'
        )
    # vector formats are not drawn into pixels
    assert await run(pool, 'import matplotlib.pyplot as plt, io\nplt.plot([1])\nb = io.BytesIO()\nplt.savefig(b, format="svg", dpi=20000)\nb.getvalue()[:5]') == b'<?xml'


async def test_code_tool_returns_image_blocks(pool):
    import base64

    from corral.integrations import CodeTool

    tool = CodeTool(pool=pool, type_check=False)
    code = {'code': 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()'}
    text, image = await tool.call_content(code)
    assert text == {'type': 'text', 'text': 'Image(<' + text['text'][7:]}
    assert text['text'].endswith(' bytes of image/png>)')
    assert image['type'] == 'image' and image['source']['type'] == 'base64' and image['source']['media_type'] == 'image/png'
    assert base64.b64decode(image['source']['data']).startswith(PNG)
    text, image = await tool.call_content(code, format='openai')
    assert text['type'] == 'input_text' and image['type'] == 'input_image'
    assert image['image_url'].startswith('data:image/png;base64,iVBORw0KGgo')
    assert await tool.call_content({'code': '1 + 1'}, format='openai') == [{'type': 'input_text', 'text': '2'}]
    with pytest.raises(ValueError, match="format must be 'anthropic' or 'openai', not 'gemini'"):
        await tool.call_content({'code': '1'}, format='gemini')


async def test_mcp_returns_image_content(pool):
    pytest.importorskip('mcp')
    from mcp import Client

    from corral.integrations.mcp import build_server

    server, close = build_server(pool=pool, type_check=False)
    try:
        async with Client(server) as client:
            result = await client.call_tool('run_code', {'code': 'import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.gcf()'})
            text, image = result.content
            assert text.type == 'text' and text.text.startswith('Image(<') and not result.is_error
            assert image.type == 'image' and image.mime_type == 'image/png' and image.data.startswith('iVBORw0KGgo')
    finally:
        await close()



# ----- type checking against the packages' own types -------------------------------------------------

async def typing_error(pool: corral.Pool, code: str) -> str:
    async with pool.checkout(type_check=True) as session:
        with pytest.raises(corral.SandboxTypingError) as caught:
            await session.feed_run(code)
    return str(caught.value)


async def test_scripts_are_checked_against_numpy_pandas_stubs_and_matplotlib(pool):
    async with pool.checkout(type_check=True) as session:
        assert await session.feed_run(
            "import pandas as pd\nimport numpy as np\nimport matplotlib.pyplot as plt\n"
            "frame = pd.DataFrame({'x': ['a', 'b', 'a'], 'y': [1, 2, 3]})\n"
            "totals = frame.groupby('x')['y'].sum()\nplt.bar(totals.index, totals.to_numpy())\nint(np.sum(totals.to_numpy()))"
        ) == 6
    assert await typing_error(pool, "import pandas as pd\nframe = pd.DataFrame({'x': ['a'], 'y': [1]})\nframe.groupby('x').summ()") == (
        'error[call-non-callable]: Object of type `SeriesGroupBy[Any, str | bytes | date | ... omitted 7 union elements]` is not callable\n'
        ' --> main.py:3:1\n'
        '  |\n'
        '1 | import pandas as pd\n'
        "2 | frame = pd.DataFrame({'x': ['a'], 'y': [1]})\n"
        "3 | frame.groupby('x').summ()\n"
        '  | ^^^^^^^^^^^^^^^^^^^^^^^^^'
    )
    # the type's name is numpy's stubs' own, which numpy's releases change (`ndarray[tuple[int], dtype[...]]`
    # up to 2.4, `_Array1D[signedinteger[...]]` from 2.5): it must be a one-dimensional array's
    text = await typing_error(pool, "import numpy as np\nnp.arange(3).summ()")
    array = re.match(r'error\[unresolved-attribute\]: Object of type `(.+?)` has no attribute', text)
    assert array is not None and array[1].startswith(('ndarray[tuple[int], dtype[', '_Array1D[signedinteger[')), text
    assert text[array.end():] == ' `summ`\n --> main.py:2:1\n  |\n1 | import numpy as np\n2 | np.arange(3).summ()\n  | ^^^^^^^^^^^^^^^^^'


async def test_the_facades_refusals_are_diagnostics_too(pool):
    assert await typing_error(pool, "import numpy as np\nnp.load('x')") == (
        'error[unresolved-attribute]: Module `numpy` has no member `load`\n'
        ' --> main.py:2:4\n'
        '  |\n'
        '1 | import numpy as np\n'
        "2 | np.load('x')\n"
        '  |    ^^^^\n'
        "info: module 'numpy' has no attribute 'load' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON "
        '(np.load unpickles); numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the '
        f'mounted folders. {NUMPY_OFFERS}'
    )
    text = await typing_error(pool, 'from pandas import read_pickle')
    assert text.splitlines()[0] == 'error[import-not-found]: Module `pandas` has no member `read_pickle`'
    assert text.splitlines()[-1] == (
        "info: module 'pandas' has no attribute 'read_pickle' in the sandbox: pickle runs code as it loads; keep data as "
        'CSV or JSON: read_csv or read_json. dir(pandas) lists the 83 names pandas offers'
    )
    text = await typing_error(pool, 'import numpy.lib')
    assert text.splitlines()[-1].startswith("info: No module named 'numpy.lib': the sandbox offers 'numpy' itself, not its submodules.")


# ----- the integrations and the command line take packages ----------------------------------------------

@pytest.mark.slow
async def test_code_tool_and_code_mode_take_packages():
    from corral.integrations import CodeTool
    from corral.integrations._common import add_packages

    async with CodeTool(packages=['pandas']) as tool:
        assert await tool.run("import pandas as pd\npd.Series([1, 2]).sum()") == 'np.int64(3)'
    with pytest.raises(ValueError, match=r'give packages to the pool \(Pool\(packages=\.\.\.\)\)'):
        CodeTool(packages=['pandas'], pool=corral.Pool())

    pytest.importorskip('pydantic_ai')
    from pydantic_ai.exceptions import UserError

    from corral.pydantic_ai import CodeMode

    assert CodeMode(packages=['matplotlib']).packages == ('numpy', 'matplotlib')
    with pytest.raises(UserError, match="CodeMode packages: unknown package 'scipy'"):
        CodeMode(packages=['scipy'])

    import argparse

    parser = argparse.ArgumentParser()
    add_packages(parser)
    assert parser.parse_args(['--packages', 'pandas,matplotlib']).packages == ('numpy', 'pandas', 'matplotlib')
    assert parser.parse_args([]).packages == ()


@pytest.mark.slow
async def test_the_readmes_data_example_runs_as_copied(tmp_path):
    import asyncio
    import os
    import subprocess
    import sys

    readme = (pathlib.Path(__file__).parent.parent / 'README.md').read_text()
    section = readme[readme.index('\n### Data work: numpy, pandas and matplotlib\n'):]
    example = section[section.index('```python\n') + len('```python\n'):section.index('\n```\n')]
    printed = section[section.index('it prints:\n\n```\n') + len('it prints:\n\n```\n'):]
    printed = printed[:printed.index('```\n')]
    (tmp_path / 'q1.csv').write_text('region,amount\nnorth,120\nsouth,80\nnorth,45\n')
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, '-c', example], cwd=tmp_path, capture_output=True, text=True, env=dict(os.environ), timeout=300,
    )
    assert (done.stdout, done.stderr, done.returncode) == (printed, '', 0)
    assert (tmp_path / 'q1.png').exists() is False  # an overlay mount: the figure stays in the session
