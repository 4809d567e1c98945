"""Files that come with a clone: read and written as data, never trusted.

A working tree holds whatever its repository's authors committed: the agents'
settings (``.claude/settings.json``, ``.codex/hooks.json``,
``.codex/config.toml``, ``.gemini/settings.json``), ``.mcp.json``, the hook
managers' configurations. A hostile one can commit any of them as a symlink
out of the tree (to a file holding a key, to ``/dev/zero``) or as text nested
100,000 levels deep. Every such file `install`, `uninstall`, `doctor`,
`mcp-config`, `hooks` and the agents' hooks read or write goes through this
package (docs/security.md, "Files that come with a clone"):

files.py   where a file is read and written: inside the working tree one
           component at a time with ``O_NOFOLLOW`` (no symlink followed, the
           last name neither), the user's own files (home, ``$CODEX_HOME``)
           with their links followed and named; regular files only, at most
           ``MAX_BYTES``
parse.py   UTF-8 text, JSON and TOML nested at most ``MAX_DEPTH`` levels; every
           failure an ``error:``/``hint:`` (:class:`UnsafeFile`, exit 1)
"""

from .files import MAX_BYTES, File, UnsafeFile
from .parse import MAX_DEPTH, load_json, load_toml, text

__all__ = ["MAX_BYTES", "MAX_DEPTH", "File", "UnsafeFile", "load_json", "load_toml", "text"]
