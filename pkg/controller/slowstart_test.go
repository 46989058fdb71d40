package controller

import (
	"errors"
	"sync/atomic"
	"testing"
)

func TestSlowStartBatch(t *testing.T) {
	fail := errors.New("fail")
	tests := []struct {
		name          string
		count         int
		okCalls       int32 // calls that succeed before all later ones fail
		wantCalls     int32
		wantSuccesses int
	}{
		{"all succeed", 10, 100, 10, 10},
		{"first fails", 10, 0, 1, 0},
		// Batches 1,2,4: the 4-batch has the first failure, the 3rd batch's calls all run.
		{"fail in third batch", 10, 4, 7, 4},
		{"zero", 0, 100, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			n, err := SlowStartBatch(tc.count, 1, func() error {
				if calls.Add(1) > tc.okCalls {
					return fail
				}
				return nil
			})
			if calls.Load() != tc.wantCalls || n != tc.wantSuccesses {
				t.Fatalf("calls=%d successes=%d, want %d %d", calls.Load(), n, tc.wantCalls, tc.wantSuccesses)
			}
			if (err != nil) != (tc.wantSuccesses != tc.count) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}
