package replicaset

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

func TestMetricsExposed(t *testing.T) {
	registerMetrics()
	rs := newRS("web", 1)
	now := time.Now()
	young := newPod("young", rs, readySince(time.Minute))
	young.CreationTimestamp.Time = now.Add(-10 * time.Second)
	old := newPod("old", rs, readySince(time.Minute))
	old.CreationTimestamp.Time = now.Add(-35 * time.Second)
	// Chosen "old" is 35s old, youngest 10s: integer ratio 3.
	reportDeletionAgeRatio([]*v1.Pod{old, young}, 1, now)

	// A consistency skip is counted per lagging resource.
	f := newFixture(t, BurstReplicas, rs)
	f.rsc.consistency = controller.NewConsistencyStore(map[schema.GroupResource]controller.LastSyncRVGetter{podsResource: lagging{}})
	f.rsc.consistency.WroteAt(types.NamespacedName{Namespace: "ns", Name: "web"}, rs.UID, podsResource, "100")
	if err := f.sync("ns/web"); err == nil {
		t.Fatal("sync must be skipped while the pod cache lags")
	}

	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sawRatio, sawSkip bool
	for _, fam := range families {
		switch fam.GetName() {
		case "replicaset_controller_sorting_deletion_age_ratio":
			h := fam.GetMetric()[0].GetHistogram()
			sawRatio = h.GetSampleCount() >= 1 && h.GetSampleSum() >= 3
		case "replicaset_controller_stale_sync_skips_total":
			for _, m := range fam.GetMetric() {
				lbl := map[string]string{}
				for _, l := range m.GetLabel() {
					lbl[l.GetName()] = l.GetValue()
				}
				if lbl["resource"] == "pods" && lbl["group"] == "" && m.GetCounter().GetValue() >= 1 {
					sawSkip = true
				}
			}
		}
	}
	if !sawRatio || !sawSkip {
		t.Fatalf("ratio observed %v, skip counted %v", sawRatio, sawSkip)
	}
}

type lagging struct{}

func (lagging) LastStoreSyncResourceVersion() string { return "50" }
