"""The packages' own ways out of the language layer (`Pool(packages=[...])`), each refused with its exact text.

Pickle (it runs code as it loads), strings evaluated as code (pandas' `query`/`eval`, with `@`
names and attribute access), raw memory (`as_strided`, `ndarray.ctypes`, a buffer read at a
negative offset or as object pointers, `resize(refcheck=False)` leaving a view on freed memory,
`__array_interface__` answered by a script's `__getattr__` or a Series' labels), function names
given as strings (`df.agg('__getattribute__', '_mgr')`), files (a font file named by a script
included) and processes. The worker runs
every lockdown layer too; these tests hold the language layer to its word on its own.
"""

from __future__ import annotations

import datetime
import textwrap

import pytest

import corral

pytest.importorskip('pandas')
pytest.importorskip('matplotlib')

from .package_payloads import NUMPY_OFFERS  # noqa: E402 - numpy is there

pytestmark = pytest.mark.asyncio(loop_scope='module')


@pytest.fixture
def pool(packages_pool: corral.Pool) -> corral.Pool:
    """The module's pool with pandas and matplotlib (tests/conftest.py)."""
    return packages_pool


USETEX = "ValueError: text.usetex is not available in the sandbox: it runs LaTeX, a program; matplotlib's own mathtext renders $...$"
DISTILLER = 'ValueError: ps.usedistiller is not available in the sandbox: it runs Ghostscript or xpdf, programs; savefig writes PostScript and EPS without it'

