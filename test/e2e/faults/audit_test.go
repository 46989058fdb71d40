package faults

import (
	"encoding/json"
	"testing"

	"github.com/kcmclone/kube-controller-manager/test/e2e/faults/bed"
)

// auditLines parses audit log lines as bed.Audit does.
func auditLines(t *testing.T, lines ...string) []bed.AuditEvent {
	t.Helper()
	var out []bed.AuditEvent
	for _, l := range lines {
		var e bed.AuditEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestElectionEventsOfALosingLeader(t *testing.T) {
	events := auditLines(t,
		// "became leader": named once its body is read.
		`{"auditID":"named","stage":"RequestReceived","verb":"create","objectRef":{"resource":"events","namespace":"kube-system"}}`,
		`{"auditID":"named","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"kube-system","name":"kube-controller-manager.18a2b"},"responseStatus":{"code":201}}`,
		// "stopped leading" read after the process exited: no body, no answer.
		`{"auditID":"unread","stage":"RequestReceived","verb":"create","objectRef":{"resource":"events","namespace":"kube-system"}}`,
		// The same, answered with an error.
		`{"auditID":"failed","stage":"RequestReceived","verb":"create","objectRef":{"resource":"events","namespace":"kube-system"}}`,
		`{"auditID":"failed","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"kube-system"},"responseStatus":{"code":500}}`,
		// Positive controls: Events a controller wrote.
		`{"auditID":"controller","stage":"RequestReceived","verb":"create","objectRef":{"resource":"events","namespace":"kube-system"}}`,
		`{"auditID":"controller","stage":"ResponseComplete","verb":"create","objectRef":{"resource":"events","namespace":"kube-system","name":"coredns-6d4b.18a2c"},"responseStatus":{"code":201}}`,
		`{"auditID":"elsewhere","stage":"RequestReceived","verb":"create","objectRef":{"resource":"events","namespace":"default"}}`,
	)
	got := electionEvents(events)
	for id, want := range map[string]bool{"named": true, "unread": true, "failed": true, "controller": false, "elsewhere": false} {
		if got[id] != want {
			t.Errorf("%s: taken for the election's own Event %v, want %v", id, got[id], want)
		}
	}
}

func TestLeaseWritesIncludeNamelessElectionCreates(t *testing.T) {
	events := auditLines(t,
		// A candidate's create that lost the race: the audit event has no name.
		`{"auditID":"create","stage":"RequestReceived","verb":"create","objectRef":{"resource":"leases","namespace":"kube-system"}}`,
		`{"auditID":"renew","stage":"RequestReceived","verb":"update","objectRef":{"resource":"leases","namespace":"kube-system","name":"kube-controller-manager"}}`,
		// Positive controls: other Lease writes stay controller writes.
		`{"auditID":"other","stage":"RequestReceived","verb":"delete","objectRef":{"resource":"leases","namespace":"kube-system","name":"apiserver-abc"}}`,
		`{"auditID":"node","stage":"RequestReceived","verb":"create","objectRef":{"resource":"leases","namespace":"kube-node-lease"}}`,
	)
	want := map[string]bool{"create": true, "renew": true, "other": false, "node": false}
	for _, e := range events {
		if got := isLeaseWrite(e); got != want[e.AuditID] {
			t.Errorf("%s: taken for a leader election Lease write %v, want %v", e.AuditID, got, want[e.AuditID])
		}
	}
}
