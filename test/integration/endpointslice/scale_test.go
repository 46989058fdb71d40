package endpointslice

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

// sliceVersion is what tells whether a slice was written.
type sliceVersion struct {
	resourceVersion string
	generation      int64
	pods            []string
}

func sliceVersions(slices []discovery.EndpointSlice) map[string]sliceVersion {
	out := map[string]sliceVersion{}
	for _, s := range slices {
		var pods []string
		for _, ep := range s.Endpoints {
			pods = append(pods, targetName(ep.TargetRef))
		}
		sort.Strings(pods)
		out[s.Name] = sliceVersion{resourceVersion: s.ResourceVersion, generation: s.Generation, pods: pods}
	}
	return out
}

// forcePodDeletions deletes pods at once (grace period 0), as if their
// kubelet had confirmed they are gone.
func forcePodDeletions(t *testing.T, c clientset.Interface, ns string, names []string) {
	t.Helper()
	for _, name := range names {
		err := c.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// 250 ready pods behind one Service, with the default
// --max-endpoints-per-slice of 100, are packed in three slices (100, 100
// and 50). Removing pods rewrites only the slices that listed them: the
// others keep their resourceVersion and generation. A slice left without
// endpoints is deleted, again without touching the others.
func TestScaleDownRewritesOnlyAffectedSlices(t *testing.T) {
	c := framework.Shared(t).Client(t)
	ns := framework.CreateNamespace(t, c, "eps-scale")
	ensureNode(t, c, "eps-node-1", "zone-a")

	// The pods exist before the controllers start and the Service is
	// created, so the first sync sees all 250 and packs them without the
	// fragmentation of incremental growth.
	const numPods = 250
	var wg sync.WaitGroup
	work := make(chan int)
	errs := make(chan error, numPods)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				_, err := tryCreatePod(context.Background(), c, ns, podSpec{
					name: fmt.Sprintf("web-%03d", i), node: "eps-node-1",
					ips: []string{fmt.Sprintf("10.245.%d.%d", i/200, i%200+1)}, ready: true,
				})
				if err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range numPods {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	startControllers(t, c)
	mustCreateService(t, c, newService(ns, "web"))

	var before map[string]sliceVersion
	eventually(t, "250 ready endpoints in 3 slices of 100, 100 and 50", func(ctx context.Context) (bool, string, error) {
		slices, err := slicesOf(ctx, c, ns, "web")
		if err != nil {
			return false, "", err
		}
		var sizes []int
		ready := 0
		for _, s := range slices {
			sizes = append(sizes, len(s.Endpoints))
			ready += readyCount(s)
		}
		sort.Ints(sizes)
		before = sliceVersions(slices)
		return fmt.Sprint(sizes) == "[50 100 100]" && ready == numPods, fmt.Sprintf("sizes %v, %d ready", sizes, ready), nil
	})
	waitEndpointCount(t, c, ns, "web", numPods)

	// Pick one full slice and remove 30 of its pods.
	var full, full2, half string
	for name, v := range before {
		switch {
		case len(v.pods) == 50:
			half = name
		case full == "":
			full = name
		default:
			full2 = name
		}
	}
	forcePodDeletions(t, c, ns, before[full].pods[:30])
	after := waitSliceSizes(t, c, ns, map[string]int{full: 70, full2: 100, half: 50}, numPods-30, nil)
	assertOnlyWritten(t, before, after, full)
	waitEndpointCount(t, c, ns, "web", numPods-30)

	// A scale-down as a Deployment does it: 10 pods of the other full
	// slice are deleted gracefully and stay terminating (no kubelet ends
	// them). Their endpoints turn terminating in place.
	terminating := before[full2].pods[:10]
	for _, name := range terminating {
		deletePodGracefully(t, c, ns, name)
	}
	before = after
	after = waitSliceSizes(t, c, ns, map[string]int{full: 70, full2: 100, half: 50}, numPods-30, terminating)
	assertOnlyWritten(t, before, after, full2)
	waitEndpointCount(t, c, ns, "web", numPods-40)
	// Then they are gone for good.
	forcePodDeletions(t, c, ns, terminating)
	before = after
	after = waitSliceSizes(t, c, ns, map[string]int{full: 70, full2: 90, half: 50}, numPods-40, nil)
	assertOnlyWritten(t, before, after, full2)

	// Remove every pod of the half slice: it goes, the others stay as they were.
	forcePodDeletions(t, c, ns, before[half].pods)
	before = after
	after = waitSliceSizes(t, c, ns, map[string]int{full: 70, full2: 90}, numPods-90, nil)
	if _, ok := after[half]; ok {
		t.Errorf("emptied slice %s still exists", half)
	}
	assertOnlyWritten(t, before, after, half)
	waitEndpointCount(t, c, ns, "web", numPods-90)
}

// waitSliceSizes waits until the Service has slices holding total
// endpoints, the named ones with the given sizes, exactly the pods named
// in terminating marked terminating (and not ready), and returns them.
func waitSliceSizes(t *testing.T, c clientset.Interface, ns string, sizes map[string]int, total int, terminating []string) map[string]sliceVersion {
	t.Helper()
	wantTerminating := fmt.Sprint(sorted(terminating))
	var got map[string]sliceVersion
	eventually(t, fmt.Sprintf("slices %v holding %d endpoints, terminating %s", sizes, total, wantTerminating), func(ctx context.Context) (bool, string, error) {
		slices, err := slicesOf(ctx, c, ns, "web")
		if err != nil {
			return false, "", err
		}
		got = sliceVersions(slices)
		var term []string
		for _, s := range slices {
			for _, ep := range s.Endpoints {
				if ptr.Deref(ep.Conditions.Terminating, false) && !ptr.Deref(ep.Conditions.Ready, true) {
					term = append(term, targetName(ep.TargetRef))
				}
			}
		}
		n := 0
		seen := map[string]int{}
		for name, v := range got {
			n += len(v.pods)
			seen[name] = len(v.pods)
		}
		desc := fmt.Sprintf("sizes %v, terminating %v", seen, sorted(term))
		for name, size := range sizes {
			if seen[name] != size {
				return false, desc, nil
			}
		}
		return n == total && len(seen) == len(sizes) && fmt.Sprint(sorted(term)) == wantTerminating, desc, nil
	})
	return got
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

// assertOnlyWritten checks that every slice but changed is the very same
// object version as before, and that changed, unless deleted, was
// rewritten in place (same name, newer generation).
func assertOnlyWritten(t *testing.T, before, after map[string]sliceVersion, changed string) {
	t.Helper()
	for name, b := range before {
		if name == changed {
			if a, ok := after[name]; ok && a.generation <= b.generation {
				t.Errorf("slice %s holding the removed pods kept generation %d", name, b.generation)
			}
			continue
		}
		a, ok := after[name]
		if !ok {
			t.Errorf("untouched slice %s is gone", name)
			continue
		}
		if a.resourceVersion != b.resourceVersion || a.generation != b.generation {
			t.Errorf("slice %s holding none of the removed pods was rewritten: resourceVersion %s → %s, generation %d → %d",
				name, b.resourceVersion, a.resourceVersion, b.generation, a.generation)
		}
	}
	for name := range after {
		if _, ok := before[name]; !ok {
			t.Errorf("new slice %s created", name)
		}
	}
}

// waitEndpointCount waits until the Service's Endpoints list n ready
// addresses and no others.
func waitEndpointCount(t *testing.T, c clientset.Interface, ns, svc string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("Endpoints %s with %d ready addresses", svc, n), func(ctx context.Context) (bool, string, error) {
		subsets, found, err := getEndpointSubsets(ctx, c, ns, svc)
		if err != nil || !found {
			return false, "not found", err
		}
		ready, notReady := 0, 0
		for _, s := range subsets {
			ready += len(s.Addresses)
			notReady += len(s.NotReadyAddresses)
		}
		return ready == n && notReady == 0, fmt.Sprintf("%d ready, %d not ready", ready, notReady), nil
	})
}
