"""numpy, pandas and matplotlib in the sandbox: loaded before the lockdown, closed where they reach out.

A pool made with `Pool(packages=[...])` starts a zygote that calls `load(packages)` before it
locks down (`corral.worker.zygote`): a locked-down worker cannot open a file, so everything these
libraries would read later is read here, once, and every forked worker shares it:

- numpy, pandas and matplotlib are imported, with the modules they import on first use (pandas'
  parsers and formatters, Pillow's PNG writer) loaded by a warm-up that uses them;
- matplotlib draws with the Agg backend; its fonts (the ones it ships) are read into memory, and
  `FT2Font`, the PDF and PostScript writers and fontTools (which subsets the fonts they embed)
  read them from there (a font file kept open would be one file offset shared by every worker);
  `savefig` writes PNG, JPEG, GIF, TIFF, WebP, raw RGBA, SVG, PDF, PostScript and EPS, and
  refuses the rest (PGF runs LaTeX, AVIF's encoder starts threads) in matplotlib's own words;
- BLAS runs one thread (the host starts the zygote with `OPENBLAS_NUM_THREADS=1` and friends): a
  zygote forks workers only while it is single-threaded.

Their clocks (`pd.Timestamp.now()`, `pd.Timestamp('now')`, `np.datetime64('today')`) read the
host's clock, as `datetime.now()` does: through the session's clock grant, recorded for a replay.

What the libraries offer that reaches past the sandbox is closed in their own classes, where
every way to it passes (a method read by name, pandas' string dispatch `df.agg('to_pickle')`, a
subclass's `super()`), with an `AttributeError` that says what to use instead
(`PACKAGE_ATTRIBUTE_HINTS`): pickle in every form (`to_pickle`, `ndarray.dump`/`dumps`), raw memory
(`ndarray.ctypes`), strings evaluated as code (`DataFrame.query`/`eval`), other processes and the
clipboard, and file formats whose libraries are not in the sandbox. Functions taking a function by
name (`df.agg('sum')`) refuse names the attribute rules refuse (`'__getattribute__'`, `'_mgr'`).
Files are read and written through the sandbox's `open()`, so `pd.read_csv('/data/q1.csv')` and
`df.to_csv('/out/x.csv')` work on the session's mounts and fail elsewhere with `open()`'s words.

The module facades (`BUILDERS`: what `import numpy` gives a script) hold the reviewed public API;
`catalog.MEMBER_HINTS` says why the rest is missing. The host never imports this module.
"""

from __future__ import annotations

import codecs
import contextlib
import functools
import importlib
import io
import operator
import os
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

from ..values import AGG_MAX_SIDE, figure_pixels, library_repr, package_form
from . import hostio
from .catalog import PACKAGE_ATTRIBUTE_HINTS, PACKAGE_MODULES, PACKAGES, WITHHELD_PACKAGE_NAMES, package_closure
from .facades import clock_method, session_entropy
from .guards import special_name_hook
from .rules import attribute_refusal, is_dunder, is_private, normalize

__all__ = ['BUILDERS', 'load', 'loaded', 'take_shown']

_loaded: list[str] = []


#: The figures `plt.show()` showed in the feed running (see `take_shown`).
_shown: list[Any] = []


def take_shown() -> list[Any]:
    """The figures `plt.show()` showed since the last call (the worker makes them the feed's
    value when the script has none: each is checked against the value_size limit by its pixel
    size, then drawn as a PNG image, as a figure that is the last expression is)."""
    figures = _shown[:]
    _shown.clear()
    return figures


def show(*args: Any, **kwargs: Any) -> None:
    """`matplotlib.pyplot.show`: every open figure comes back to the host as a PNG image, as
    the script's value (when its last expression has none), and is closed. The figures are
    drawn when the feed ends."""
    import matplotlib.pyplot as plt

    for number in plt.get_fignums():
        _shown.append(plt.figure(number))
    plt.close('all')


show.__module__ = 'matplotlib.pyplot'


def loaded() -> tuple[str, ...]:
    """The packages `load` loaded in this process (the zygote's, inherited by its workers)."""
    return tuple(_loaded)


# ----- closing attributes in the libraries' own classes ------------------------------------------

class _Refused:
    """A class attribute that is not there: reading it raises `AttributeError` with the reason."""

    __slots__ = ('_text',)

    def __init__(self, text: str) -> None:
        self._text = text

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        # with `obj` given, 3.12 and later add no `Did you mean` of their own to the reason
        raise AttributeError(self._text, obj=owner if obj is None else obj)

    def __set_name__(self, owner: Any, name: str) -> None:
        pass


def _close(cls: type, name: str, hint: str) -> None:
    """Replace `cls.name` with a `_Refused` attribute."""
    _set_on_type(cls, name, _Refused(f"'{cls.__name__}' object has no attribute '{name}' in the sandbox: {hint}"))


