"""`CodeMode` hands a model the figure a script drew as Pydantic AI's `BinaryContent`."""

from __future__ import annotations

import pytest

pytest.importorskip('matplotlib')

from pydantic_ai import Agent
from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart

import corral
from corral.pydantic_ai import CodeMode

from .scripted_model import Script, answers


async def test_code_mode_hands_the_model_the_image():
    script = Script('import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.gcf()')
    async with corral.Pool(packages=['matplotlib'], warm_workers=0) as pool:
        agent = Agent(script.model, capabilities=[CodeMode(pool=pool, type_check=False)])
        result = await agent.run('plot it')
    images = [
        item for message in result.all_messages() if isinstance(message, ModelRequest)
        for part in message.parts if isinstance(part, UserPromptPart) and not isinstance(part.content, str)
        for item in part.content if isinstance(item, BinaryContent)
    ]
    assert [(image.media_type, image.data[:8]) for image in images] == [('image/png', b'\x89PNG\r\n\x1a\n')]
    (text,) = answers(result.all_messages())
    assert text.startswith('Image(<') and text.endswith(' bytes of image/png>)')
