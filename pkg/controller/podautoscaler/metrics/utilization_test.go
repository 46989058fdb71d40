package metrics

import "testing"

func TestGetResourceUtilizationRatio(t *testing.T) {
	cases := []struct {
		name        string
		metrics     PodMetricsInfo
		requests    map[string]int64
		target      int32
		wantRatio   float64
		wantUtil    int32
		wantRawAvg  int64
		wantErrText string
	}{{
		name:       "average over pods",
		metrics:    PodMetricsInfo{"a": {Value: 300}, "b": {Value: 500}},
		requests:   map[string]int64{"a": 1000, "b": 1000},
		target:     50,
		wantRatio:  0.8,
		wantUtil:   40,
		wantRawAvg: 400,
	}, {
		// Utilization is truncated to a whole percent before the ratio.
		name:       "truncation",
		metrics:    PodMetricsInfo{"a": {Value: 999}},
		requests:   map[string]int64{"a": 1000},
		target:     100,
		wantRatio:  0.99,
		wantUtil:   99,
		wantRawAvg: 999,
	}, {
		name:       "samples without request ignored",
		metrics:    PodMetricsInfo{"a": {Value: 200}, "stranger": {Value: 9000}},
		requests:   map[string]int64{"a": 100},
		target:     100,
		wantRatio:  2,
		wantUtil:   200,
		wantRawAvg: 200,
	}, {
		name:        "disjoint",
		metrics:     PodMetricsInfo{"a": {Value: 200}},
		requests:    map[string]int64{"b": 100},
		target:      100,
		wantErrText: "no metrics returned matched known pods",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ratio, util, raw, err := GetResourceUtilizationRatio(tc.metrics, tc.requests, tc.target)
			if tc.wantErrText != "" {
				if err == nil || err.Error() != tc.wantErrText {
					t.Fatalf("err = %v, want %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ratio != tc.wantRatio || util != tc.wantUtil || raw != tc.wantRawAvg {
				t.Errorf("got (%v, %v, %v), want (%v, %v, %v)", ratio, util, raw, tc.wantRatio, tc.wantUtil, tc.wantRawAvg)
			}
		})
	}
}

func TestGetMetricUsageRatio(t *testing.T) {
	ratio, usage := GetMetricUsageRatio(PodMetricsInfo{"a": {Value: 1000}, "b": {Value: 2001}}, 500)
	// The average is an integer division: 3001/2 = 1500.
	if usage != 1500 || ratio != 3 {
		t.Errorf("got (%v, %v), want (3, 1500)", ratio, usage)
	}
}
