//go:build linux

package app

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

const smapsFixture = `00400000-0261b000 r-xp 00000000 fd:01 1234 /usr/local/bin/kube-controller-manager
Size:              35764 kB
Rss:               29184 kB
Anonymous:             0 kB
0261b000-05126000 r--p 0221b000 fd:01 1234 /usr/local/bin/kube-controller-manager
Rss:               31368 kB
Anonymous:             0 kB
05126000-051f8000 rw-p 04d26000 fd:01 1234 /usr/local/bin/kube-controller-manager
Rss:                 840 kB
Anonymous:           600 kB
051f8000-05200000 r--p 04e00000 fd:01 1234 /usr/local/bin/kube-controller-manager
Rss:                   8 kB
Anonymous:             8 kB
06000000-06100000 r-xp 00000000 00:2a 99 /usr/local/bin/kube-controller-manager (deleted)
Rss:                  64 kB
Anonymous:             0 kB
06800000-06900000 r--p 00000000 fd:01 1234 /usr/local/bin/kube-controller-manager
Rss:                  64 kB
07000000-07100000 r-xp 00000000 fd:01 555 /lib/other.so
Rss:                  64 kB
Anonymous:             0 kB
2c7642400000-2c7644400000 rw-p 00000000 00:00 0 
Rss:               27520 kB
Anonymous:         27520 kB
7ffd65102000-7ffd65123000 rw-p 00000000 00:00 0                          [stack]
Rss:                  16 kB
Anonymous:            16 kB
`

func TestDroppableMappingsAreTheExecutablesCleanReadOnlyOnes(t *testing.T) {
	mappings, err := parseSmaps(strings.NewReader(smapsFixture))
	if err != nil {
		t.Fatal(err)
	}
	if len(mappings) != 9 {
		t.Fatalf("parsed %d mappings, want 9", len(mappings))
	}
	if m := mappings[0]; m.start != 0x400000 || m.end != 0x261b000 || m.writable || m.major != 0xfd || m.minor != 1 ||
		m.inode != 1234 || m.path != "/usr/local/bin/kube-controller-manager" || m.rssBytes != 29184*1024 || m.anonBytes != 0 {
		t.Errorf("first mapping parsed as %+v", m)
	}
	self := executable{major: 0xfd, minor: 1, inode: 1234, path: "/usr/local/bin/kube-controller-manager"}
	var got []string
	for _, m := range droppableMappings(mappings, self) {
		got = append(got, strconv.FormatUint(uint64(m.start), 16))
	}
	// Code and constants; the path matches the replaced binary's mapping
	// shown on another device (overlayfs); not the writable data, not the
	// read-only segment holding private copies, not one whose private
	// copies smaps does not report, not other files or anonymous memory.
	if want := "400000 261b000 6000000"; strings.Join(got, " ") != want {
		t.Errorf("droppable = %v, want %s", got, want)
	}
	// Without the path, the other device's mapping is not ours.
	self.path = ""
	if n := len(droppableMappings(mappings, self)); n != 2 {
		t.Errorf("droppable by device and inode alone = %d, want 2", n)
	}
}

func TestMappingPathsKeepTheirSpaces(t *testing.T) {
	for line, want := range map[string]string{
		"1000-2000 r-xp 00000000 fd:01 7    /opt/my tools/kcm":    "/opt/my tools/kcm",
		"1000-2000 r-xp 00000000 fd:01 7 /bin/kcm (deleted)":      "/bin/kcm (deleted)",
		"2c7642400000-2c7644400000 rw-p 00000000 00:00 0 ":        "",
		"7ffd65102000-7ffd65123000 rw-p 00000000 00:00 0 [stack]": "[stack]",
	} {
		if got := afterFields(line, 5); got != want {
			t.Errorf("path of %q = %q, want %q", line, got, want)
		}
	}
}

func TestParseSmapsRejectsGarbage(t *testing.T) {
	if _, err := parseSmaps(strings.NewReader("not a mapping line at all\n")); err == nil {
		t.Error("want an error for a malformed header")
	}
}

// residentExecutableKiB: what the executable's droppable mappings hold.
func residentExecutableKiB(t *testing.T) uint64 {
	t.Helper()
	mappings, err := droppableSelfMappings()
	if err != nil {
		t.Fatal(err)
	}
	var kib uint64
	for _, m := range mappings {
		kib += m.rssBytes / 1024
	}
	return kib
}

// The test binary, like the controller manager, has run its startup code;
// dropping its read-only pages must shrink the resident set, and the
// process must go on running (the rest of this package's tests run after).
func TestReleaseStartupPagesShrinksResidentFilePages(t *testing.T) {
	before := residentExecutableKiB(t)
	released, err := dropExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	after := residentExecutableKiB(t)
	if released == 0 {
		t.Fatal("released nothing")
	}
	t.Logf("executable pages %d KiB -> %d KiB, released %d KiB", before, after, released/1024)
	if after+released/1024/2 > before {
		t.Errorf("executable pages %d KiB -> %d KiB after releasing %d KiB", before, after, released/1024)
	}
	releaseStartupPages(klog.Background()) // and again, through the logging wrapper
}
