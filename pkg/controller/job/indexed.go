package job

import (
	"math"
	"sort"
	"strconv"
	"strings"

	batch "k8s.io/api/batch/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/kcmclone/kube-controller-manager/pkg/controller"
)

const (
	// completionIndexEnvName is injected into every container of an Indexed
	// Job's pods, read from the completion-index label via the downward API.
	completionIndexEnvName = "JOB_COMPLETION_INDEX"
	// noIndex marks a pod without a valid completion index.
	noIndex = -1
	// maxGeneratedNameLength is the longest generateName the apiserver keeps
	// whole (63 minus the 5 random characters it appends).
	maxGeneratedNameLength = 58
)

func isIndexedJob(job *batch.Job) bool {
	return job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batch.IndexedCompletion
}

func hasBackoffLimitPerIndex(job *batch.Job) bool {
	return job.Spec.BackoffLimitPerIndex != nil
}

// completionModeLabel is the completion_mode metric label.
func completionModeLabel(job *batch.Job) string {
	if isIndexedJob(job) {
		return string(batch.IndexedCompletion)
	}
	return string(batch.NonIndexedCompletion)
}

// span is an inclusive range of completion indexes.
type span struct{ first, last int }

// indexSet is a sorted list of disjoint, non-adjacent spans; it is the
// in-memory form of status.completedIndexes / failedIndexes ("1,3-5").
type indexSet []span

// total counts the indexes in the set.
func (s indexSet) total() int {
	n := 0
	for _, sp := range s {
		n += sp.last - sp.first + 1
	}
	return n
}

// has reports whether ix is in the set (binary search on the spans).
func (s indexSet) has(ix int) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i].last >= ix })
	return i < len(s) && s[i].first <= ix
}

// String renders the API format: spans of 3+ as "a-b", pairs as "a,b".
func (s indexSet) String() string {
	var b strings.Builder
	for _, sp := range s {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(sp.first))
		switch {
		case sp.last == sp.first+1:
			b.WriteByte(',')
			b.WriteString(strconv.Itoa(sp.last))
		case sp.last > sp.first:
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(sp.last))
		}
	}
	return b.String()
}

// union merges two sets into a new one, joining touching spans.
func (s indexSet) union(o indexSet) indexSet {
	var out indexSet
	push := func(sp span) {
		if n := len(out); n > 0 && sp.first <= out[n-1].last+1 {
			if sp.last > out[n-1].last {
				out[n-1].last = sp.last
			}
			return
		}
		out = append(out, sp)
	}
	i, j := 0, 0
	for i < len(s) || j < len(o) {
		if j == len(o) || (i < len(s) && s[i].first < o[j].first) {
			push(s[i])
			i++
		} else {
			push(o[j])
			j++
		}
	}
	return out
}

// withIndexes adds sorted single indexes.
func (s indexSet) withIndexes(sorted []int) indexSet {
	add := make(indexSet, len(sorted))
	for i, ix := range sorted {
		add[i] = span{ix, ix}
	}
	return s.union(add)
}

// parseIndexSet reads the API format, dropping indexes >= completions and
// skipping malformed parts (a hand-edited status must not wedge the Job).
func parseIndexSet(logger klog.Logger, str string, completions int) indexSet {
	if str == "" {
		return nil
	}
	var out indexSet
	for _, part := range strings.Split(str, ",") {
		bounds := strings.Split(part, "-")
		first, err := strconv.Atoi(bounds[0])
		if err != nil {
			logger.Info("Corrupted indexes interval, ignoring", "interval", part, "err", err)
			continue
		}
		if first >= completions {
			break
		}
		last := first
		if len(bounds) > 1 {
			if last, err = strconv.Atoi(bounds[1]); err != nil {
				logger.Info("Corrupted indexes interval, ignoring", "interval", part, "err", err)
				continue
			}
			last = min(last, completions-1)
		}
		if n := len(out); n > 0 && out[n-1].last == first-1 {
			out[n-1].last = last
		} else {
			out = append(out, span{first, last})
		}
	}
	return out
}

// countIndexes is the size of a possibly-nil status index string.
func countIndexes(logger klog.Logger, str *string, completions int) int {
	if str == nil {
		return 0
	}
	return parseIndexSet(logger, *str, completions).total()
}