#: Offsets in CPython's PyTypeObject (Include/cpython/object.h, unchanged from 3.8 to 3.13 on
#: 64-bit Linux): tp_flags, tp_base, tp_new. Checked against each type before use.
_TP_FLAGS, _TP_BASE, _TP_NEW = 168, 256, 312
_TPFLAGS_IMMUTABLETYPE = 1 << 8
_TPFLAGS_HEAPTYPE = 1 << 9


def _type_field(cls: type, offset: int, kind: Any) -> Any:
    import ctypes

    flags = ctypes.c_ulong.from_address(id(cls) + _TP_FLAGS)
    base = ctypes.c_void_p.from_address(id(cls) + _TP_BASE)
    if flags.value != cls.__flags__ or base.value != id(cls.__base__):
        raise RuntimeError(f'the layout of type objects in this CPython is not the one the sandbox knows; {cls.__name__} cannot be closed')
    return kind.from_address(id(cls) + offset)


def _set_on_type(cls: type, name: str, value: Any) -> None:
    """`setattr(cls, name, value)`, for a static type too (numpy's `ndarray`): its flag that
    makes it immutable is lifted for the assignment, so CPython updates the type's slots as for
    any class (`__new__` included)."""
    if not cls.__flags__ & _TPFLAGS_IMMUTABLETYPE:
        setattr(cls, name, value)
        return
    import ctypes

    flags = _type_field(cls, _TP_FLAGS, ctypes.c_ulong)
    flags.value &= ~_TPFLAGS_IMMUTABLETYPE
    try:
        setattr(cls, name, value)
    finally:
        flags.value |= _TPFLAGS_IMMUTABLETYPE


def _native_new(cls: type) -> Callable[..., Any]:
    """`cls`'s own constructor, callable as `new(subtype, args, kwargs)` once `cls.__new__` is
    replaced: a heap type's `__new__` function, or a static type's `tp_new` (CPython refuses to
    call a static type's old `__new__` for it)."""
    if cls.__flags__ & _TPFLAGS_HEAPTYPE:
        original = cls.__new__
        return lambda subtype, args, kwargs: original(subtype, *args, **kwargs)
    import ctypes

    newfunc = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object)
    return newfunc(_type_field(cls, _TP_NEW, ctypes.c_void_p).value)


def _checked_ndarray_new(ndarray: type) -> Callable[..., Any]:
    """`ndarray.__new__` refusing what numpy does not check when it wraps a buffer: a negative
    `offset` (it reads before the buffer) and a dtype holding objects (it makes object pointers
    of the buffer's bytes)."""
    import numpy as np

    array_new = _native_new(ndarray)

    def __new__(subtype: Any, *args: Any, **kwargs: Any) -> Any:
        names = ('shape', 'dtype', 'buffer', 'offset')
        given = {**dict(zip(names, args)), **kwargs}
        if given.get('buffer') is not None:
            if given.get('offset', 0) is not None and operator.index(given.get('offset', 0)) < 0:
                raise ValueError('offset must be non-negative and no greater than buffer length')
            if np.dtype(given.get('dtype', float)).hasobject:
                raise ValueError('cannot create an OBJECT array from memory buffer')
        return array_new(subtype, args, kwargs)

    return __new__


#: The strings numpy and pandas turn into the current time.
_CLOCK_WORDS = frozenset({'now', 'today'})


def _clock_word(value: Any) -> str | None:
    return value.strip().lower() if isinstance(value, str) and value.strip().lower() in _CLOCK_WORDS else None


def _host_clock(cls: type, build: Callable[[Any, str], Any]) -> Callable[..., Any]:
    """`cls.__new__` that reads 'now' and 'today' from the host's clock (`build(cls, word)`), as
    `datetime.now()` does: through the session's clock grant, which a replay reads from the
    journal. Every other value goes to the library's own constructor."""
    native = _native_new(cls)

    def __new__(subtype: Any, *args: Any, **kwargs: Any) -> Any:
        word = _clock_word(args[0]) if args else None
        if word is not None and not kwargs and len(args) == 1:
            return build(subtype, word)
        return native(subtype, args, kwargs)

    return __new__


def _library_folders() -> tuple[str, ...]:
    return tuple(os.path.dirname(sys.modules[name].__file__ or '') + os.sep for name in PACKAGES if name in sys.modules)


def _checked_resize(resize: Any) -> Callable[..., Any]:
    def resize_(self: Any, *shape: Any, refcheck: bool = True) -> Any:
        """`ndarray.resize`; only the libraries' own code may turn `refcheck` off (a view of the
        old memory would read it freed)."""
        if not refcheck and not sys._getframe(1).f_code.co_filename.startswith(_library_folders()):
            raise ValueError('resize(refcheck=False) is not available in the sandbox: views of the array would read freed memory; use np.resize(a, shape), which makes a new array')
        return resize(self, *shape, refcheck=refcheck)

    resize_.__name__ = resize_.__qualname__ = 'resize'
    return resize_


