"""The packages' ways out carried to an effect: scripts that write a marker on the host or read a host file.

`test_package_attacks.py` pins the refusal of each way numpy, pandas and matplotlib offer past the
language layer (pickle, strings evaluated as code, raw memory, files). Most of its scripts stop at
the way itself (`pd.eval('1 + 1')`): with the language layer on they are refused, and that is all
they need to show. The scripts here go on to what an attacker wants from the way, so that the
ablation (`python -m tests.security.ablation --packages`) can tell, with layers turned off, whether
the process layers below stop it:

- `MARKER` is a path on the host the script writes (through pickle's `open`, `tofile`, `memmap`,
  `savefig`, libc's `open` through `np.ctypeslib` ...): the file appearing is an escape;
- `SECRET` is a host file holding a secret the script reads (`np.fromfile`, `pd.read_csv`,
  `np.loadtxt`) and returns after `LEAK `: the value starting with LEAK is a leak.

Each has the last line of the error a script gets with every layer on (`expected`, with the same
placeholders); `test_package_payloads.py` checks it. matplotlib writing a path with its canvas's and
its images' own methods (past `savefig`) is refused by the language layer as `open()` refuses it:
it routes the paths matplotlib and Pillow open through `open()`, wherever they open them.
"""

from __future__ import annotations

from corral.language.modules import module_names

from .attacks import Attack, attack

_GRANT = (
    'PermissionError: [Errno 13] Permission denied (the host has not granted file access; the host grants it with '
    "checkout(mounts=[Mount(host_dir, sandbox_path)])): '{}'"
)
_FILES = 'numpy reads and writes files as text here: np.loadtxt, np.genfromtxt and np.savetxt on the mounted folders'
_PICKLE = 'pickle runs code as it loads; keep data as CSV or JSON'
#: How a refusal of a numpy name ends: the count is the installed numpy's.
NUMPY_OFFERS = f'dir(numpy) lists the {len(module_names("numpy"))} names numpy offers'

PAYLOADS: list[Attack] = [
    # pickle: a payload whose loading calls a function of the script's choosing
    attack('pickle-open-marker', 'pickle documentation: "never unpickle data from an untrusted source"', r"""
        import io
        import pandas as pd
        pd.read_pickle(io.BytesIO(b"cbuiltins\nopen\n(VMARKER\nVw\ntR."))
    """, f"AttributeError: module 'pandas' has no attribute 'read_pickle' in the sandbox: {_PICKLE}: read_csv or read_json. dir(pandas) lists the 83 names pandas offers"),
    attack('np-load-pickle-command', 'numpy CVE-2019-6446: np.load unpickles object arrays', r"""
        import io
        import numpy as np
        np.load(io.BytesIO(b"cos\nsystem\n(Vtouch MARKER\ntR."), allow_pickle=True)
    """, f"AttributeError: module 'numpy' has no attribute 'load' in the sandbox: {_PICKLE} (np.load unpickles); {_FILES}. {NUMPY_OFFERS}"),
    attack('ndarray-dump-marker', 'numpy documentation: ndarray.dump pickles to a path', """
        import numpy as np
        np.arange(3).dump('MARKER')
    """, f"AttributeError: 'ndarray' object has no attribute 'dump' in the sandbox: {_PICKLE}: np.savetxt, or arr.tolist() with json"),
    attack('to-pickle-marker', 'pandas documentation: DataFrame.to_pickle writes a path', """
        import pandas as pd
        pd.DataFrame({'a': [1]}).to_pickle('MARKER')
    """, f"AttributeError: 'DataFrame' object has no attribute 'to_pickle' in the sandbox: {_PICKLE}: to_csv or to_json"),
    # files written past open()
    attack('tofile-marker', 'numpy documentation: ndarray.tofile writes a path', """
        import numpy as np
        np.arange(3).tofile('MARKER')
    """, f"AttributeError: 'ndarray' object has no attribute 'tofile' in the sandbox: {_FILES}"),
    attack('memmap-marker', 'numpy documentation: memmap maps a file, mode w+ creates it', """
        import numpy as np
        np.memmap('MARKER', mode='w+', shape=(1,))
    """, f"AttributeError: module 'numpy' has no attribute 'memmap' in the sandbox: {_FILES}. {NUMPY_OFFERS}"),
    attack('savetxt-marker', 'numpy documentation: savetxt writes a path', """
        import numpy as np
        np.savetxt('MARKER', [1.0])
    """, _GRANT.format('MARKER')),
    attack('to-csv-marker', 'pandas documentation: to_csv writes a path', """
        import pandas as pd
        pd.DataFrame({'a': [1]}).to_csv('MARKER')
    """, _GRANT.format('MARKER')),
    attack('savefig-marker', 'matplotlib documentation: savefig writes a path', """
        import matplotlib.pyplot as plt
        plt.plot([1, 2])
        plt.savefig('MARKER', format='png')
    """, _GRANT.format('MARKER')),
    # matplotlib writing a path itself, past savefig: through open() all the same
    attack('canvas-print-png-marker', 'matplotlib documentation: FigureCanvasAgg.print_png writes a path', """
        import matplotlib.pyplot as plt
        plt.figure().canvas.print_png('MARKER')
    """, _GRANT.format('MARKER')),
    attack('image-write-png-marker', 'matplotlib documentation: AxesImage.write_png writes a path', """
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots()
        axes.imshow([[0, 1], [1, 0]]).write_png('MARKER')
    """, _GRANT.format('MARKER')),
    # native code through numpy
    attack('ctypeslib-libc-open', 'numpy documentation: numpy.ctypeslib loads shared libraries', """
        import numpy as np
        np.ctypeslib.ctypes.CDLL(None).open(b'MARKER', 0o101, 0o644)
    """, f"AttributeError: module 'numpy' has no attribute 'ctypeslib' in the sandbox: it reaches the worker's raw memory. {NUMPY_OFFERS}"),
    # host files read past open()
    attack('fromfile-secret', 'numpy documentation: fromfile reads a path', """
        import numpy as np
        'LEAK ' + np.fromfile('SECRET', dtype='u1').tobytes().decode()
    """, f"AttributeError: module 'numpy' has no attribute 'fromfile' in the sandbox: {_FILES}. Did you mean: fromiter? {NUMPY_OFFERS}"),
    attack('read-csv-secret', 'pandas documentation: read_csv reads a path or URL', """
        import pandas as pd
        'LEAK ' + pd.read_csv('SECRET', header=None).iloc[0, 0]
    """, _GRANT.format('SECRET')),
    attack('loadtxt-secret', 'numpy documentation: loadtxt reads a path', """
        import numpy as np
        'LEAK ' + str(np.loadtxt('SECRET', dtype=str))
    """, _GRANT.format('SECRET')),
]

#: What `SECRET` holds.
SECRET_TEXT = 'corral-secret'
