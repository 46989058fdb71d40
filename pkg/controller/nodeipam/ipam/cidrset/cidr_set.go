// Package cidrset tracks which node-sized blocks of a cluster CIDR are in
// use. The node IPAM controller keeps one set per cluster CIDR (one per IP
// family) and hands out the blocks as nodes' pod CIDRs.
package cidrset

import (
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
)

// maxIPv6SubnetDiff bounds how many more bits a node mask may have than an
// IPv6 cluster mask: the bitmap is not compressed, so a /48 cluster with
// /64 nodes (65536 blocks) is the practical limit upstream chose.
const maxIPv6SubnetDiff = 16

var (
	// ErrCIDRRangeNoCIDRsRemaining is returned by AllocateNext once every
	// block is in use.
	ErrCIDRRangeNoCIDRsRemaining = errors.New(
		"CIDR allocation failed; there are no remaining CIDRs left to allocate in the accepted range")
	// ErrCIDRSetSubNetTooBig is returned by NewCIDRSet for a node mask too
	// long for the cluster CIDR.
	ErrCIDRSetSubNetTooBig = errors.New( //nolint:staticcheck // upstream's text
		"New CIDR set failed; the node CIDR size is too big")
)

// CidrSet is the allocation bitmap of one cluster CIDR cut into blocks of
// the node mask size. Bit i stands for the i-th block from the start of the
// cluster CIDR. It is safe for concurrent use.
type CidrSet struct {
	mu sync.Mutex

	clusterCIDR     *net.IPNet
	clusterMaskSize int
	// base is the cluster network address as an integer; block i starts
	// at base + i<<hostBits.
	base     *big.Int
	addrLen  int
	hostBits uint

	nodeMask     net.IPMask
	nodeMaskSize int

	maxCIDRs       int
	allocatedCIDRs int
	// nextCandidate is where the next search for a free block starts, so
	// allocations walk the range instead of refilling the lowest hole.
	nextCandidate int
	used          big.Int

	// label is the clusterCIDR label of the metrics.
	label string
}

// NewCIDRSet returns an empty set of the blocks of size subNetMaskSize in
// clusterCIDR.
func NewCIDRSet(clusterCIDR *net.IPNet, subNetMaskSize int) (*CidrSet, error) {
	clusterMaskSize, bits := clusterCIDR.Mask.Size()
	if bits == 0 {
		return nil, fmt.Errorf("invalid cluster CIDR mask %v", clusterCIDR.Mask)
	}
	addrLen := bits / 8
	if bits == 128 && subNetMaskSize-clusterMaskSize > maxIPv6SubnetDiff {
		return nil, ErrCIDRSetSubNetTooBig
	}
	// The flag checks keep the node mask between the cluster mask and the
	// address length; refuse anything else rather than build nonsense.
	if subNetMaskSize > bits {
		return nil, ErrCIDRSetSubNetTooBig
	}
	if subNetMaskSize < clusterMaskSize {
		return nil, fmt.Errorf("node CIDR mask size %d is shorter than the cluster CIDR mask size %d", subNetMaskSize, clusterMaskSize)
	}
	ip := normalize(clusterCIDR.IP, addrLen)
	if ip == nil {
		return nil, fmt.Errorf("cluster CIDR %v: address and mask are of different IP families", clusterCIDR)
	}
	network := &net.IPNet{IP: ip.Mask(clusterCIDR.Mask), Mask: clusterCIDR.Mask}

	registerCidrsetMetrics()
	s := &CidrSet{
		clusterCIDR:     network,
		clusterMaskSize: clusterMaskSize,
		base:            new(big.Int).SetBytes(network.IP),
		addrLen:         addrLen,
		hostBits:        uint(bits - subNetMaskSize),
		nodeMask:        net.CIDRMask(subNetMaskSize, bits),
		nodeMaskSize:    subNetMaskSize,
		maxCIDRs:        1 << uint(subNetMaskSize-clusterMaskSize),
		label:           clusterCIDR.String(),
	}
	cidrSetMaxCidrs.WithLabelValues(s.label).Set(float64(s.maxCIDRs))
	return s, nil
}

// normalize returns ip in its addrLen-byte form, or nil if it is of the
// other family.
func normalize(ip net.IP, addrLen int) net.IP {
	if addrLen == net.IPv4len {
		return ip.To4()
	}
	if ip.To4() != nil {
		return nil
	}
	return ip.To16()
}

