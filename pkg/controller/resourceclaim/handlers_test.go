package resourceclaim

import (
	"context"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/testutil"

	ctrltestutil "github.com/kcmclone/kube-controller-manager/pkg/controller/testutil"
)

func TestEnqueuePod(t *testing.T) {
	pod := podWithTemplate("web")
	claim := generatedClaim("web-gpu-1", pod)
	for name, tc := range map[string]struct {
		pod     *v1.Pod
		objs    []runtimeObject
		deleted bool
		want    []string
	}{
		"no-claims": {
			pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}},
		},
		"needs-claim": {
			pod:  pod,
			want: []string{"pod:ns/web"},
		},
		"claim-exists": {
			pod:  withStatus(pod, claim.Name),
			objs: []runtimeObject{claim},
		},
		"claim-missing-again": {
			pod:  withStatus(pod, claim.Name),
			want: []string{"pod:ns/web"},
		},
		"done-releases-claims": {
			pod:  withPhase(withStatus(pod, claim.Name), v1.PodSucceeded),
			objs: []runtimeObject{claim},
			want: []string{"claim:ns/web-gpu-1"},
		},
		"deleted-releases-claims": {
			pod:     withStatus(pod, claim.Name),
			objs:    []runtimeObject{claim},
			deleted: true,
			want:    []string{"claim:ns/web-gpu-1"},
		},
		"deleted-unscheduled-releases-claims": {
			pod:  deletedCopy(withStatus(pod, claim.Name)),
			objs: []runtimeObject{claim},
			want: []string{"claim:ns/web-gpu-1"},
		},
		"deleted-scheduled-keeps-claims": {
			pod:  deletedCopy(scheduled(withStatus(pod, claim.Name))),
			objs: []runtimeObject{claim},
		},
		"scheduled-needs-reservation": {
			pod:  scheduled(withStatus(pod, claim.Name)),
			objs: []runtimeObject{allocated(claim)},
			want: []string{"pod:ns/web"},
		},
		"scheduled-reserved": {
			pod:  scheduled(withStatus(pod, claim.Name)),
			objs: []runtimeObject{reservedFor(allocated(claim), pod)},
		},
		"user-claim-missing": {
			pod: podWithClaimName("web", "missing"),
		},
		"extended-resource-claim-done": {
			pod: func() *v1.Pod {
				p := withPhase(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ext"}}, v1.PodFailed)
				p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "ext-claim"}
				return p
			}(),
			want: []string{"claim:ns/ext-claim"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, allFeatures(), tc.objs...)
			f.ec.enqueuePod(f.logger(), tc.pod, tc.deleted)
			if got := f.queued(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("queued %v, want %v", got, tc.want)
			}
			if tc.deleted != f.ec.deleted.Has(tc.pod.UID) {
				t.Errorf("deleted pod remembered: %v", !tc.deleted)
			}
		})
	}
}

func TestEnqueueClaimAndTemplate(t *testing.T) {
	pod := podWithTemplate("web")
	claim := generatedClaim("web-gpu-1", pod)
	user := podWithClaimName("user", "shared")
	f := newFixture(t, allFeatures(), withStatus(pod, claim.Name), user, podWithTemplate("waiting"))

	// A deleted claim is not synced, but its pod is, to make it again.
	f.ec.enqueueClaim(f.logger(), cache.DeletedFinalStateUnknown{Obj: claim}, nil)
	if got := f.queued(); !reflect.DeepEqual(got, []string{"pod:ns/web"}) {
		t.Errorf("after claim deletion queued %v", got)
	}
	// A new claim is synced; the scheduled user may need a reservation.
	f.ec.enqueueClaim(f.logger(), nil, userClaim("shared"))
	if got := f.queued(); !reflect.DeepEqual(got, []string{"claim:ns/shared"}) {
		t.Errorf("after claim add queued %v", got)
	}
	// A template that appears unblocks the pods waiting for it (web's
	// claim is gone, so it waits too).
	f.ec.enqueueTemplate(f.logger(), template())
	if got := f.queued(); !reflect.DeepEqual(got, []string{"pod:ns/waiting", "pod:ns/web"}) {
		t.Errorf("after template add queued %v", got)
	}
}

