package job

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// faultyTransport fails chosen requests of one controller instance with a
// 500, standing in for a controller that dies at that point.
type faultyTransport struct {
	next http.RoundTripper
	// rejectPodPatches fails every pod PATCH: the tracking finalizers
	// cannot be removed.
	rejectPodPatches bool
	// rejectStatusAfterPatch fails every Job status write once a pod
	// PATCH succeeded: the controller "crashes" between removing
	// finalizers and counting those pods.
	rejectStatusAfterPatch bool
	patched                atomic.Bool
	rejected               atomic.Int32
}

func (f *faultyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	podPatch := req.Method == http.MethodPatch && strings.Contains(req.URL.Path, "/pods/")
	jobStatus := req.Method == http.MethodPut && strings.HasPrefix(req.URL.Path, "/apis/batch/v1/") && strings.HasSuffix(req.URL.Path, "/status")
	if (podPatch && f.rejectPodPatches) || (jobStatus && f.rejectStatusAfterPatch && f.patched.Load()) {
		f.rejected.Add(1)
		body := `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected by the test","reason":"InternalError","code":500}`
		return &http.Response{
			StatusCode: http.StatusInternalServerError,
			Status:     "500 Internal Server Error",
			Header:     http.Header{"Content-Type": []string{"application/json"}},
			Body:       io.NopCloser(bytes.NewBufferString(body)),
			Request:    req,
		}, nil
	}
	resp, err := f.next.RoundTrip(req)
	if err == nil && podPatch && resp.StatusCode < 300 {
		f.patched.Store(true)
	}
	return resp, err
}

// startFaultyControllers runs a Job controller instance whose requests go
// through f; the returned function stops it.
func startFaultyControllers(t *testing.T, f *faultyTransport) func() {
	t.Helper()
	cfg := rest.CopyConfig(framework.Shared(t).Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		f.next = rt
		return f
	})
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	runControllersCtx(t, ctx, c)
	return cancel
}

func uidsOf(pods []v1.Pod) sets.Set[types.UID] {
	s := sets.New[types.UID]()
	for _, p := range pods {
		s.Insert(p.UID)
	}
	return s
}

func podsInPhase(pods []v1.Pod, phase v1.PodPhase) []v1.Pod {
	return slices.DeleteFunc(slices.Clone(pods), func(p v1.Pod) bool { return p.Status.Phase != phase })
}

