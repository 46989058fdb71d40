package podautoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	v1 "k8s.io/api/core/v1"
)

// Without a behavior, a scale-up may at most double the replicas, or go
// to 4 if that is more.
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

// recordInitialRecommendation seeds an HPA's history with the current
// replica count, so a fresh controller does not scale down at once.
func (a *Controller) recordInitialRecommendation(currentReplicas int32, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recommendations[key] == nil {
		a.recommendations[key] = []timestampedRecommendation{{currentReplicas, a.clock.Now()}}
	}
}

// stabilizeRecommendation records proposal and returns the highest
// proposal of the downscale stabilization window: scale-downs wait until
// the window holds nothing higher. An expired entry is reused.
func (a *Controller) stabilizeRecommendation(key string, proposal int32) int32 {
	now := a.clock.Now()
	cutoff := now.Add(-a.downscaleStabilisationWindow)
	highest := proposal

	a.mu.Lock()
	defer a.mu.Unlock()
	expired := -1
	for i, rec := range a.recommendations[key] {
		if rec.timestamp.Before(cutoff) {
			expired = i
		} else if rec.recommendation > highest {
			highest = rec.recommendation
		}
	}
	a.storeRecommendation(key, expired, timestampedRecommendation{proposal, now})
	return highest
}

// storeRecommendation puts rec at index reuse of key's history, or appends
// it when reuse is negative. a.mu must be held.
func (a *Controller) storeRecommendation(key string, reuse int, rec timestampedRecommendation) {
	if reuse >= 0 {
		a.recommendations[key][reuse] = rec
		return
	}
	a.recommendations[key] = append(a.recommendations[key], rec)
}

