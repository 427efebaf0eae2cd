"""An MCP server the tests start as an upstream of `corral mcp --upstream`."""

from typing import TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer('weather')


class Weather(TypedDict):
    city: str
    temp_f: float


@server.tool(name='get-weather')
def get_weather(city: str) -> Weather:
    """Current weather of a city."""
    if city == 'Atlantis':
        raise ToolError('no weather station in Atlantis')
    return {'city': city, 'temp_f': 72}


@server.tool()
def convert_temp(fahrenheit: float) -> float:
    """Fahrenheit to Celsius, rounded to one decimal."""
    return round((fahrenheit - 32) * 5 / 9, 1)


@server.tool()
def motd():
    """Message of the day."""
    return 'hello'


if __name__ == '__main__':
    server.run('stdio')
