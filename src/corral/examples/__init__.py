"""The examples of the documents corral follows, with only their import lines changed.

`code_tool` / `code_tool_main`: a run_code tool for any agent (`corral demo` runs this one).
`billing` / `billing_main`: a whole API as one importable module, checked against its stub.
"""
