package rootcacertpublisher

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestSyncMetrics(t *testing.T) {
	registerMetrics()
	cases := map[string]struct {
		err  error
		code string
	}{
		"success":                 {code: "200"},
		"api error":               {err: apierrors.NewNotFound(v1.Resource("configmaps"), "x"), code: "404"},
		"api error without code":  {err: &apierrors.StatusError{}, code: "500"},
		"other error":             {err: errors.New("boom"), code: "500"},
		"conflict from an update": {err: apierrors.NewConflict(v1.Resource("configmaps"), "x", errors.New("rv")), code: "409"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			syncCounter.Reset()
			syncLatency.Reset()
			recordMetrics(time.Now(), tc.err)
			want := `
# HELP root_ca_cert_publisher_sync_total [ALPHA] Number of namespace syncs happened in root ca cert publisher.
# TYPE root_ca_cert_publisher_sync_total counter
root_ca_cert_publisher_sync_total{code="` + tc.code + `"} 1
`
			if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "root_ca_cert_publisher_sync_total"); err != nil {
				t.Fatal(err)
			}
			n, err := testutil.GetHistogramMetricCount(syncLatency.WithLabelValues(tc.code))
			if err != nil || n != 1 {
				t.Fatalf("histogram count %d, %v", n, err)
			}
		})
	}
}

// The histogram is exposed with upstream's name, help and buckets
// (1ms doubling 15 times).
func TestSyncDurationBuckets(t *testing.T) {
	registerMetrics()
	syncLatency.Reset()
	recordMetrics(time.Now(), nil)
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "root_ca_cert_publisher_sync_duration_seconds" {
			continue
		}
		if fam.GetHelp() != "[ALPHA] Number of namespace syncs happened in root ca cert publisher." {
			t.Errorf("help %q", fam.GetHelp())
		}
		b := fam.GetMetric()[0].GetHistogram().GetBucket()
		if len(b) != 15 || b[0].GetUpperBound() != 0.001 || b[14].GetUpperBound() != 0.001*(1<<14) {
			t.Fatalf("buckets %v", b)
		}
		if l := fam.GetMetric()[0].GetLabel(); len(l) != 1 || l[0].GetName() != "code" || l[0].GetValue() != "200" {
			t.Fatalf("labels %v", l)
		}
		return
	}
	t.Fatal("root_ca_cert_publisher_sync_duration_seconds not exposed")
}

// A sync records one observation labelled with its outcome.
func TestSyncRecordsMetrics(t *testing.T) {
	p, _, _ := newPublisher(t)
	syncCounter.Reset()
	if err := p.syncHandler(testCtx(t), "ns"); err != nil {
		t.Fatal(err)
	}
	if v, err := testutil.GetCounterMetricValue(syncCounter.WithLabelValues("200")); err != nil || v != 1 {
		t.Fatalf("sync_total{code=200} = %v, %v", v, err)
	}
}
