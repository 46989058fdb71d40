package app

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeLock is a resourcelock.Interface over one record; conflicts makes
// that many Updates fail with a conflict first.
type fakeLock struct {
	rec       resourcelock.LeaderElectionRecord
	conflicts int
	updates   []resourcelock.LeaderElectionRecord
}

func (f *fakeLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	r := f.rec
	return &r, nil, nil
}
func (f *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return nil }
func (f *fakeLock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	if f.conflicts > 0 {
		f.conflicts--
		return apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "kcm", nil)
	}
	f.updates = append(f.updates, r)
	f.rec = r
	return nil
}
func (f *fakeLock) RecordEvent(string) {}
func (f *fakeLock) Identity() string   { return "me" }
func (f *fakeLock) Describe() string   { return "kube-system/kcm" }

func TestReleaseLease(t *testing.T) {
	t.Run("held by us", func(t *testing.T) {
		l := &fakeLock{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15, LeaderTransitions: 3}, conflicts: 1}
		if err := releaseLease(l, "me", time.Minute); err != nil {
			t.Fatal(err)
		}
		if len(l.updates) != 1 {
			t.Fatalf("updates %d, want 1 (after one conflict)", len(l.updates))
		}
		if u := l.updates[0]; u.HolderIdentity != "" || u.LeaseDurationSeconds != 1 || u.LeaderTransitions != 3 {
			t.Errorf("released record %+v, want no holder, 1s, transitions kept", u)
		}
	})
	t.Run("held by another", func(t *testing.T) {
		l := &fakeLock{rec: resourcelock.LeaderElectionRecord{HolderIdentity: "other", LeaseDurationSeconds: 15}}
		if err := releaseLease(l, "me", time.Minute); err != nil {
			t.Fatal(err)
		}
		if len(l.updates) != 0 {
			t.Errorf("released another holder's Lease: %+v", l.updates)
		}
	})
}
