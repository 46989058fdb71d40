package e2e

import (
	"context"
	"regexp"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kcmclone/kube-controller-manager/test/integration/framework"
)

var versionRE = regexp.MustCompile(`Kubernetes v(\d+\.\d+\.\d+)`)

// With CoordinatedLeaderElection on, ours publishes a LeaseCandidate for
// the kube-controller-manager Lease and leads once the apiserver's
// coordinated election names it, not by taking the Lease itself.
func TestCoordinatedLeaderElection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	cp, err := framework.StartControlPlaneWithOptions(ctx, framework.Options{APIServerFlags: []string{
		"--feature-gates=CoordinatedLeaderElection=true",
		"--runtime-config=coordination.k8s.io/v1beta1=true",
	}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	cfg := rest.CopyConfig(cp.Config)
	// The v1beta1 LeaseCandidate API warns it is deprecated on every call.
	cfg.WarningHandler = rest.NoWarnings{}
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}

	code, out := runKCM(t, "--version")
	m := versionRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("--version: %d %q", code, out)
	}
	binaryVersion := m[1]

	p := startKCMOn(t, cp, kcmBinary,
		"--feature-gates=CoordinatedLeaderElection=true",
		"--controllers="+migratedController)

	var candidate string
	framework.Eventually(t, 60*time.Second, "a LeaseCandidate for kube-controller-manager", func(ctx context.Context) (bool, error) {
		list, err := c.CoordinationV1beta1().LeaseCandidates("kube-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, lc := range list.Items {
			if lc.Spec.LeaseName != "kube-controller-manager" {
				continue
			}
			candidate = lc.Name
			if lc.Spec.BinaryVersion != binaryVersion {
				t.Errorf("binaryVersion %q, want %q", lc.Spec.BinaryVersion, binaryVersion)
			}
			if want := regexp.MustCompile(`^\d+\.\d+`).FindString(binaryVersion) + ".0"; lc.Spec.EmulationVersion != want {
				t.Errorf("emulationVersion %q, want %q", lc.Spec.EmulationVersion, want)
			}
			if lc.Spec.Strategy != coordinationv1.OldestEmulationVersion {
				t.Errorf("strategy %q, want %q", lc.Spec.Strategy, coordinationv1.OldestEmulationVersion)
			}
			if lc.Spec.RenewTime == nil {
				t.Error("no renewTime")
			}
			return true, nil
		}
		return false, nil
	})

	// The apiserver's election controller writes the Lease with the
	// strategy it elected by; the candidate only ever waits for it.
	framework.Eventually(t, 90*time.Second, "the coordinated election to name our candidate", func(ctx context.Context) (bool, error) {
		l, err := c.CoordinationV1().Leases("kube-system").Get(ctx, "kube-controller-manager", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if holder(l) != candidate {
			return false, nil
		}
		if l.Spec.Strategy == nil || *l.Spec.Strategy != coordinationv1.OldestEmulationVersion {
			t.Fatalf("lease held by our candidate without the coordinated strategy: %+v", l.Spec)
		}
		return true, nil
	})
	waitRuns(t, p, "ours", migratedController, 60*time.Second)
	code, body := get(t, p.url("/healthz?verbose"), "")
	if code != 200 || !regexp.MustCompile(`\[\+\]informer-sync ok`).MatchString(body) {
		t.Errorf("/healthz = %d, want the candidate's informer-sync check:\n%s", code, body)
	}
}
