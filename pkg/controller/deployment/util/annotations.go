// Package util holds the pure Deployment logic shared by the controller and
// its tests: annotations, revisions, conditions, replica arithmetic, hashing.
package util

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	apps "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
)

// Annotation keys, as upstream spells them.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
)

// Event reasons for the legacy rollback annotation.
const (
	RollbackRevisionNotFound  = "DeploymentRollbackRevisionNotFound"
	RollbackTemplateUnchanged = "DeploymentRollbackTemplateUnchanged"
	RollbackDone              = "DeploymentRollback"
)

// MaxRevHistoryLengthInChars bounds the revision-history annotation.
const MaxRevHistoryLengthInChars = 2000

// Revision parses the revision annotation of obj; a missing one is 0.
func Revision(obj runtime.Object) (int64, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	v, ok := acc.GetAnnotations()[RevisionAnnotation]
	if !ok {
		return 0, nil
	}
	return strconv.ParseInt(v, 10, 64)
}

// MaxRevision is the highest parseable revision among rss.
func MaxRevision(logger klog.Logger, rss []*apps.ReplicaSet) int64 {
	var top int64
	for _, rs := range rss {
		v, err := Revision(rs)
		if err != nil {
			logger.V(4).Info("Couldn't parse revision for replica set, deployment controller will skip it when reconciling revisions", "replicaSet", klog.KObj(rs), "err", err)
			continue
		}
		if v > top {
			top = v
		}
	}
	return top
}

// LastRevision is the second highest revision among rss (the one before the
// current), used by rollback to "revision 0".
func LastRevision(logger klog.Logger, rss []*apps.ReplicaSet) int64 {
	var first, second int64
	for _, rs := range rss {
		v, err := Revision(rs)
		if err != nil {
			logger.V(4).Info("Couldn't parse revision for replica set, deployment controller will skip it when reconciling revisions", "replicaSet", klog.KObj(rs), "err", err)
			continue
		}
		switch {
		case v >= first:
			second, first = first, v
		case v > second:
			second = v
		}
	}
	return second
}

// SetDeploymentRevision records revision on d and reports whether it changed.
func SetDeploymentRevision(d *apps.Deployment, revision string) bool {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	if d.Annotations[RevisionAnnotation] == revision {
		return false
	}
	d.Annotations[RevisionAnnotation] = revision
	return true
}

// skippedAnnotations are owned by the controller (or by kubectl apply) and are
// never copied between a Deployment and its ReplicaSets.
var skippedAnnotations = map[string]bool{
	v1.LastAppliedConfigAnnotation: true,
	RevisionAnnotation:             true,
	RevisionHistoryAnnotation:      true,
	DesiredReplicasAnnotation:      true,
	MaxReplicasAnnotation:          true,
	apps.DeprecatedRollbackTo:      true,
}

func skipCopyAnnotation(key string) bool { return skippedAnnotations[key] }

// copyAnnotationsToReplicaSet copies the user's Deployment annotations onto rs.
// It only adds or overwrites; annotations the user removed stay, as upstream.
func copyAnnotationsToReplicaSet(d *apps.Deployment, rs *apps.ReplicaSet) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if skipCopyAnnotation(k) {
			continue
		}
		if cur, ok := rs.Annotations[k]; ok && cur == v {
			continue
		}
		rs.Annotations[k] = v
		changed = true
	}
	return changed
}

// SetNewReplicaSetAnnotations brings the new ReplicaSet's annotations up to
// date: user annotations, revision (never lowered), revision history when an
// old revision is reused, and the replica annotations for a ReplicaSet about
// to be created. It reports whether anything changed.
func SetNewReplicaSetAnnotations(ctx context.Context, d *apps.Deployment, rs *apps.ReplicaSet, newRevision string, exists bool, historyLimitChars int) bool {
	logger := klog.FromContext(ctx)
	changed := copyAnnotationsToReplicaSet(d, rs)

	oldRevision, had := rs.Annotations[RevisionAnnotation]
	oldRev, err := strconv.ParseInt(oldRevision, 10, 64)
	if err != nil {
		if oldRevision != "" {
			logger.Info("Updating replica set revision OldRevision not int", "err", err)
			return false
		}
		oldRev = 0
	}
	newRev, err := strconv.ParseInt(newRevision, 10, 64)
	if err != nil {
		logger.Info("Updating replica set revision NewRevision not int", "err", err)
		return false
	}
	if oldRev < newRev {
		rs.Annotations[RevisionAnnotation] = newRevision
		changed = true
		logger.V(4).Info("Updating replica set revision", "replicaSet", klog.KObj(rs), "newRevision", newRevision)
		// An RS that already had a revision is being rolled back to: keep
		// the revisions it served before.
		if had {
			appendRevisionHistory(logger, rs, oldRevision, historyLimitChars)
		}
	}

	if !exists && SetReplicasAnnotations(rs, *d.Spec.Replicas, *d.Spec.Replicas+MaxSurge(*d)) {
		changed = true
	}
	return changed
}

