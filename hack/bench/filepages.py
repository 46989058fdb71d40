#!/usr/bin/env python3
"""How much of a binary's file stays resident per page a process touches.

  filepages.py FILE            map FILE, touch one byte per MiB, print the
                               resident KiB per touch, with the kernel's
                               default advice and with MADV_RANDOM (no
                               readahead; it does not stop fault-around, nor
                               shrink what the page cache already holds)
  filepages.py --pid PID       the resident and anonymous KiB of each of
                               PID's mappings of its own executable

A process's resident set counts its binary's pages in windows: each fault on
a page already in the page cache maps its neighbours too (fault-around, 64
KiB by default), and a fault that reads the file maps what readahead
brought in. So a controller manager's file-backed RSS says more about how
its hot code is spread over the binary than about how much of it runs.
"""
import mmap
import os
import sys

MIB = 1 << 20


def smaps_rss_kib(start):
    """Rss of this process's mapping that starts at address start."""
    prefix = f"{start:x}-"
    with open("/proc/self/smaps") as f:
        found = False
        for line in f:
            if line.startswith(prefix):
                found = True
            elif found and line.startswith("Rss:"):
                return int(line.split()[1])
    return -1


def touch(path, advice):
    size = os.path.getsize(path) // mmap.PAGESIZE * mmap.PAGESIZE
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ, flags=mmap.MAP_PRIVATE)
    try:
        m.madvise(mmap.MADV_DONTNEED)
        m.madvise(advice)
        touches = 0
        for off in range(0, size, MIB):
            _ = m[off]
            touches += 1
        st = os.stat(path)
        rss = -1
        with open("/proc/self/maps") as maps:
            for line in maps:
                fields = line.split()
                if len(fields) >= 6 and int(fields[4]) == st.st_ino and fields[5] == os.path.realpath(path):
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    if hi - lo == size:
                        rss = smaps_rss_kib(lo)
        return touches, rss
    finally:
        m.close()


def by_pid(pid):
    exe = os.path.realpath(f"/proc/{pid}/exe")
    mine = False  # inside one of the executable's mappings
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if not fields[0].endswith(":"):  # a mapping's header line
                mine = len(fields) >= 6 and fields[5] == exe
                if mine:
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    print(f"{fields[0]} {fields[1]} size {(hi - lo) // 1024} KiB", end="")
            elif mine and fields[0] in ("Rss:", "Anonymous:"):
                print(f", {fields[0][:-1]} {fields[1]} KiB", end="")
                if fields[0] == "Anonymous:":
                    print()
                    mine = False


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--pid":
        by_pid(int(sys.argv[2]))
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, advice in (("as cached", mmap.MADV_NORMAL), ("MADV_RANDOM", mmap.MADV_RANDOM)):
        touches, rss = touch(sys.argv[1], advice)
        print(f"{name}: {touches} touches (one per MiB), {rss} KiB resident, {rss / touches:.0f} KiB per touch")


if __name__ == "__main__":
    main()