// normalizeDesiredReplicas stabilizes and bounds a proposal for an HPA
// without a behavior, setting AbleToScale and ScalingLimited to explain.
func (a *Controller) normalizeDesiredReplicas(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, currentReplicas, proposal, minReplicas int32) int32 {
	stabilized := a.stabilizeRecommendation(key, proposal)
	if stabilized != proposal {
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	desired, reason, message := convertDesiredReplicasWithRules(currentReplicas, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	setScalingLimited(hpa, desired != stabilized, reason, message)
	return desired
}

// setScalingLimited sets ScalingLimited to whether the bounds changed the
// proposal.
func setScalingLimited(hpa *autoscalingv2.HorizontalPodAutoscaler, limited bool, reason, message string) {
	status := v1.ConditionFalse
	if limited {
		status = v1.ConditionTrue
	}
	setCondition(hpa, autoscalingv2.ScalingLimited, status, reason, "%s", message)
}

// convertDesiredReplicasWithRules bounds a proposal by minReplicas and by
// the smaller of maxReplicas and the scale-up limit, naming the bound that
// applies (or would apply) as reason.
func convertDesiredReplicasWithRules(currentReplicas, desiredReplicas, hpaMinReplicas, hpaMaxReplicas int32) (int32, string, string) {
	maximum := hpaMaxReplicas
	reason, message := "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	// Bogus usage samples must not multiply the replicas in one step.
	if limit := calculateScaleUpLimit(currentReplicas); hpaMaxReplicas > limit {
		maximum = limit
		reason, message = "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desiredReplicas < hpaMinReplicas:
		return hpaMinReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case desiredReplicas > maximum:
		return maximum, reason, message
	}
	return desiredReplicas, "DesiredWithinRange", "the desired count is within the acceptable range"
}

func calculateScaleUpLimit(currentReplicas int32) int32 {
	return int32(math.Max(scaleUpLimitFactor*float64(currentReplicas), scaleUpLimitMinimum))
}

// normalizationArg is what the behavior-based normalization works from.
type normalizationArg struct {
	Key               string
	ScaleUpBehavior   *autoscalingv2.HPAScalingRules
	ScaleDownBehavior *autoscalingv2.HPAScalingRules
	MinReplicas       int32
	MaxReplicas       int32
	CurrentReplicas   int32
	DesiredReplicas   int32
}

// normalizeDesiredReplicasWithBehaviors stabilizes a proposal over the
// behavior's windows, then bounds it by min/max and the policies' rates,
// setting AbleToScale and ScalingLimited to explain.
func (a *Controller) normalizeDesiredReplicasWithBehaviors(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, currentReplicas, proposal, minReplicas int32) int32 {
	a.maybeInitScaleDownStabilizationWindow(hpa)
	arg := normalizationArg{
		Key:               key,
		ScaleUpBehavior:   hpa.Spec.Behavior.ScaleUp,
		ScaleDownBehavior: hpa.Spec.Behavior.ScaleDown,
		MinReplicas:       minReplicas,
		MaxReplicas:       hpa.Spec.MaxReplicas,
		CurrentReplicas:   currentReplicas,
		DesiredReplicas:   proposal,
	}
	stabilized, reason, message := a.stabilizeRecommendationWithBehaviors(arg)
	if stabilized != proposal {
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, reason, "%s", message)
	} else {
		setCondition(hpa, autoscalingv2.AbleToScale, v1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	arg.DesiredReplicas = stabilized
	desired, reason, message := a.convertDesiredReplicasWithBehaviorRate(arg)
	setScalingLimited(hpa, desired != stabilized, reason, message)
	return desired
}

// maybeInitScaleDownStabilizationWindow applies the controller's
// --horizontal-pod-autoscaler-downscale-stabilization to a scale-down rule
// that sets no window of its own.
func (a *Controller) maybeInitScaleDownStabilizationWindow(hpa *autoscalingv2.HorizontalPodAutoscaler) {
	b := hpa.Spec.Behavior
	if b != nil && b.ScaleDown != nil && b.ScaleDown.StabilizationWindowSeconds == nil {
		seconds := int32(a.downscaleStabilisationWindow.Seconds())
		b.ScaleDown.StabilizationWindowSeconds = &seconds
	}
}

// stabilizeRecommendationWithBehaviors records the proposal and moves the
// current count no further than every proposal of the windows agrees: up
// to the lowest of the scale-up window, down to the highest of the
// scale-down window.
func (a *Controller) stabilizeRecommendationWithBehaviors(arg normalizationArg) (int32, string, string) {
	now := a.clock.Now()
	upCutoff := now.Add(-time.Second * time.Duration(*arg.ScaleUpBehavior.StabilizationWindowSeconds))
	downCutoff := now.Add(-time.Second * time.Duration(*arg.ScaleDownBehavior.StabilizationWindowSeconds))
	upRecommendation, downRecommendation := arg.DesiredReplicas, arg.DesiredReplicas

	a.mu.Lock()
	defer a.mu.Unlock()
	expired := -1
	for i, rec := range a.recommendations[arg.Key] {
		if rec.timestamp.After(upCutoff) {
			upRecommendation = min(rec.recommendation, upRecommendation)
		}
		if rec.timestamp.After(downCutoff) {
			downRecommendation = max(rec.recommendation, downRecommendation)
		}
		if rec.timestamp.Before(upCutoff) && rec.timestamp.Before(downCutoff) {
			expired = i
		}
	}

	recommendation := arg.CurrentReplicas
	if recommendation < upRecommendation {
		recommendation = upRecommendation
	}
	if recommendation > downRecommendation {
		recommendation = downRecommendation
	}
	a.storeRecommendation(arg.Key, expired, timestampedRecommendation{arg.DesiredReplicas, now})

	if arg.DesiredReplicas >= arg.CurrentReplicas {
		return recommendation, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return recommendation, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// convertDesiredReplicasWithBehaviorRate bounds a stabilized proposal by
// min/max and by what the scaling policies allow given the recent
// rescales.
func (a *Controller) convertDesiredReplicasWithBehaviorRate(arg normalizationArg) (int32, string, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ups, downs := a.scaleUpEvents[arg.Key], a.scaleDownEvents[arg.Key]
	now := a.clock.Now()

	switch {
	case arg.DesiredReplicas > arg.CurrentReplicas:
		// Never below current: a rule may not force a scale-down.
		limit := max(calculateScaleUpLimitWithScalingRules(arg.CurrentReplicas, ups, downs, arg.ScaleUpBehavior, now), arg.CurrentReplicas)
		maximum := arg.MaxReplicas
		reason, message := "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maximum > limit {
			maximum = limit
			reason, message = "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if arg.DesiredReplicas > maximum {
			return maximum, reason, message
		}
	case arg.DesiredReplicas < arg.CurrentReplicas:
		// Never above current: a rule may not force a scale-up.
		limit := min(calculateScaleDownLimitWithBehaviors(arg.CurrentReplicas, ups, downs, arg.ScaleDownBehavior, now), arg.CurrentReplicas)
		minimum := arg.MinReplicas
		reason, message := "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minimum < limit {
			minimum = limit
			reason, message = "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if arg.DesiredReplicas < minimum {
			return minimum, reason, message
		}
	}
	return arg.DesiredReplicas, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// replicasChangedSince sums the changes of the events newer than
// periodSeconds.
func replicasChangedSince(periodSeconds int32, events []timestampedScaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Second * time.Duration(periodSeconds))
	var total int32
	for _, e := range events {
		if e.timestamp.After(cutoff) {
			total += e.replicaChange
		}
	}
	return total
}

// periodStartReplicas is the replica count at the start of a policy's
// period: the current count with the period's rescales undone.
func periodStartReplicas(current int32, periodSeconds int32, ups, downs []timestampedScaleEvent, now time.Time) int32 {
	return current - replicasChangedSince(periodSeconds, ups, now) + replicasChangedSince(periodSeconds, downs, now)
}

// calculateScaleUpLimitWithScalingRules returns the most replicas the
// scale-up policies allow now: the largest of their limits (Max), the
// smallest (Min), or the current count (Disabled).
func calculateScaleUpLimitWithScalingRules(current int32, ups, downs []timestampedScaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	pick, result := maxInt32, int32(math.MinInt32)
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current
	case autoscalingv2.MinChangePolicySelect:
		pick, result = minInt32, math.MaxInt32
	}
	for _, p := range rules.Policies {
		start := periodStartReplicas(current, p.PeriodSeconds, ups, downs, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start + p.Value
		case autoscalingv2.PercentScalingPolicy:
			// Round up so a small percentage still adds a pod.
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

// calculateScaleDownLimitWithBehaviors returns the fewest replicas the
// scale-down policies allow now: the largest change (Max) is the smallest
// count, the smallest change (Min) the largest; Disabled keeps the count.
func calculateScaleDownLimitWithBehaviors(current int32, ups, downs []timestampedScaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	pick, result := minInt32, int32(math.MaxInt32)
	switch *rules.SelectPolicy {
	case autoscalingv2.DisabledPolicySelect:
		return current
	case autoscalingv2.MinChangePolicySelect:
		pick, result = maxInt32, math.MinInt32
	}
	for _, p := range rules.Policies {
		start := periodStartReplicas(current, p.PeriodSeconds, ups, downs, now)
		var proposed int32
		switch p.Type {
		case autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

func minInt32(a, b int32) int32 { return min(a, b) }
func maxInt32(a, b int32) int32 { return max(a, b) }

// storeScaleEvent records a rescale for the behavior's rate limits,
// reusing an entry older than the longest policy period.
func (a *Controller) storeScaleEvent(behavior *autoscalingv2.HorizontalPodAutoscalerBehavior, key string, prevReplicas, newReplicas int32) {
	if behavior == nil {
		// Only the policies read the events.
		return
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	events, rules, change := a.scaleDownEvents, behavior.ScaleDown, prevReplicas-newReplicas
	if newReplicas > prevReplicas {
		events, rules, change = a.scaleUpEvents, behavior.ScaleUp, newReplicas-prevReplicas
	}
	list := events[key]
	markScaleEventsOutdated(list, getLongestPolicyPeriod(rules), now)
	event := timestampedScaleEvent{replicaChange: change, timestamp: now}
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].outdated {
			list[i] = event
			return
		}
	}
	events[key] = append(list, event)
}

// markScaleEventsOutdated flags the events no policy period covers anymore.
func markScaleEventsOutdated(events []timestampedScaleEvent, longestPolicyPeriod int32, now time.Time) {
	cutoff := now.Add(-time.Second * time.Duration(longestPolicyPeriod))
	for i := range events {
		if events[i].timestamp.Before(cutoff) {
			events[i].outdated = true
		}
	}
}

func getLongestPolicyPeriod(rules *autoscalingv2.HPAScalingRules) int32 {
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	return longest
}