#: name -> (script, the error corral raises, the last line of the text the model reads)
ATTACKS = {
    # pickle
    'read_pickle': ("import pandas as pd, io\npd.read_pickle(io.BytesIO(b'x'))", 'SandboxRuntimeError', "AttributeError: module 'pandas' has no attribute 'read_pickle' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON: read_csv or read_json. dir(pandas) lists the 83 names pandas offers"),
    'np_load': ("import numpy as np, io\nnp.load(io.BytesIO(b'x'), allow_pickle=True)", 'SandboxRuntimeError', f"AttributeError: module 'numpy' has no attribute 'load' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON (np.load unpickles); numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the mounted folders. {NUMPY_OFFERS}"),
    'np_lib_format': ('import numpy as np\nnp.lib.format.read_array', 'SandboxRuntimeError', f"AttributeError: module 'numpy' has no attribute 'lib' in the sandbox: numpy.lib is not available (np.lib.stride_tricks.as_strided reads memory outside the array); its public functions are in numpy itself. {NUMPY_OFFERS}"),
    'pd_io': ('import pandas as pd\npd.io.pickle.read_pickle', 'SandboxRuntimeError', "AttributeError: module 'pandas' has no attribute 'io' in the sandbox. dir(pandas) lists the 83 names pandas offers"),
    'dumps': ('import numpy as np\nnp.arange(3).dumps()', 'SandboxRuntimeError', "AttributeError: 'ndarray' object has no attribute 'dumps' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON: arr.tolist() with json"),
    'to_pickle': ("import pandas as pd, io\npd.DataFrame({'a': [1]}).to_pickle(io.BytesIO())", 'SandboxRuntimeError', "AttributeError: 'DataFrame' object has no attribute 'to_pickle' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON: to_csv or to_json"),
    'to_pickle_class': ("import pandas as pd, io\npd.DataFrame.to_pickle(pd.DataFrame({'a': [1]}), io.BytesIO())", 'SandboxRuntimeError', "AttributeError: 'DataFrame' object has no attribute 'to_pickle' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON: to_csv or to_json"),
    'agg_to_pickle': ("import pandas as pd, io\npd.DataFrame({'a': [1]}).agg('to_pickle', path=io.BytesIO())", 'SandboxRuntimeError', "AttributeError: 'to_pickle' is not a valid function for 'DataFrame' object"),
    'series_to_pickle': ('import pandas as pd, io\npd.Series([1]).to_pickle(io.BytesIO())', 'SandboxRuntimeError', "AttributeError: 'Series' object has no attribute 'to_pickle' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON: to_csv or to_json"),
    'generic_dump': ("import numpy as np\nnp.float64(1.0).dump('/tmp/x')", 'SandboxRuntimeError', "AttributeError: 'generic' object has no attribute 'dump' in the sandbox: pickle runs code as it loads; keep data as CSV or JSON: np.savetxt, or arr.tolist() with json"),
    # strings evaluated as code
    'query_at': ("import pandas as pd\nsecret = 1\npd.DataFrame({'a': [1]}).query('@secret.__class__')", 'SandboxRuntimeError', 'AttributeError: \'DataFrame\' object has no attribute \'query\' in the sandbox: it evaluates a string as code; select with boolean masks, df[(df["a"] > 1) & (df["b"] < 2)], and compute columns with df["c"] = df["a"] + df["b"]'),
    'eval': ("import pandas as pd\npd.DataFrame({'a': [1]}).eval('a.__class__')", 'SandboxRuntimeError', 'AttributeError: \'DataFrame\' object has no attribute \'eval\' in the sandbox: it evaluates a string as code; select with boolean masks, df[(df["a"] > 1) & (df["b"] < 2)], and compute columns with df["c"] = df["a"] + df["b"]'),
    'pd_eval': ("import pandas as pd\npd.eval('1 + 1')", 'SandboxRuntimeError', 'AttributeError: module \'pandas\' has no attribute \'eval\' in the sandbox: it evaluates a string as code; select with boolean masks, df[(df["a"] > 1) & (df["b"] < 2)], and compute columns with df["c"] = df["a"] + df["b"]. dir(pandas) lists the 83 names pandas offers'),
    'agg_query': ("import pandas as pd\npd.DataFrame({'a': [1]}).agg('query', expr='a > 0')", 'SandboxRuntimeError', "AttributeError: 'query' is not a valid function for 'DataFrame' object"),
    'super_query': ("import pandas as pd\nclass F(pd.DataFrame):\n    def q(self):\n        return super().query('a > 0')\nF({'a': [1]}).q()", 'SandboxRuntimeError', 'AttributeError: \'DataFrame\' object has no attribute \'query\' in the sandbox: it evaluates a string as code; select with boolean masks, df[(df["a"] > 1) & (df["b"] < 2)], and compute columns with df["c"] = df["a"] + df["b"]'),
    'plot_backend': ("import pandas as pd\npd.set_option('plotting.backend', 'os')", 'SandboxRuntimeError', "ValueError: the sandbox's plotting backend is 'matplotlib'"),
    # memory
    'as_strided': ('import numpy as np\nnp.lib.stride_tricks.as_strided(np.arange(2), shape=(1000,), strides=(8,))', 'SandboxRuntimeError', f"AttributeError: module 'numpy' has no attribute 'lib' in the sandbox: numpy.lib is not available (np.lib.stride_tricks.as_strided reads memory outside the array); its public functions are in numpy itself. {NUMPY_OFFERS}"),
    'strides_set': ('import numpy as np\na = np.arange(2)\na.strides = (100000,)\na.tolist()', 'SandboxRuntimeError', 'ValueError: strides is not compatible with available memory'),
    'ndarray_buffer': ("import numpy as np\nnp.ndarray((100,), dtype='u1', buffer=b'abc', strides=(1000,))", 'SandboxRuntimeError', 'ValueError: strides is incompatible with shape of requested array and size of buffer'),
    'ndarray_offset': ("import numpy as np\nnp.ndarray((4,), dtype='u1', buffer=b'abcd', offset=-100)", 'SandboxRuntimeError', 'ValueError: offset must be non-negative and no greater than buffer length'),
    'ndarray_new_offset': ("import numpy as np\nnp.ndarray.__new__(np.ndarray, (4,), 'u1', b'abcd', -1)", 'SandboxRuntimeError', 'ValueError: offset must be non-negative and no greater than buffer length'),
    'ndarray_object_buffer': ("import numpy as np\nnp.ndarray((1,), dtype=object, buffer=b'x' * 8)", 'SandboxRuntimeError', 'ValueError: cannot create an OBJECT array from memory buffer'),
    'frombuffer_object': ("import numpy as np\nnp.frombuffer(b'x' * 8, dtype=object)", 'SandboxRuntimeError', 'ValueError: cannot create an OBJECT array from memory buffer'),
    'view_object': ('import numpy as np\nnp.arange(3).view(object)', 'SandboxRuntimeError', 'TypeError: Cannot change data-type for array of references.'),
    'structured_view': ("import numpy as np\nnp.zeros(2, dtype=[('a', 'i8')]).view([('a', 'O')])", 'SandboxRuntimeError', 'TypeError: Cannot change data-type for array of references.'),
    'resize_refcheck': ('import numpy as np\na = np.arange(4)\nview = a[:]\na.resize(100000, refcheck=False)', 'SandboxRuntimeError', 'ValueError: resize(refcheck=False) is not available in the sandbox: views of the array would read freed memory; use np.resize(a, shape), which makes a new array'),
    'ctypes': ('import numpy as np\nnp.arange(3).ctypes', 'SandboxRuntimeError', "AttributeError: 'ndarray' object has no attribute 'ctypes' in the sandbox: it reaches the worker's raw memory"),
    'ctypes_getattr': ("import numpy as np\ngetattr(np.arange(3), 'ctypes')", 'SandboxRuntimeError', "AttributeError: 'ndarray' object has no attribute 'ctypes' in the sandbox: it reaches the worker's raw memory"),
    'ctypes_class': ('import numpy as np\nnp.ndarray.ctypes', 'SandboxRuntimeError', "AttributeError: 'ndarray' object has no attribute 'ctypes' in the sandbox: it reaches the worker's raw memory"),
    'ctypes_attrgetter': ("import numpy as np, operator\noperator.attrgetter('ctypes')(np.arange(3))", 'SandboxRuntimeError', "AttributeError: 'ndarray' object has no attribute 'ctypes' in the sandbox: it reaches the worker's raw memory"),
    'ctypeslib': ('import numpy as np\nnp.ctypeslib', 'SandboxRuntimeError', f"AttributeError: module 'numpy' has no attribute 'ctypeslib' in the sandbox: it reaches the worker's raw memory. {NUMPY_OFFERS}"),
    'array_interface_read': ('import numpy as np\nnp.arange(3).__array_interface__', 'SandboxSyntaxError', "SyntaxError: attribute '__array_interface__' cannot be read in the sandbox: names like __this__ are refused except a short list"),
    'getattr_dlpack': ('import numpy as np\nclass Sneaky:\n    def __getattr__(self, name):\n        return lambda *a, **k: None\nnp.from_dlpack(Sneaky())', 'SandboxRuntimeError', "AttributeError: 'Sneaky' object has no attribute '__dlpack__'"),
    'subclass_finalize': ('import numpy as np\nclass A(np.ndarray):\n    def __array_finalize__(self, obj):\n        pass', 'SandboxSyntaxError', "SyntaxError: method '__array_finalize__' cannot be defined in the sandbox; the special methods a class may define are __init__, __repr__, __str__, __eq__, __hash__, __lt__, __len__, __iter__, __getitem__, __enter__, __exit__, __post_init__, ..."),
    # names by string
    'private_agg': ("import pandas as pd\npd.DataFrame({'a': [1]}).agg('_mgr')", 'SandboxRuntimeError', "AttributeError: agg('_mgr'): attribute '_mgr' is private: the sandbox refuses names starting with '_' on the libraries' objects; use the public API"),
    'groupby_agg_dunder': ("import pandas as pd\npd.DataFrame({'a': [1], 'b': [2]}).groupby('a').agg('__getattribute__', '_mgr')", 'SandboxRuntimeError', "AttributeError: agg('__getattribute__'): attribute '__getattribute__' cannot be read in the sandbox: names like __this__ are refused except a short list; use getattr(obj, name)"),
    'apply_dict': ("import pandas as pd\npd.DataFrame({'a': [1]}).agg({'a': ['sum', '__reduce_ex__']})", 'SandboxRuntimeError', "AttributeError: agg('__reduce_ex__'): attribute '__reduce_ex__' cannot be read in the sandbox: names like __this__ are refused except a short list; pickling is not available in the sandbox; use copy.copy or copy.deepcopy"),
    'rolling_agg': ("import pandas as pd\npd.Series([1, 2]).rolling(1).agg('__class__')", 'SandboxRuntimeError', "AttributeError: agg('__class__'): attribute '__class__' is a special method: name the operation instead ('sum', 'mean', 'max' ...)"),
    # files, processes and backends
    'tofile': ("import numpy as np\nnp.arange(3).tofile('/tmp/x')", 'SandboxRuntimeError', "AttributeError: 'ndarray' object has no attribute 'tofile' in the sandbox: numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the mounted folders"),
    'memmap': ("import numpy as np\nnp.memmap('/tmp/x')", 'SandboxRuntimeError', f"AttributeError: module 'numpy' has no attribute 'memmap' in the sandbox: numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the mounted folders. {NUMPY_OFFERS}"),
    'fromfile': ("import numpy as np\nnp.fromfile('/etc/passwd')", 'SandboxRuntimeError', f"AttributeError: module 'numpy' has no attribute 'fromfile' in the sandbox: numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the mounted folders. Did you mean: fromiter? {NUMPY_OFFERS}"),
    'read_clipboard': ('import pandas as pd\npd.read_clipboard()', 'SandboxRuntimeError', "AttributeError: module 'pandas' has no attribute 'read_clipboard' in the sandbox: a script has no clipboard. dir(pandas) lists the 83 names pandas offers"),
    'numpy_submodule': ('import numpy.lib', 'SandboxRuntimeError', "ModuleNotFoundError: No module named 'numpy.lib'\nthe sandbox offers 'numpy' itself, not its submodules. A script may import: abc, asyncio, base64, bisect, calendar, collections, collections.abc, contextlib, copy, csv, dataclasses, datetime, decimal, difflib, email, email.utils, enum, fnmatch, fractions, functools, glob, graphlib, hashlib, heapq, html, io, itertools, json, logging, math, matplotlib, matplotlib.pyplot, numpy, numpy.fft, numpy.linalg, numpy.random, operator, os, os.path, pandas, pathlib, pprint, random, re, shlex, statistics, string, sys, textwrap, time, types, typing, unicodedata, urllib, urllib.parse, uuid, warnings, zoneinfo"),
    'switch_backend': ("import matplotlib.pyplot as plt\nplt.switch_backend('tkagg')", 'SandboxRuntimeError', "AttributeError: module 'matplotlib.pyplot' has no attribute 'switch_backend' in the sandbox: the sandbox draws with Agg: a figure as the last expression, or plt.show(), comes back as a PNG image. dir(matplotlib.pyplot) lists the 203 names matplotlib.pyplot offers"),
    'mpl_use': ("import matplotlib\nmatplotlib.use('tkagg')", 'SandboxRuntimeError', "AttributeError: module 'matplotlib' has no attribute 'use' in the sandbox: the sandbox draws with Agg: a figure as the last expression, or plt.show(), comes back as a PNG image. matplotlib offers: ExecutableNotFoundError, MatplotlibDeprecationWarning, RcParams, bivar_colormaps, color_sequences, colormaps, defaultParams, multivar_colormaps, pyplot, rc, rcParams, rcParamsDefault, rcParamsOrig, rc_context, rc_params, rcdefaults"),
    'font_file_pdf': ("import io, pathlib\nimport matplotlib.pyplot as plt\nplt.figure().text(0, 0, 'x', fontproperties=pathlib.Path('/etc/passwd'))\nplt.savefig(io.BytesIO(), format='pdf')", 'SandboxRuntimeError', "FileNotFoundError: the sandbox has the fonts matplotlib ships, not '/etc/passwd'"),
    'font_file_png': ("import matplotlib.pyplot as plt\nplt.figure().text(0, 0, 'x', fontproperties={'fname': '/etc/passwd'})\nplt.gcf()", 'SandboxRuntimeError', "TypeError: the value of the last expression cannot leave the sandbox: the sandbox has the fonts matplotlib ships, not '/etc/passwd'"),
    'savefig_pgf': ("import io\nimport matplotlib.pyplot as plt\nplt.plot([1])\nplt.savefig(io.BytesIO(), format='pgf')", 'SandboxRuntimeError', "ValueError: Format 'pgf' is not supported (supported formats: eps, gif, jpeg, jpg, pdf, png, ps, raw, rgba, svg, svgz, tif, tiff, webp)"),
    # paths matplotlib and Pillow open themselves, past savefig: through open()
    'print_png': ("import matplotlib.pyplot as plt\nplt.figure().canvas.print_png('/tmp/x')", 'SandboxRuntimeError', "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])): '/tmp/x'"),
    'print_figure': ("import matplotlib.pyplot as plt\nplt.figure().canvas.print_figure('/tmp/x', format='svg')", 'SandboxRuntimeError', "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])): '/tmp/x'"),
    'write_png': ("import matplotlib.pyplot as plt\nplt.subplots()[1].imshow([[0, 1]]).write_png('/tmp/x')", 'SandboxRuntimeError', "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])): '/tmp/x'"),
    'rc_context_fname': ("import matplotlib\nwith matplotlib.rc_context(fname='/etc/passwd'):\n    pass", 'SandboxRuntimeError', "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])): '/etc/passwd'"),
    'rc_context_url': ("import matplotlib\nwith matplotlib.rc_context(fname='https://example.com/style.rc'):\n    pass", 'SandboxRuntimeError', "PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with checkout(mounts=[Mount(host_dir, sandbox_path)])): 'https://example.com/style.rc'"),
    'style': ("import pandas as pd\npd.DataFrame({'a': [1]}).style", 'SandboxRuntimeError', "AttributeError: 'DataFrame' object has no attribute 'style' in the sandbox: styling needs templates the sandbox does not have; use to_string() or to_html()"),
    # settings that run a program (LaTeX, Ghostscript), refused where they are set
    'usetex_rcparams': ("import matplotlib\nmatplotlib.rcParams['text.usetex'] = True", 'SandboxRuntimeError', USETEX),
    'usetex_rc': ("import matplotlib.pyplot as plt\nplt.rc('text', usetex=True)", 'SandboxRuntimeError', USETEX),
    'usetex_update': ("import matplotlib.pyplot as plt\nplt.rcParams.update({'text.usetex': 'yes'})", 'SandboxRuntimeError', USETEX),
    'usetex_rc_context': ("import matplotlib\nwith matplotlib.rc_context({'text.usetex': True}):\n    pass", 'SandboxRuntimeError', USETEX),
    'usetex_text': ("import matplotlib.pyplot as plt\nplt.figure().text(0, 0, 'x', usetex=True)", 'SandboxRuntimeError', USETEX),
    'usetex_set': ("import matplotlib.pyplot as plt\nplt.title('x').set_usetex(1)", 'SandboxRuntimeError', USETEX),
    # set past the rcParams' own checks: refused where TeX would run
    'usetex_dict_setitem': ("import matplotlib.pyplot as plt\ndict.__setitem__(plt.rcParams, 'text.usetex', True)\nplt.title('x')\nplt.gcf()", 'SandboxRuntimeError', 'TypeError: the value of the last expression cannot leave the sandbox: ' + USETEX.removeprefix('ValueError: ')),
    'usedistiller_dict_setitem': ("import io\nimport matplotlib.pyplot as plt\ndict.__setitem__(plt.rcParams, 'ps.usedistiller', 'ghostscript')\nplt.plot([1])\nplt.savefig(io.BytesIO(), format='eps')", 'SandboxRuntimeError', DISTILLER),
    'usedistiller': ("import matplotlib.pyplot as plt\nplt.rcParams['ps.usedistiller'] = 'ghostscript'", 'SandboxRuntimeError', DISTILLER),
    'usedistiller_xpdf': ("import matplotlib.pyplot as plt\nplt.rc('ps', usedistiller='xpdf')", 'SandboxRuntimeError', DISTILLER),
    'savefig_backend': ("import io\nimport matplotlib.pyplot as plt\nplt.plot([1])\nplt.savefig(io.BytesIO(), backend='pgf')", 'SandboxRuntimeError', "ValueError: savefig(backend='pgf') is not available in the sandbox: figures are drawn with Agg; savefig(format=...) picks the file's format (png, pdf, svg, ps ...)"),
}


