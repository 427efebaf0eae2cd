"""The diagnostics the checker makes itself for imports the sandbox refuses and ty resolves."""

import pytest

from corral.typecheck import _sandbox, _syntax

NP_LOAD = 'error[unresolved-attribute]: Module `numpy` has no member `load`'
DECODER = 'error[import-not-found]: Module `json` has no member `decoder`'


@pytest.mark.parametrize(
    'code, headers',
    [
        ('import numpy as np\nnp.load("f")', [NP_LOAD]),
        # a standard library module's names once replaced the packages' modules the later imports are looked up in
        ('from json import loads\nimport numpy as np\nnp.load("f")', [NP_LOAD]),
        ('from json import decoder\nimport numpy as np\nnp.load("f")', [DECODER, NP_LOAD]),
    ],
)
def test_every_import_of_a_package_is_looked_up_in_its_facade(code, headers):
    found = _sandbox.unresolved_imports(code, _syntax.read(code), 'main.py', frozenset(), (), ('numpy',))
    assert [diagnostic.header for diagnostic in found] == headers