// completionIndex reads the pod's completion-index annotation.
func completionIndex(pod *v1.Pod) int {
	v, ok := pod.Annotations[batch.JobCompletionIndexAnnotation]
	if !ok {
		return noIndex
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 {
		return noIndex
	}
	return i
}

// validIndex reports whether the pod has an index within completions.
func validIndex(job *batch.Job, pod *v1.Pod) (int, bool) {
	ix := completionIndex(pod)
	return ix, ix != noIndex && ix < int(*job.Spec.Completions)
}

// succeededIndexes returns the indexes recorded in status and those plus
// the indexes of succeeded pods still carrying the tracking finalizer.
func succeededIndexes(logger klog.Logger, job *batch.Job, pods []*v1.Pod) (prev, now indexSet) {
	prev = parseIndexSet(logger, job.Status.CompletedIndexes, int(*job.Spec.Completions))
	found := sets.New[int]()
	for _, p := range pods {
		if ix, ok := validIndex(job, p); ok && p.Status.Phase == v1.PodSucceeded && hasTrackingFinalizer(p) {
			found.Insert(ix)
		}
	}
	return prev, prev.withIndexes(sets.List(found))
}

// failedIndexesOf is succeededIndexes for backoffLimitPerIndex failures.
func failedIndexesOf(logger klog.Logger, job *batch.Job, pods []*v1.Pod) *indexSet {
	var prev indexSet
	if job.Status.FailedIndexes != nil {
		prev = parseIndexSet(logger, *job.Status.FailedIndexes, int(*job.Spec.Completions))
	}
	found := sets.New[int]()
	for _, p := range pods {
		if ix, ok := validIndex(job, p); ok && hasTrackingFinalizer(p) && indexFailed(logger, job, p) {
			found.Insert(ix)
		}
	}
	out := prev.withIndexes(sets.List(found))
	return &out
}

// indexFailed reports whether this pod's failure exhausts its index: a
// FailIndex rule matched, or the counted failures reached the per-index limit.
func indexFailed(logger klog.Logger, job *batch.Job, pod *v1.Pod) bool {
	if !isPodFailed(pod, job) {
		return false
	}
	counted := true
	if job.Spec.PodFailurePolicy != nil {
		_, c, action := matchPodFailurePolicy(job.Spec.PodFailurePolicy, pod)
		if action != nil && *action == batch.PodFailurePolicyActionFailIndex {
			return true
		}
		counted = c
	}
	return counted && indexFailureCount(logger, pod) >= *job.Spec.BackoffLimitPerIndex
}

// indexesOf returns the valid completion indexes of pods.
func indexesOf(pods []*v1.Pod) sets.Set[int] {
	out := sets.New[int]()
	for _, p := range pods {
		if ix := completionIndex(p); ix != noIndex {
			out.Insert(ix)
		}
	}
	return out
}

// firstPendingIndexes returns up to count lowest indexes that are neither
// succeeded, failed, active nor (with podReplacementPolicy Failed) terminating.
func firstPendingIndexes(jc *syncJobCtx, count, completions int) []int {
	if count == 0 {
		return nil
	}
	busy := jc.succeededIndexes.withIndexes(sets.List(indexesOf(jc.activePods)))
	if onlyReplaceFailedPods(jc.job) {
		busy = busy.withIndexes(sets.List(indexesOf(controller.FilterTerminatingPods(jc.pods))))
	}
	if jc.failedIndexes != nil {
		busy = busy.union(*jc.failedIndexes)
	}
	out := make([]int, 0, count)
	next := 0
	for _, sp := range busy {
		for ; next < completions && len(out) < count && next < sp.first; next++ {
			out = append(out, next)
		}
		next = max(next, sp.last+1)
	}
	for ; next < completions && len(out) < count; next++ {
		out = append(out, next)
	}
	return out
}

// byIndex sorts pods by completion index.
type byIndex []*v1.Pod

func (b byIndex) Len() int           { return len(b) }
func (b byIndex) Swap(i, j int)      { b[i], b[j] = b[j], b[i] }
func (b byIndex) Less(i, j int) bool { return completionIndex(b[i]) < completionIndex(b[j]) }

// duplicateIndexPodsForRemoval splits active pods of an Indexed Job into
// those to remove (no index, index out of range, or extra pods of an index:
// all but the best-ranked one) and those to keep.
func duplicateIndexPodsForRemoval(pods []*v1.Pod, completions int) (rm, keep []*v1.Pod) {
	sort.Sort(byIndex(pods))
	group := func(g []*v1.Pod, ix int) {
		switch {
		case len(g) == 0:
		case ix == noIndex:
			rm = append(rm, g...)
		case len(g) == 1:
			keep = append(keep, g[0])
		default:
			// ActivePods sorts the pod to delete first; keep the last.
			sort.Sort(controller.ActivePods(g))
			rm = append(rm, g[:len(g)-1]...)
			keep = append(keep, g[len(g)-1])
		}
	}
	start, last := 0, noIndex
	for i, p := range pods {
		ix := completionIndex(p)
		if ix >= completions {
			group(pods[start:i], last)
			rm = append(rm, pods[i:]...)
			return rm, keep
		}
		if ix != last {
			group(pods[start:i], last)
			start, last = i, ix
		}
	}
	group(pods[start:], last)
	return rm, keep
}

// podsWithDelayedDeletionPerIndex picks, per index that still needs a pod,
// the latest failed pod whose finalizer is kept until its replacement
// inherits its failure counts (backoffLimitPerIndex).
func podsWithDelayedDeletionPerIndex(logger klog.Logger, jc *syncJobCtx) map[int]*v1.Pod {
	active := indexesOf(jc.activePods)
	out := map[int]*v1.Pod{}
	for _, p := range validTrackedPods(jc, nil, func(p *v1.Pod) bool { return isPodFailed(p, jc.job) }) {
		ix := completionIndex(p)
		if jc.succeededIndexes.has(ix) || (jc.failedIndexes != nil && jc.failedIndexes.has(ix)) || active.Has(ix) {
			continue
		}
		if prev, ok := out[ix]; ok {
			if absoluteIndexFailureCount(logger, prev) <= absoluteIndexFailureCount(logger, p) && !finishedTime(p).Before(finishedTime(prev)) {
				out[ix] = p
			}
		} else {
			out[ix] = p
		}
	}
	return out
}

// newIndexFailureCounts are the counts the replacement of failed inherits.
func newIndexFailureCounts(logger klog.Logger, job *batch.Job, failed *v1.Pod) (count, ignored int32) {
	if failed == nil {
		return 0, 0
	}
	count, ignored = indexFailureCount(logger, failed), indexIgnoredFailureCount(failed)
	if job.Spec.PodFailurePolicy != nil {
		if _, counted, _ := matchPodFailurePolicy(job.Spec.PodFailurePolicy, failed); !counted {
			return count, ignored + 1
		}
	}
	return count + 1, ignored
}

func indexFailureCount(logger klog.Logger, pod *v1.Pod) int32 {
	v, ok := pod.Annotations[batch.JobIndexFailureCountAnnotation]
	if !ok {
		logger.V(3).Info("There is no expected annotation", "annotationKey", batch.JobIndexFailureCountAnnotation, "pod", klog.KObj(pod), "podUID", pod.UID)
		return 0
	}
	return parseCount(v)
}

func indexIgnoredFailureCount(pod *v1.Pod) int32 {
	if v, ok := pod.Annotations[batch.JobIndexIgnoredFailureCountAnnotation]; ok {
		return parseCount(v)
	}
	return 0
}

func absoluteIndexFailureCount(logger klog.Logger, pod *v1.Pod) int32 {
	return indexFailureCount(logger, pod) + indexIgnoredFailureCount(pod)
}

// parseCount reads a non-negative int32 annotation value, 0 if invalid.
func parseCount(v string) int32 {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > math.MaxInt32 {
		return 0
	}
	return int32(n)
}

// indexedPodTemplate stamps one index onto a copy of the template: the
// annotation and label, hostname "<job>-<index>" and, with
// backoffLimitPerIndex, the inherited failure counts.
func indexedPodTemplate(logger klog.Logger, base *v1.PodTemplateSpec, job *batch.Job, ix int, replaced *v1.Pod) *v1.PodTemplateSpec {
	t := base.DeepCopy()
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Annotations[batch.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
	t.Labels[batch.JobCompletionIndexAnnotation] = strconv.Itoa(ix)
	t.Spec.Hostname = job.Name + "-" + strconv.Itoa(ix)
	if hasBackoffLimitPerIndex(job) {
		count, ignored := newIndexFailureCounts(logger, job, replaced)
		t.Annotations[batch.JobIndexFailureCountAnnotation] = strconv.Itoa(int(count))
		if ignored > 0 {
			t.Annotations[batch.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
		}
	}
	return t
}

// addCompletionIndexEnv gives every (init) container JOB_COMPLETION_INDEX
// from the pod's completion-index label, unless it already defines it.
func addCompletionIndexEnv(t *v1.PodTemplateSpec) {
	add := func(c *v1.Container) {
		for _, e := range c.Env {
			if e.Name == completionIndexEnvName {
				return
			}
		}
		c.Env = append(c.Env, v1.EnvVar{
			Name: completionIndexEnvName,
			ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{
				FieldPath: "metadata.labels['" + batch.JobCompletionIndexAnnotation + "']",
			}},
		})
	}
	for i := range t.Spec.InitContainers {
		add(&t.Spec.InitContainers[i])
	}
	for i := range t.Spec.Containers {
		add(&t.Spec.Containers[i])
	}
}

// indexedGenerateName is "<job>-<index>-", with the job name cut so the
// whole prefix stays within maxGeneratedNameLength.
func indexedGenerateName(jobName string, ix int) string {
	suffix := "-" + strconv.Itoa(ix) + "-"
	prefix := jobName + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}
