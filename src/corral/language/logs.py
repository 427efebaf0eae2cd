"""`logging` and `warnings` for the sandbox: what they write goes to the script's stderr.

- logging: the real module's loggers, levels, handlers and formatters, with `StreamHandler` and
  `basicConfig` writing to the script's stderr (`facades.stderr`) unless given a stream, and no
  `FileHandler` (`basicConfig(filename=...)` is refused: files are opened with `open()`). A
  `{`-style format reads the record's attributes with the sandbox's rules (`install`).
- warnings: `warn` finds the line it names among the frames of the script and the standard
  library (never the sandbox's own), then goes through the real filters (`simplefilter`,
  `filterwarnings`, `catch_warnings` as in CPython); `showwarning` and `formatwarning` show a
  source line only of the script. No `warn_explicit`: it names any file, whose line
  `formatwarning` would read.

`install()` runs in the worker only (`runtime.Worker`): it points the real modules' last-resort
handler, warning printer and `{` style at the sandbox's rules, and shows only the script's own
frames in a logged traceback or stack (no path or source line of the worker's), times a record
by the host's clock as `time.time()` reads it (no clock of the worker's), for the loggers
and formatters a script reaches through `type()` too. The builders (`BUILDERS`) change nothing global, so the
host, which builds the facades to list their names, keeps its own modules as they are.
"""

from __future__ import annotations

import linecache
import logging
import sys
import traceback
import warnings
from typing import Any

from . import hostio
from .facades import stderr
from .facades import time as _clock
from .guards import _refusal
from .strformat import safe_format

__all__ = ['BUILDERS', 'install']

_CORRAL = __file__.rpartition('/language/')[0] + '/'
_SCRIPT = '<script '


# ----- logging ---------------------------------------------------------------------------------

class StreamHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """`logging.StreamHandler`: to the script's stderr unless given a stream."""

    def __init__(self, stream: Any = None) -> None:
        super().__init__(stderr if stream is None else stream)


StreamHandler.__module__ = 'logging'


def basicConfig(**kwargs: Any) -> None:
    """`logging.basicConfig`, with the script's stderr as the default stream; no `filename`."""
    if 'filename' in kwargs or 'filemode' in kwargs:
        raise ValueError(
            "basicConfig(filename=...) is not available in the sandbox: log to the script's stderr (the default), "
            'or to a stream: basicConfig(stream=buffer)'
        )
    if 'stream' not in kwargs and 'handlers' not in kwargs:
        kwargs['stream'] = stderr
    logging.basicConfig(**kwargs)


basicConfig.__module__ = 'logging'


