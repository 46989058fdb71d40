package clustertrustbundlepublisher

import (
	"errors"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/component-base/metrics/testutil"
)

func TestRecordMetrics(t *testing.T) {
	registerMetrics()
	for name, tc := range map[string]struct {
		err  error
		code string
	}{
		"success":                {code: "200"},
		"api error":              {err: apierrors.NewConflict(certificatesv1.Resource("clustertrustbundles"), "x", errors.New("rv")), code: "409"},
		"wrapped api error":      {err: errors.Join(errors.New("ctx"), apierrors.NewNotFound(certificatesv1.Resource("clustertrustbundles"), "x")), code: "404"},
		"api error without code": {err: &apierrors.StatusError{}, code: "500"},
		"other error":            {err: errors.New("boom"), code: "500"},
	} {
		t.Run(name, func(t *testing.T) {
			syncCounter.Reset()
			syncLatency.Reset()
			recordMetrics(time.Now(), tc.err)
			want := `
# HELP clustertrustbundle_publisher_sync_total [ALPHA] Number of syncs that occurred in cluster trust bundle publisher.
# TYPE clustertrustbundle_publisher_sync_total counter
clustertrustbundle_publisher_sync_total{code="` + tc.code + `"} 1
`
			if err := testutil.GatherAndCompare(legacyregistry.DefaultGatherer, strings.NewReader(want), "clustertrustbundle_publisher_sync_total"); err != nil {
				t.Fatal(err)
			}
			if n, err := testutil.GetHistogramMetricCount(syncLatency.WithLabelValues(tc.code)); err != nil || n != 1 {
				t.Fatalf("histogram count %d, %v", n, err)
			}
		})
	}
}

func TestSyncDurationHistogram(t *testing.T) {
	registerMetrics()
	syncLatency.Reset()
	recordMetrics(time.Now(), nil)
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != "clustertrustbundle_publisher_sync_duration_seconds" {
			continue
		}
		if fam.GetHelp() != "[ALPHA] The time it took to sync a cluster trust bundle." {
			t.Errorf("help %q", fam.GetHelp())
		}
		b := fam.GetMetric()[0].GetHistogram().GetBucket()
		if len(b) != 15 || b[0].GetUpperBound() != 0.001 || b[14].GetUpperBound() != 0.001*(1<<14) {
			t.Fatalf("buckets %v", b)
		}
		return
	}
	t.Fatal("clustertrustbundle_publisher_sync_duration_seconds not exposed")
}
