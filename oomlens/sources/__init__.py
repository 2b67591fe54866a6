"""Sources: turn the paths a user names into readable inputs, each with what its name says.

A folder is walked recursively and each file gets its role from its name (raylet, gcs,
core worker, worker `.out/.err` with its pid, events, driver, kernel); a Ray `logs/`
folder gives every file under it the node its raylet.out names. `.gz` and `.zst` are
decompressed as streams, tar archives (plain, `.tar.gz`/`.tgz`, `.tar.zst`) are read
member by member, and `-` is standard input; a named pipe given by name (`<(zcat x.gz)`)
is read like standard input. In a Ray session folder (one holding `logs/`) the
`runtime_resources/` and `sockets/` folders are left out: they hold environments and
sockets, not logs. Beside `session_*` folders (in /tmp/ray) only the sessions and files
named as logs are read: a README there is no log, and `session_latest` is only a link to
the newest session. Nothing that cannot be read is skipped in silence: every problem
becomes a sentence in the input's `problems`, except the empty folders Ray itself makes
in every session's `logs/`.

Each input knows the Ray session it lies in (the `session_<date>_<time>_<pid>` folder on its
path), so that sessions are correlated apart and one of them can be read alone.

Memory stays bounded and nothing hangs: special files met in a walk (pipes, devices,
sockets, links to /dev/zero) are never opened, and a decompressed stream that grows far
beyond what its compressed bytes can honestly hold is stopped.

The package, in the order data flows through it, a module to each job:

- `walk`: the paths named and the folders under them (discover, files_under), each file
  made an Input, or an archive's members;
- `archives`: the members of tar archives and zip files;
- `decoding`: bytes to the text the scan reads (binary told, holes read past, gzip, zstd,
  xz and bzip2 decompressed, UTF-16 and marks, a collector's records);
- `naming`: Ray's names (a file's role and pid, sessions, the node a raylet.out names),
  read by the three above;
- `inputs`: Input, and a path or an error told as one line.
"""

from .inputs import Input, error_line
from .walk import discover, files_under, reopen

__all__ = ["Input", "discover", "error_line", "files_under", "reopen"]  # what the other stages read
