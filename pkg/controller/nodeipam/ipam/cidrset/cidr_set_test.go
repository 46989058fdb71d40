package cidrset

import (
	"errors"
	"math/rand"
	"net"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/testutil"
)

func mustCIDR(t testing.TB, s string) *net.IPNet {
	t.Helper()
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustSet(t testing.TB, cluster string, nodeMask int) *CidrSet {
	t.Helper()
	s, err := NewCIDRSet(mustCIDR(t, cluster), nodeMask)
	if err != nil {
		t.Fatalf("NewCIDRSet(%s, %d): %v", cluster, nodeMask, err)
	}
	return s
}

func allocate(t *testing.T, s *CidrSet) string {
	t.Helper()
	n, err := s.AllocateNext()
	if err != nil {
		t.Fatalf("AllocateNext: %v", err)
	}
	return n.String()
}

func TestNewCIDRSet(t *testing.T) {
	tests := []struct {
		cluster  string
		nodeMask int
		wantErr  error
		errText  string
		max      int
	}{
		{cluster: "10.0.0.0/16", nodeMask: 24, max: 256},
		{cluster: "10.0.0.0/16", nodeMask: 16, max: 1},
		// IPv4 has no cap on the difference.
		{cluster: "10.0.0.0/8", nodeMask: 32, max: 1 << 24},
		{cluster: "fd00::/48", nodeMask: 64, max: 1 << 16},
		{cluster: "fd00::/47", nodeMask: 64, wantErr: ErrCIDRSetSubNetTooBig},
		{cluster: "fd00::/112", nodeMask: 128, max: 1 << 16},
		{cluster: "10.0.0.0/24", nodeMask: 33, wantErr: ErrCIDRSetSubNetTooBig},
		{cluster: "10.0.0.0/24", nodeMask: 16, errText: "shorter than the cluster CIDR mask"},
	}
	for _, tc := range tests {
		s, err := NewCIDRSet(mustCIDR(t, tc.cluster), tc.nodeMask)
		switch {
		case tc.wantErr != nil:
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s /%d: err %v, want %v", tc.cluster, tc.nodeMask, err, tc.wantErr)
			}
		case tc.errText != "":
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s /%d: err %v, want %q", tc.cluster, tc.nodeMask, err, tc.errText)
			}
		case err != nil:
			t.Errorf("%s /%d: %v", tc.cluster, tc.nodeMask, err)
		case s.maxCIDRs != tc.max:
			t.Errorf("%s /%d: %d blocks, want %d", tc.cluster, tc.nodeMask, s.maxCIDRs, tc.max)
		}
	}
}

// The n-th block, checked against hand-computed values, including node
// masks on both sides of, and across, the middle of an IPv6 address.
func TestBlock(t *testing.T) {
	tests := []struct {
		cluster  string
		nodeMask int
		index    int
		want     string
	}{
		{"127.123.0.0/16", 24, 0, "127.123.0.0/24"},
		{"127.123.0.0/16", 24, 15, "127.123.15.0/24"},
		{"192.168.5.208/28", 32, 5, "192.168.5.213/32"},
		{"10.0.0.0/8", 32, 0x010203, "10.1.2.3/32"},
		{"2001:db8:1234::/48", 64, 0, "2001:db8:1234::/64"},
		{"2001:db8:1234::/48", 64, 15, "2001:db8:1234:f::/64"},
		{"2001:db8::/32", 48, 6426, "2001:db8:191a::/48"},
		{"2001:db8:1234:ff00::/56", 72, 1, "2001:db8:1234:ff00:100::/72"},
		{"2001:db8:1234:ff00::/56", 72, 16, "2001:db8:1234:ff00:1000::/72"},
		// The index straddles the 64-bit halves: 6426 = 0x646<<2 | 2.
		{"2001:db8:85a3::/50", 66, 6426, "2001:db8:85a3:646:8000::/66"},
		{"2001:db8:1234:0:1234::/80", 96, 16, "2001:db8:1234:0:1234:10::/96"},
		{"fd00::/112", 128, 0xbeef, "fd00::beef/128"},
	}
	for _, tc := range tests {
		s := mustSet(t, tc.cluster, tc.nodeMask)
		if got := s.block(tc.index).String(); got != tc.want {
			t.Errorf("%s /%d block %d = %s, want %s", tc.cluster, tc.nodeMask, tc.index, got, tc.want)
		}
		i, err := s.indexOf(mustCIDR(t, tc.want).IP)
		if err != nil || i != tc.index {
			t.Errorf("%s /%d indexOf(%s) = %d, %v; want %d", tc.cluster, tc.nodeMask, tc.want, i, err, tc.index)
		}
	}
}

