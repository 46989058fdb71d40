package job

import (
	"fmt"
	"slices"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// matchPodFailurePolicy applies the first matching rule to a failed pod.
// It returns the Job failure message (FailJob only), whether the failure
// counts against the backoff limit, and the matched action (nil if none).
func matchPodFailurePolicy(policy *batch.PodFailurePolicy, pod *v1.Pod) (*string, bool, *batch.PodFailurePolicyAction) {
	if policy == nil {
		return nil, true, nil
	}
	for i, rule := range policy.Rules {
		action := rule.Action
		var failMsg string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failMsg = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchPodConditions(&pod.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			failMsg = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
				pod.Namespace, pod.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		switch action {
		case batch.PodFailurePolicyActionIgnore:
			return nil, false, &action
		case batch.PodFailurePolicyActionFailIndex, batch.PodFailurePolicyActionCount:
			return nil, true, &action
		case batch.PodFailurePolicyActionFailJob:
			return &failMsg, true, &action
		}
		// An unknown action (newer API) neither matches nor stops the scan.
	}
	return nil, true, nil
}

// matchExitCodes finds a terminated container (regular first, then init)
// with a non-zero exit code matching the requirement.
func matchExitCodes(status *v1.PodStatus, req *batch.PodFailurePolicyOnExitCodesRequirement) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batch.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batch.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

func matchPodConditions(status *v1.PodStatus, patterns []batch.PodFailurePolicyOnPodConditionsPattern) *v1.PodCondition {
	for i := range status.Conditions {
		c := &status.Conditions[i]
		for _, p := range patterns {
			if c.Type == p.Type && c.Status == p.Status {
				return c
			}
		}
	}
	return nil
}

// failJobMessage is the message of the first failed pod matching a FailJob rule.
func failJobMessage(job *batch.Job, pods []*v1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if isPodFailed(p, job) {
			if msg, _, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); msg != nil {
				return msg
			}
		}
	}
	return nil
}

// matchSuccessPolicy reports whether a rule of the success policy holds for
// the succeeded indexes, with the message upstream puts on the condition.
func matchSuccessPolicy(logger klog.Logger, policy *batch.SuccessPolicy, completions int32, succeeded indexSet) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		if rule.SucceededIndexes != nil {
			required := parseIndexSet(logger, *rule.SucceededIndexes, int(completions))
			if len(required) == 0 {
				continue
			}
			overlap := overlapCount(required, succeeded)
			if overlap == required.total() || (rule.SucceededCount != nil && overlap >= int(*rule.SucceededCount)) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
		} else if rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount) {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlapCount counts the indexes in both sets.
func overlapCount(a, b indexSet) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if o := min(a[i].last, b[j].last) - max(a[i].first, b[j].first) + 1; o > 0 {
			n += o
		}
		switch {
		case b[j].last < a[i].last:
			j++
		case b[j].last > a[i].last:
			i++
		default:
			i++
			j++
		}
	}
	return n
}

func successCriteriaMetCondition(job *batch.Job) *batch.JobCondition {
	if c := findCondition(job.Status.Conditions, batch.JobSuccessCriteriaMet); c != nil && c.Status == v1.ConditionTrue {
		return c
	}
	return nil
}

func isSuccessCriteriaMet(c *batch.JobCondition) bool {
	return c != nil && c.Type == batch.JobSuccessCriteriaMet && c.Status == v1.ConditionTrue
}
