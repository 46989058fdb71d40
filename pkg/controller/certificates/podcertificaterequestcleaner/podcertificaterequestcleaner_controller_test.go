package podcertificaterequestcleaner

import (
	"context"
	"errors"
	"testing"
	"time"

	certsv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	core "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

var pcrResource = schema.GroupVersionResource{Group: "certificates.k8s.io", Version: "v1", Resource: "podcertificaterequests"}

func pcr(name string, age time.Duration, conds ...metav1.Condition) *certsv1.PodCertificateRequest {
	return &certsv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         "ns",
			Name:              name,
			UID:               types.UID(name + "-uid"),
			CreationTimestamp: metav1.NewTime(now.Add(-age)),
		},
		Spec: certsv1.PodCertificateRequestSpec{
			SignerName:           "example.com/signer",
			PodName:              "pod",
			PodUID:               "pod-uid",
			ServiceAccountName:   "sa",
			ServiceAccountUID:    "sa-uid",
			NodeName:             "node",
			NodeUID:              "node-uid",
			MaxExpirationSeconds: ptr.To[int32](86400),
		},
		Status: certsv1.PodCertificateRequestStatus{Conditions: conds},
	}
}

func condition(typ string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R", Message: "m", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
}

// newController builds a cleaner over a fake client holding objs, with its
// lister filled directly (no informer goroutines).
func newController(t *testing.T, objs ...runtime.Object) (*Controller, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Certificates().V1().PodCertificateRequests()
	for _, o := range objs {
		if err := inf.Informer().GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	c := NewController(client, inf, testingclock.NewFakePassiveClock(now), DefaultThreshold, DefaultPollingInterval)
	return c, client
}

func exists(t *testing.T, client *fake.Clientset, name string) bool {
	t.Helper()
	_, err := client.CertificatesV1().PodCertificateRequests("ns").Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

func TestDefaults(t *testing.T) {
	if DefaultThreshold != 15*time.Minute || DefaultPollingInterval != 5*time.Minute {
		t.Errorf("defaults = %v/%v, want 15m/5m as upstream", DefaultThreshold, DefaultPollingInterval)
	}
}

func TestHandle(t *testing.T) {
	tests := []struct {
		name       string
		pcr        *certsv1.PodCertificateRequest
		wantDelete bool
	}{
		{name: "pending new", pcr: pcr("p", time.Minute)},
		{name: "pending just under threshold", pcr: pcr("p", DefaultThreshold-time.Second)},
		{name: "pending exactly threshold", pcr: pcr("p", DefaultThreshold), wantDelete: true},
		{name: "pending past threshold", pcr: pcr("p", DefaultThreshold+time.Second), wantDelete: true},
		{name: "issued young", pcr: pcr("p", time.Minute, condition(certsv1.PodCertificateRequestConditionTypeIssued))},
		{name: "issued old", pcr: pcr("p", time.Hour, condition(certsv1.PodCertificateRequestConditionTypeIssued)), wantDelete: true},
		{name: "denied young", pcr: pcr("p", time.Minute, condition(certsv1.PodCertificateRequestConditionTypeDenied))},
		{name: "denied old", pcr: pcr("p", 16*time.Minute, condition(certsv1.PodCertificateRequestConditionTypeDenied)), wantDelete: true},
		{name: "failed young", pcr: pcr("p", 14*time.Minute, condition(certsv1.PodCertificateRequestConditionTypeFailed))},
		{name: "failed old", pcr: pcr("p", 20*time.Minute, condition(certsv1.PodCertificateRequestConditionTypeFailed)), wantDelete: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, client := newController(t, tc.pcr)
			if err := c.handle(context.Background(), tc.pcr); err != nil {
				t.Fatalf("handle: %v", err)
			}
			if got := !exists(t, client, tc.pcr.Name); got != tc.wantDelete {
				t.Errorf("deleted = %v, want %v", got, tc.wantDelete)
			}
		})
	}
}

func TestHandleDeletesWithUIDPrecondition(t *testing.T) {
	old := pcr("old", time.Hour)
	c, client := newController(t, old)
	if err := c.handle(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	var deletes []core.DeleteActionImpl
	for _, a := range client.Actions() {
		if d, ok := a.(core.DeleteActionImpl); ok {
			deletes = append(deletes, d)
		}
	}
	if len(deletes) != 1 {
		t.Fatalf("got %d deletes, want 1: %v", len(deletes), client.Actions())
	}
	d := deletes[0]
	if d.GetResource() != pcrResource || d.GetNamespace() != "ns" || d.GetName() != "old" {
		t.Errorf("deleted %v %s/%s, want %v ns/old", d.GetResource(), d.GetNamespace(), d.GetName(), pcrResource)
	}
	pre := d.DeleteOptions.Preconditions
	if pre == nil || pre.UID == nil || *pre.UID != old.UID {
		t.Errorf("preconditions = %+v, want UID %s", pre, old.UID)
	}
}

func TestHandleErrors(t *testing.T) {
	old := pcr("old", time.Hour)

	c, client := newController(t, old)
	client.PrependReactor("delete", "podcertificaterequests", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(pcrResource.GroupResource(), "old")
	})
	if err := c.handle(context.Background(), old); err != nil {
		t.Errorf("already deleted: handle = %v, want nil", err)
	}

	c, client = newController(t, old)
	boom := errors.New("boom")
	client.PrependReactor("delete", "podcertificaterequests", func(core.Action) (bool, runtime.Object, error) {
		return true, nil, boom
	})
	if err := c.handle(context.Background(), old); !errors.Is(err, boom) {
		t.Errorf("delete failure: handle = %v, want wrapping %v", err, boom)
	}
}

func TestSweep(t *testing.T) {
	young, old1, old2 := pcr("young", time.Minute), pcr("old1", time.Hour), pcr("old2", time.Hour)
	c, client := newController(t, young, old1, old2)
	// A failure on one request must not stop the sweep.
	client.PrependReactor("delete", "podcertificaterequests", func(a core.Action) (bool, runtime.Object, error) {
		if a.(core.DeleteAction).GetName() == "old1" {
			return true, nil, errors.New("boom")
		}
		return false, nil, nil
	})
	c.sweep(context.Background())
	if !exists(t, client, "young") {
		t.Error("young request was deleted")
	}
	if !exists(t, client, "old1") {
		t.Error("old1 deleted although its delete failed")
	}
	if exists(t, client, "old2") {
		t.Error("old2 survived the sweep")
	}
}

// TestRunPolls checks that Run sweeps repeatedly on pollingInterval, from
// the informer's cache, and returns once ctx is cancelled.
func TestRunPolls(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	clock := testingclock.NewFakePassiveClock(now)
	c := NewController(client, factory.Certificates().V1().PodCertificateRequests(), clock, DefaultThreshold, 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		c.Run(ctx, 1)
		close(done)
	}()
	factory.WaitForCacheSync(ctx.Done())

	// Created after Run started, so only a later sweep can delete it.
	if _, err := client.CertificatesV1().PodCertificateRequests("ns").Create(ctx, pcr("old", time.Hour), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.WaitUntil(t, "old request never deleted", func(ctx context.Context) (bool, error) {
		_, err := client.CertificatesV1().PodCertificateRequests("ns").Get(ctx, "old", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	cancel()
	<-done
}