func TestAllocateNextOrderAndExhaustion(t *testing.T) {
	for _, tc := range []struct {
		cluster  string
		nodeMask int
		want     []string
	}{
		{"10.0.0.0/22", 24, []string{"10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24", "10.0.3.0/24"}},
		{"127.123.234.0/30", 30, []string{"127.123.234.0/30"}},
		{"fd00:1::/62", 64, []string{"fd00:1::/64", "fd00:1:0:1::/64", "fd00:1:0:2::/64", "fd00:1:0:3::/64"}},
		{"beef:1234::/30", 30, []string{"beef:1234::/30"}},
	} {
		s := mustSet(t, tc.cluster, tc.nodeMask)
		for _, want := range tc.want {
			if got := allocate(t, s); got != want {
				t.Errorf("%s: allocated %s, want %s", tc.cluster, got, want)
			}
		}
		if _, err := s.AllocateNext(); !errors.Is(err, ErrCIDRRangeNoCIDRsRemaining) {
			t.Errorf("%s: allocation past the end: %v", tc.cluster, err)
		}
		// Releasing one block makes exactly that block available again.
		if err := s.Release(mustCIDR(t, tc.want[0])); err != nil {
			t.Fatal(err)
		}
		if got := allocate(t, s); got != tc.want[0] {
			t.Errorf("%s: after release got %s, want %s", tc.cluster, got, tc.want[0])
		}
	}
}

// Allocation continues after the last block handed out, so a released
// block is reused only once the range wraps around.
func TestAllocateNextWrapsAround(t *testing.T) {
	s := mustSet(t, "10.0.0.0/22", 24)
	for range 3 {
		allocate(t, s)
	}
	if err := s.Release(mustCIDR(t, "10.0.0.0/24")); err != nil {
		t.Fatal(err)
	}
	if got := allocate(t, s); got != "10.0.3.0/24" {
		t.Errorf("got %s, want 10.0.3.0/24", got)
	}
	if got := allocate(t, s); got != "10.0.0.0/24" {
		t.Errorf("got %s, want the wrapped-around 10.0.0.0/24", got)
	}
}