def _module_function(name: str) -> Any:
    """`logging.info` ...: CPython's configures the root logger first when it has no handler."""
    real = getattr(logging, name)

    def function(*args: Any, **kwargs: Any) -> None:
        if not logging.root.handlers:
            basicConfig()
        real(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__module__ = 'logging'
    function.__doc__ = real.__doc__
    return function


def _logging() -> dict[str, Any]:
    names = [name for name in logging.__all__ if name not in ('FileHandler', 'lastResort')]
    values = {name: getattr(logging, name) for name in names}
    values['root'] = logging.root
    values['StreamHandler'] = StreamHandler
    values['basicConfig'] = basicConfig
    for name in ('critical', 'debug', 'error', 'exception', 'fatal', 'info', 'log', 'warn', 'warning'):
        values[name] = _module_function(name)
    return values


def _str_style_format(self: Any, record: logging.LogRecord) -> str:
    """`logging.StrFormatStyle._format`: the record's fields read with the sandbox's rules."""
    values = self._defaults
    fields = {**values, **record.__dict__} if values else record.__dict__
    return safe_format(self._fmt, (), fields, refusal=_refusal, mapping=True)


def _script_frames(frames: traceback.StackSummary) -> traceback.StackSummary:
    """The script's own frames, named as its tracebacks name them (as the worker shows them)."""
    kept = [frame for frame in frames if frame.filename.startswith(_SCRIPT)]
    for frame in kept:
        frame.line  # read from the script's source before the name changes
        frame.filename = hostio.script_name()
    return traceback.StackSummary.from_list(kept)


def _format_exception(self: Any, ei: Any) -> str:
    """`Formatter.formatException` (`logger.exception`, `exc_info=True`): the script's frames only."""
    summary = traceback.TracebackException(ei[0], ei[1], ei[2])
    pending = [summary]
    while pending:
        current = pending.pop()
        current.stack = _script_frames(current.stack)
        pending.extend(chained for chained in (current.__cause__, current.__context__) if chained is not None)
    return ''.join(summary.format()).rstrip('\n')


_record_init = logging.LogRecord.__init__
_first_time: list[float] = []
_no_clock: list[bool] = []


def _sandbox_record_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """`LogRecord.__init__`: the time of a record is the host's clock as a script reads it
    (`time.time()`, in the journal), or the epoch when the host grants no clock; no process
    or thread number of the worker (`logging.logProcesses` ... are off, see `install`)."""
    _record_init(self, *args, **kwargs)
    now = 0.0
    if not _no_clock:
        try:
            now = _clock()
        except PermissionError:  # the session's grants do not change: the host is asked once
            _no_clock.append(True)
    if not _first_time:
        _first_time.append(now)
    self.created = now
    self.msecs = float(int(now * 1000) % 1000)
    self.relativeCreated = (now - _first_time[0]) * 1000


def _handle_error(self: Any, record: logging.LogRecord) -> None:
    """`Handler.handleError`: CPython's report of a handler that failed, on the script's stderr,
    with the script's frames only."""
    if not logging.raiseExceptions:
        return
    error = sys.exc_info()
    try:
        stderr.write(f'--- Logging error ---\n{_format_exception(None, error)}\nMessage: {record.msg!r}\nArguments: {record.args}\n')
    finally:
        del error


def _find_caller(self: Any, stack_info: bool = False, stacklevel: int = 1) -> tuple[str, int, str, str | None]:
    """`Logger.findCaller`: the frame that logged, passing over logging's and the sandbox's own
    frames (the facade's `logging.info`); `stack_info=True` shows the script's frames only."""
    frame: Any = sys._getframe(1)
    try:
        while stacklevel > 0 and frame.f_back is not None:
            frame = frame.f_back
            filename = frame.f_code.co_filename
            if not (filename == logging._srcfile or filename.startswith(_CORRAL) or ('importlib' in filename and '_bootstrap' in filename)):
                stacklevel -= 1
        code = frame.f_code
        info = None
        if stack_info:
            info = 'Stack (most recent call last):\n' + ''.join(_script_frames(traceback.extract_stack(frame)).format()).rstrip('\n')
        return code.co_filename, frame.f_lineno, code.co_name, info
    finally:
        del frame


# ----- warnings --------------------------------------------------------------------------------

def _shown_name(filename: str) -> str:
    return hostio.script_name() if filename.startswith(_SCRIPT) else filename


def _script_line(filename: str, lineno: int) -> str:
    """The source line, of the script's own code only (the worker keeps it in linecache's cache)."""
    if not filename.startswith(_SCRIPT):
        return ''
    entry = linecache.cache.get(filename)
    if entry is None or not 0 < lineno <= len(entry[2]):
        return ''
    return entry[2][lineno - 1]


def formatwarning(message: Any, category: Any, filename: str, lineno: int, line: str | None = None) -> str:
    """`warnings.formatwarning`: the source line shown is the given one, or the script's own."""
    text = f'{_shown_name(str(filename))}:{lineno}: {category.__name__}: {message}\n'
    line = _script_line(str(filename), lineno) if line is None else line
    if line and line.strip():
        text += f'  {line.strip()}\n'
    return text


def showwarning(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: str | None = None) -> None:
    """`warnings.showwarning`: to the script's stderr unless given a file."""
    text = formatwarning(message, category, filename, lineno, line)
    try:
        (stderr if file is None else file).write(text)
    except OSError:
        pass


def _show_message(message: Any) -> None:
    """The real module's `_showwarnmsg_impl` (see `install`)."""
    showwarning(message.message, message.category, message.filename, message.lineno, message.file, message.line)


def warn(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None) -> None:
    """`warnings.warn`: the frame `stacklevel` names is counted among the script's and the
    standard library's frames, as CPython counts them, passing over the sandbox's own."""
    if isinstance(message, Warning):
        category = message.__class__
    if category is None:
        category = UserWarning
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise TypeError(f"category must be a Warning subclass, not '{type(category).__name__}'")
    frame: Any = sys._getframe(1)
    try:
        level = int(stacklevel)
        while frame is not None:
            if not frame.f_code.co_filename.startswith(_CORRAL):
                if level <= 1:
                    break
                level -= 1
            frame = frame.f_back
        if frame is None:
            filename, lineno, module, namespace = 'sys', 1, 'sys', {}
        else:
            filename, lineno, namespace = frame.f_code.co_filename, frame.f_lineno, frame.f_globals
            module = namespace.get('__name__', '<string>') if type(namespace) is dict else '<string>'
    finally:
        del frame
    registry = namespace.setdefault('__warningregistry__', {}) if type(namespace) is dict else {}
    warnings.warn_explicit(message, category, filename, lineno, module, registry, None, source)


for _function in (formatwarning, showwarning, warn):
    _function.__module__ = 'warnings'
del _function


def _warnings() -> dict[str, Any]:
    return {
        'warn': warn, 'showwarning': showwarning, 'formatwarning': formatwarning,
        'filterwarnings': warnings.filterwarnings, 'simplefilter': warnings.simplefilter,
        'resetwarnings': warnings.resetwarnings, 'catch_warnings': warnings.catch_warnings,
    }


BUILDERS = {'logging': _logging, 'warnings': _warnings}


def install() -> None:
    """Point the real modules at the sandbox's output and rules (in the zygote only)."""
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging.LogRecord.__init__ = _sandbox_record_init  # type: ignore[method-assign]
    logging.Handler.handleError = _handle_error  # type: ignore[method-assign]
    logging.lastResort = StreamHandler()
    logging.lastResort.setLevel(logging.WARNING)
    logging.StrFormatStyle._format = _str_style_format  # type: ignore[method-assign]
    logging.Formatter.formatException = _format_exception  # type: ignore[method-assign]
    logging.Logger.findCaller = _find_caller  # type: ignore[method-assign]
    warnings._showwarnmsg_impl = _show_message  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning  # logging.captureWarnings formats with it