@pytest.mark.parametrize('name', ATTACKS)
async def test_attack_is_refused(pool, name):
    code, kind, text = ATTACKS[name]
    async with pool.checkout() as session:
        with pytest.raises(getattr(corral, kind)) as caught:
            await session.feed_run(code)
    assert str(caught.value).strip().splitlines()[-text.count('\n') - 1:] == text.splitlines()  # an import's refusal: its note too


def _matplotlib_folders() -> list[str]:
    import matplotlib

    return [matplotlib.get_cachedir(), matplotlib.get_configdir(), matplotlib.get_data_path()]


async def test_no_matplotlib_error_names_a_folder_of_the_host(pool):
    """The refusals above, and drawing or saving with every setting a script may change, never
    show the host's matplotlib cache, config or data folder (TeX's cache named it)."""
    scripts = [code for code, _, _ in ATTACKS.values() if 'matplotlib' in code]
    scripts += [
        f"import io\nimport matplotlib.pyplot as plt\ndict.__setitem__(plt.rcParams, {setting!r}, {value!r})\nplt.title('x')\nplt.savefig(io.BytesIO(), format={form!r})"
        for setting, value in (('text.usetex', True), ('ps.usedistiller', 'ghostscript'))
        for form in ('png', 'pdf', 'ps', 'eps', 'svg', 'pgf')
        if setting == 'text.usetex' or form in ('ps', 'eps')
    ]
    scripts += ["import matplotlib.pyplot as plt\nplt.rcParams['savefig.directory'] = '/etc'\nplt.plot([1])\nplt.savefig('x.png')"]
    folders = _matplotlib_folders()
    async with pool.checkout() as session:
        for code in scripts:
            try:
                await session.feed_run(code)
            except corral.SandboxError as error:
                assert not [folder for folder in folders if folder in str(error)], code
            else:
                raise AssertionError(f'not refused: {code}')