func TestOccupy(t *testing.T) {
	tests := []struct {
		name      string
		cluster   string
		nodeMask  int
		occupy    string
		wantErr   string
		wantUsed  int
		wantFirst string // next allocation, "" if exhausted
	}{
		{name: "exact block", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.0.0.0/24", wantUsed: 1, wantFirst: "10.0.1.0/24"},
		{name: "range of blocks", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.0.0.0/20", wantUsed: 16, wantFirst: "10.0.16.0/24"},
		{name: "smaller than a block", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.0.0.16/28", wantUsed: 1, wantFirst: "10.0.1.0/24"},
		{name: "last block", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.0.255.0/24", wantUsed: 1, wantFirst: "10.0.0.0/24"},
		{name: "cluster itself", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.0.0.0/16", wantUsed: 256},
		{name: "larger than the cluster", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.0.0.0/8", wantUsed: 256},
		{name: "outside", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "10.1.0.0/24", wantErr: "cidr 10.1.0.0/24 is out the range of cluster cidr 10.0.0.0/16"},
		{name: "larger, not containing", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "11.0.0.0/8", wantErr: "out the range"},
		{name: "other family", cluster: "10.0.0.0/16", nodeMask: 24, occupy: "fd00::/64", wantErr: "out the range"},
		{name: "v6 range", cluster: "fd00::/48", nodeMask: 64, occupy: "fd00::/60", wantUsed: 16, wantFirst: "fd00:0:0:10::/64"},
		{name: "v6 smaller than a block", cluster: "fd00::/48", nodeMask: 64, occupy: "fd00:0:0:3::1/128", wantUsed: 1, wantFirst: "fd00::/64"},
		{name: "v6 larger", cluster: "fd00::/48", nodeMask: 64, occupy: "fd00::/8", wantUsed: 1 << 16},
		{name: "v6 outside", cluster: "fd00::/48", nodeMask: 64, occupy: "fd01::/64", wantErr: "out the range"},
		{name: "v4 in v6", cluster: "fd00::/48", nodeMask: 64, occupy: "10.0.0.0/8", wantErr: "out the range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustSet(t, tc.cluster, tc.nodeMask)
			err := s.Occupy(mustCIDR(t, tc.occupy))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				if s.allocatedCIDRs != 0 {
					t.Errorf("failed occupy changed the count to %d", s.allocatedCIDRs)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.allocatedCIDRs != tc.wantUsed {
				t.Errorf("%d used, want %d", s.allocatedCIDRs, tc.wantUsed)
			}
			n, err := s.AllocateNext()
			if tc.wantFirst == "" {
				if !errors.Is(err, ErrCIDRRangeNoCIDRsRemaining) {
					t.Errorf("allocation after full occupy: %v, %v", n, err)
				}
				return
			}
			if err != nil || n.String() != tc.wantFirst {
				t.Errorf("next allocation %v, %v; want %s", n, err, tc.wantFirst)
			}
		})
	}
}

func TestNilCIDR(t *testing.T) {
	s := mustSet(t, "10.0.0.0/16", 24)
	if err := s.Occupy(nil); err == nil {
		t.Error("Occupy(nil) succeeded")
	}
	if err := s.Release(nil); err == nil {
		t.Error("Release(nil) succeeded")
	}
}

// Occupying or releasing twice changes the count once.
func TestDoubleOccupyRelease(t *testing.T) {
	s := mustSet(t, "10.42.0.0/16", 24)
	ops := []struct {
		occupy bool
		cidr   string
		used   int
	}{
		{true, "10.42.0.0/24", 1},
		{true, "10.42.0.0/24", 1},
		{true, "10.42.0.0/23", 2},
		{false, "10.42.1.0/24", 1},
		{false, "10.42.1.0/24", 1},
		{false, "10.42.0.0/16", 0},
		{false, "10.42.0.0/16", 0},
	}
	for i, op := range ops {
		var err error
		if op.occupy {
			err = s.Occupy(mustCIDR(t, op.cidr))
		} else {
			err = s.Release(mustCIDR(t, op.cidr))
		}
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
		if s.allocatedCIDRs != op.used {
			t.Fatalf("op %d: %d used, want %d", i, s.allocatedCIDRs, op.used)
		}
	}
}

func TestMetrics(t *testing.T) {
	// A cluster CIDR no other test uses keeps the series apart.
	label := "10.99.0.0/22"
	s := mustSet(t, label, 24)
	if v, _ := testutil.GetGaugeMetricValue(cidrSetMaxCidrs.WithLabelValues(label)); v != 4 {
		t.Errorf("max cidrs %v, want 4", v)
	}
	allocate(t, s)
	if err := s.Occupy(mustCIDR(t, "10.99.2.0/23")); err != nil {
		t.Fatal(err)
	}
	// Occupied blocks count as allocations too.
	allocate(t, s)
	if v, _ := testutil.GetCounterMetricValue(cidrSetAllocations.WithLabelValues(label)); v != 4 {
		t.Errorf("allocations %v, want 4", v)
	}
	if v, _ := testutil.GetGaugeMetricValue(cidrSetUsage.WithLabelValues(label)); v != 1 {
		t.Errorf("usage %v, want 1", v)
	}
	if err := s.Release(mustCIDR(t, "10.99.0.0/22")); err != nil {
		t.Fatal(err)
	}
	if v, _ := testutil.GetCounterMetricValue(cidrSetReleases.WithLabelValues(label)); v != 4 {
		t.Errorf("releases %v, want 4", v)
	}
	if v, _ := testutil.GetGaugeMetricValue(cidrSetUsage.WithLabelValues(label)); v != 0 {
		t.Errorf("usage %v, want 0", v)
	}
	if n, _ := testutil.GetHistogramMetricCount(cidrSetAllocationTriesPerRequest.WithLabelValues(label)); n != 2 {
		t.Errorf("%d tries observations, want 2", n)
	}
}

// model is a reference implementation of a CidrSet that enumerates the
// blocks with netip and decides coverage with Prefix.Overlaps.
type model struct {
	cluster netip.Prefix
	blocks  []netip.Prefix
	used    []bool
	next    int
}

func newModel(cluster netip.Prefix, nodeMask int) *model {
	m := &model{cluster: cluster}
	n := 1 << (nodeMask - cluster.Bits())
	for i := range n {
		b := cluster.Addr().AsSlice()
		// Write i into the bits [cluster.Bits(), nodeMask) one bit at a time.
		for bit := range nodeMask - cluster.Bits() {
			if i&(1<<bit) != 0 {
				pos := nodeMask - 1 - bit
				b[pos/8] |= 0x80 >> (pos % 8)
			}
		}
		a, _ := netip.AddrFromSlice(b)
		m.blocks = append(m.blocks, netip.PrefixFrom(a, nodeMask))
	}
	m.used = make([]bool, n)
	return m
}

func (m *model) count() int {
	c := 0
	for _, u := range m.used {
		if u {
			c++
		}
	}
	return c
}

func (m *model) allocate() (netip.Prefix, bool) {
	for i := range m.blocks {
		c := (m.next + i) % len(m.blocks)
		if !m.used[c] {
			m.used[c] = true
			m.next = (c + 1) % len(m.blocks)
			return m.blocks[c], true
		}
	}
	return netip.Prefix{}, false
}

// mark sets every block overlapping p; false if p misses the cluster.
func (m *model) mark(p netip.Prefix, used bool) bool {
	if p.Addr().Is4() != m.cluster.Addr().Is4() || !p.Overlaps(m.cluster) {
		return false
	}
	for i, b := range m.blocks {
		if b.Overlaps(p) {
			m.used[i] = used
		}
	}
	return true
}

// randomPrefix returns a prefix near the cluster: mostly inside it, some
// around it, some of the other family.
func randomPrefix(r *rand.Rand, cluster netip.Prefix) netip.Prefix {
	b := cluster.Addr().AsSlice()
	bits := len(b) * 8
	if r.Intn(20) == 0 {
		if len(b) == 4 {
			return netip.MustParsePrefix("fd00::/64")
		}
		return netip.MustParsePrefix("10.0.0.0/24")
	}
	// Randomise the bits from a little above the cluster mask down to the end.
	from := max(cluster.Bits()-2, 0)
	for pos := from; pos < bits; pos++ {
		if r.Intn(2) == 1 {
			b[pos/8] ^= 0x80 >> (pos % 8)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(a, from+r.Intn(bits-from+1)).Masked()
}

func toIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// exercise runs random operations against a CidrSet and the model and
// fails at the first disagreement.
func exercise(t *testing.T, r *rand.Rand, cluster netip.Prefix, nodeMask, steps int) {
	t.Helper()
	s, err := NewCIDRSet(toIPNet(cluster), nodeMask)
	if err != nil {
		t.Fatalf("NewCIDRSet(%s, %d): %v", cluster, nodeMask, err)
	}
	m := newModel(cluster, nodeMask)
	for step := range steps {
		switch op := r.Intn(3); op {
		case 0:
			want, ok := m.allocate()
			got, err := s.AllocateNext()
			if !ok {
				if !errors.Is(err, ErrCIDRRangeNoCIDRsRemaining) {
					t.Fatalf("%s/%d step %d: allocation in a full set: %v, %v", cluster, nodeMask, step, got, err)
				}
				continue
			}
			if err != nil || got.String() != want.String() {
				t.Fatalf("%s/%d step %d: allocated %v, %v; want %s", cluster, nodeMask, step, got, err, want)
			}
		default:
			p := randomPrefix(r, cluster)
			occupy := op == 1
			inRange := m.mark(p, occupy)
			if occupy {
				err = s.Occupy(toIPNet(p))
			} else {
				err = s.Release(toIPNet(p))
			}
			if (err == nil) != inRange {
				t.Fatalf("%s/%d step %d: occupy=%v %s: err %v, in range %v", cluster, nodeMask, step, occupy, p, err, inRange)
			}
		}
		if s.allocatedCIDRs != m.count() {
			t.Fatalf("%s/%d step %d: %d used, model has %d", cluster, nodeMask, step, s.allocatedCIDRs, m.count())
		}
	}
}

// Random operations across families and mask sizes agree with the model.
func TestAgainstModel(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	clusters := []string{"10.0.0.0/8", "10.244.0.0/16", "192.168.7.0/24", "0.0.0.0/0", "fd00::/8", "2001:db8::/48", "2001:db8:0:ff00::/56", "2001:db8:85a3::/58", "fd00::8a2e:0:0/96", "fd00::ff00/120"}
	for _, c := range clusters {
		cluster := netip.MustParsePrefix(c)
		bits := cluster.Addr().BitLen()
		for diff := 0; diff <= 8 && cluster.Bits()+diff <= bits; diff++ {
			exercise(t, r, cluster, cluster.Bits()+diff, 300)
		}
	}
}

func FuzzCIDRSet(f *testing.F) {
	f.Add(int64(1), uint8(16), uint8(8), false)
	f.Add(int64(2), uint8(60), uint8(6), true)
	f.Add(int64(3), uint8(30), uint8(2), false)
	f.Add(int64(4), uint8(120), uint8(8), true)
	f.Fuzz(func(t *testing.T, seed int64, clusterBits, diff uint8, v6 bool) {
		r := rand.New(rand.NewSource(seed))
		base, bits := "172.16.33.0", 32
		if v6 {
			base, bits = "2001:db8:aa55:ff00:1234:5678:9abc:def0", 128
		}
		cb := int(clusterBits) % (bits + 1)
		nodeMask := cb + int(diff)%9
		if nodeMask > bits {
			nodeMask = bits
		}
		cluster := netip.PrefixFrom(netip.MustParseAddr(base), cb).Masked()
		exercise(t, r, cluster, nodeMask, 200)
	})
}
