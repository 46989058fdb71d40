package framework

import (
	"net"
	"strconv"
	"testing"
)

// Reserved ports are distinct, never handed out twice in a process, and
// held (nothing else can bind them) until released.
func TestReservePorts(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		r, err := ReservePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range r.Ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
		addr := "127.0.0.1:" + strconv.Itoa(r.Ports[0])
		if l, err := net.Listen("tcp", addr); err == nil {
			_ = l.Close()
			t.Fatalf("port %d could be bound while reserved", r.Ports[0])
		}
		r.Release()
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("port %d not free after release: %v", r.Ports[0], err)
		}
		_ = l.Close()
	}
	p, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if seen[p] {
		t.Fatalf("FreePort returned reserved port %d again", p)
	}
}
