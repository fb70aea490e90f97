"""`python -m tessera ARGS`: the `tessera` command installed with the package."""
import os
import sys

from . import tool_path

os.execv(tool_path(), ["tessera"] + sys.argv[1:])
