"""A `FunctionModel` that plays a fixed list of `run_code` calls, and what the agent answered to each."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


class Script:
    """A FunctionModel that calls `run_code` with each step in turn, then answers 'done'.

    A step is the code, the tool call's arguments, or a whole `ToolCallPart` (any tool).
    `infos` keeps what the model was offered at each request.
    """

    def __init__(self, *steps: str | dict[str, Any] | ToolCallPart) -> None:
        self.steps = list(steps)
        self.infos: list[AgentInfo] = []
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        done = sum(isinstance(message, ModelResponse) for message in messages)
        if done < len(self.steps):
            step = self.steps[done]
            if isinstance(step, ToolCallPart):
                return ModelResponse(parts=[step])
            args = {'code': step} if isinstance(step, str) else step
            return ModelResponse(parts=[ToolCallPart('run_code', args, tool_call_id=f'call_{done + 1}')])
        return ModelResponse(parts=[TextPart('done')])

    def description(self, step: int = 0) -> str:
        """The `run_code` tool's description as the model was offered it at request `step`."""
        (tool,) = [tool for tool in self.infos[step].function_tools if tool.name == 'run_code']
        return tool.description or ''


def answers(messages: list[ModelMessage]) -> list[Any]:
    """What the model got back from each tool call, in order: return contents, or retry texts."""
    result = []
    for message in messages:
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    result.append(('retry', part.content) if part.outcome == 'retried' else part.content)
                elif isinstance(part, RetryPromptPart):  # how older Pydantic AI versions sent a retry
                    result.append(('retry', part.content))
    return result