_SECRET = """
    import numpy as np
    import pandas as pd
    secret = b'0123456789abcdef'
    interface = {'shape': (8,), 'typestr': '|u1', 'data': (id(secret), False), 'version': 3}
"""


@pytest.mark.parametrize('code', [
    # a script's __getattr__ answering the name numpy reads an array's address from
    """
    class Sneaky:
        def __getattr__(self, name):
            if name == '__array_interface__':
                return interface
            raise AttributeError(name)
    array = np.asarray(Sneaky())
    """,
    # the same, through a metaclass (numpy reads the name off a class given as the array)
    """
    class Meta(type):
        def __getattr__(cls, name):
            return interface
    class Sneaky(metaclass=Meta):
        pass
    array = np.asarray(Sneaky)
    """,
    # a class made by type() under another name, with a __getattr__
    """
    make = type
    Sneaky = make('Sneaky', (), {'__getattr__': lambda self, name: interface})
    array = np.asarray(Sneaky())
    """,
    # a class made by dataclasses.make_dataclass, with a __getattr__ in its namespace
    """
    import dataclasses
    Sneaky = dataclasses.make_dataclass('Sneaky', [], namespace={'__getattr__': lambda self, name: interface})
    array = np.asarray(Sneaky())
    """,
    # a Series answers its labels as attributes
    """
    array = np.asarray(pd.Series({'__array_interface__': interface}))
    """,
])
async def test_array_interface_is_never_answered_for_a_script(pool, code):
    """numpy wraps the object instead (an array of one object, or of the dict): it never reads the address."""
    async with pool.checkout() as session:
        assert await session.feed_run(textwrap.dedent(_SECRET) + textwrap.dedent(code) + "\n(array.dtype.kind, array.size)") in (('O', 1),)