// TestPodAccountingAcrossControllerRestart stops the Job controller at the
// two points where a crash could lose or double-count a finished pod, and
// while pods finish, each time going on with a fresh instance:
//  1. finished pods are listed in status.uncountedTerminatedPods but still
//     hold the tracking finalizer;
//  2. the finalizers are removed but the pods are still in
//     uncountedTerminatedPods (the counters were not written);
//  3. no controller runs while more pods finish.
//
// Every finished pod is counted exactly once: at the end status.succeeded
// and status.failed equal the numbers of Succeeded and Failed pods, and no
// pod keeps the finalizer.
func TestPodAccountingAcrossControllerRestart(t *testing.T) {
	if os.Getenv("KCM_UPSTREAM_CONTROLLERS") != "" {
		t.Skip("injects faults into in-process controllers")
	}
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "job-restart")
	ctx := context.Background()

	spec := kubectlJob("recount")
	spec.Spec.Completions = ptr.To[int32](6)
	spec.Spec.Parallelism = ptr.To[int32](6)
	spec.Spec.BackoffLimit = ptr.To[int32](6)
	j := createJob(t, c, ns, spec)

	// 1. An instance that cannot remove finalizers.
	first := &faultyTransport{rejectPodPatches: true}
	stop := startFaultyControllers(t, first)
	waitCounts(t, c, j, counts{active: 6})
	pods, err := activePodsOf(ctx, c, j)
	if err != nil || len(pods) != 6 {
		t.Fatalf("pods %d, %v", len(pods), err)
	}
	for i := range pods[:3] {
		succeedPod(t, c, &pods[i])
	}
	for i := range pods[3:5] {
		failPod(t, c, &pods[3+i], 1)
	}
	wantSucceeded, wantFailed := uidsOf(pods[:3]), uidsOf(pods[3:5])
	// Three succeeded of six: three pods run, the failed ones replaced.
	poll(t, "the finished pods listed as uncounted, finalizers kept", func(ctx context.Context) (bool, string, error) {
		cur, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		u := cur.Status.UncountedTerminatedPods
		if u == nil || !sets.New(u.Succeeded...).Equal(wantSucceeded) || !sets.New(u.Failed...).Equal(wantFailed) ||
			cur.Status.Succeeded != 0 || cur.Status.Failed != 0 || cur.Status.Active != 3 {
			return false, statusString(cur.Status), nil
		}
		all, err := podsOf(ctx, c, j)
		if err != nil {
			return false, "", err
		}
		for _, p := range all {
			if (wantSucceeded.Has(p.UID) || wantFailed.Has(p.UID)) && !slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				return false, "", fmt.Errorf("pod %s lost its finalizer although removal was failing", p.Name)
			}
		}
		return true, "", nil
	})
	if first.rejected.Load() == 0 {
		t.Fatal("the first instance never tried to remove a finalizer")
	}
	stop()

	// 2. An instance that "crashes" right after removing finalizers.
	second := &faultyTransport{rejectStatusAfterPatch: true}
	stop = startFaultyControllers(t, second)
	poll(t, "finalizers removed, pods still uncounted", func(ctx context.Context) (bool, string, error) {
		all, err := podsOf(ctx, c, j)
		if err != nil {
			return false, "", err
		}
		var held []string
		for _, p := range all {
			if (wantSucceeded.Has(p.UID) || wantFailed.Has(p.UID)) && slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer) {
				held = append(held, p.Name)
			}
		}
		cur, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		return len(held) == 0 && second.rejected.Load() > 0, fmt.Sprintf("finalizers held by %v; %s", held, statusString(cur.Status)), nil
	})
	stop()
	cur, err := c.BatchV1().Jobs(ns).Get(ctx, j.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := cur.Status.UncountedTerminatedPods; u == nil || len(u.Succeeded)+len(u.Failed) != 5 || cur.Status.Succeeded+cur.Status.Failed != 0 {
		t.Fatalf("expected the five pods still uncounted after the crash: %s", statusString(cur.Status))
	}

	// 3. Pods finish while no controller runs.
	act, err := activePodsOf(ctx, c, j)
	if err != nil || len(act) != 3 {
		t.Fatalf("active pods %d, %v", len(act), err)
	}
	succeedPod(t, c, &act[0])
	failPod(t, c, &act[1], 1)

	// A healthy instance counts everything once and finishes the Job.
	runControllers(t, c)
	waitJob(t, c, j, "succeeded=4 failed=3, nothing uncounted", func(j *batchv1.Job) bool {
		u := j.Status.UncountedTerminatedPods
		return j.Status.Succeeded == 4 && j.Status.Failed == 3 && (u == nil || len(u.Succeeded)+len(u.Failed) == 0)
	})
	done := finishPods(t, c, j, true, batchv1.JobComplete)
	all, err := podsOf(ctx, c, j)
	if err != nil {
		t.Fatal(err)
	}
	succeeded, failed := podsInPhase(all, v1.PodSucceeded), podsInPhase(all, v1.PodFailed)
	if done.Status.Succeeded != 6 || done.Status.Failed != 3 || len(succeeded) != 6 || len(failed) != 3 {
		t.Errorf("status %s; pods: %d succeeded, %d failed; want 6 and 3 in both", statusString(done.Status), len(succeeded), len(failed))
	}
	if u := done.Status.UncountedTerminatedPods; u != nil && len(u.Succeeded)+len(u.Failed) != 0 {
		t.Errorf("uncounted left: %+v", u)
	}
	noTrackingFinalizers(t, c, j)
}