func TestWorkQueueRetries(t *testing.T) {
	// A PodGroup member without GenericWorkload fails for good.
	f := newFixture(t, allFeatures(), groupMember("final"), template())
	f.ec.queue.Add("pod:ns/final")
	f.ec.loop.ProcessNextWorkItem(f.ctx)
	if n := f.ec.queue.NumRequeues("pod:ns/final"); n != 0 {
		t.Errorf("non-retryable error requeued %d times", n)
	}
	f.ec.queue.Add("retry")
	f.ec.loop.ProcessNextWorkItem(f.ctx)
	if n := f.ec.queue.NumRequeues("retry"); n != 1 {
		t.Errorf("retryable error requeued %d times, want 1", n)
	}
	if err := f.ec.syncKey(f.ctx, "bogus"); err == nil {
		t.Error("want error for a key without prefix")
	}
}

func TestClaimCountMetric(t *testing.T) {
	pod := podWithTemplate("web")
	admin := userClaim("admin")
	admin.Spec.Devices.Requests[0].Exactly.AdminAccess = new(bool)
	*admin.Spec.Devices.Requests[0].Exactly.AdminAccess = true
	ext := userClaim("ext")
	ext.Annotations = map[string]string{resourceapi.ExtendedResourceClaimAnnotation: "true"}
	f := newFixture(t, allFeatures(),
		generatedClaim("a", pod), allocated(generatedClaim("b", pod)), userClaim("c"), admin, ext)
	collector := &claimCollector{lister: f.ec.claimLister, logger: f.logger()}
	want := `
# HELP dynamic_resource_allocation_resource_claims [ALPHA] Number of ResourceClaims, categorized by allocation status, admin access, and source. Source can be 'resource_claim_template' (created from a template), 'extended_resource' (extended resources), or empty (manually created by a user).
# TYPE dynamic_resource_allocation_resource_claims gauge
dynamic_resource_allocation_resource_claims{admin_access="false",allocated="false",source=""} 1
dynamic_resource_allocation_resource_claims{admin_access="false",allocated="false",source="extended_resource"} 1
dynamic_resource_allocation_resource_claims{admin_access="false",allocated="false",source="resource_claim_template"} 1
dynamic_resource_allocation_resource_claims{admin_access="false",allocated="true",source="resource_claim_template"} 1
dynamic_resource_allocation_resource_claims{admin_access="true",allocated="false",source=""} 1
`
	if err := testutil.CustomCollectAndCompare(collector, strings.NewReader(want), "dynamic_resource_allocation_resource_claims"); err != nil {
		t.Error(err)
	}
}

// TestRun drives the controller through its informers: a claim is made,
// then released and deleted when the pod finishes.
func TestRun(t *testing.T) {
	pod := podWithTemplate("web")
	f := newFixture(t, allFeatures(), template())
	ctx, cancel := context.WithCancel(f.ctx)
	f.factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		f.ec.Run(ctx, 2)
	}()
	defer func() {
		cancel()
		<-done
		f.factory.Shutdown()
	}()

	if _, err := f.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var claimName string
	poll(t, "claim in pod status", func() bool {
		statuses := f.pod("web").Status.ResourceClaimStatuses
		if len(statuses) == 1 && statuses[0].ResourceClaimName != nil {
			claimName = *statuses[0].ResourceClaimName
		}
		return claimName != ""
	})

	p := f.pod("web")
	p.Status.Phase = v1.PodSucceeded
	if _, err := f.client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	poll(t, "claim deleted", func() bool { return len(f.claims()) == 0 })
}

func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctrltestutil.WaitUntil(t, what, func(context.Context) (bool, error) {
		return cond(), nil
	})
}