async def test_the_libraries_still_resize_their_own_arrays_without_refcheck(pool):
    async with pool.checkout() as session:
        assert await session.feed_run(textwrap.dedent("""
            import pandas as pd
            (pd.Series(['b', 'a', 'b']).factorize()[0].tolist(), pd.Series(['x', 'y', 'x']).value_counts().to_dict())
        """)) == ([0, 1, 0], {'x': 2, 'y': 1})


CLOCK_REFUSED = (
    'PermissionError: the host has not granted clock access (datetime.now(), date.today(), time.time()); the host '
    'grants it with checkout(os_access=OsAccess(clock=True))'
)


@pytest.mark.parametrize('code', [
    'import pandas as pd\npd.Timestamp.now()',
    'import pandas as pd\npd.Timestamp.today()',
    'import pandas as pd\npd.Timestamp.utcnow()',
    "import pandas as pd\npd.Timestamp('now')",
    "import pandas as pd\npd.to_datetime('today')",
    "import numpy as np\nnp.datetime64('now')",
    "import numpy as np\nnp.datetime64(' Today ')",
])
async def test_the_libraries_read_the_clock_only_through_the_host(pool, code):
    """As datetime.now() does: refused without a grant, the host's clock with one (which a replay reads from the journal)."""
    async with pool.checkout() as session:
        with pytest.raises(corral.SandboxRuntimeError) as caught:
            await session.feed_run(code)
    assert str(caught.value).strip().splitlines()[-1] == CLOCK_REFUSED
    moment = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc)
    async with pool.checkout(os_access=corral.OsAccess(clock=lambda: moment)) as session:
        value = await session.feed_run(code)
    assert value in (datetime.datetime(2024, 5, 6, 7, 8, 9), datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.timezone.utc), datetime.datetime(2024, 5, 6))


async def test_timestamps_and_datetimes_of_values_are_unchanged(pool):
    async with pool.checkout() as session:
        assert await session.feed_run(
            "import numpy as np\nimport pandas as pd\n(pd.Timestamp('2024-01-02 03:04'), np.datetime64('2024-01-02'), pd.Timestamp(2024, 1, 2), pd.date_range('2024-01-01', periods=2).tolist())"
        ) == (datetime.datetime(2024, 1, 2, 3, 4), datetime.datetime(2024, 1, 2), datetime.datetime(2024, 1, 2), [datetime.datetime(2024, 1, 1), datetime.datetime(2024, 1, 2)])