def _function_names(function: str, value: Any) -> None:
    """Refuse function names the attribute rules refuse, in what `agg`/`apply`/`transform` take
    (a name, a list of them, a dict of either)."""
    if isinstance(value, str):
        name = normalize(value)
        refusal = attribute_refusal(name)
        if refusal is None and is_dunder(name):
            refusal = f"attribute '{value}' is a special method: name the operation instead ('sum', 'mean', 'max' ...)"
        if refusal is None and is_private(name):
            refusal = f"attribute '{value}' is private: the sandbox refuses names starting with '_' on the libraries' objects; use the public API"
        if refusal is not None:
            raise AttributeError(f'{function}({value!r}): {refusal}')
    elif isinstance(value, dict):
        for item in value.values():
            _function_names(function, item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _function_names(function, item)


def _checking_names(method: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(method)
    def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
        for value in (*args[:1], kwargs.get('func'), kwargs.get('arg')):
            _function_names(name, value)
        return method(self, *args, **kwargs)

    checked._corral_checked = True  # type: ignore[attr-defined]
    return checked


# ----- files through the sandbox's open() ----------------------------------------------------------

def _is_path(value: Any) -> bool:
    return isinstance(value, (str, bytes)) or isinstance(value, os.PathLike)


def _reader(function: Callable[..., Any], argument: str, mode: str) -> Callable[..., Any]:
    """`function` with its `argument` (first positional) opened through the sandbox's open()."""

    @functools.wraps(function)
    def read(*args: Any, **kwargs: Any) -> Any:
        if args and _is_path(args[0]):
            with hostio.open(args[0], mode) as file:
                return function(file, *args[1:], **kwargs)
        if _is_path(kwargs.get(argument)):
            with hostio.open(kwargs.pop(argument), mode) as file:
                return function(*args, **{argument: file}, **kwargs)
        return function(*args, **kwargs)

    return read


def _writer(method: Callable[..., Any], argument: str, *, binary: bool = False, position: int = 0, suffix_format: bool = False) -> Callable[..., Any]:
    """`method` (a method, or a function with `position` arguments before the path) with its
    path `argument` opened for writing through the sandbox's open() (mode 'w', or `mode=` 'a').
    `suffix_format`: the path's suffix is the `format` when none is given (`savefig` reads the
    format from a path's name, which the file opened for it has not)."""

    @functools.wraps(method)
    def write(*args: Any, **kwargs: Any) -> Any:
        where = position + 1 if position >= 0 else 0
        mode = kwargs.get('mode', 'w') if not binary else 'wb'
        if mode not in ('w', 'a', 'x', 'wb'):
            mode = 'w'
        path = args[where] if len(args) > where else kwargs.get(argument)
        if suffix_format and kwargs.get('format') is None and _is_path(path):
            suffix = os.path.splitext(hostio.fspath(path))[1][1:]
            if suffix:
                kwargs['format'] = suffix
        if len(args) > where and _is_path(args[where]):
            with hostio.open(args[where], mode) as file:
                return method(*args[:where], file, *args[where + 1 :], **kwargs)
        if _is_path(kwargs.get(argument)):
            path = kwargs.pop(argument)
            with hostio.open(path, mode) as file:
                return method(*args, **{argument: file}, **kwargs)
        return method(*args, **kwargs)

    return write


# ----- loading ---------------------------------------------------------------------------------------

def load(packages: Iterable[str]) -> None:
    """Import `packages` (names of `catalog.PACKAGES`, with what they need) and close them; in
    the zygote, before the lockdown (`modules.load_packages`, which then builds their facades).
    Raises `ImportError` when one is not installed."""
    wanted = set(package_closure(packages))
    for name in PACKAGES:
        if name in wanted and name not in _loaded:
            _LOADERS[name]()
            _loaded.append(name)


def _load_numpy() -> None:
    import numpy as np
    import numpy.fft
    import numpy.linalg
    import numpy.random

    for cls in (np.ndarray, np.generic):
        for name, hint in PACKAGE_ATTRIBUTE_HINTS['ndarray'].items():
            if name in cls.__dict__:
                _close(cls, name, hint)
    _set_on_type(np.ndarray, '__new__', _checked_ndarray_new(np.ndarray))

    def moment(cls: Any, word: str) -> Any:
        now = hostio.now().replace(tzinfo=None)
        return np.datetime64(now.date() if word == 'today' else now, 'D' if word == 'today' else 's')

    _set_on_type(np.datetime64, '__new__', _host_clock(np.datetime64, moment))
    _set_on_type(np.ndarray, 'resize', _checked_resize(np.ndarray.resize))
    # warm-up: what numpy loads or builds on first use
    values = np.arange(12.0).reshape(3, 4)
    repr(values), str(values), repr(np.float64(1.5)), values.tolist()
    np.linalg.inv(np.eye(3)), np.linalg.svd(values), np.fft.fft(values[0])
    np.random.default_rng(0).normal(size=3), np.random.RandomState(0).rand(2)
    np.loadtxt(io.StringIO('1 2\n3 4')), np.savetxt(io.StringIO(), values)
    np.datetime64('2024-01-01') + np.timedelta64(1, 'D')
    np.array(['a', 'b']).astype('U3'), np.unique(values), np.percentile(values, 50)
    package_form(values), package_form(np.datetime64('2024-01-01T10:00')), library_repr(values), library_repr(values[0, 0])


def _load_pandas() -> None:
    import pandas as pd
    from pandas.core.generic import NDFrame
    from pandas.core.groupby import DataFrameGroupBy, SeriesGroupBy
    from pandas.core.resample import Resampler
    from pandas.core.window.ewm import ExponentialMovingWindow
    from pandas.core.window.expanding import Expanding
    from pandas.core.window.rolling import Rolling, Window

    # the clock: pd.Timestamp.now() and pd.Timestamp('now') read it through the host, as datetime.now() does
    for name in ('now', 'today', 'utcnow'):
        _set_on_type(pd.Timestamp, name, staticmethod(clock_method(pd.Timestamp, name)))
    _set_on_type(pd.Timestamp, '__new__', _host_clock(pd.Timestamp, lambda cls, word: getattr(pd.Timestamp, word)()))
    # a Series answers its labels as attributes, a frame its columns: never a special name
    for cls in (NDFrame, DataFrameGroupBy, SeriesGroupBy, Resampler, Rolling, Window, Expanding, ExponentialMovingWindow):
        for base in cls.__mro__:
            hook = base.__dict__.get('__getattr__')
            if hook is not None and base.__module__.startswith('pandas') and not getattr(hook, '_corral_checked', False):
                base.__getattr__ = special_name_hook(hook)
    for name, hint in PACKAGE_ATTRIBUTE_HINTS['DataFrame'].items():
        for cls in (pd.DataFrame, pd.Series):
            if any(name in vars(base) for base in cls.__mro__):
                _close(cls, name, hint)
        if name in vars(NDFrame):
            _close(NDFrame, name, hint)
    for cls in (pd.DataFrame, pd.Series, DataFrameGroupBy, SeriesGroupBy, Resampler, Rolling, Window, Expanding, ExponentialMovingWindow):
        for base in cls.__mro__:
            for name in ('agg', 'aggregate', 'apply', 'transform'):
                method = base.__dict__.get(name)
                if base.__module__.startswith('pandas') and callable(method) and not getattr(method, '_corral_checked', False):
                    setattr(base, name, _checking_names(method, name))
    for cls, writers in ((pd.DataFrame, ('to_csv', 'to_json', 'to_string', 'to_html')), (pd.Series, ('to_csv', 'to_json', 'to_string'))):
        for name in writers:
            method = getattr(cls, name)
            argument = 'buf' if name in ('to_string', 'to_html') else 'path_or_buf'
            setattr(cls, name, _writer(method, argument))
    # pandas imports a plotting backend by its name: only matplotlib, preloaded
    from pandas._config import config

    option = config._registered_options['plotting.backend']

    def validator(value: Any) -> None:
        if value != 'matplotlib':
            raise ValueError("the sandbox's plotting backend is 'matplotlib'")

    config._registered_options['plotting.backend'] = option._replace(validator=validator)
    # warm-up: parsers, formatters, group-bys and the modules they import on first use
    frame = pd.read_csv(io.StringIO('x,y,when\na,1,2024-01-01\nb,2.5,2024-02-01\na,3,2024-03-01\n'), parse_dates=['when'])
    repr(frame), str(frame), frame.to_string(), frame.to_html(), frame.describe(), frame.to_json(), frame.to_csv()
    frame.groupby('x')[['y']].agg(['sum', 'mean']), frame.groupby('x')['y'].sum(), frame.pivot_table(index='x', values='y')
    frame.sort_values('y'), frame.merge(frame, on='x'), frame.set_index('when')[['y']].resample('ME').sum()
    frame['y'].rolling(2).mean(), frame['when'].dt.year, frame['x'].str.upper(), frame.dtypes, frame.info(buf=io.StringIO())
    pd.read_json(io.StringIO(frame.to_json())), pd.to_datetime(['2024-01-01']), pd.date_range('2024-01-01', periods=3)
    pd.concat([frame, frame]), frame.isna().sum(), frame.corr(numeric_only=True), pd.Categorical(['a', 'b'])
    for orient in ('dict', 'list', 'series', 'split', 'tight', 'records', 'index'):
        frame.to_dict(orient=orient)
    frame['y'].to_dict(), frame['y'].to_list(), frame.index.to_list(), repr(frame.index), repr(frame.columns)
    package_form(frame), package_form(frame['y']), library_repr(frame), library_repr(frame['y'])


#: The fonts matplotlib ships (TrueType, and the AFM metrics of the PDF and PostScript core
#: fonts), read before the lockdown: path -> bytes.
_FONTS: dict[str, bytes] = {}


def _load_matplotlib() -> None:
    import matplotlib

    matplotlib.use('Agg')
    import fontTools.ttLib
    import matplotlib.pyplot as plt
    from matplotlib import font_manager, ft2font
    from matplotlib.figure import Figure

    data = matplotlib.get_data_path()
    manager = font_manager.fontManager
    manager.ttflist = [entry for entry in manager.ttflist if _inside(entry.fname, data)]
    manager.afmlist = [entry for entry in manager.afmlist if _inside(entry.fname, data)]
    for kind, suffix in (('ttf', '.ttf'), ('afm', '.afm'), ('pdfcorefonts', '.afm')):
        folder = os.path.join(data, 'fonts', kind)
        for name in sorted(os.listdir(folder)):
            if name.endswith(suffix):
                path = os.path.join(folder, name)
                with open(path, 'rb') as file:
                    _FONTS[path] = _FONTS[os.path.realpath(path)] = file.read()
    for entry in (*manager.ttflist, *manager.afmlist):
        _FONTS.setdefault(_font_key(entry.fname), _FONTS.get(os.path.realpath(entry.fname), b''))
    real_font = ft2font.FT2Font

    def memory_font(filename: Any, *args: Any, **kwargs: Any) -> Any:
        return real_font(_font_file(filename), *args, **kwargs)

    font_manager.ft2font = types.SimpleNamespace(**{**vars(ft2font), 'FT2Font': memory_font})
    font_manager._get_font.cache_clear()
    # matplotlib asks whether a font file exists, and where it really is, before it loads it (a
    # stat, refused after the lockdown): the fonts in memory answer
    from matplotlib import _mathtext

    font_os = types.SimpleNamespace(**{**vars(os), 'stat': _font_stat, 'path': types.SimpleNamespace(**{
        **vars(os.path),
        'exists': lambda path: _is_font(path) or os.path.exists(path),
        'isfile': lambda path: _is_font(path) or os.path.isfile(path),
        'realpath': lambda path, **kwargs: _font_key(path) if _is_font(path) else os.path.realpath(path, **kwargs),
    })})
    font_manager.os = _mathtext.os = font_os
    _file_formats(font_os)
    _script_files()
    Figure.savefig = _writer(_bounded_savefig(Figure.savefig), 'fname', binary=True, suffix_format=True)
    _close_programs()
    # warm-up: draw and write a figure with what a plot usually has (Pillow's PNG writer loads here)
    figure, axes = plt.subplots()
    axes.plot([1, 2, 3], [1, 4, 9], label='$x^2$')
    axes.bar(['a', 'b'], [1, 2]), axes.scatter([1], [2]), axes.hist([1, 2, 2, 3])
    axes.set_title('title'), axes.set_xlabel('x'), axes.legend(), axes.grid(True)
    axes.imshow([[0, 1], [1, 0]]), figure.colorbar(axes.images[0]), axes.set_yscale('log'), figure.tight_layout()
    axes.annotate('note', xy=(1, 1), fontweight='bold', fontstyle='italic', family='monospace')
    figure.autofmt_xdate()
    if 'pandas' in sys.modules:  # pandas finds its matplotlib backend on first use
        import pandas as pd

        frame = pd.DataFrame({'x': [1, 2, 3], 'y': [3, 1, 2]}, index=pd.date_range('2024-01-01', periods=3))
        frame.plot(), frame['y'].plot.pie(), frame.plot.bar(), frame.plot.scatter(x='x', y='y'), frame.hist()
    figure.savefig(io.BytesIO(), format='png'), figure.savefig(io.BytesIO(), format='svg')
    # the other writers (Pillow's); fonttype 3 draws the glyphs in a PDF or PostScript file, 42
    # embeds the font, subset by fontTools, which imports the module of each font table it reads
    # on first use: every table of every font
    figure, axes = plt.subplots(figsize=(1, 1), dpi=10)
    axes.plot([1, 2]), axes.set_title('$x^2$ ü'), axes.set_xlabel('x', family='serif'), axes.set_ylabel('y', family='monospace')
    for form in ('jpg', 'gif', 'tiff', 'webp', 'svgz', 'pdf', 'ps', 'eps'):
        figure.savefig(io.BytesIO(), format=form)
    for path in {_font_key(entry.fname) for entry in manager.ttflist}:
        for tag in fontTools.ttLib.TTFont(_font_file(path), lazy=True).keys():
            fontTools.ttLib.getTableModule(tag)
    for encoding in ('mac_roman', 'utf_16_be', 'utf_32_be', 'latin_1'):  # font names, PostScript text
        codecs.lookup(encoding)
    plt.close('all')


#: The formats `savefig` writes in the sandbox. Left out: pgf (it runs LaTeX, a process) and
#: avif (its encoder starts threads).
_FORMATS = ('png', 'jpg', 'jpeg', 'gif', 'tif', 'tiff', 'webp', 'raw', 'rgba', 'svg', 'svgz', 'pdf', 'ps', 'eps')


def _file_formats(font_os: Any) -> None:
    """Load the writers of every format in `_FORMATS`, reading fonts from memory, and drop the
    rest from matplotlib's table of formats, so `savefig` refuses them with its own words
    ("Format 'pgf' is not supported (supported formats: ...)")."""
    import fontTools.ttLib.ttFont
    from matplotlib import backend_bases
    from matplotlib.backends import _backend_pdf_ps, backend_pdf, backend_ps, backend_svg
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import GifImagePlugin, JpegImagePlugin, TiffImagePlugin, WebPImagePlugin  # noqa: F401  (savefig's writers)

    # the files carry no date from the worker's clock (a script reads the clock through the
    # session's grant): the writers date them as reproducible builds do, from SOURCE_DATE_EPOCH
    # (reproducible-builds.org/specs/source-date-epoch), which reads 0 here: 1970-01-01
    dated = types.SimpleNamespace(**{**vars(font_os), 'getenv': lambda key, default=None: '0' if key == 'SOURCE_DATE_EPOCH' else os.getenv(key, default)})
    backend_pdf.os = backend_ps.os = backend_svg.os = dated
    for module in (_backend_pdf_ps, backend_pdf, fontTools.ttLib.ttFont):
        module.open = _font_open  # type: ignore[attr-defined]  (a module's global shadows the builtin)
    for form in list(backend_bases._default_backends):
        if form in _FORMATS:
            backend_bases.get_registered_canvas_class(form)
        else:
            del backend_bases._default_backends[form], backend_bases._default_filetypes[form]
            if f'print_{form}' in vars(FigureCanvasAgg):
                delattr(FigureCanvasAgg, f'print_{form}')


#: matplotlib's settings that run a program (LaTeX, Ghostscript): name -> (the values that run
#: none, the refusal).
_PROGRAM_SETTINGS = {
    'text.usetex': ((False,), "text.usetex is not available in the sandbox: it runs LaTeX, a program; matplotlib's own mathtext renders $...$"),
    'ps.usedistiller': ((None, False), 'ps.usedistiller is not available in the sandbox: it runs Ghostscript or xpdf, programs; savefig writes PostScript and EPS without it'),
}


def _refuse_program(key: str, value: Any) -> None:
    """Raise `ValueError` with the refusal when setting `key` to `value` would run a program."""
    if key in _PROGRAM_SETTINGS:
        import matplotlib

        allowed, refusal = _PROGRAM_SETTINGS[key]
        if matplotlib.RcParams.validate[key](value) not in allowed:
            raise ValueError(refusal)


def _close_programs() -> None:
    """Refuse, where they are set, the settings that run a program: `rcParams[...] = ...` (and
    `plt.rc`, `rcParams.update`, `rc_context`, which go through it), a text's `usetex=True`;
    and where the program would run (TeX's manager, PostScript's distillers), for a setting
    made some other way."""
    import matplotlib
    from matplotlib import texmanager
    from matplotlib.backends import backend_ps
    from matplotlib.text import Text

    setitem = matplotlib.RcParams.__setitem__

    @functools.wraps(setitem)
    def __setitem__(self: Any, key: str, value: Any) -> None:
        _refuse_program(key, value)
        setitem(self, key, value)

    set_usetex = Text.set_usetex

    @functools.wraps(set_usetex)
    def set_usetex_(self: Any, usetex: Any) -> None:
        if usetex is not None:
            _refuse_program('text.usetex', usetex)
        set_usetex(self, usetex)

    def no_tex(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(_PROGRAM_SETTINGS['text.usetex'][1])

    def no_distiller(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(_PROGRAM_SETTINGS['ps.usedistiller'][1])

    matplotlib.RcParams.__setitem__ = __setitem__  # type: ignore[method-assign]
    Text.set_usetex = set_usetex_  # type: ignore[method-assign]
    texmanager.TexManager.__new__ = no_tex  # type: ignore[method-assign]
    backend_ps.gs_distill = backend_ps.xpdf_distill = no_distiller


#: The formats `savefig` draws with Agg, into width * height * 4 bytes.
_RASTER_FORMATS = frozenset({'png', 'jpg', 'jpeg', 'gif', 'tif', 'tiff', 'webp', 'raw', 'rgba'})


def _bounded_savefig(savefig: Callable[..., Any]) -> Callable[..., Any]:
    """`Figure.savefig` drawing with Agg only (`backend=` another is refused), running no
    program (`_PROGRAM_SETTINGS`, however they were set), and refusing to
    draw a figure whose pixels take more bytes than the memory limit (RLIMIT_AS) allows, before
    it allocates them (past `AGG_MAX_SIDE` a side, matplotlib refuses it in its own words)."""
    import resource

    import matplotlib

    @functools.wraps(savefig)
    def bounded(self: Any, *args: Any, **kwargs: Any) -> Any:
        backend = kwargs.get('backend')
        if backend is not None and str(backend).lower() != 'agg':
            raise ValueError(f"savefig(backend={backend!r}) is not available in the sandbox: figures are drawn with Agg; savefig(format=...) picks the file's format (png, pdf, svg, ps ...)")
        for key, (allowed, refusal) in _PROGRAM_SETTINGS.items():  # set past rcParams' own checks
            if matplotlib.rcParams[key] not in allowed:
                raise ValueError(refusal)
        form = kwargs.get('format') or matplotlib.rcParams['savefig.format']
        if str(form).lower() in _RASTER_FORMATS:
            width, height = figure_pixels(self, kwargs.get('dpi'))
            drawn, memory = width * height * 4, resource.getrlimit(resource.RLIMIT_AS)[0]
            if width < AGG_MAX_SIDE and height < AGG_MAX_SIDE and memory != resource.RLIM_INFINITY and drawn > memory:
                raise ValueError(
                    f'savefig would draw a figure of {width:,} x {height:,} pixels into {drawn:,} bytes, more than the memory '
                    f'limit of {memory:,} bytes: make the figure smaller (figsize) or its dpi lower'
                )
        return savefig(self, *args, **kwargs)

    return bounded


def _script_files() -> None:
    """Route the paths a script hands matplotlib (and Pillow, which writes and reads its images)
    through the sandbox's open(), wherever they are opened: `cbook.to_filehandle` (and
    `open_file_cm`, on it: `print_png`, `print_figure`, `print_svg`, `PdfPages` ...),
    `_open_file_or_url` (`rc_file`, `rc_context(fname=)`, a style file) and Pillow's `open`,
    `os.path.exists` and `os.remove` (`AxesImage.write_png`, `imsave`, `imread`). A path on a mount works; any other, a URL
    too, is refused with open()'s words. matplotlib's own files are read before this: its
    styles (`matplotlib.style.core`, imported here) and its fonts (`_FONTS`)."""
    import gzip

    import matplotlib
    import matplotlib.style.core  # noqa: F401  (its library of styles: read now, with matplotlib's open)
    from matplotlib import cbook
    from PIL import Image, ImageFile, TiffImagePlugin

    from .facades import exists, remove

    to_filehandle = cbook.to_filehandle

    def script_filehandle(fname: Any, flag: str = 'r', return_opened: bool = False, encoding: str | None = None) -> Any:
        if not isinstance(fname, (str, os.PathLike)):
            return to_filehandle(fname, flag, return_opened, encoding)
        path = hostio.fspath(fname)
        if path.endswith(('.gz', '.bz2')):
            raw = hostio.open(path, flag.replace('b', '').replace('t', '') + 'b')
            if path.endswith('.gz'):
                file = gzip.GzipFile(fileobj=raw, mode=flag)
                file.myfileobj = raw  # closed with the file, as gzip.open closes what it opened
            else:
                import bz2

                file = bz2.BZ2File(raw, flag)
                file._closefp = True  # closed with the file, as BZ2File closes what it opened
        else:
            file = hostio.open(path, flag, encoding=encoding)
        return (file, True) if return_opened else file

    @contextlib.contextmanager
    def open_file_or_url(fname: Any) -> Any:
        with hostio.open(fname, encoding='utf-8') as file:
            yield file

    cbook.to_filehandle = script_filehandle
    matplotlib._open_file_or_url = open_file_or_url
    Image.builtins = types.SimpleNamespace(open=hostio.open)  # type: ignore[attr-defined]
    # Image.save asks whether the path exists first, and removes the file it made if writing fails
    Image.os = types.SimpleNamespace(**{**vars(os), 'remove': remove, 'path': types.SimpleNamespace(**{**vars(os.path), 'exists': exists})})  # type: ignore[attr-defined]
    ImageFile.open = TiffImagePlugin.open = hostio.open  # type: ignore[attr-defined]  (a module's global shadows the builtin)


class _FontFile(io.BytesIO):
    """A font file read into memory. Its repr is its path: `FT2Font` takes a file's repr for its
    `fname`, by which the PDF and PostScript writers find the font again to embed it."""

    def __init__(self, path: str) -> None:
        super().__init__(_FONTS[path])
        self._path = path

    def __repr__(self) -> str:
        return self._path


def _font_file(path: Any) -> _FontFile:
    """A font read into memory, as a file. Anything else (another path, a file a script made)
    is refused: FreeType and fontTools parse only the fonts matplotlib ships."""
    if not _is_font(path):
        raise FileNotFoundError(f'the sandbox has the fonts matplotlib ships, not {os.fsdecode(path) if _is_path(path) else path!r}')
    return _FontFile(_font_key(path))


def _font_open(path: Any, mode: str = 'r') -> Any:
    """`open()` for the font readers of matplotlib's PDF and PostScript writers (and fontTools,
    which subsets the fonts they embed): a font file, from memory."""
    if mode != 'rb':
        raise PermissionError(f'the sandbox reads the fonts matplotlib ships, and writes none: {os.fsdecode(path)!r}')
    return _font_file(path)


def _font_stat(path: Any, *args: Any, **kwargs: Any) -> Any:
    """`os.stat` for matplotlib's font writers, which log a font's size: a font in memory answers."""
    if _is_font(path):
        return os.stat_result((0o100444, 0, 0, 1, 0, 0, len(_FONTS[_font_key(path)]), 0, 0, 0))
    return os.stat(path, *args, **kwargs)


def _inside(path: str, folder: str) -> bool:
    return os.path.realpath(path).startswith(os.path.realpath(folder) + os.sep)


def _font_key(path: Any) -> str:
    # a plain str: matplotlib's FontPath is a str that hashes with its face index
    return str.__str__(os.fsdecode(path))


def _is_font(path: Any) -> bool:
    """A font read into memory before the lockdown (`_FONTS`)."""
    return _is_path(path) and _font_key(path) in _FONTS


_LOADERS: dict[str, Callable[[], None]] = {'numpy': _load_numpy, 'pandas': _load_pandas, 'matplotlib': _load_matplotlib}


# ----- the facades -------------------------------------------------------------------------------------

def _public(module: types.ModuleType, names: Iterable[str]) -> dict[str, Any]:
    withheld = WITHHELD_PACKAGE_NAMES.get(module.__name__, frozenset())
    values = {}
    for name in names:
        # vars(): a name the module would import on first use (numpy's `__getattr__`) is a module anyway
        if name.startswith('_') or name in withheld or name not in vars(module):
            continue
        value = vars(module)[name]
        if not isinstance(value, types.ModuleType):
            values[name] = value
    return values


def _numpy() -> dict[str, Any]:
    import numpy as np

    values = _public(np, np.__all__)
    values['loadtxt'] = _reader(np.loadtxt, 'fname', 'r')
    values['genfromtxt'] = _reader(np.genfromtxt, 'fname', 'r')
    values['savetxt'] = _writer(np.savetxt, 'fname', position=-1)
    return values


def _numpy_random() -> dict[str, Any]:
    import numpy as np

    random = np.random
    values = _public(random, random.__all__)

    def default_rng(seed: Any = None) -> np.random.Generator:
        """A `Generator`; without a seed, one drawn from the session's seed (reproducible)."""
        return random.default_rng(session_entropy().getrandbits(128) if seed is None else seed)

    default_rng.__module__ = 'numpy.random'
    values['default_rng'] = default_rng
    state: dict[str, Any] = {}

    def legacy(name: str) -> Callable[..., Any]:
        def function(*args: Any, **kwargs: Any) -> Any:
            generator = state.get('rs')
            if generator is None:
                generator = state['rs'] = random.RandomState(session_entropy().getrandbits(32))
            if name == 'seed' and not args and not kwargs:
                args = (session_entropy().getrandbits(32),)
            return getattr(generator, name)(*args, **kwargs)

        function.__name__ = function.__qualname__ = name
        function.__doc__ = getattr(random.RandomState, name).__doc__
        function.__module__ = 'numpy.random'
        return function

    for name in list(values):
        if name not in ('Generator', 'RandomState', 'SeedSequence', 'BitGenerator', 'MT19937', 'Philox', 'PCG64', 'PCG64DXSM', 'SFC64', 'default_rng'):
            if hasattr(random.RandomState, name):
                values[name] = legacy(name)
    return values


def _module_of(name: str) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        module = importlib.import_module(name)
        return _public(module, getattr(module, '__all__', None) or dir(module))

    return build


def _pandas() -> dict[str, Any]:
    import pandas as pd

    values = _public(pd, pd.__all__)
    for name in ('read_csv', 'read_table', 'read_fwf'):
        values[name] = _reader(getattr(pd, name), 'filepath_or_buffer', 'rb')
    values['read_json'] = _reader(pd.read_json, 'path_or_buf', 'r')
    return values


def _matplotlib() -> dict[str, Any]:
    import matplotlib

    return _public(matplotlib, matplotlib.__all__)


def _pyplot() -> dict[str, Any]:
    import matplotlib.pyplot as plt

    names = [
        name for name in dir(plt)
        if not name.startswith('_') and getattr(getattr(plt, name), '__module__', '') .startswith('matplotlib')
    ]
    values = _public(plt, names)
    values['savefig'] = _writer(plt.savefig, 'fname', binary=True, position=-1, suffix_format=True)
    values['show'] = show
    values['rcParams'] = plt.rcParams
    return values


#: Facades of the packages' modules: module name -> a function returning the facade's names.
BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    'numpy': _numpy,
    'numpy.linalg': _module_of('numpy.linalg'),
    'numpy.fft': _module_of('numpy.fft'),
    'numpy.random': _numpy_random,
    'pandas': _pandas,
    'matplotlib': _matplotlib,
    'matplotlib.pyplot': _pyplot,
}

assert set(BUILDERS) == {module for modules in PACKAGE_MODULES.values() for module in modules}
