"""The first write into fresh sparse, memory-mapped files, as a Kafka broker makes into a new segment's indexes.

Each new log segment preallocates its offset and time index as sparse files of
``log.index.size.max.bytes`` and maps them. The first touch faults, and the kernel reads around the
page in readahead-sized pieces, zero-filling the holes (docs/performance.md, "the target broker
zero-filled its index files")::

    .venv/bin/python bench/sparse_index_faults.py 500 10485760   # Kafka's default index size
    .venv/bin/python bench/sparse_index_faults.py 500 1048576    # the dev clusters'
"""

from __future__ import annotations

import argparse
import mmap
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=int)
    parser.add_argument("size", type=int, help="bytes per sparse file")
    parser.add_argument("--dir", default=None, help="where to make the files (default: the temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        maps = []
        for i in range(args.files):
            f = (Path(tmp) / f"{i:05d}.index").open("w+b")
            f.truncate(args.size)
            maps.append((f, mmap.mmap(f.fileno(), args.size)))
        wall, cpu = time.perf_counter(), time.process_time()
        for _f, m in maps:
            m[0:8] = b"\x01" * 8
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        for f, m in maps:
            m.close()
            f.close()
    print(f"{args.files} files of {args.size // 1024} KB: first write {wall:.2f} s wall, {cpu:.2f} s CPU")


if __name__ == "__main__":
    main()