// appendRevisionHistory appends rev to the history annotation, dropping the
// oldest entries to stay within limit characters.
func appendRevisionHistory(logger klog.Logger, rs *apps.ReplicaSet, rev string, limit int) {
	history := rs.Annotations[RevisionHistoryAnnotation]
	if history == "" {
		rs.Annotations[RevisionHistoryAnnotation] = rev
		return
	}
	entries := strings.Split(history, ",")
	total := len(history) + len(rev) + 1
	start := 0
	for total > limit && start < len(entries) {
		total -= len(entries[start]) + 1
		start++
	}
	if total > limit {
		logger.Info("Not appending revision due to revision history length limit reached", "revisionHistoryLimit", limit)
		return
	}
	rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(entries[start:], rev), ",")
}

// SetDeploymentAnnotationsTo replaces d's user annotations with those of the
// ReplicaSet being rolled back to, keeping the controller-owned ones.
func SetDeploymentAnnotationsTo(d *apps.Deployment, rollbackTo *apps.ReplicaSet) {
	kept := map[string]string{}
	for k, v := range d.Annotations {
		if skipCopyAnnotation(k) {
			kept[k] = v
		}
	}
	for k, v := range rollbackTo.Annotations {
		if !skipCopyAnnotation(k) {
			kept[k] = v
		}
	}
	d.Annotations = kept
}

// GetDesiredReplicasAnnotation reads the desired-replicas annotation.
func GetDesiredReplicasAnnotation(logger klog.Logger, rs *apps.ReplicaSet) (int32, bool) {
	return nonNegativeInt32Annotation(logger, rs, DesiredReplicasAnnotation)
}

func getMaxReplicasAnnotation(logger klog.Logger, rs *apps.ReplicaSet) (int32, bool) {
	return nonNegativeInt32Annotation(logger, rs, MaxReplicasAnnotation)
}

func nonNegativeInt32Annotation(logger klog.Logger, rs *apps.ReplicaSet, key string) (int32, bool) {
	s, ok := rs.Annotations[key]
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 32)
	if err == nil && v > math.MaxInt32 {
		err = fmt.Errorf("value %d is out of range (higher than %d)", v, math.MaxInt32)
	}
	if err != nil {
		logger.V(2).Info("Could not convert the value with annotation key for the replica set", "annotationValue", s, "annotationKey", key, "replicaSet", klog.KObj(rs))
		return 0, false
	}
	return int32(v), true
}

// SetReplicasAnnotations records desired and max replicas on rs and reports
// whether either changed.
func SetReplicasAnnotations(rs *apps.ReplicaSet, desired, maxReplicas int32) bool {
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	changed := false
	for k, v := range map[string]string{
		DesiredReplicasAnnotation: strconv.Itoa(int(desired)),
		MaxReplicasAnnotation:     strconv.Itoa(int(maxReplicas)),
	} {
		if rs.Annotations[k] != v {
			rs.Annotations[k] = v
			changed = true
		}
	}
	return changed
}

// ReplicasAnnotationsNeedUpdate reports whether SetReplicasAnnotations would
// change rs.
func ReplicasAnnotationsNeedUpdate(rs *apps.ReplicaSet, desired, maxReplicas int32) bool {
	return rs.Annotations[DesiredReplicasAnnotation] != strconv.Itoa(int(desired)) ||
		rs.Annotations[MaxReplicasAnnotation] != strconv.Itoa(int(maxReplicas))
}
