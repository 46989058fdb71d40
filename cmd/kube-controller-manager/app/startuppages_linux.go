//go:build linux

package app

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// releaseStartupPages takes the binary's read-only segments (code and
// constants) out of the process's resident set once startup is over.
// Startup runs code and reads tables nothing touches again (flag, scheme and
// controller registration), and each page fault maps a window of pages
// around it, so most of the binary would otherwise stay counted in the
// process's memory for its whole life. The pages stay in the page cache:
// those still in use come back with a minor fault.
func releaseStartupPages(logger klog.Logger) {
	released, err := dropExecutablePages()
	if err != nil {
		logger.V(2).Info("Could not release the binary's startup pages", "err", err)
		return
	}
	logger.V(2).Info("Released the binary's startup pages", "residentKiB", released/1024)
}

// fileMapping is one mapping of /proc/self/smaps.
type fileMapping struct {
	start, end   uintptr
	writable     bool
	major, minor uint32
	inode        uint64
	path         string
	rssBytes     uint64
	anonBytes    uint64
	// anonKnown: smaps reported the private copies (a kernel or sandbox
	// that does not is not trusted with a drop).
	anonKnown bool
}

// dropExecutablePages unmaps the clean read-only mappings of the running
// executable and returns how many resident bytes they held.
func dropExecutablePages() (uint64, error) {
	mappings, err := droppableSelfMappings()
	if err != nil {
		return 0, err
	}
	var released uint64
	for _, m := range mappings {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.start, m.end-m.start, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %x-%x: %w", m.start, m.end, errno)
		}
		released += m.rssBytes
	}
	return released, nil
}

// droppableSelfMappings reads this process's smaps for the mappings
// dropExecutablePages may drop.
func droppableSelfMappings() ([]fileMapping, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &st); err != nil {
		return nil, err
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return nil, err
	}
	self := executable{major: unix.Major(st.Dev), minor: unix.Minor(st.Dev), inode: st.Ino, path: exe}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	mappings, err := parseSmaps(f)
	if err != nil {
		return nil, err
	}
	return droppableMappings(mappings, self), nil
}

// executable identifies the running binary's file. On overlayfs (a
// container image) the mappings show the underlying file's device and
// inode but the path the process sees, so either identifies it.
type executable struct {
	major, minor uint32
	inode        uint64
	path         string
}

func (e executable) mapped(m fileMapping) bool {
	if m.inode == 0 {
		return false // anonymous memory
	}
	return (m.inode == e.inode && m.major == e.major && m.minor == e.minor) ||
		(e.path != "" && strings.TrimSuffix(m.path, " (deleted)") == e.path)
}

// droppableMappings: the executable's mappings whose pages all still equal
// the file's. A writable mapping, or a read-only one holding private copies
// (a segment relocated at load and then protected), would lose data.
func droppableMappings(mappings []fileMapping, self executable) []fileMapping {
	var out []fileMapping
	for _, m := range mappings {
		if self.mapped(m) && !m.writable && m.anonKnown && m.anonBytes == 0 {
			out = append(out, m)
		}
	}
	return out
}

// parseSmaps reads the mappings of a /proc/PID/smaps file: a header line
// per mapping ("start-end perms offset major:minor inode [path]") followed
// by "Key: value kB" lines.
func parseSmaps(r io.Reader) ([]fileMapping, error) {
	var out []fileMapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if strings.HasSuffix(fields[0], ":") {
			if len(out) == 0 || len(fields) < 2 {
				continue
			}
			m := &out[len(out)-1]
			kib, err := strconv.ParseUint(fields[1], 10, 64)
			if err != nil {
				continue
			}
			switch fields[0] {
			case "Rss:":
				m.rssBytes = kib * 1024
			case "Anonymous:":
				m.anonBytes = kib * 1024
				m.anonKnown = true
			}
			continue
		}
		m, err := parseMappingHeader(sc.Text(), fields)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

func parseMappingHeader(line string, fields []string) (fileMapping, error) {
	bad := func() (fileMapping, error) {
		return fileMapping{}, fmt.Errorf("unexpected smaps line %q", strings.Join(fields, " "))
	}
	if len(fields) < 5 {
		return bad()
	}
	startHex, endHex, ok := strings.Cut(fields[0], "-")
	majorHex, minorHex, ok2 := strings.Cut(fields[3], ":")
	if !ok || !ok2 || len(fields[1]) < 2 {
		return bad()
	}
	start, err1 := strconv.ParseUint(startHex, 16, 64)
	end, err2 := strconv.ParseUint(endHex, 16, 64)
	major, err3 := strconv.ParseUint(majorHex, 16, 32)
	minor, err4 := strconv.ParseUint(minorHex, 16, 32)
	inode, err5 := strconv.ParseUint(fields[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || end < start {
		return bad()
	}
	return fileMapping{
		start:    uintptr(start),
		end:      uintptr(end),
		writable: fields[1][1] == 'w',
		major:    uint32(major),
		minor:    uint32(minor),
		inode:    inode,
		path:     afterFields(line, 5),
	}, nil
}

// afterFields is what follows the first n whitespace-separated fields of
// line, trimmed: a mapping's path, which may hold spaces.
func afterFields(line string, n int) string {
	rest := line
	for range n {
		rest = strings.TrimLeft(rest, " \t")
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			return ""
		}
		rest = rest[i:]
	}
	return strings.TrimSpace(rest)
}
