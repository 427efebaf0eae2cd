from pydantic_ai_harness import CodeMode

CodeMode(
    tools='all',
    max_retries=3,
)
