"""Which files a search reads: the core's project walker (`tether.walk`), as git and ast-grep choose them.

`.gitignore` in every folder (with `!` re-includes), `.ignore` files, `.git/info/exclude` and the
global git excludes are honoured; hidden files and folders, `node_modules` and virtual environments
are left out, and counted in `Walk.ignored`.
"""

from tether.walk import FileEntry, Walk, walk

__all__ = ["FileEntry", "Walk", "walk"]
