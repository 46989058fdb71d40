package metrics

import "fmt"

// GetResourceUtilizationRatio compares the pods' usage with their requests:
// it returns the ratio of the current to the target utilization, the
// current utilization (percent of requests, truncated) and the average raw
// usage per pod. Samples of pods without a request are skipped.
func GetResourceUtilizationRatio(metrics PodMetricsInfo, requests map[string]int64, targetUtilization int32) (utilizationRatio float64, currentUtilization int32, rawAverageValue int64, err error) {
	var usageTotal, requestsTotal int64
	counted := 0
	for podName, m := range metrics {
		request, ok := requests[podName]
		if !ok {
			// Requests are checked elsewhere: a sample without one belongs
			// to a pod we do not track.
			continue
		}
		usageTotal += m.Value
		requestsTotal += request
		counted++
	}
	// Metrics and requests may not overlap at all.
	if requestsTotal == 0 {
		return 0, 0, 0, fmt.Errorf("no metrics returned matched known pods")
	}
	currentUtilization = int32((usageTotal * 100) / requestsTotal)
	return float64(currentUtilization) / float64(targetUtilization), currentUtilization, usageTotal / int64(counted), nil
}

// GetMetricUsageRatio returns the ratio of the average sample to
// targetUsage, and that average. metrics must not be empty.
func GetMetricUsageRatio(metrics PodMetricsInfo, targetUsage int64) (usageRatio float64, currentUsage int64) {
	var total int64
	for _, m := range metrics {
		total += m.Value
	}
	currentUsage = total / int64(len(metrics))
	return float64(currentUsage) / float64(targetUsage), currentUsage
}
