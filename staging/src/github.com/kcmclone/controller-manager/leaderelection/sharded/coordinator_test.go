package sharded

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

// running counts, per unit, the replicas running it now and the most ever
// at once.
type running struct {
	mu     sync.Mutex
	now    map[string]map[string]bool
	maxRun map[string]int
}

func (r *running) unit(name, replica string) Unit {
	return Unit{Name: name, Weight: 1, Run: func(ctx context.Context) {
		r.mu.Lock()
		if r.now[name] == nil {
			r.now[name] = map[string]bool{}
		}
		r.now[name][replica] = true
		r.maxRun[name] = max(r.maxRun[name], len(r.now[name]))
		r.mu.Unlock()
		<-ctx.Done()
		r.mu.Lock()
		delete(r.now[name], replica)
		r.mu.Unlock()
	}}
}

func (r *running) counts() (map[string]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	per := map[string]int{}
	total := 0
	for _, reps := range r.now {
		for rep := range reps {
			per[rep]++
		}
		if len(reps) > 0 {
			total++
		}
	}
	return per, total
}

func TestCoordinatorsShareAndHandOver(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about 15s")
	}
	client := fake.NewClientset()
	r := &running{now: map[string]map[string]bool{}, maxRun: map[string]int{}}
	const n = 6
	start := func(id string) (context.CancelFunc, chan error) {
		var units []Unit
		for i := 0; i < n; i++ {
			units = append(units, r.unit(fmt.Sprintf("c%d", i), id))
		}
		c, err := New(Config{Client: client, Namespace: "kube-system", Name: "kcm", Identity: id,
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
			Units: units, StopTimeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			done <- c.Run(ctx)
		}()
		t.Cleanup(func() { cancel(); <-finished })
		return cancel, done
	}
	waitFor := func(what string, cond func(per map[string]int, total int) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
			per, total := r.counts()
			return cond(per, total), nil
		})
		if err != nil {
			per, total := r.counts()
			t.Fatalf("waiting for %s: per replica %v, %d of %d running", what, per, total, n)
		}
	}

	start("a")
	waitFor("a to run everything", func(per map[string]int, total int) bool { return per["a"] == n })
	stopB, doneB := start("b")
	waitFor("b to take a share", func(per map[string]int, total int) bool {
		return per["b"] >= 2 && per["a"] >= 2 && total == n
	})
	// The main Lease is held by the group.
	l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), "kcm", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != GroupIdentity("kcm") {
		t.Fatalf("main lease %+v, %v; want held by %q", l, err, GroupIdentity("kcm"))
	}

	stopB()
	if err := <-doneB; err != nil {
		t.Fatalf("b: %v", err)
	}
	// b released its Leases on the way out, so a takes over well before
	// they would have expired.
	for i := 0; i < n; i++ {
		l, err := client.CoordinationV1().Leases("kube-system").Get(context.Background(), fmt.Sprintf("kcm-c%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := l.Spec.HolderIdentity; h != nil && *h == "b" {
			t.Errorf("kcm-c%d still held by b after it stopped", i)
		}
	}
	waitFor("a to run everything again", func(per map[string]int, total int) bool { return per["a"] == n })

	r.mu.Lock()
	defer r.mu.Unlock()
	for name, m := range r.maxRun {
		if m > 1 {
			t.Errorf("%s ran in %d replicas at once", name, m)
		}
	}
}

func TestNewRejectsBadTimings(t *testing.T) {
	_, err := New(Config{Client: fake.NewClientset(), Namespace: "ns", Name: "n", Identity: "i",
		LeaseDuration: time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second})
	if err == nil {
		t.Fatal("renew deadline above lease duration accepted")
	}
}

func TestHoldersShowsWhoRunsEachUnit(t *testing.T) {
	client := fake.NewClientset()
	r := &running{now: map[string]map[string]bool{}, maxRun: map[string]int{}}
	c, err := New(Config{Client: client, Namespace: "kube-system", Name: "kcm", Identity: "a",
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 200 * time.Millisecond,
		Units: []Unit{r.unit("u", "a")}, StopTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if h := c.Holders(); len(h) != 1 || h["u"] != "" {
		t.Fatalf("before running: %v, want u free", h)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		return c.Holders()["u"] == "a", nil
	})
	if err != nil {
		t.Fatalf("holders = %v, want u held by a", c.Holders())
	}
}