// block returns the index-th node CIDR.
func (s *CidrSet) block(index int) *net.IPNet {
	n := new(big.Int).Lsh(big.NewInt(int64(index)), s.hostBits)
	n.Or(n, s.base)
	return &net.IPNet{IP: n.FillBytes(make([]byte, s.addrLen)), Mask: s.nodeMask}
}

// indexOf returns the block holding ip, which must be of the set's family.
func (s *CidrSet) indexOf(ip net.IP) (int, error) {
	n := new(big.Int).SetBytes(ip)
	n.Xor(n, s.base)
	n.Rsh(n, s.hostBits)
	if !n.IsInt64() || n.Int64() >= int64(s.maxCIDRs) {
		return 0, fmt.Errorf("CIDR: %v/%v is out of the range of CIDR allocator", ip, s.nodeMaskSize)
	}
	return int(n.Int64()), nil
}

// AllocateNext marks the first free block at or after the last allocation
// as used (wrapping around) and returns it.
func (s *CidrSet) AllocateNext() (*net.IPNet, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.allocatedCIDRs == s.maxCIDRs {
		return nil, ErrCIDRRangeNoCIDRsRemaining
	}
	candidate := s.nextCandidate
	tries := 0
	for ; tries < s.maxCIDRs; tries++ {
		if s.used.Bit(candidate) == 0 {
			break
		}
		candidate = (candidate + 1) % s.maxCIDRs
	}
	s.nextCandidate = (candidate + 1) % s.maxCIDRs
	s.used.SetBit(&s.used, candidate, 1)
	s.allocatedCIDRs++

	cidrSetAllocations.WithLabelValues(s.label).Inc()
	cidrSetAllocationTriesPerRequest.WithLabelValues(s.label).Observe(float64(tries))
	s.observeUsage()
	return s.block(candidate), nil
}

// indexRange returns the first and last block cidr covers. A cidr at least
// as large as the cluster CIDR covers every block; one smaller than a node
// block covers the block it falls in.
func (s *CidrSet) indexRange(cidr *net.IPNet) (begin, end int, err error) {
	if cidr == nil {
		return -1, -1, fmt.Errorf("error getting indices for cluster cidr %v, cidr is nil", s.clusterCIDR)
	}
	outOfRange := fmt.Errorf("cidr %v is out the range of cluster cidr %v", cidr, s.clusterCIDR)
	maskSize, bits := cidr.Mask.Size()
	ip := normalize(cidr.IP, s.addrLen)
	if bits != s.addrLen*8 || ip == nil {
		return -1, -1, outOfRange
	}
	ip = ip.Mask(cidr.Mask)
	// Two prefixes overlap only if one contains the other's start.
	if !s.clusterCIDR.Contains(ip) && !(&net.IPNet{IP: ip, Mask: cidr.Mask}).Contains(s.clusterCIDR.IP) {
		return -1, -1, outOfRange
	}
	if maskSize <= s.clusterMaskSize {
		return 0, s.maxCIDRs - 1, nil
	}

	if begin, err = s.indexOf(ip); err != nil {
		return -1, -1, err
	}
	last := make(net.IP, len(ip))
	for i := range ip {
		last[i] = ip[i] | ^cidr.Mask[i]
	}
	if end, err = s.indexOf(last); err != nil {
		return -1, -1, err
	}
	return begin, end, nil
}

// Release marks every block cidr covers as free. Releasing a free block
// is not an error.
func (s *CidrSet) Release(cidr *net.IPNet) error {
	begin, end, err := s.indexRange(cidr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := begin; i <= end; i++ {
		// Count only real changes so a double release cannot skew usage.
		if s.used.Bit(i) == 1 {
			s.used.SetBit(&s.used, i, 0)
			s.allocatedCIDRs--
			cidrSetReleases.WithLabelValues(s.label).Inc()
		}
	}
	s.observeUsage()
	return nil
}

// Occupy marks every block cidr covers as used. Occupying a used block is
// not an error.
func (s *CidrSet) Occupy(cidr *net.IPNet) error {
	begin, end, err := s.indexRange(cidr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := begin; i <= end; i++ {
		if s.used.Bit(i) == 0 {
			s.used.SetBit(&s.used, i, 1)
			s.allocatedCIDRs++
			cidrSetAllocations.WithLabelValues(s.label).Inc()
		}
	}
	s.observeUsage()
	return nil
}

// observeUsage publishes the used fraction; the caller holds mu.
func (s *CidrSet) observeUsage() {
	cidrSetUsage.WithLabelValues(s.label).Set(float64(s.allocatedCIDRs) / float64(s.maxCIDRs))
}
